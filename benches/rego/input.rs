//! The Rego side of the comparison: the input document `benches/rego/default.rego` reads, and
//! a regorus engine loaded with that policy. Shared by benches/versus.rs and
//! tests/rego_agreement.rs.

use baton::State;

/// The Rego policy: the strategy decision of the shipped `default` policy.
pub const DEFAULT_REGO: &str = include_str!("default.rego");

/// `{state, target, caps}` for the Rego policy: the state as baton serialises it, with each
/// run's rough summary size (`chars`, what `baton::eval::RoughSizer` counts) added, and the
/// target's resolved capabilities.
pub fn input(state: &State, target: Option<&str>) -> regorus::Value {
    let target = target.unwrap_or(&state.request.provider);
    let mut json = serde_json::to_value(state).expect("a state serialises");
    if let Some(runs) = json.get_mut("runs").and_then(|r| r.as_array_mut()) {
        for (run, model) in runs.iter_mut().zip(&state.runs) {
            let chars: usize = model
                .items
                .iter()
                .filter(|i| !matches!(i.kind(), "reasoning" | "protocol"))
                .map(|i| i.char_len())
                .sum();
            if let Some(obj) = run.as_object_mut() {
                obj.insert("chars".into(), chars.into());
                // Items are not read by the policy: their sizes are in `chars`.
                obj.remove("items");
            }
        }
    }
    let caps = serde_json::to_value(baton::state::caps_for(state, target)).expect("caps");
    regorus::Value::from(serde_json::json!({ "state": json, "target": target, "caps": caps }))
}

/// A regorus engine with the policy loaded.
pub fn engine() -> regorus::Engine {
    let mut engine = regorus::Engine::new();
    engine
        .add_policy("default.rego".into(), DEFAULT_REGO.into())
        .expect("the Rego policy parses");
    engine
}

/// `data.baton.decision` for one input: (strategy, stale signals, delivery mode).
pub fn decide(
    engine: &mut regorus::Engine,
    input: &regorus::Value,
) -> (String, Vec<String>, String) {
    engine.set_input(input.clone());
    let v = engine
        .eval_rule("data.baton.decision".into())
        .expect("the Rego policy evaluates");
    let s = |v: &regorus::Value| v.as_string().map(|s| s.to_string()).unwrap_or_default();
    let strategy = s(&v["strategy"]);
    let stale = v["stale"]
        .as_array()
        .map(|a| a.iter().map(s).collect())
        .unwrap_or_default();
    let delivery = s(&v["delivery"]);
    (strategy, stale, delivery)
}
