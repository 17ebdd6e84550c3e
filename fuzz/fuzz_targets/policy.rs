#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| baton_fuzz::props::policy_parses_or_errs(data));
