//! The dashboard's top URLs and clients over the last minutes, from the requests the workers
//! sample (`sepia_observe::metrics`, one in [`SAMPLE_EVERY`]), collected once a second.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

pub use sepia_observe::metrics::SAMPLE_EVERY;
use sepia_observe::metrics::{self, Sample};

/// How far back the top lists look.
pub const WINDOW_SECS: u64 = 300;
/// Samples kept at most (beyond, the oldest go first): about 9 MiB, reached above 2,700
/// requests/s over the window.
const MAX_KEPT: usize = 50_000;

/// Samples of the last [`WINDOW_SECS`].
#[derive(Default)]
pub struct Top {
    kept: Mutex<VecDeque<Sample>>,
}

/// One line of a top list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranked {
    pub name: String,
    /// Sampled requests (about one in [`SAMPLE_EVERY`]).
    pub samples: u64,
    pub bytes: u64,
}

impl Top {
    /// Takes the workers' new samples and forgets those out of the window.
    pub fn collect(&self, now: u64) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        metrics::take_samples(&mut *kept);
        while kept.len() > MAX_KEPT || kept.front().is_some_and(|s| s.at + WINDOW_SECS < now) {
            kept.pop_front();
        }
    }

    /// The `n` URLs and the `n` clients sampled most often in the window.
    pub fn lists(&self, n: usize) -> (Vec<Ranked>, Vec<Ranked>) {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut urls: HashMap<&[u8], (u64, u64)> = HashMap::new();
        let mut clients: HashMap<IpAddr, (u64, u64)> = HashMap::new();
        for s in kept.iter() {
            let u = urls.entry(s.url()).or_default();
            u.0 += 1;
            u.1 += s.bytes;
            let c = clients.entry(s.client).or_default();
            c.0 += 1;
            c.1 += s.bytes;
        }
        let urls = urls
            .into_iter()
            .map(|(url, v)| (String::from_utf8_lossy(url).into_owned(), v));
        let clients = clients.into_iter().map(|(ip, v)| (ip.to_string(), v));
        (rank(urls, n), rank(clients, n))
    }
}

fn rank(all: impl Iterator<Item = (String, (u64, u64))>, n: usize) -> Vec<Ranked> {
    let mut all: Vec<Ranked> = all
        .map(|(name, (samples, bytes))| Ranked {
            name,
            samples,
            bytes,
        })
        .collect();
    all.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    all.truncate(n);
    all
}
