//! A miniature cache wired to the policy the way the proxy is meant to wire
//! it (see NOTES.md), a scripted origin modelled on the http-cache-tests
//! server, and a simulated clock. The scenario tests replay the suite's
//! request sequences through it.

#![allow(dead_code)]

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use sepia_cache_policy::{
    evaluate, evaluate_conditionals, freshen_headers, invalidations, is_error_status,
    is_safe_method, is_storable, primary_key, range_for_stored, select_for_update,
    storable_post_response, usable_on_error, validators, vary_key, ConditionalOutcome, Decision,
    FieldList, Fields, PolicyConfig, RangeOutcome, RequestCacheControl, StoredFieldFilter,
    StoredMeta, VaryKey, CONDITIONAL_FIELDS, NOT_MODIFIED_FIELDS,
};
use sepia_http1::HeaderId;

/// The suite's pause between requests marked `pause_after`.
pub const PAUSE: u64 = 3;

/// A header value in a scenario: literal, or an HTTP-date relative to the
/// origin's clock (responses) or to the previous response (requests, the
/// suite's `magic_ims`).
#[derive(Clone, Copy, Debug)]
pub enum Val {
    S(&'static str),
    Date(i64),
}

pub use Val::{Date, S};

/// What the suite checks about where a response came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Setup step: anything goes.
    Any,
    /// The origin was not contacted.
    Cached,
    /// The origin was contacted.
    NotCached,
    /// The origin was contacted with `If-None-Match`.
    EtagValidated,
    /// The origin was contacted with `If-Modified-Since`.
    LmValidated,
}

/// One request of a scenario and the origin's configured answer to it.
#[derive(Clone, Debug)]
pub struct Step {
    pub method: &'static str,
    pub target: &'static str,
    pub request: Vec<(&'static str, Val)>,
    pub status: u16,
    pub response: Vec<(&'static str, Val)>,
    pub body: &'static str,
    pub expect: Expect,
    pub pause_after: bool,
}

impl Step {
    pub fn get(response: &[(&'static str, Val)]) -> Self {
        Self {
            method: "GET",
            target: "/test/uuid",
            request: Vec::new(),
            status: 200,
            response: response.to_vec(),
            body: "0123456789A",
            expect: Expect::Any,
            pause_after: false,
        }
    }

    pub fn expect(mut self, expect: Expect) -> Self {
        self.expect = expect;
        self
    }

    pub fn pause(mut self) -> Self {
        self.pause_after = true;
        self
    }

    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    pub fn method(mut self, method: &'static str) -> Self {
        self.method = method;
        self
    }

    pub fn target(mut self, target: &'static str) -> Self {
        self.target = target;
        self
    }

    pub fn request(mut self, request: &[(&'static str, Val)]) -> Self {
        self.request = request.to_vec();
        self
    }
}

/// What the client received.
#[derive(Clone, Debug)]
pub struct Received {
    pub status: u16,
    pub fields: FieldList,
    pub body: Vec<u8>,
    /// Headers of the request the origin saw, if it was contacted.
    pub origin_saw: Option<FieldList>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<String> {
        self.fields
            .first_named(name.as_bytes())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// One step being replayed.
struct Script<'a> {
    step: &'a Step,
    response: &'a FieldList,
    previous: Option<&'a FieldList>,
}

struct Entry {
    meta: StoredMeta,
    fields: FieldList,
    body: Vec<u8>,
    vary_key: Vec<u8>,
}

/// The miniature cache.
pub struct MiniCache {
    pub config: PolicyConfig,
    pub now: u64,
    entries: HashMap<Vec<u8>, Vec<Entry>>,
    key: Vec<u8>,
    scratch: Vec<u8>,
    last_origin_time: u64,
}

pub fn http_date(secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

fn materialise(list: &[(&'static str, Val)], base: u64) -> FieldList {
    let mut out = FieldList::new();
    for (name, value) in list {
        let text = match value {
            Val::S(s) => (*s).to_owned(),
            Val::Date(offset) => http_date(base.saturating_add_signed(*offset)),
        };
        out.push(Bytes::from_static(name.as_bytes()), Bytes::from(text));
    }
    out
}

fn copy_fields<'a>(lines: impl Iterator<Item = (&'a [u8], &'a [u8])>, out: &mut FieldList) {
    for (name, value) in lines {
        out.push(Bytes::copy_from_slice(name), Bytes::copy_from_slice(value));
    }
}

impl MiniCache {
    pub fn new(config: PolicyConfig) -> Self {
        Self {
            config,
            now: 1_700_000_000,
            entries: HashMap::new(),
            key: Vec::new(),
            scratch: Vec::new(),
            last_origin_time: 1_700_000_000,
        }
    }

    /// Runs every step, returning what the client received for each.
    pub fn run(&mut self, steps: &[Step]) -> Vec<Received> {
        let mut received = Vec::new();
        let mut previous: Option<FieldList> = None;
        for step in steps {
            // The origin's answer, with dates on the clock of this request.
            let response = materialise(&step.response, self.now);
            let script = Script {
                step,
                response: &response,
                previous: previous.as_ref(),
            };
            received.push(self.handle(&script));
            previous = Some(response);
            if step.pause_after {
                self.now += PAUSE;
            }
        }
        received
    }

    /// Runs the steps and asserts each step's expectation.
    pub fn check(&mut self, name: &str, steps: &[Step]) -> Vec<Received> {
        let received = self.run(steps);
        for (i, (step, got)) in steps.iter().zip(&received).enumerate() {
            let saw = got.origin_saw.as_ref();
            let ok = match step.expect {
                Expect::Any => true,
                Expect::Cached => saw.is_none(),
                Expect::NotCached => saw.is_some(),
                Expect::EtagValidated => saw.is_some_and(|f| f.contains(HeaderId::IfNoneMatch)),
                Expect::LmValidated => saw.is_some_and(|f| f.contains(HeaderId::IfModifiedSince)),
            };
            assert!(
                ok,
                "{name}: request {} expected {:?}, origin saw {saw:?}",
                i + 1,
                step.expect
            );
        }
        received
    }

    /// The scripted origin: answers 304 like the suite server when a
    /// validation was expected and the validator equals the one the previous
    /// step's response carried, else the step's configured response.
    fn origin(&mut self, script: &Script<'_>, forwarded: &FieldList) -> (u16, FieldList) {
        self.last_origin_time = self.now;
        let mut status = script.step.status;
        if let Some(prev) = script.previous {
            let matches = |req: &[u8], resp: &[u8]| {
                forwarded
                    .first_named(req)
                    .is_some_and(|v| prev.first_named(resp) == Some(v))
            };
            let validated = matches(b"if-none-match", b"etag")
                || matches(b"if-modified-since", b"last-modified");
            if validated
                && matches!(
                    script.step.expect,
                    Expect::EtagValidated | Expect::LmValidated
                )
            {
                status = 304;
            }
        }
        (status, script.response.clone())
    }

    fn handle(&mut self, script: &Script<'_>) -> Received {
        let step = script.step;
        let request = materialise(&step.request, self.last_origin_time);
        let method = step.method.as_bytes();
        primary_key(
            b"http",
            b"example.test",
            step.target.as_bytes(),
            &mut self.key,
        );
        let key = self.key.clone();
        let request_cc = RequestCacheControl::parse(&request);

        if !is_safe_method(method) {
            let (status, fields) = self.origin(script, &request);
            for stale in invalidations(
                method,
                status,
                &key,
                fields.first(HeaderId::Location),
                fields.first(HeaderId::ContentLocation),
            )
            .iter()
            {
                self.entries.remove(stale);
            }
            if method == b"POST"
                && storable_post_response(&request, status, &fields, &key, &self.config)
                    .is_storable()
            {
                self.store(
                    &key,
                    &request,
                    status,
                    &fields,
                    step.body.as_bytes(),
                    self.now,
                );
            }
            return Received {
                status,
                fields,
                body: step.body.into(),
                origin_saw: Some(request),
            };
        }

        let selected = self.entries.get(&key).and_then(|variants| {
            variants.iter().position(|e| {
                e.meta
                    .vary_matches(&e.vary_key, &request, &mut self.scratch)
            })
        });
        let Some(index) = selected else {
            if request_cc.only_if_cached() {
                return Received {
                    status: 504,
                    fields: FieldList::new(),
                    body: Vec::new(),
                    origin_saw: None,
                };
            }
            return self.fill(script, &key, &request);
        };
        let entry = &self.entries[&key][index];
        match evaluate(&entry.meta, &request_cc, self.now, &self.config) {
            Decision::Fresh(_) | Decision::StaleAllowed(_) | Decision::StaleWhileRevalidate(_) => {
                self.serve(&key, index, step.method, &request, None)
            }
            Decision::GatewayTimeout => Received {
                status: 504,
                fields: FieldList::new(),
                body: Vec::new(),
                origin_saw: None,
            },
            Decision::Revalidate { .. } => self.revalidate(script, &key, index, &request),
        }
    }

    /// Miss: strip the client's conditionals, fetch, store if allowed.
    fn fill(&mut self, script: &Script<'_>, key: &[u8], request: &FieldList) -> Received {
        let step = script.step;
        let mut forwarded = FieldList::new();
        copy_fields(
            request.lines().filter(|(n, _)| {
                !CONDITIONAL_FIELDS
                    .iter()
                    .any(|c| n.eq_ignore_ascii_case(c.as_bytes()))
            }),
            &mut forwarded,
        );
        let request_time = self.now;
        let (status, fields) = self.origin(script, &forwarded);
        let stored = is_storable(
            step.method.as_bytes(),
            request,
            status,
            &fields,
            &self.config,
        )
        .is_storable()
            && self.store(
                key,
                request,
                status,
                &fields,
                step.body.as_bytes(),
                request_time,
            );
        if stored {
            let index = self.entries[key].len() - 1;
            return self.serve(key, index, step.method, request, Some(forwarded));
        }
        Received {
            status,
            fields,
            body: step.body.into(),
            origin_saw: Some(forwarded),
        }
    }

    /// Stale or no-cache: validate with the stored validators.
    fn revalidate(
        &mut self,
        script: &Script<'_>,
        key: &[u8],
        index: usize,
        request: &FieldList,
    ) -> Received {
        let step = script.step;
        let mut forwarded = FieldList::new();
        copy_fields(
            request.lines().filter(|(n, _)| {
                !CONDITIONAL_FIELDS
                    .iter()
                    .any(|c| n.eq_ignore_ascii_case(c.as_bytes()))
            }),
            &mut forwarded,
        );
        let v = validators(&self.entries[key][index].meta);
        if let Some(etag) = v.if_none_match {
            forwarded.push(
                Bytes::from_static(b"If-None-Match"),
                Bytes::copy_from_slice(etag),
            );
        }
        if let Some(lm) = v.if_modified_since {
            forwarded.push(
                Bytes::from_static(b"If-Modified-Since"),
                Bytes::copy_from_slice(lm),
            );
        }
        let request_time = self.now;
        let (status, fields) = self.origin(script, &forwarded);
        if status == 304 {
            let entry = &self.entries[key][index];
            if select_for_update(&[&entry.meta], &fields) == [0] {
                let merged = freshen_headers(&entry.fields, &fields);
                let meta = StoredMeta::from_response(
                    entry.meta.status,
                    &merged,
                    request_time,
                    self.now,
                    key,
                    &self.config,
                );
                let entry = &mut self.entries.get_mut(key).unwrap()[index];
                entry.meta = meta;
                entry.fields = merged;
                return self.serve(key, index, step.method, request, Some(forwarded));
            }
        }
        let request_cc = RequestCacheControl::parse(request);
        if is_error_status(status)
            && usable_on_error(
                &self.entries[key][index].meta,
                &request_cc,
                self.now,
                &self.config,
            )
        {
            return self.serve(key, index, step.method, request, Some(forwarded));
        }
        self.entries.get_mut(key).unwrap().remove(index);
        if is_storable(
            step.method.as_bytes(),
            request,
            status,
            &fields,
            &self.config,
        )
        .is_storable()
            && self.store(
                key,
                request,
                status,
                &fields,
                step.body.as_bytes(),
                request_time,
            )
        {
            let index = self.entries[key].len() - 1;
            return self.serve(key, index, step.method, request, Some(forwarded));
        }
        Received {
            status,
            fields,
            body: step.body.into(),
            origin_saw: Some(forwarded),
        }
    }

    fn store(
        &mut self,
        key: &[u8],
        request: &FieldList,
        status: u16,
        fields: &FieldList,
        body: &[u8],
        request_time: u64,
    ) -> bool {
        let meta =
            StoredMeta::from_response(status, fields, request_time, self.now, key, &self.config);
        let mut vary = Vec::new();
        if vary_key(fields, request, &mut vary) == VaryKey::Never || !meta.is_worth_storing() {
            return false;
        }
        let kept = StoredFieldFilter::new(fields, self.config.shared()).stored_fields();
        let variants = self.entries.entry(key.to_vec()).or_default();
        variants.retain(|e| e.vary_key != vary);
        variants.push(Entry {
            meta,
            fields: kept,
            body: body.to_vec(),
            vary_key: vary,
        });
        true
    }

    /// Builds the client's response from a stored entry.
    fn serve(
        &self,
        key: &[u8],
        index: usize,
        method: &str,
        request: &FieldList,
        origin_saw: Option<FieldList>,
    ) -> Received {
        let entry = &self.entries[key][index];
        let mut fields = FieldList::new();
        copy_fields(
            entry
                .fields
                .lines()
                .filter(|(n, _)| !n.eq_ignore_ascii_case(b"age")),
            &mut fields,
        );
        let age = entry.meta.age_field_value(self.now).to_string();
        fields.push(Bytes::from_static(b"Age"), Bytes::from(age));
        match evaluate_conditionals(method.as_bytes(), request, &entry.meta) {
            ConditionalOutcome::NotModified => {
                let mut subset = FieldList::new();
                copy_fields(
                    fields.lines().filter(|(n, _)| {
                        NOT_MODIFIED_FIELDS
                            .iter()
                            .any(|f| n.eq_ignore_ascii_case(f.as_bytes()))
                    }),
                    &mut subset,
                );
                return Received {
                    status: 304,
                    fields: subset,
                    body: Vec::new(),
                    origin_saw,
                };
            }
            ConditionalOutcome::PreconditionFailed => {
                return Received {
                    status: 412,
                    fields: FieldList::new(),
                    body: Vec::new(),
                    origin_saw,
                };
            }
            ConditionalOutcome::Proceed => {}
        }
        match range_for_stored(
            method.as_bytes(),
            request,
            &entry.meta,
            entry.body.len() as u64,
        ) {
            RangeOutcome::Partial { start, end } => Received {
                status: 206,
                fields,
                body: entry.body[start as usize..=end as usize].to_vec(),
                origin_saw,
            },
            RangeOutcome::Unsatisfiable => Received {
                status: 416,
                fields,
                body: Vec::new(),
                origin_saw,
            },
            RangeOutcome::Full => Received {
                status: entry.meta.status,
                fields,
                body: entry.body.clone(),
                origin_saw,
            },
        }
    }
}
