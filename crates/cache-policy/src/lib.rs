//! RFC 9111 HTTP caching policy as pure functions.
//!
//! No I/O, no clock reads, no global state: every time is a `u64` count of
//! seconds since the Unix epoch and `now` is always passed in, so tests
//! control time. Headers are read through the [`Fields`] trait, which the
//! proxy implements over its parsed heads; nothing on the hit path allocates.
//!
//! The flow the proxy follows (see `NOTES.md` for the wiring in detail):
//!
//! 1. Key: [`primary_key`] into a reused buffer; for a variant,
//!    [`secondary_key`] / [`StoredMeta::vary_matches`] (§4.1).
//! 2. Hit: [`RequestCacheControl::parse`], then [`evaluate`] →
//!    [`Decision`]; answer the client's conditionals with
//!    [`evaluate_conditionals`] and ranges with [`range_for_stored`]; send
//!    `Age` from [`StoredMeta::age_field_value`] and a [`CacheStatus`].
//! 3. Revalidate: [`validators`] (§4.3.1); on 304 [`select_for_update`] and
//!    [`freshen_headers`] (§4.3.4); on error [`usable_on_error`].
//! 4. Miss: [`is_storable`] (§3); if storable build [`StoredMeta::from_response`]
//!    once and keep the fields [`StoredFieldFilter`] keeps (§3.1).
//! 5. Unsafe methods: [`invalidations`] (§4.4).

mod age;
mod cache_control;
mod cache_status;
mod conditional;
mod config;
mod dates;
mod etag;
mod evaluate;
mod fields;
mod freshen;
mod freshness;
mod invalidation;
mod key;
mod partial;
mod persist;
mod range;
mod status;
mod storability;
mod stored;
mod structured;
mod targeted;
mod uri;
mod vary;

pub use age::{age_field_value, corrected_initial_age, current_age, AgeHeader};
pub use cache_control::{
    parse_delta_seconds, RequestCacheControl, ResponseCacheControl, DELTA_SECONDS_CAP,
};
pub use cache_status::{write_decimal, CacheStatus, Forward};
pub use conditional::{
    conditional_forwarding, evaluate_conditionals, validators, ConditionalForwarding,
    ConditionalOutcome, Validators, CONDITIONAL_FIELDS, NOT_MODIFIED_FIELDS,
};
pub use config::{
    HeuristicRule, PolicyConfig, PolicyConfigBuilder, PolicyConfigError, DEFAULT_HEURISTIC_MAX,
    DEFAULT_HEURISTIC_PERCENT,
};
pub use dates::{
    first_date, parse_http_date, retry_after, unix_seconds, Expires, CLOCKLESS_REFERENCE,
};
pub use etag::{field_matches, Comparison, EntityTag};
pub use evaluate::{evaluate, is_error_status, usable_on_error, Decision, RevalidateReason};
pub use fields::{all_members, is_token, list_members, trim_ows, FieldList, Fields, ListMembers};
pub use freshen::{
    freshen_headers, is_hop_by_hop, is_never_updated, select_for_update, KeptLines,
    StoredFieldFilter,
};
pub use freshness::{explicit_lifetime, freshness_lifetime, heuristic_allowed, Freshness};
pub use invalidation::{invalidations, is_safe_method, Invalidations};
pub use key::{key_origin, primary_key};
pub use partial::{is_strong_validator, same_strong_validator, Piece};
pub use range::{
    parse_content_range, parse_range, parse_range_value, range_for_stored, resolve_range,
    write_content_range, ByteRange, ContentRange, RangeOutcome, RangeRequest,
};
pub use status::{is_final, is_heuristically_cacheable, is_understood};
pub use storability::{
    is_storable, is_storable_piece, is_storable_stored, storable_post_response, NotStorableReason,
    Storability,
};
pub use stored::StoredMeta;
pub use targeted::{governing, Governing, PolicySource, TargetList};
pub use uri::{remove_dot_segments, resolve_reference_key};
pub use vary::{
    secondary_key, vary_key, vary_key_of, vary_matches, Vary, VaryKey, MAX_SORTED_MEMBERS,
};
