//! A pool of Squid basic-auth helper processes (`auth_param basic program …`, `children`,
//! `concurrency`), so helpers written for Squid keep working: Squid's own `basic_ncsa_auth`,
//! `basic_ldap_auth`, `basic_pam_auth`, site scripts.
//!
//! Each child is looked after by its own task ([`child::supervise`]), which owns the process's
//! pipes and a queue of jobs. A request goes to the live child with the fewest jobs. A child
//! that exits, writes something that is not a reply, or does not answer within the timeout is
//! killed and restarted after a back-off (doubling from 100 ms to 30 s, reset once a child has
//! stayed up for a minute); the requests it had in flight are retried once on another child,
//! or, when no other child is alive, wait for the replacement (within the requester's timeout)
//! instead of failing at once: a pool of one helper survives its helper's crash.

mod child;
pub(crate) mod protocol;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sepia_config::HelperConfig;
use tokio::sync::{mpsc, oneshot, watch};

pub(crate) use protocol::Answer;

/// One credentials check travelling to a child.
#[derive(Debug)]
pub(crate) struct Job {
    /// `user SP password`, escaped; the child adds its channel-ID and LF.
    line: Vec<u8>,
    /// Dropped unanswered means "unavailable".
    reply: oneshot::Sender<Answer>,
    /// Already handed back once by a child that died with it in flight.
    retried: bool,
}

/// What the requesters and the children share: one slot per child.
#[derive(Debug)]
struct Shared {
    slots: Vec<Slot>,
    /// Rotates the starting point of the least-loaded search so ties spread out.
    next: AtomicUsize,
    /// Jobs written to a child and not answered yet (the rest of the slots' load is queued).
    in_flight: AtomicUsize,
    /// Answers by [`HelperStats::ANSWERS`]: ok, err, bh, unavailable.
    answers: [AtomicU64; 4],
}

/// What the helper pool has done and holds, for the admin listener.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HelperStats {
    /// Requests waiting for a child.
    pub queued: u64,
    /// Requests written to a child, not answered yet.
    pub in_flight: u64,
    /// Checks by how they ended, in the order of [`HelperStats::ANSWERS`].
    pub answers: [u64; 4],
}

impl HelperStats {
    /// `OK`, `ERR`, `BH`, and no answer in time (a helper hung, failed or restarting).
    pub const ANSWERS: [&'static str; 4] = ["ok", "err", "bh", "unavailable"];
}

#[derive(Debug)]
struct Slot {
    queue: mpsc::UnboundedSender<Job>,
    /// False from a child's failure until its replacement runs.
    alive: AtomicBool,
    /// Jobs queued for or in flight on this child.
    load: AtomicUsize,
}

impl Shared {
    /// Hands `job` to the live child with the fewest jobs, other than `except` (the child that
    /// just failed with it). When there is none, the job waits in the queue of `except` (or of
    /// any child) for that child's replacement; its requester's timeout still applies.
    fn dispatch(&self, job: Job, except: Option<usize>) {
        if let Err(job) = self.dispatch_live(job, except) {
            let index =
                except.unwrap_or_else(|| self.next.load(Ordering::Relaxed) % self.slots.len());
            self.enqueue(index, job);
        }
    }

    /// Queues `job` on child `index`, alive or being restarted.
    fn enqueue(&self, index: usize, job: Job) {
        let slot = &self.slots[index];
        slot.load.fetch_add(1, Ordering::Relaxed);
        if slot.queue.send(job).is_err() {
            // The pool is stopping: the job is dropped, its requester told "unavailable".
            slot.load.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// [`Shared::dispatch`] among live children only; gives the job back when none is alive.
    fn dispatch_live(&self, job: Job, except: Option<usize>) -> Result<(), Job> {
        let count = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % count;
        let mut best: Option<(usize, usize)> = None;
        for offset in 0..count {
            let index = (start + offset) % count;
            let slot = &self.slots[index];
            if Some(index) == except || !slot.alive.load(Ordering::Acquire) {
                continue;
            }
            let load = slot.load.load(Ordering::Relaxed);
            if best.is_none_or(|(_, least)| load < least) {
                best = Some((index, load));
            }
        }
        let Some((index, _)) = best else {
            return Err(job);
        };
        self.enqueue(index, job);
        Ok(())
    }

    /// A job has left child `index` (answered, dropped or passed on).
    fn done(&self, index: usize) {
        self.slots[index].load.fetch_sub(1, Ordering::Relaxed);
    }

    /// A job was written to a child.
    fn sent(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A job written to child `index` has left it (answered, or handed back after a failure).
    fn done_in_flight(&self, index: usize) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.done(index);
    }
}

/// The running helpers; dropping it stops and kills them.
#[derive(Debug)]
pub(crate) struct HelperPool {
    shared: Arc<Shared>,
    timeout: Duration,
    /// Dropped with the pool, which tells every child task to stop.
    _shutdown: watch::Sender<()>,
}

impl HelperPool {
    /// Starts `children` processes now, so a helper that cannot be started at all is a start-up
    /// error rather than a proxy that refuses everyone. Inside tokio.
    pub(crate) fn start(config: &HelperConfig) -> Result<HelperPool, String> {
        let spec = Arc::new(child::Spec::from(config));
        let children = config.children.max(1);
        let mut processes = Vec::with_capacity(children);
        for _ in 0..children {
            let process = spec.spawn().map_err(|e| {
                format!(
                    "cannot start the auth helper {}: {e}",
                    config.program.display()
                )
            })?;
            processes.push(process);
        }
        let (queues, receivers): (Vec<_>, Vec<_>) =
            (0..children).map(|_| mpsc::unbounded_channel()).unzip();
        let shared = Arc::new(Shared {
            slots: queues
                .into_iter()
                .map(|queue| Slot {
                    queue,
                    alive: AtomicBool::new(true),
                    load: AtomicUsize::new(0),
                })
                .collect(),
            next: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            answers: Default::default(),
        });
        let (shutdown, stop) = watch::channel(());
        for (index, (process, queue)) in processes.into_iter().zip(receivers).enumerate() {
            let child = child::Child {
                index,
                spec: Arc::clone(&spec),
                shared: Arc::clone(&shared),
                queue,
                stop: stop.clone(),
            };
            tokio::spawn(child.supervise(process));
        }
        Ok(HelperPool {
            shared,
            timeout: config.timeout,
            _shutdown: shutdown,
        })
    }

    /// Asks a helper about `user` and `password`; `None` when no helper answered in time.
    pub(crate) async fn check(&self, user: &str, password: &[u8]) -> Option<Answer> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            line: protocol::request(user, password),
            reply,
            retried: false,
        };
        self.shared.dispatch(job, None);
        let answer = tokio::time::timeout(self.timeout, answer)
            .await
            .ok()
            .and_then(Result::ok);
        let kind = match answer {
            Some(Answer::Ok) => 0,
            Some(Answer::Err) => 1,
            Some(Answer::BrokenHelper) => 2,
            None => 3,
        };
        self.shared.answers[kind].fetch_add(1, Ordering::Relaxed);
        answer
    }

    /// The queue and the answers so far.
    pub(crate) fn stats(&self) -> HelperStats {
        let shared = &self.shared;
        let load: usize = shared
            .slots
            .iter()
            .map(|s| s.load.load(Ordering::Relaxed))
            .sum();
        let in_flight = shared.in_flight.load(Ordering::Relaxed);
        HelperStats {
            queued: load.saturating_sub(in_flight) as u64,
            in_flight: in_flight as u64,
            answers: shared.answers.each_ref().map(|a| a.load(Ordering::Relaxed)),
        }
    }
}
