//! HTTP-dates (RFC 9110 §5.6.7) through the cache's own parser, checked against an oracle
//! (`sepia_fuzz::http_date`):
//! - the input as a field value: never a panic, the same answer as `httpdate` wherever that
//!   accepts, anything more accepted only as a case / day-name / leap-second variant of the
//!   date it returned, and the clock only matters for the RFC 850 format;
//! - the input as a recipe (a timestamp, one of the three formats, letter case, a wrong day
//!   name, a leap second, a clock): written out, it must read back as what it means, RFC 850
//!   two-digit years by the fifty-year rule.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sepia_fuzz::http_date::check(data);
});
