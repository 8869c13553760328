//! Targeted cache control (RFC 9213): response fields such as `CDN-Cache-Control` that carry
//! cache directives for one class of caches. A cache keeps a *target list*, the field names it
//! obeys in priority order; "the cache MUST select the first (in target list order) field with
//! a valid, non-empty value and use its value to determine the caching policy for the
//! response, and it MUST ignore the Cache-Control and Expires header fields in that response,
//! unless no valid, non-empty value is available from the listed header fields" (§2.2).
//!
//! A targeted field is a Structured Field Dictionary (§2.1, RFC 8941); "If a targeted field in
//! a given response is empty, or a parsing error is encountered, that field SHOULD be ignored".
//! Its members are mapped onto Cache-Control's directives: an Integer is delta-seconds (a
//! negative or non-integer value is invalid, as in Cache-Control), a Boolean `true` is a
//! directive without argument and `false` its absence. `no-cache` and `private` with a field
//! list (a String) are taken as their unqualified forms: the field-level exceptions only ever
//! relax them, so obeying the whole directive is the safe reading.

use crate::cache_control::ResponseCacheControl;
use crate::dates::Expires;
use crate::fields::Fields;
use crate::structured::{parse_dictionary, Value};
use sepia_http1::HeaderId;

/// A cache's target list (RFC 9213 §2.2), highest priority first. Empty for a cache that obeys
/// only Cache-Control.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetList {
    names: Vec<Box<[u8]>>,
    /// Each name's id when the codec knows it (`CDN-Cache-Control`): then an absent field is
    /// one bit test on every miss, not a pass over the response's fields.
    ids: Vec<HeaderId>,
}

impl TargetList {
    /// At most this many names: the index of the one that decided fits the stored metadata's
    /// byte.
    pub const MAX: usize = 32;

    /// The list of `names`, in priority order; names beyond [`TargetList::MAX`] are dropped.
    pub fn new<N: AsRef<[u8]>>(names: impl IntoIterator<Item = N>) -> TargetList {
        let names: Vec<Box<[u8]>> = names
            .into_iter()
            .take(Self::MAX)
            .map(|n| n.as_ref().to_ascii_lowercase().into_boxed_slice())
            .collect();
        let ids = names.iter().map(|n| HeaderId::from_name(n)).collect();
        TargetList { names, ids }
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The name at `index` (lower case).
    pub fn name(&self, index: u8) -> Option<&[u8]> {
        self.names.get(usize::from(index)).map(|n| &n[..])
    }

    /// The name of the field that decided `source`, for Cache-Status's `detail` (RFC 9211
    /// §2.8): `None` when Cache-Control did.
    pub fn deciding(&self, source: PolicySource) -> Option<&str> {
        match source {
            PolicySource::CacheControl => None,
            PolicySource::Targeted(index) => std::str::from_utf8(self.name(index)?).ok(),
        }
    }
}

/// The field whose directives a response's caching follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PolicySource {
    /// Cache-Control and Expires (RFC 9111 §5.2, §5.3).
    #[default]
    CacheControl,
    /// The target list's field at this index (RFC 9213).
    Targeted(u8),
}

/// The directives that govern a response for this cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Governing {
    pub cache_control: ResponseCacheControl,
    /// `Expires::Absent` when a targeted field governs (§2.2 ignores Expires then).
    pub expires: Expires,
    pub source: PolicySource,
}

/// The directives a response's caching follows: those of the first targeted field with a
/// valid, non-empty value, else its Cache-Control and Expires.
pub fn governing<F: Fields>(response: &F, targets: &TargetList) -> Governing {
    governing_with(response, targets, || Expires::parse(response))
}

/// [`governing`] for a response received at `now`: its Expires is read against the receipt
/// time, so the response's Date is not parsed for it a second time.
pub(crate) fn governing_at<F: Fields>(response: &F, targets: &TargetList, now: u64) -> Governing {
    governing_with(response, targets, || Expires::parse_at(response, now))
}

/// [`governing`], reading Expires with `expires` when no targeted field decides.
fn governing_with<F: Fields>(
    response: &F,
    targets: &TargetList,
    expires: impl FnOnce() -> Expires,
) -> Governing {
    for (index, (name, &id)) in targets.names.iter().zip(&targets.ids).enumerate() {
        let found = match id {
            HeaderId::Other => targeted_directives(response.values(name)),
            known => targeted_directives(response.known(known)),
        };
        if let Some(cache_control) = found {
            return Governing {
                cache_control,
                expires: Expires::Absent,
                source: PolicySource::Targeted(index as u8),
            };
        }
    }
    Governing {
        cache_control: ResponseCacheControl::parse(response),
        expires: expires(),
        source: PolicySource::CacheControl,
    }
}

/// The directives of a targeted field's `lines`, when it is present with a valid, non-empty
/// value.
fn targeted_directives<'a>(
    mut lines: impl Iterator<Item = &'a [u8]>,
) -> Option<ResponseCacheControl> {
    let first = lines.next()?;
    // Several lines form one value, joined by commas (RFC 8941 §4.2); one line is read in place.
    let joined: Vec<u8>;
    let value = match lines.next() {
        None => first,
        Some(second) => {
            let mut all = [first, b",", second].concat();
            for line in lines {
                all.push(b',');
                all.extend_from_slice(line);
            }
            joined = all;
            &joined
        }
    };
    let mut members: Vec<(&[u8], Value<'_>)> = Vec::new();
    let parsed = parse_dictionary(value, |key, value| {
        // "when duplicate Dictionary keys are encountered, all but the last instance are
        // ignored" (RFC 8941 §4.2.2).
        match members.iter_mut().find(|(k, _)| *k == key) {
            Some(member) => member.1 = value,
            None => members.push((key, value)),
        }
    });
    if parsed.is_err() || members.is_empty() {
        return None;
    }
    Some(ResponseCacheControl::from_targeted(members))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    fn governing_of(pairs: &[(&str, &str)], targets: &[&str]) -> Governing {
        governing(&FieldList::from_pairs(pairs), &TargetList::new(targets))
    }

    const CDN: &[&str] = &["Sepia-Cache-Control", "CDN-Cache-Control"];

    #[test]
    fn the_first_valid_targeted_field_governs_and_cache_control_and_expires_are_ignored() {
        let g = governing_of(
            &[
                ("Cache-Control", "no-store"),
                ("Expires", "0"),
                ("CDN-Cache-Control", "max-age=600"),
            ],
            CDN,
        );
        assert_eq!(g.source, PolicySource::Targeted(1));
        assert_eq!(g.expires, Expires::Absent);
        assert_eq!(g.cache_control.max_age(), Some(600));
        assert!(!g.cache_control.no_store());
        let both = governing_of(
            &[
                ("CDN-Cache-Control", "max-age=600"),
                ("sepia-cache-control", "no-store"),
            ],
            CDN,
        );
        assert_eq!(both.source, PolicySource::Targeted(0));
        assert!(both.cache_control.no_store());
    }

    #[test]
    fn invalid_or_empty_targeted_fields_are_ignored() {
        for value in ["", "  ", "Max-Age=60", "max-age=60,", "max-age=\"60"] {
            let g = governing_of(
                &[("Cache-Control", "max-age=5"), ("CDN-Cache-Control", value)],
                CDN,
            );
            assert_eq!(g.source, PolicySource::CacheControl, "{value:?}");
            assert_eq!(g.cache_control.max_age(), Some(5));
        }
        let none = governing_of(&[("Cache-Control", "max-age=5")], &[]);
        assert_eq!(none.source, PolicySource::CacheControl);
    }

    #[test]
    fn directives_map_onto_cache_control() {
        let cc = |value: &str| governing_of(&[("CDN-Cache-Control", value)], CDN).cache_control;
        let all = cc(
            "max-age=60, s-maxage=30, must-revalidate, stale-while-revalidate=5, \
                      stale-if-error=9, public",
        );
        assert_eq!(
            (
                all.max_age(),
                all.s_maxage(),
                all.stale_while_revalidate(),
                all.stale_if_error()
            ),
            (Some(60), Some(30), Some(5), Some(9))
        );
        assert!(all.must_revalidate() && all.public());
        assert!(cc("no-store").no_store());
        assert!(!cc("no-store=?0, max-age=1").no_store());
        // Qualified forms are obeyed whole.
        assert!(cc("no-cache=\"set-cookie\"").no_cache());
        assert!(cc("private=\"x\"").private());
        // A value that is not delta-seconds makes the lifetime 0 (stale), as in Cache-Control.
        for bad in ["max-age=-1", "max-age=1.5", "max-age=abc", "max-age=\"60\""] {
            assert_eq!(cc(bad).max_age(), Some(0), "{bad}");
            assert!(cc(bad).invalid_max_age(), "{bad}");
        }
        // The last of duplicate keys wins (RFC 8941 §4.2.2).
        assert_eq!(cc("max-age=1, max-age=2").max_age(), Some(2));
        // Parameters are ignored (RFC 9213 §2.1).
        assert_eq!(cc("max-age=60;foo=bar").max_age(), Some(60));
    }

    #[test]
    fn the_deciding_field_is_named() {
        let targets = TargetList::new(CDN);
        assert_eq!(targets.deciding(PolicySource::CacheControl), None);
        assert_eq!(
            targets.deciding(PolicySource::Targeted(1)),
            Some("cdn-cache-control")
        );
        assert_eq!(targets.deciding(PolicySource::Targeted(7)), None);
    }

    #[test]
    fn several_lines_form_one_value() {
        let g = governing_of(
            &[
                ("CDN-Cache-Control", "max-age=60"),
                ("CDN-Cache-Control", "must-revalidate"),
            ],
            CDN,
        );
        assert_eq!(g.cache_control.max_age(), Some(60));
        assert!(g.cache_control.must_revalidate());
    }
}
