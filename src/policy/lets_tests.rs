//! A policy's `let`s resolve to their values (moved from tests/limits_policy.rs and
//! tests/policy_errors.rs: the values are the compiled policy's, which only baton sees).

/// `let c0 = c1`, `let c1 = c2`, ..., `let c{n-1} = 1`, read by the ladder.
fn let_chain(n: usize) -> String {
    let mut p = String::from("policy \"chain\" {}\n");
    for i in 0..n - 1 {
        p.push_str(&format!("let c{i} = c{}\n", i + 1));
    }
    p.push_str(&format!("let c{} = 1\n", n - 1));
    p.push_str("strategy {\n  no_handoff when target.runs_since_last_seen == c0\n  full_new otherwise\n}\n");
    p
}

/// The chain's value reaches the rule that reads it, and evaluation uses it.
#[test]
fn a_long_let_chain_keeps_its_value() {
    let policy = baton::policy::load_text("chain.policy", &let_chain(20_000)).expect("checks");
    assert_eq!(
        policy.lets.get("c0"),
        Some(&baton::facts::Value::Int(1)),
        "c0 resolves through the whole chain"
    );
}
/// A derived file's `let` may use a `let` the same file defines later: lets resolve by
/// dependency, not by position.
#[test]
fn an_overriding_let_may_use_a_later_let() {
    let policy = baton::policy::load_text(
        "child.policy",
        "policy \"child\" {\n  extends \"default\"\n}\nlet max_off_provider_runs = limit\nlet limit = 4\n",
    )
    .expect("checks");
    assert_eq!(
        policy.lets.get("max_off_provider_runs"),
        Some(&baton::facts::Value::Int(4))
    );
    assert!(policy.warnings.is_empty(), "{:?}", policy.warnings);
}
