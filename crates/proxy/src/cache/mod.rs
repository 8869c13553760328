//! The HTTP cache (RFC 9111) in front of the pass path: policy decisions come from
//! `sepia-cache-policy` (pure functions), storage from `sepia-store` (memory store with
//! collapsed, streaming fills). This module only connects them to the connection.

mod background;
mod fields;
mod flow;
mod serve;
mod stored_head;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sepia_cache_policy::{
    freshen_headers, Fields, HeuristicRule, PolicyConfig, StoredFieldFilter, StoredMeta,
};
use sepia_config::CacheConfig;
use sepia_http1::{BodyFraming, ResponseHead};
use sepia_store::{
    BodyLength, BodyWriter, FileHome, FillWriter, FinishError, FinishOutcome, MemoryStore, Object,
    StoreConfig,
};

pub use fields::HeadFields;
pub use flow::handle;
pub use stored_head::HeadLayout;

/// What the store keeps beside a response's bytes: the policy's view of it and where the
/// stored header fields sit in the stored head (needed to freshen them on a 304, RFC 9111
/// §4.3.4).
pub struct Entry {
    pub meta: StoredMeta,
    pub layout: HeadLayout,
    /// Content-Type, a slice of the stored head kept apart for the access log of every hit.
    pub content_type: Option<Bytes>,
}

impl Entry {
    /// The entry of `head`, built by `stored_head::build` together with `layout`.
    pub fn new(meta: StoredMeta, head: &Bytes, layout: HeadLayout) -> Entry {
        Entry {
            meta,
            content_type: layout.content_type(head),
            layout,
        }
    }
}

pub type Meta = Arc<Entry>;

pub struct Cache {
    pub store: MemoryStore<Meta>,
    pub policy: PolicyConfig,
    pub config: CacheConfig,
}

impl Cache {
    /// `None` when the configuration disables caching.
    pub fn from_config(config: &CacheConfig) -> Result<Option<Cache>, String> {
        if !config.enabled {
            return Ok(None);
        }
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
        let policy = policy.build().map_err(|e| e.to_string())?;
        let store = MemoryStore::new(StoreConfig {
            budget_bytes: config.memory_bytes,
            max_object_bytes: config.max_object_bytes,
            body_file_min: config.sendfile_min_bytes.unwrap_or(u64::MAX),
            max_body_files: body_file_cap(),
            body_file_home: body_file_home(config)?,
            ..StoreConfig::default()
        });
        Ok(Some(Cache {
            store,
            policy,
            config: config.clone(),
        }))
    }
}

/// Completes a refresh fill after a 304 (RFC 9111 §4.3.4): the freshened `head` and `fresh`
/// metadata with the stored object's body, appended so that requests collapsed on the refresh
/// receive it too. A body kept in a file is read back for them (rare: a 304 for a large
/// object); if that fails the fill aborts.
fn republish(
    writer: FillWriter<Meta>,
    obj: &Object<Meta>,
    head: Bytes,
    fresh: Meta,
) -> Result<FinishOutcome<Meta>, &'static str> {
    let mut body = writer.publish_head(
        head,
        fresh,
        obj.secondary().clone(),
        BodyLength::Known(obj.body_len()),
    );
    let chunks = obj
        .body()
        .to_chunks()
        .map_err(|_| "reading the stored body back failed")?;
    for chunk in chunks.iter() {
        body.append(chunk.clone());
    }
    body.finish()
        .map_err(|_| "storing the freshened response failed")
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
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE).map_or(0, |(soft, _)| {
        usize::try_from(soft / 4).unwrap_or(usize::MAX)
    })
}

/// Bodies up to this length, announced by Content-Length, are stored in the allocation of
/// their head: one allocation per small object instead of three (head, body, and the shared
/// header a `Bytes` made from a `Vec` allocates when it is first sliced), about 100 bytes
/// less per object and fewer fresh pages touched per miss. Larger ones are not reserved up
/// front: an origin that announces a large body and sends it slowly must not make Sepia hold
/// memory for all of it before it arrives.
const BODY_WITH_HEAD_MAX: u64 = 64 * 1024;

/// A response being stored: its body's bytes are copied into the store as they pass (see
/// [`publish_response`]).
pub struct StoringBody {
    writer: BodyWriter<Meta>,
    /// Room reserved after the head for a small announced body; empty otherwise.
    room: BytesMut,
}

impl StoringBody {
    /// Copies one piece of the body into the store: into the room after the head when it
    /// fits there, else into an allocation of its own.
    pub fn append(&mut self, data: &[u8]) {
        let chunk = if self.room.capacity() - self.room.len() < data.len() {
            Bytes::copy_from_slice(data)
        } else {
            self.room.extend_from_slice(data);
            self.room.split().freeze()
        };
        self.writer.append(chunk);
    }

    /// The body is complete: commit it (the store checks an announced length).
    pub fn finish(self) -> Result<FinishOutcome<Meta>, FinishError> {
        self.writer.finish()
    }

    /// The body will not be complete: nothing is stored.
    pub fn abort(self) {
        self.writer.abort();
    }
}

/// Publishes an origin response about to be stored through `writer`: its stored head and
/// entry, keeping the fields a shared cache stores (RFC 9111 §3.1), and the body length the
/// store should expect. The body follows through the returned [`StoringBody`].
pub fn publish_response(
    writer: FillWriter<Meta>,
    meta: StoredMeta,
    resp: &ResponseHead,
    framing: BodyFraming,
    via: Option<&[u8]>,
    secondary: Bytes,
) -> StoringBody {
    let fields = HeadFields(resp.headers());
    let filter = StoredFieldFilter::new(&fields, true);
    let kept = filter.kept();
    let length = match framing {
        BodyFraming::Length(n) => BodyLength::Known(n),
        BodyFraming::Empty => BodyLength::Known(0),
        BodyFraming::Chunked | BodyFraming::UntilClose => BodyLength::Unknown,
    };
    let room = match length {
        BodyLength::Known(n) if n <= BODY_WITH_HEAD_MAX => n as usize,
        _ => 0,
    };
    let reason = resp.reason();
    let (mut buf, layout) =
        stored_head::build_with_room(resp.status, reason, || kept.iter(), via, room);
    let head = if room == 0 {
        std::mem::take(&mut buf).freeze()
    } else {
        buf.split().freeze()
    };
    let entry = Arc::new(Entry::new(meta, &head, layout));
    StoringBody {
        writer: writer.publish_head(head, entry, secondary, length),
        room: buf,
    }
}

/// The stored head and entry of `obj` freshened by a 304 whose fields are `update` (RFC 9111
/// §4.3.4), its metadata rebuilt with the revalidation's request and response times.
pub fn freshened<U: Fields>(
    obj: &Object<Meta>,
    update: &U,
    (request_time, response_time): (u64, u64),
    key: &[u8],
    policy: &PolicyConfig,
    via: Option<&[u8]>,
) -> (Bytes, Meta) {
    let entry = obj.meta();
    let merged = freshen_headers(&entry.layout.fields(obj.head()), update);
    let meta = StoredMeta::from_response(
        entry.meta.status,
        &merged,
        request_time,
        response_time,
        key,
        policy,
    );
    let reason = entry.layout.reason(obj.head());
    let (head, layout) = stored_head::build(entry.meta.status, reason, || merged.lines(), via);
    let fresh = Arc::new(Entry::new(meta, &head, layout));
    (head, fresh)
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
