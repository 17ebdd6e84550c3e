//! Fitting selects once: a budget's degradation steps applied to the prepared selection give
//! exactly the summary a fresh selection under the same changes gives (sections, texts,
//! included and omitted ids with their reasons).

use baton::eval::EvalOptions;
use baton::select::{prepare, select_degraded, Degrade, PolicySizer};
use baton::state::{parse_str, Format};
use rstest::rstest;

fn fixture(path: &str) -> baton::State {
    let text = std::fs::read_to_string(path).expect("fixture");
    parse_str(&text, Format::Yaml, path).expect("state is valid")
}

/// Every kind of change a degradation step makes, alone and together.
fn degrades() -> Vec<Degrade> {
    let s = |k: &str| k.to_string();
    let all = Degrade {
        drop_kinds: vec![s("narration"), s("decision")],
        tail: vec![
            (s("tool_call"), 400),
            (s("command"), 40),
            (s("tool_call"), 90),
        ],
        paths: vec![s("file_change")],
        drop_runs_before: Some(6),
        shorten: Some(120),
        must_keep_only: false,
        // Issue 24's finer steps, reaching only some runs.
        reach: vec![(s("tail command 40"), 4), (s("first_line user_message"), 5)],
        drop_output: vec![s("command")],
        first_line: vec![s("user_message"), s("decision")],
        count: vec![s("assistant_message")],
        group: vec![s("file_change")],
        ..Degrade::default()
    };
    let mut out = vec![
        Degrade::default(),
        Degrade {
            drop_kinds: vec![s("narration")],
            ..Degrade::default()
        },
        Degrade {
            tail: vec![(s("command"), 30), (s("user_message"), 20)],
            ..Degrade::default()
        },
        Degrade {
            paths: vec![s("file_change")],
            ..Degrade::default()
        },
        Degrade {
            shorten: Some(50),
            ..Degrade::default()
        },
        Degrade {
            must_keep_only: true,
            ..Degrade::default()
        },
    ];
    for before in [0, 1, 2, 5, 12, 23, 24, 25, 1_000] {
        out.push(Degrade {
            drop_runs_before: Some(before),
            ..Degrade::default()
        });
    }
    out.push(all.clone());
    out.push(Degrade {
        must_keep_only: true,
        ..all
    });
    out
}

#[rstest]
#[case::far_over_budget("tests/fixtures/budget/far-over-budget.yaml", "default")]
#[case::far_over_budget_t3code("tests/fixtures/budget/far-over-budget.yaml", "t3code")]
#[case::legacy_newest_first("tests/fixtures/budget/far-over-budget.yaml", "t3code-legacy")]
#[case::long_debugging("tests/fixtures/quality/01-long-debugging.yaml", "default")]
#[case::pending_approval("tests/fixtures/quality/03-pending-approval.yaml", "mcode")]
#[case::rolled_back_summary("tests/fixtures/quality/05-rollback-summary-invalid.yaml", "default")]
#[case::fork("examples/ladder-native-fork.yaml", "default")]
fn degrading_the_prepared_selection_is_selecting_again(#[case] path: &str, #[case] policy: &str) {
    let state = fixture(path);
    let policy = baton::policy::load(policy).expect("shipped policy");
    let sizer = PolicySizer { policy: &policy };
    let eval = EvalOptions::default();
    let (decision, facts) = baton::eval::evaluate(&policy, &state, &eval, &sizer).expect("decides");
    let prepared = prepare(&policy, &facts, &decision).expect("the policy has summary rules");
    for d in degrades() {
        let fresh = select_degraded(&policy, &facts, &decision, &d);
        assert_eq!(prepared.summary(&d), fresh, "{path} {d:?}");
    }
    // A step about a kind no included item has changes nothing (fitting then keeps the
    // summary it has).
    let base = prepared.summary(&Degrade::default());
    for kind in [
        "narration",
        "tool_call",
        "command",
        "file_change",
        "decision",
        "error",
    ] {
        let s = |k: &str| k.to_string();
        let steps = [
            Degrade {
                drop_kinds: vec![s(kind)],
                ..Degrade::default()
            },
            Degrade {
                tail: vec![(s(kind), 10)],
                ..Degrade::default()
            },
            Degrade {
                paths: vec![s(kind)],
                ..Degrade::default()
            },
        ];
        for d in steps {
            let changed = prepared.summary(&d) != base;
            assert!(!changed || prepared.touches(kind), "{path} {d:?}");
        }
    }
    let d = Degrade::default();
    assert!(
        !prepared.summary(&d).included.is_empty(),
        "{path}: the handoff has entries"
    );
    assert_eq!(
        prepared.into_summary(&d),
        baton::select::select(&policy, &facts, &decision)
    );
}
