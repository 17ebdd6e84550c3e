//! Coverage as the engine sees it on seed 000 built run by run through `baton dispatch` and
//! `baton complete` (moved from tests/store_cli.rs, which checks that the store exports exactly
//! tests/fixtures/db/seed-built.yaml, but for the clock's times).

use std::path::Path;

#[test]
fn seed_000_built_run_by_run_has_the_seed_coverage() {
    let s = baton::state::load_file(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/db/seed-built.yaml"
    )))
    .unwrap();
    // C1 native 1-5 and 9 plus H2; L1 native 6-8 plus H1.
    let c1 = baton::facts::coverage(&s, "C1", |_| true);
    assert_eq!(c1.native_runs, [1, 2, 3, 4, 5, 9]);
    assert_eq!((c1.handoffs[0].from, c1.handoffs[0].to), (6, 8));
    let l1 = baton::facts::coverage(&s, "L1", |_| true);
    assert_eq!(l1.native_runs, [6, 7, 8]);
    assert_eq!((l1.handoffs[0].from, l1.handoffs[0].to), (1, 5));
}
