//! Shared by the two-process tests and the echo bench: the layout of a test
//! connection (a request ring and an echo ring in one shared memory, each
//! followed by its doorbell), an endpoint over it, and spawning the current
//! executable again as the peer process.
#![allow(dead_code)]

use rustix::fd::{AsRawFd, BorrowedFd, OwnedFd};
use splitkv_client::{Doorbell, WaitOutcome, WaitPolicy};
use splitkv_layout::doorbell::{doorbell_offset, init_doorbell, ring_with_doorbell_bytes};
use splitkv_layout::ring::{init_ring, RingConsumer, RingError, RingProducer};
use splitkv_layout::Region;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::Instant;

/// Environment variable naming the role a re-executed child plays.
pub const ENV_ROLE: &str = "SPLITKV_CLIENT_TEST_ROLE";
/// Environment variable holding the child's socket descriptor number.
pub const ENV_SOCKET_FD: &str = "SPLITKV_CLIENT_TEST_SOCKET_FD";
/// Environment variable holding the ring capacity in bytes.
pub const ENV_CAPACITY: &str = "SPLITKV_CLIENT_TEST_CAPACITY";

/// Bytes of shared memory a connection with rings of `capacity_bytes` needs.
pub fn connection_bytes(capacity_bytes: usize) -> usize {
    2 * ring_with_doorbell_bytes(capacity_bytes)
}

fn ring_offset(ring: usize, capacity_bytes: usize) -> usize {
    ring * ring_with_doorbell_bytes(capacity_bytes)
}

/// Writes both empty rings and idle doorbells.
pub fn init_connection(region: &Region, capacity_bytes: usize) {
    for ring in 0..2 {
        let at = ring_offset(ring, capacity_bytes);
        init_ring(region, at, capacity_bytes).expect("ring fits");
        init_doorbell(region, doorbell_offset(at, capacity_bytes)).expect("doorbell fits");
    }
}

/// Which end of the connection: the parent sends on ring 0, the child on ring 1.
#[derive(Clone, Copy)]
pub enum Side {
    Parent,
    Child,
}

/// One side of a connection: sends on one ring, receives on the other,
/// waiting adaptively on the receive ring's doorbell.
pub struct Endpoint {
    tx: RingProducer,
    tx_bell: Doorbell,
    rx: RingConsumer,
    rx_bell: Doorbell,
    policy: WaitPolicy,
    /// Wake-ups this side issued.
    pub wakes: u64,
}

impl Endpoint {
    pub fn attach(region: &Region, capacity_bytes: usize, side: Side, policy: WaitPolicy) -> Self {
        let (tx_ring, rx_ring) = match side {
            Side::Parent => (0, 1),
            Side::Child => (1, 0),
        };
        let tx_at = ring_offset(tx_ring, capacity_bytes);
        let rx_at = ring_offset(rx_ring, capacity_bytes);
        Endpoint {
            tx: RingProducer::attach(region.clone(), tx_at).expect("tx ring"),
            tx_bell: Doorbell::attach(region.clone(), doorbell_offset(tx_at, capacity_bytes))
                .expect("tx doorbell"),
            rx: RingConsumer::attach(region.clone(), rx_at).expect("rx ring"),
            rx_bell: Doorbell::attach(region.clone(), doorbell_offset(rx_at, capacity_bytes))
                .expect("rx doorbell"),
            policy,
            wakes: 0,
        }
    }

    /// Largest payload the send ring takes.
    pub fn payload_bytes_max(&self) -> usize {
        self.tx.payload_bytes_max()
    }

    /// Pushes and rings; `Ok(false)` if the ring is full now.
    pub fn try_send(&mut self, msg: &[u8]) -> Result<bool, String> {
        let pushed = match self.tx.try_push(msg) {
            Ok(_) => true,
            Err(RingError::Full) => false,
            Err(e) => return Err(format!("push: {e}")),
        };
        // Also after `Full`: the push may have published a padding entry,
        // which a sleeping consumer must skip before the ring has room.
        self.wakes += u64::from(self.tx_bell.ring());
        Ok(pushed)
    }

    /// Sends, yielding while the ring is full, until `deadline`.
    pub fn send(&mut self, msg: &[u8], deadline: Instant) -> Result<(), String> {
        while !self.try_send(msg)? {
            if Instant::now() > deadline {
                return Err("send: ring stayed full past the deadline".into());
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Pops one message if there is one.
    pub fn try_recv(&mut self, out: &mut Vec<u8>) -> Result<bool, String> {
        self.rx.try_pop(out).map_err(|e| format!("pop: {e}"))
    }

    /// Waits (adaptively) for a message and pops it, until `deadline`.
    pub fn recv(&mut self, out: &mut Vec<u8>, deadline: Instant) -> Result<(), String> {
        loop {
            if self.try_recv(out)? {
                return Ok(());
            }
            let rx = &mut self.rx;
            if self
                .rx_bell
                .wait(&self.policy, || !rx.is_empty(), Some(deadline))
                == WaitOutcome::TimedOut
            {
                return Err("recv: nothing arrived before the deadline".into());
            }
        }
    }
}

/// Spawns the current executable again with `role`, handing it `socket` as an
/// inherited descriptor (its number in [`ENV_SOCKET_FD`]); `args` go first on
/// its command line (a test filter for a test binary).
pub fn spawn_child(
    role: &str,
    socket: &OwnedFd,
    args: &[&str],
    env: &[(&str, String)],
) -> ChildGuard {
    let raw = socket.as_raw_fd();
    let mut cmd = Command::new(std::env::current_exe().expect("current exe"));
    cmd.args(args)
        .env(ENV_ROLE, role)
        .env(ENV_SOCKET_FD, raw.to_string());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // SAFETY: between fork and exec the closure only makes one fcntl system
    // call (async-signal-safe) on a descriptor the parent keeps open.
    unsafe {
        cmd.pre_exec(move || {
            let fd = BorrowedFd::borrow_raw(raw);
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            Ok(())
        });
    }
    cmd.stdout(std::process::Stdio::null());
    ChildGuard(cmd.spawn().expect("spawn child"))
}

/// A spawned peer, killed and reaped when dropped (a failed check returns
/// early; no process outlives its test).
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// In a child: its inherited socket, if this process is a child at all.
pub fn child_socket() -> Option<(String, std::os::unix::net::UnixStream)> {
    let role = std::env::var(ENV_ROLE).ok()?;
    let raw: i32 = std::env::var(ENV_SOCKET_FD).ok()?.parse().ok()?;
    // SAFETY: the parent handed this descriptor over for this process to own;
    // nothing else in the child uses it.
    let fd = unsafe { <OwnedFd as rustix::fd::FromRawFd>::from_raw_fd(raw) };
    Some((role, std::os::unix::net::UnixStream::from(fd)))
}

/// Waits for `child` to exit until `deadline`, killing it past that.
pub fn wait_child(child: &mut ChildGuard, deadline: Instant) -> Result<(), String> {
    let child = &mut child.0;
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => return Err(format!("child failed: {status}")),
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("child did not exit before the deadline; killed".into());
            }
            None => std::thread::sleep(std::time::Duration::from_millis(2)),
        }
    }
}
