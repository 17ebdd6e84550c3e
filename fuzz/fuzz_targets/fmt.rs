#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| baton_fuzz::props::fmt_is_idempotent_and_keeps_meaning(data));
