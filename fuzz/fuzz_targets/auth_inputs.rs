//! Proxy-Authorization values, htpasswd files and helper replies: never a panic, and the
//! invariants in `sepia_auth::fuzzing` hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sepia_auth::fuzzing::check_untrusted_inputs(data);
});
