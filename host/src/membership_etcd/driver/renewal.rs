//! The lease's renewals, on a task of their own next to the driver loop
//! (module `driver`): a keep-alive never waits behind a snapshot read, an
//! install or a join step. On an etcd whose disk syncs slowly each of those
//! can take up to an RPC timeout, and a renewal queued behind two or three
//! of them came too late for a 1 s lease (seen with etcd's syncs delayed
//! 100 ms on purpose, `tests/membership_etcd/slow_sync.rs`). A keep-alive
//! writes nothing to etcd's disk, though etcd answers it only once it has
//! applied the writes before it: on such a disk a backlog of writes delays
//! renewals. So an answer is awaited up to the believed lease rather than
//! one RPC timeout: a grant counts from when its keep-alive was sent, so a
//! late answer is still good, while one given up and asked again waits
//! behind the same writes (the slow-disk test failed so under load, its
//! keep-alives given up after 200 ms while each sync took 400 ms).
//!
//! The driver loop hands requests over through [`RenewalHandle::request`]
//! (requests not yet served coalesce: one keep-alive serves every request
//! sent before it, and the grant is counted from the newest of them) and
//! tells the task whether this node is a suspect
//! ([`RenewalHandle::set_suspected`]): a suspect's renewals fail, so its
//! lease runs out (as the simulated manager refuses a suspect's renewals).
//!
//! **Start-up.** From the grant until the driver loop runs, the task renews
//! by itself every third of the believed lease: the start-up's
//! registration writes may together take longer than a short lease (with
//! etcd's syncs delayed 100 ms, every node was fenced the moment it
//! started). After start-up only the member's requests renew, so a node
//! whose polling stopped loses its lease.

use super::{bump, notify, Counters, Notice};
use crate::membership_etcd::believed_lease_ns;
use crate::membership_etcd::store::{timed, StoreError};
use crossbeam::channel::Sender;
use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};
use splitkv_nic::Nanos;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the driver loop and the renewal task share.
#[derive(Debug, Default)]
struct Shared {
    /// The newest renewal request not yet served (member's ns).
    requested: Mutex<Option<Nanos>>,
    /// This node is a suspect the configuration takes: renewals fail.
    suspected: AtomicBool,
    /// Start-up: the task renews by itself (see the module docs).
    starting: AtomicBool,
}

/// The member's clock as seen from the driver thread: member time `ns` at
/// `at`, counting in step with [`Instant`] (both monotonic).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemberClock {
    pub at: Instant,
    pub ns: Nanos,
}

impl MemberClock {
    /// The member's time now (ns).
    fn now(&self) -> Nanos {
        let d = self.at.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        self.ns.saturating_add(d)
    }
}

/// The driver loop's side of the renewal task.
pub(crate) struct RenewalHandle {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl RenewalHandle {
    /// Asks for a renewal sent by the member at `sent` (ns).
    pub(crate) fn request(&self, sent: Nanos) {
        let mut r = lock(&self.shared.requested);
        *r = Some(r.map_or(sent, |old| old.max(sent)));
    }

    /// Ends start-up: from now on only [`RenewalHandle::request`] renews.
    pub(crate) fn started(&self) {
        self.shared.starting.store(false, Ordering::Relaxed);
    }

    /// Whether the configuration takes a report naming this node.
    pub(crate) fn set_suspected(&self, suspected: bool) {
        self.shared.suspected.store(suspected, Ordering::Relaxed);
    }

    /// Stops the task (an unanswered keep-alive is given up) and closes the
    /// keep-alive stream.
    pub(crate) async fn stop(&mut self) {
        self.task.abort();
        _ = (&mut self.task).await;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The renewal task's state.
pub(crate) struct Renewal {
    client: Client,
    lease: i64,
    /// The TTL granted at start-up (s).
    ttl_s: i64,
    /// How long an answer to a keep-alive is awaited.
    answer_within: Duration,
    tick: Duration,
    clock: MemberClock,
    keeper: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    shared: Arc<Shared>,
    notices: Sender<Notice>,
    counters: Arc<Counters>,
}

impl Renewal {
    /// A renewal task for `lease` (granted for `ttl_s`), each keep-alive's
    /// answer awaited up to `answer_within`, looking for requests every
    /// `tick`; grants are
    /// counted in the member's `clock`. It starts in start-up (module docs).
    pub(crate) fn new(
        client: Client,
        (lease, ttl_s): (i64, i64),
        (answer_within, tick): (Duration, Duration),
        clock: MemberClock,
        (notices, counters): (Sender<Notice>, Arc<Counters>),
    ) -> Renewal {
        let shared = Shared {
            starting: AtomicBool::new(true),
            ..Shared::default()
        };
        Renewal {
            client,
            lease,
            ttl_s,
            answer_within,
            tick,
            clock,
            keeper: None,
            shared: Arc::new(shared),
            notices,
            counters,
        }
    }

    /// Spawns the task on the current tokio runtime.
    pub(crate) fn spawn(self) -> RenewalHandle {
        let shared = self.shared.clone();
        RenewalHandle {
            shared,
            task: tokio::spawn(self.run()),
        }
    }

    async fn run(mut self) {
        let every = believed_lease_ns(self.ttl_s.max(0) as u64) / 3;
        let mut next_own = self.clock.now().saturating_add(every);
        loop {
            let request = lock(&self.shared.requested).take();
            let now = self.clock.now();
            let own = self.shared.starting.load(Ordering::Relaxed) && now >= next_own;
            match request {
                Some(sent) => self.renew(sent).await,
                None if own => {
                    next_own = now.saturating_add(every);
                    self.renew(now).await;
                }
                None => tokio::time::sleep(self.tick).await,
            }
        }
    }

    async fn renew(&mut self, sent: Nanos) {
        let n = if self.shared.suspected.load(Ordering::Relaxed) {
            bump(&self.counters.renewals_failed);
            Notice::RenewFailed
        } else {
            match self.keep_alive().await {
                Ok(ttl_s) if ttl_s > 0 => {
                    bump(&self.counters.grants);
                    let until = sent.saturating_add(believed_lease_ns(ttl_s as u64));
                    self.counters
                        .granted_until
                        .fetch_max(until, Ordering::AcqRel);
                    Notice::Grant { sent, ttl_s }
                }
                Ok(_) => Notice::LeaseGone,
                Err(e) => {
                    self.keeper = None;
                    bump(&self.counters.renewals_failed);
                    self.counters.error("lease keep-alive", &e);
                    Notice::RenewFailed
                }
            }
        };
        notify(&self.notices, &self.counters, n);
    }

    /// One keep-alive; the TTL etcd answered (0 or less: the lease is gone).
    async fn keep_alive(&mut self) -> Result<i64, StoreError> {
        let rpc = self.answer_within;
        let Some((keeper, stream)) = self.keeper.as_mut() else {
            // Opening the stream sends the first keep-alive and waits for it.
            return match timed(rpc, self.client.lease_keep_alive(self.lease)).await {
                Ok(k) => {
                    self.keeper = Some(k);
                    Ok(self.ttl_s)
                }
                Err(StoreError::Etcd(etcd_client::Error::LeaseKeepAliveError(_))) => Ok(0),
                Err(e) => Err(e),
            };
        };
        timed(rpc, keeper.keep_alive()).await?;
        match timed(rpc, stream.message()).await? {
            Some(r) => Ok(r.ttl()),
            None => Err(StoreError::Corrupt("keep-alive stream ended".into())),
        }
    }
}
