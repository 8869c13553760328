//! One helper process and the task that looks after it: writes requests, matches replies to
//! them by channel-ID, enforces the timeout, and restarts the process when it fails.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use sepia_config::HelperConfig;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::protocol::{self, Answer};
use super::{Job, Shared};

/// First wait before restarting a failed child; doubled on each failure in a row.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A child that ran this long before failing is restarted after [`FIRST_BACKOFF`] again.
const HEALTHY: Duration = Duration::from_secs(60);
/// A reply line longer than this is not a reply: the child is restarted. (Squid's helper
/// buffer is 32 KiB.)
const MAX_REPLY: usize = 64 * 1024;

/// How to run a child.
#[derive(Debug)]
pub(super) struct Spec {
    program: PathBuf,
    args: Vec<String>,
    /// 0: plain protocol; n: up to n requests in flight, each with a channel-ID.
    concurrency: usize,
    timeout: Duration,
}

impl From<&HelperConfig> for Spec {
    fn from(config: &HelperConfig) -> Spec {
        Spec {
            program: config.program.clone(),
            args: config.args.clone(),
            concurrency: config.concurrency,
            timeout: config.timeout,
        }
    }
}

/// A running helper process.
pub(super) struct Process {
    child: tokio::process::Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

impl Spec {
    /// The helper's stderr is Sepia's, as Squid passes helpers' stderr to cache.log.
    pub(super) fn spawn(&self) -> std::io::Result<Process> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the helper's pipes were not set up"));
        };
        Ok(Process {
            child,
            stdin,
            stdout,
        })
    }
}

/// Why a session with a process ended.
enum End {
    /// The pool is gone.
    Stop,
    /// The process failed; it is killed and restarted.
    Failed(String),
}

struct InFlight {
    job: Job,
    /// When the process is presumed hung.
    deadline: Instant,
}

/// The task for child `index`.
pub(super) struct Child {
    pub(super) index: usize,
    pub(super) spec: Arc<Spec>,
    pub(super) shared: Arc<Shared>,
    pub(super) queue: mpsc::UnboundedReceiver<Job>,
    pub(super) stop: watch::Receiver<()>,
}

impl Child {
    /// Runs `process`, and its replacements, until the pool is dropped.
    pub(super) async fn supervise(mut self, mut process: Process) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let started = Instant::now();
            // Channel-ID n is slot n: the lowest free one is reused, as Squid's helpers expect
            // IDs below `concurrency`.
            let mut in_flight: Vec<Option<InFlight>> =
                (0..self.spec.concurrency.max(1)).map(|_| None).collect();
            let end = self.serve(&mut process, &mut in_flight).await;
            self.shared.slots[self.index]
                .alive
                .store(false, Ordering::Release);
            let _ = process.child.kill().await;
            self.hand_back(in_flight);
            let why = match end {
                End::Stop => return,
                End::Failed(why) => why,
            };
            if started.elapsed() >= HEALTHY {
                backoff = FIRST_BACKOFF;
            }
            tracing::warn!(
                "auth helper #{} ({}) {why}; restarting it in {backoff:?}",
                self.index,
                self.spec.program.display()
            );
            process = loop {
                if self.pause(backoff).await.is_err() {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                match self.spec.spawn() {
                    Ok(process) => break process,
                    Err(e) => tracing::error!(
                        "cannot restart auth helper #{} ({}): {e}; next try in {backoff:?}",
                        self.index,
                        self.spec.program.display()
                    ),
                }
            };
            self.shared.slots[self.index]
                .alive
                .store(true, Ordering::Release);
        }
    }

    /// Sleeps, or `Err` when the pool is dropped meanwhile.
    async fn pause(&mut self, wait: Duration) -> Result<(), ()> {
        tokio::select! {
            () = tokio::time::sleep(wait) => Ok(()),
            _ = self.stop.changed() => Err(()),
        }
    }

    /// After a failure: in-flight jobs are retried once (a job already retried, or one whose
    /// deadline passed, is dropped: its requester gets "unavailable"); they and the queued ones
    /// go to another live child, or, when there is none, back into this child's queue for its
    /// replacement.
    fn hand_back(&mut self, in_flight: Vec<Option<InFlight>>) {
        let now = Instant::now();
        let mut jobs = Vec::new();
        for entry in in_flight.into_iter().flatten() {
            self.shared.done_in_flight(self.index);
            let mut job = entry.job;
            if !job.retried && entry.deadline > now && !job.reply.is_closed() {
                job.retried = true;
                jobs.push(job);
            }
        }
        // Drained before any is handed on: one may come straight back into this queue.
        while let Ok(job) = self.queue.try_recv() {
            self.shared.done(self.index);
            jobs.push(job);
        }
        for job in jobs {
            self.shared.dispatch(job, Some(self.index));
        }
    }

    /// Talks to one process until it fails or the pool stops.
    async fn serve(&mut self, process: &mut Process, in_flight: &mut [Option<InFlight>]) -> End {
        let concurrent = self.spec.concurrency > 0;
        let mut pending = Vec::new();
        let mut chunk = vec![0u8; 4096];
        let mut line = Vec::new();
        loop {
            let (busy, deadline) = in_flight
                .iter()
                .flatten()
                .fold((0, None::<Instant>), |(n, min), f| {
                    (n + 1, Some(min.map_or(f.deadline, |m| m.min(f.deadline))))
                });
            tokio::select! {
                biased;
                _ = self.stop.changed() => return End::Stop,
                read = process.stdout.read(&mut chunk) => {
                    let n = match read {
                        Ok(0) => return End::Failed("closed its output (exited?)".into()),
                        Ok(n) => n,
                        Err(e) => return End::Failed(format!("could not be read: {e}")),
                    };
                    pending.extend_from_slice(&chunk[..n]);
                    if let Err(why) = self.answer_lines(&mut pending, in_flight, concurrent) {
                        return End::Failed(why);
                    }
                }
                job = self.queue.recv(), if busy < in_flight.len() => {
                    let Some(job) = job else { return End::Stop };
                    if job.reply.is_closed() {
                        // The requester gave up while the job was queued.
                        self.shared.done(self.index);
                        continue;
                    }
                    let channel = in_flight.iter().position(Option::is_none).unwrap_or(0);
                    line.clear();
                    if concurrent {
                        // Written into the reused line: no string per job.
                        let _ = write!(line, "{channel} ");
                    }
                    line.extend_from_slice(&job.line);
                    line.push(b'\n');
                    let deadline = Instant::now() + self.spec.timeout;
                    in_flight[channel] = Some(InFlight { job, deadline });
                    self.shared.sent();
                    let write = process.stdin.write_all(&line);
                    match tokio::time::timeout(self.spec.timeout, write).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return End::Failed(format!("could not be written to: {e}")),
                        Err(_) => return End::Failed("does not read its input".into()),
                    }
                }
                () = sleep_until(deadline), if deadline.is_some() => {
                    return End::Failed(format!(
                        "did not answer within {:?} (hung?)",
                        self.spec.timeout
                    ));
                }
            }
        }
    }

    /// Answers the requests whose reply lines are complete in `pending`.
    fn answer_lines(
        &self,
        pending: &mut Vec<u8>,
        in_flight: &mut [Option<InFlight>],
        concurrent: bool,
    ) -> Result<(), String> {
        while let Some(end) = memchr::memchr(b'\n', pending) {
            let parsed = protocol::parse_reply(&pending[..end], concurrent);
            pending.drain(..=end);
            let (channel, answer) = parsed?;
            let entry = in_flight
                .get_mut(channel)
                .and_then(Option::take)
                .ok_or_else(|| format!("answered channel {channel}, which has no request"))?;
            self.shared.done_in_flight(self.index);
            if answer == Answer::BrokenHelper {
                tracing::warn!(
                    "auth helper #{} answered BH (it could not decide)",
                    self.index
                );
            }
            // The requester may have given up (timeout); nothing to do then.
            let _ = entry.job.reply.send(answer);
        }
        if pending.len() > MAX_REPLY {
            return Err(format!("wrote a reply line longer than {MAX_REPLY} bytes"));
        }
        Ok(())
    }
}

/// `deadline` is only polled when it is `Some` (see the select guard).
async fn sleep_until(deadline: Option<Instant>) {
    if let Some(deadline) = deadline {
        tokio::time::sleep_until(deadline).await;
    }
}
