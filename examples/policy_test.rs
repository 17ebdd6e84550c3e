//! Testing a team's own policy from Rust with `baton::testing`.
//!
//! Run: `cargo run --example policy_test [POLICY] [STATE]`. In a test suite, the same calls go
//! in `#[test]` or `#[rstest]` functions; a failed `assert_*` panics with expected vs actual and
//! the rule that decided, with its values.

use baton::testing::PolicyUnderTest;

fn main() {
    let mut args = std::env::args().skip(1);
    let policy = args.next().unwrap_or_else(|| "default".into());
    let state = args
        .next()
        .unwrap_or_else(|| "examples/seed-run6.yaml".into());
    let put = match PolicyUnderTest::load(&policy) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let checked = match put.decide_file(&state) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!("{}", checked.deciding_rule());
    if policy == "default" && state == "examples/seed-run6.yaml" {
        checked
            .assert_strategy("full_new")
            .assert_thread("create", None)
            .assert_covered_runs(1, 5)
            .assert_delivery("off_band");
        println!("all assertions hold");
    }
}
