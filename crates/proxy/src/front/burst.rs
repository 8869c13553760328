//! Responses leave in bursts when a worker is busy.
//!
//! A response written the moment it is ready wakes its reader on its own, and the writer pays
//! for that wake-up in the kernel. When a worker's pass over the ready connections serves
//! many requests, letting the other sessions of the pass run first sends the responses back
//! to back, and a client woken by the first finds the others already there. haproxy gets the
//! same effect by running its tasks after all the receives of a pass. Measured at c=100
//! (bench/RESULTS.md, 2026-11-23): wrk slept 0.01–0.09 times per keep-alive hit instead of
//! 0.05–0.48 (haproxy's wrk: 0.02–0.035); the CPU per request moved within the noise.
//!
//! The wait sends the session to the back of its worker's run queue, so it runs again once
//! the tasks already queued in this pass have, before the worker next looks at the event
//! queue. For a lone client that is a second poll of its task for nothing. So a session
//! waits only when its worker is busy: it began another request since the worker last ran
//! out of work, or the worker began at least two in the busy period before. The counts live
//! in a thread-local, like tokio's cooperative budget (which is kept per task, in a
//! thread-local of the thread running it): a scheduling hint read and written only by the
//! worker thread that runs the sessions, never shared across cores and never part of what a
//! request computes. With several workers a "busy period" is approximate (a worker may park
//! with a zero timeout to look at the event queue while it still has work), which costs at
//! worst one needless or one missed wait.
//!
//! The hint needs the runtime to call [`worker_parks`] from `on_thread_park`; without it the
//! counts never reset and every response waits once its worker has begun two requests.

use std::cell::Cell;

/// Requests begun on this worker in its current busy period and in the one before.
#[derive(Clone, Copy, Default)]
struct Periods {
    current: u32,
    previous: u32,
}

thread_local! {
    static PERIODS: Cell<Periods> = const { Cell::new(Periods { current: 0, previous: 0 }) };
}

/// The worker ran out of work and is about to wait for events (tokio's `on_thread_park`):
/// a busy period ends.
pub fn worker_parks() {
    PERIODS.with(|p| p.set(p.get().parked()));
}

/// A session has a complete request head to answer.
pub(crate) fn request_began() {
    PERIODS.with(|p| p.set(p.get().began()));
}

/// Lets the other sessions of this pass over the ready connections run before this one writes
/// its response, when the worker is busy (see the module's comment); returns at once otherwise.
pub(crate) async fn let_the_pass_finish() {
    if !PERIODS.with(|p| p.get().busy()) {
        return;
    }
    // Pending once, having woken itself. tokio puts a task woken during its own poll at the
    // back of its worker's run queue (a "yield": never the LIFO slot), so it runs again after
    // the tasks already queued in this pass and before the worker next looks at the event
    // queue. `tokio::task::yield_now` instead defers the task until after that look (an
    // `epoll_wait` with a zero timeout on every busy pass): 1.13 `epoll_wait` calls per miss
    // against 1.05 this way (bench/RESULTS.md, 2026-11-25, "the response yield").
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await;
}

impl Periods {
    fn parked(self) -> Periods {
        Periods {
            current: 0,
            previous: self.current,
        }
    }

    fn began(self) -> Periods {
        Periods {
            current: self.current.saturating_add(1),
            ..self
        }
    }

    fn busy(self) -> bool {
        self.current > 1 || self.previous > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_client_never_waits() {
        let mut p = Periods::default();
        for _ in 0..5 {
            p = p.began();
            assert!(!p.busy());
            p = p.parked();
        }
    }

    #[test]
    fn a_second_request_in_a_period_makes_the_worker_busy() {
        let p = Periods::default().began();
        assert!(!p.busy());
        assert!(p.began().busy());
    }

    #[test]
    fn a_busy_period_carries_over_to_the_next_one_only() {
        let p = Periods::default().began().began().parked();
        assert!(p.busy(), "the first request after a busy period waits");
        let p = p.began().parked();
        assert!(!p.busy(), "one quiet period later it does not");
    }

    #[test]
    fn counts_saturate() {
        let p = Periods {
            current: u32::MAX,
            previous: 0,
        };
        assert_eq!(p.began().current, u32::MAX);
    }

    #[tokio::test]
    async fn a_busy_worker_lets_other_tasks_run_first() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        // A current-thread test runtime never calls `worker_parks`: periods are driven here.
        worker_parks();
        worker_parks();
        let ran = Arc::new(AtomicBool::new(false));
        let other = ran.clone();
        let task = tokio::spawn(async move { other.store(true, Ordering::SeqCst) });
        request_began();
        let_the_pass_finish().await;
        assert!(!ran.load(Ordering::SeqCst), "one request: no wait");
        request_began();
        let_the_pass_finish().await;
        assert!(
            ran.load(Ordering::SeqCst),
            "two requests: the other task ran first"
        );
        task.await.unwrap();
        worker_parks();
        worker_parks();
    }
}
