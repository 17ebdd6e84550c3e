//! The long-thread table of docs/rendering.md#long-threads: generated threads of 100 to 3,200
//! runs, handed over under every shipped policy, and what the handoff carries.
//!
//! ```sh
//! cargo run --release --example long_threads            # 100, 200, 400, 800, 1600, 3200
//! cargo run --release --example long_threads -- 50 5000  # the sizes you name
//! ```

use baton::quality::long::{generate, measure, Handover};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `--show N POLICY`: print the document a fresh handover of N runs gets.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, n, policy] = args.as_slice() {
        if flag == "--show" {
            let state = generate(n.parse()?, Handover::Fresh)?;
            let policy = baton::policy::load(policy)?;
            let eval = baton::eval::EvalOptions {
                target: Some(Handover::Fresh.target().into()),
                document_root: Some("/baton-docs".into()),
            };
            let o = baton::pipeline::run(&policy, &state, &eval, &Default::default())?;
            if let Some(r) = o.rendered {
                println!("{}", r.document);
                eprintln!("{}", baton::explain::render(&o.decision, false));
            }
            return Ok(());
        }
    }
    let mut sizes: Vec<u32> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    if sizes.is_empty() {
        sizes = vec![100, 200, 400, 800, 1600, 3200];
    }
    println!("| policy | handover | runs | strategy | read chars (limit) | files named | requests (first line) | newest 10 whole | decisions (newest 100 runs) | \"all here\" |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for policy_name in baton::policy::source::shipped_names() {
        let policy = baton::policy::load(policy_name)?;
        for handover in [Handover::Fresh, Handover::Back] {
            for &n in &sizes {
                let state = generate(n, handover)?;
                let f = measure(&policy, &state, handover.target())?;
                // `turn max none` (t3code-legacy): no first-turn limit.
                let limit = if f.limit == baton::policy::NO_TURN_LIMIT {
                    "none".to_string()
                } else {
                    f.limit.to_string()
                };
                println!(
                    "| {} | {} {} | {} | {} {} | {} ({}) | {}/{} | {}/{} | {}/{} | {}/{} | {} |",
                    f.policy,
                    handover.target(),
                    match handover {
                        Handover::Fresh => "(no thread)",
                        Handover::Back => "(own thread)",
                    },
                    n,
                    f.strategy,
                    f.delivery,
                    f.document_chars,
                    limit,
                    f.files.0,
                    f.files.1,
                    f.requests.0,
                    f.requests.1,
                    f.newest_requests.0,
                    f.newest_requests.1,
                    f.decisions.0,
                    f.decisions.1,
                    if f.says_all_here { "yes" } else { "no" },
                );
            }
        }
    }
    Ok(())
}
