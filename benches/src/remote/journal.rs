//! The client journal of a node process (Jepsen-style): every input a node's
//! [`TxGenerator`] receives — the transactions it draws and the outcomes it
//! is told — appended to a file *before* the drawn transaction is submitted,
//! so a client that dies with its node (SIGKILL) leaves its history behind.
//! The driver replays the file through a fresh generator of the same seed
//! ([`super::replay`]): every invocation without a completion is then
//! indeterminate (Jepsen's `info`: it may or may not have committed), every
//! completion it recorded counts as reported.
//!
//! **Why it is sound.** An invocation's line reaches the kernel (one
//! `write(2)` of everything buffered, the outcomes since the last draw
//! included) before [`TxGenerator::next`] returns, so before the load
//! generator pushes the request into the ring: every transaction the node's
//! runtime ever saw has its invocation in the file. A write that returned is
//! in the page cache, which a killed process does not take with it (no
//! `fsync` is needed for a process kill; a machine crash would need one).
//! What the file holds is a prefix of the generator's inputs, in order:
//! outcomes buffered but not yet written are lost, which only makes their
//! transactions indeterminate. If a write fails, the transaction just drawn
//! is neutered (an unregistered procedure, which the node rejects without
//! effect) and the generator stops drawing.
//!
//! **Format** (text lines, numbers in decimal, bytes in lower-case hex):
//!
//! | line | meaning |
//! |---|---|
//! | `h <version> <node> <seed> <lo_ns> <hi_ns>` | header: [`JOURNAL_VERSION`], the node, the generator's seed, its clock origin ([`ClockOrigin`]) |
//! | `t <ns>` | the load generator's `now` for the lines that follow |
//! | `n <procedure> <args>` | the next transaction drawn (its `seq` is the count of `n` lines before it) |
//! | `o <seq> <status> <attempt> <last> <result>` | an attempt's outcome ([`TxStatus`] wire value, `last` 0 or 1) |
//!
//! The cost when journaling is on: one `write(2)` per drawn transaction and
//! no allocation once the buffer is warm; off, one branch per call.

use super::protocol::ClockOrigin;
use crate::workload::{AttemptOutcome, TxCall, TxGenerator};
use splitkv_nic::Nanos;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Version of the journal's line format (the header's second field).
pub const JOURNAL_VERSION: u32 = 1;

/// Buffered outcome lines are written at the start of an iteration once
/// they hold this many bytes (draws write everything at once anyway).
pub const JOURNAL_FLUSH_BYTES_MAX: usize = 16 * 1024;

/// The procedure id a transaction drawn after a failed journal write is
/// given: unregistered, so the node rejects it and it has no effect.
pub const NEUTERED_PROCEDURE: u32 = u32::MAX;

/// The file a journal is written to, with its reused line buffer.
#[derive(Debug)]
struct Sink {
    file: File,
    buf: Vec<u8>,
    /// The `now` of the last `t` line written.
    stamped_ns: Option<Nanos>,
    /// The first write error (the generator then stops drawing).
    error: Option<std::io::Error>,
}

impl Sink {
    fn stamp(&mut self, now: Nanos) {
        if self.stamped_ns != Some(now) {
            let _ = writeln!(self.buf, "t {now}");
            self.stamped_ns = Some(now);
        }
    }

    /// One `write(2)` of the buffer (more only for a short write).
    fn flush(&mut self) -> bool {
        if self.error.is_none() && !self.buf.is_empty() {
            if let Err(e) = self.file.write_all(&self.buf) {
                self.error = Some(e);
            }
            self.buf.clear();
        }
        self.error.is_none()
    }
}

/// Appends `bytes` to `buf` as lower-case hex.
fn push_hex(buf: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        buf.push(DIGITS[(b >> 4) as usize]);
        buf.push(DIGITS[(b & 15) as usize]);
    }
}

/// A [`TxGenerator`] that journals its inputs (module docs) when given a
/// file, and is its inner generator unchanged otherwise.
#[derive(Debug)]
pub struct Journaled<G> {
    inner: G,
    sink: Option<Sink>,
    now: Nanos,
}

impl<G: TxGenerator> Journaled<G> {
    /// `inner` without a journal.
    pub fn off(inner: G) -> Journaled<G> {
        Journaled {
            inner,
            sink: None,
            now: 0,
        }
    }

    /// `inner` journaled to `path` (created, or truncated), starting with
    /// the header for `node`, `seed` and `clock`.
    ///
    /// # Errors
    /// The file cannot be created or the header written.
    pub fn to_file(
        inner: G,
        path: &Path,
        node: u16,
        seed: u64,
        clock: ClockOrigin,
    ) -> std::io::Result<Journaled<G>> {
        let mut file = File::create(path)?;
        writeln!(
            file,
            "h {JOURNAL_VERSION} {node} {seed} {} {}",
            clock.lo_ns, clock.hi_ns
        )?;
        Ok(Journaled {
            inner,
            sink: Some(Sink {
                file,
                buf: Vec::with_capacity(JOURNAL_FLUSH_BYTES_MAX * 2),
                stamped_ns: None,
                error: None,
            }),
            now: 0,
        })
    }

    /// The inner generator.
    pub fn inner(&self) -> &G {
        &self.inner
    }

    /// The inner generator, mutable.
    pub fn inner_mut(&mut self) -> &mut G {
        &mut self.inner
    }

    /// The first journal write error, if any.
    pub fn error(&self) -> Option<&std::io::Error> {
        self.sink.as_ref()?.error.as_ref()
    }
}

impl<G: TxGenerator> TxGenerator for Journaled<G> {
    fn next(&mut self, call: &mut TxCall) {
        self.inner.next(call);
        let Some(s) = self.sink.as_mut() else {
            return;
        };
        s.stamp(self.now);
        let _ = write!(s.buf, "n {} ", call.procedure);
        push_hex(&mut s.buf, &call.args);
        s.buf.push(b'\n');
        if !s.flush() {
            // Not journaled: it must not run (module docs).
            call.procedure = NEUTERED_PROCEDURE;
            call.args.clear();
        }
    }

    fn on_outcome(&mut self, o: &AttemptOutcome<'_>) {
        if let Some(s) = self.sink.as_mut() {
            s.stamp(self.now);
            let _ = write!(
                s.buf,
                "o {} {} {} {} ",
                o.seq, o.status as u8, o.attempt, o.last as u8
            );
            push_hex(&mut s.buf, o.result);
            s.buf.push(b'\n');
        }
        self.inner.on_outcome(o);
    }

    fn on_iteration(&mut self, now: Nanos) {
        self.now = now;
        if let Some(s) = self.sink.as_mut() {
            if s.buf.len() >= JOURNAL_FLUSH_BYTES_MAX {
                s.flush();
            }
        }
        self.inner.on_iteration(now);
    }

    fn set_window(&mut self, from_ns: Nanos, until_ns: Nanos) {
        self.inner.set_window(from_ns, until_ns);
    }

    fn exhausted(&self) -> bool {
        self.inner.exhausted() || self.error().is_some()
    }

    fn finish(&mut self, now: Nanos) {
        if let Some(s) = self.sink.as_mut() {
            s.flush();
        }
        self.inner.finish(now);
    }
}
