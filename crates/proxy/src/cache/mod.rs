//! The HTTP cache's storage side (RFC 9111): what is kept beside each stored response
//! ([`Entry`]), how a response is published into the store while it is relayed and freshened
//! after a 304 (`publish`), and the store itself, reached only through `sepia_store::Store` so
//! that a tiered memory + disk store plugs in without touching the pipeline. Policy decisions
//! come from `sepia-cache-policy` (pure functions); the pipeline decides when to call what.

mod bans;
mod entry;
mod persist;
mod publish;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nix::sys::resource::{getrlimit, Resource};
use sepia_cache_policy::{HeuristicRule, PolicyConfig, TargetList};
use sepia_config::{CacheConfig, Listener};
use sepia_store::{
    DiskConfig, FileHome, LockWait, MemoryStore, Store, StoreConfig, TieredConfig, TieredStore,
};

pub use bans::{Ban, Bans};
pub use entry::{FieldMap, Meta};
pub use publish::{
    freshened, publish_combined, publish_response, republish, stored_body, Publishing, StoringBody,
};

/// Name this cache uses in Cache-Status (RFC 9211 §2).
pub const CACHE_NAME: &str = "sepia";

pub struct Cache {
    /// Shared with the cache of a reloaded configuration (`Cache::reconfigured`).
    pub store: Arc<dyn Store<Meta>>,
    /// The policy of each listener, in `config.listeners` order: the same rules, each with its
    /// listener's targeted fields (RFC 9213).
    policies: Vec<PolicyConfig>,
    /// The policy without targeted fields.
    base: PolicyConfig,
    pub config: CacheConfig,
    /// A piece of a representation (RFC 9111 §3.3) has been kept since start: until then a
    /// miss does not look for one to complete, which would cost every miss a lookup.
    pieces_kept: AtomicBool,
    /// Purges by prefix and tag, applied when a lookup finds a condemned object. Shared with
    /// the cache of a reloaded configuration, as the store is.
    pub bans: Arc<Bans>,
}

impl Cache {
    /// The policy requests of listener `listener` (its index in the configuration) are cached
    /// by.
    pub fn policy(&self, listener: usize) -> &PolicyConfig {
        self.policies.get(listener).unwrap_or(&self.base)
    }

    /// Whether a piece may be stored (one was kept since start).
    pub fn may_hold_pieces(&self) -> bool {
        self.pieces_kept.load(Ordering::Relaxed)
    }

    /// Notes that a piece is being kept.
    pub fn keeping_pieces(&self) {
        self.pieces_kept.store(true, Ordering::Relaxed);
    }

    /// Removes every stored response of `primary`, its pieces included (PURGE, and
    /// invalidation by an unsafe method, RFC 9111 §4.4). Returns how many were removed.
    pub fn purge(&self, primary: &[u8]) -> usize {
        let pieces = match self.may_hold_pieces() {
            true => with_piece_key(primary, |key| self.store.purge(key)),
            false => 0,
        };
        self.store.purge(primary) + pieces
    }

    /// `None` when the configuration disables caching.
    pub fn from_config(
        config: &CacheConfig,
        listeners: &[Listener],
        tag_fields: Vec<String>,
        lock_wait: LockWait,
    ) -> Result<Option<Cache>, String> {
        if !config.enabled {
            return Ok(None);
        }
        let policy = base_policy(config)?;
        let memory = StoreConfig {
            budget_bytes: config.memory_bytes,
            max_object_bytes: config.max_object_bytes,
            body_file_min: config.sendfile_min_bytes.unwrap_or(u64::MAX),
            max_body_files: body_file_cap(),
            body_file_home: body_file_home(config)?,
            ..StoreConfig::default()
        };
        let store: Arc<dyn Store<Meta>> = if config.disks.is_empty() {
            Arc::new(MemoryStore::new(memory))
        } else {
            let disks = config.disks.iter().map(disk_config).collect();
            // Disk bodies from the sendfile size up are sent from their segment file.
            let segment_body_min = memory.body_file_min;
            let tiered = TieredConfig {
                segment_body_min,
                read_threads: config.disk_read_threads,
                io_uring: config.disk_io == sepia_config::DiskIo::IoUring,
                ring_depth: config.disk_ring_depth,
                lock_wait,
                // The ring's completions are taken by the event loop that serves them.
                reads_on: tokio::runtime::Handle::try_current().ok(),
                ..TieredConfig::new(memory, disks)
            };
            Arc::new(TieredStore::try_open(tiered).map_err(|e| e.to_string())?)
        };
        Ok(Some(Cache {
            store,
            policies: policies(&policy, listeners),
            base: policy,
            config: config.clone(),
            pieces_kept: AtomicBool::new(false),
            bans: Arc::new(Bans::new(tag_fields)),
        }))
    }

    /// The cache of a reloaded configuration: the same store (resized to `config`'s memory
    /// budget; shrinking evicts) and purges, with `config`'s freshness rules and listeners.
    /// What only a restart can change (disks, object size limit, body files) keeps its
    /// running value; the reload reports it.
    pub fn reconfigured(
        &self,
        config: &CacheConfig,
        listeners: &[Listener],
    ) -> Result<Cache, String> {
        let policy = base_policy(config)?;
        if config.memory_bytes != self.config.memory_bytes {
            self.store.set_memory_budget(config.memory_bytes);
        }
        Ok(Cache {
            store: self.store.clone(),
            policies: policies(&policy, listeners),
            base: policy,
            config: CacheConfig {
                disks: self.config.disks.clone(),
                disk_read_threads: self.config.disk_read_threads,
                disk_io: self.config.disk_io,
                disk_ring_depth: self.config.disk_ring_depth,
                max_object_bytes: self.config.max_object_bytes,
                sendfile_min_bytes: self.config.sendfile_min_bytes,
                sendfile_dir: self.config.sendfile_dir.clone(),
                ..config.clone()
            },
            pieces_kept: AtomicBool::new(self.may_hold_pieces()),
            bans: self.bans.clone(),
        })
    }
}

/// The freshness policy of `config` (RFC 9111 §4.2.2 heuristics and `refresh` rules).
fn base_policy(config: &CacheConfig) -> Result<PolicyConfig, String> {
    let mut policy = PolicyConfig::builder()
        .shared(true)
        .heuristic_percent(config.heuristic_percent)
        .heuristic_max(config.heuristic_max.as_secs());
    for rule in &config.refresh {
        policy = policy.refresh_rule(
            &rule.pattern,
            HeuristicRule {
                min: rule.min.as_secs(),
                percent: rule.percent,
                max: rule.max.as_secs(),
            },
        );
    }
    policy.build().map_err(|e| e.to_string())
}

/// Each listener's policy: `base` with the listener's targeted fields (RFC 9213).
fn policies(base: &PolicyConfig, listeners: &[Listener]) -> Vec<PolicyConfig> {
    listeners
        .iter()
        .map(|l| base.with_targets(TargetList::new(&l.targeted_cache_control)))
        .collect()
}

/// The most descriptors the disk tier of `cache` holds open (its segment files when full):
/// what the process's descriptor table is sized for at start, besides connections.
pub fn disk_descriptors(cache: &CacheConfig) -> u64 {
    cache
        .disks
        .iter()
        .map(|d| disk_config(d).open_files())
        .sum()
}

/// The store's settings for one `[[cache.disk]]`: its path, size, write budget and
/// admission, the engine's defaults for the rest (`sepia_store::DiskConfig::new`).
fn disk_config(disk: &sepia_config::DiskConfig) -> DiskConfig {
    DiskConfig {
        write_budget_bytes_per_day: disk.write_budget_per_day,
        admission: match disk.admission {
            sepia_config::DiskAdmission::Fill => sepia_store::Admission::Fill,
            sepia_config::DiskAdmission::Earned => sepia_store::Admission::Earned,
        },
        ..DiskConfig::new(disk.path.clone(), disk.size_bytes)
    }
}

/// What follows a primary key in the key its pieces are stored under. A request target
/// never holds a NUL (RFC 9112 §3.2), so no URL's key can be mistaken for a piece's.
const PIECE_SUFFIX: &[u8] = b"\0piece";

/// Writes into `out` the key the pieces of `primary`'s representation are stored under
/// (RFC 9111 §3.3): apart from complete responses, so that no lookup for a whole response
/// can ever find a piece.
pub fn piece_key(primary: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(primary);
    out.extend_from_slice(PIECE_SUFFIX);
}

/// Runs `with` with the key of `primary`'s pieces, built on the stack when it fits: every
/// full-GET miss looks for a piece to complete, and must not allocate for it.
pub fn with_piece_key<T>(primary: &[u8], with: impl FnOnce(&[u8]) -> T) -> T {
    const ROOM: usize = 512;
    let len = primary.len() + PIECE_SUFFIX.len();
    if len > ROOM {
        let mut key = Vec::new();
        piece_key(primary, &mut key);
        return with(&key);
    }
    let mut room = [0u8; ROOM];
    room[..primary.len()].copy_from_slice(primary);
    room[primary.len()..len].copy_from_slice(PIECE_SUFFIX);
    with(&room[..len])
}

/// Where body files are made. A configured `sendfile_dir` must work (an error names it);
/// the default, /var/tmp (a disk filesystem on most systems, where sendfile is cheapest:
/// see sepia_store's `body_file.rs`), falls back to memory files when it does not.
fn body_file_home(config: &CacheConfig) -> Result<FileHome, String> {
    if config.sendfile_min_bytes.is_none() {
        return Ok(FileHome::Memory);
    }
    if let Some(dir) = &config.sendfile_dir {
        let home = FileHome::Dir(dir.clone());
        return home.probe().map(|()| home).map_err(|e| {
            format!(
                "cache.sendfile_dir: cannot make unnamed files (O_TMPFILE) in \"{}\": {e}",
                dir.display()
            )
        });
    }
    let home = FileHome::Dir(DEFAULT_SENDFILE_DIR.into());
    match home.probe() {
        Ok(()) => Ok(home),
        Err(e) => {
            tracing::warn!(
                "large bodies go to memory files: cannot make unnamed files in \
                 {DEFAULT_SENDFILE_DIR} ({e}); set cache.sendfile_dir"
            );
            Ok(FileHome::Memory)
        }
    }
}

/// The default home of body files.
const DEFAULT_SENDFILE_DIR: &str = "/var/tmp";

/// How many stored bodies may be kept in files (one descriptor each): a quarter of the
/// descriptor limit, so that large objects never starve accepts and origin connections.
fn body_file_cap() -> usize {
    getrlimit(Resource::RLIMIT_NOFILE).map_or(0, |(soft, _)| {
        usize::try_from(soft / 4).unwrap_or(usize::MAX)
    })
}

/// Seconds since the Unix epoch: the policy's clock. Read from the coarse realtime clock
/// (updated every scheduler tick, a few ms): whole seconds are all RFC 9111's arithmetic
/// uses, and the coarse clock is a plain memory read in the vDSO, where the precise one
/// reads and scales the TSC, several times as long in a virtual machine (every hit reads it).
pub fn unix_now() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    match clock_gettime(ClockId::CLOCK_REALTIME_COARSE) {
        Ok(t) => u64::try_from(t.tv_sec()).unwrap_or(0),
        Err(_) => sepia_cache_policy::unix_seconds(std::time::SystemTime::now()),
    }
}
