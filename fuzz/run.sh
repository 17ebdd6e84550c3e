#!/usr/bin/env bash
# Bounded fuzzing run (CI): every target for FUZZ_SECONDS (default 40) with its seed corpus
# (shipped policies, examples, test fixtures). A finding fails the run and leaves the input
# in fuzz/artifacts/<target>/. Needs nightly and cargo-fuzz (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-40}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
cargo +nightly fuzz build -O
run() {
    local target="$1"; shift
    mkdir -p "fuzz/corpus/$target"
    cargo +nightly fuzz run -O "$target" "fuzz/corpus/$target" "$@" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
}
run policy policies tests/fixtures/policies
run fmt policies tests/fixtures/policies
run state examples tests/fixtures/state tests/fixtures/db
run framing fuzz/seeds/framing
