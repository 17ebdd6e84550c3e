//! `baton policy list|show` (the policies and templates shipped in the binary) and `baton init`
//! (a team's starting point: a policy extending `default`, its tests, two states, a CI script).

use super::commands::{FAIL, OK};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// List the shipped policies and templates.
    List,
    /// Print a shipped policy's or template's source.
    #[command(
        after_help = "Examples:\n  baton policy show default > policies/team.policy   # start from the shipped ladder\n  baton policy show handoff.md.j2                    # the handoff document template"
    )]
    Show {
        /// A shipped policy (`default`, `t3code`, `t3code-legacy`, `mcode`) or template
        /// (`handoff.md.j2`, ...).
        name: String,
    },
}

#[derive(Args, Debug)]
pub struct InitArgs {
    /// The directory to write into (created when missing; default: the current directory).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
}

/// The files `baton init` writes: (path under DIR, contents).
pub const INIT_FILES: &[(&str, &str)] = &[
    ("policies/team.policy", include_str!("init/team.policy")),
    ("policies/tests/team.yaml", include_str!("init/team.yaml")),
    ("states/switch.yaml", include_str!("init/switch.yaml")),
    ("states/stale.yaml", include_str!("init/stale.yaml")),
    ("ci/baton.sh", include_str!("init/ci.sh")),
];

pub(crate) fn policy(a: PolicyArgs) -> u8 {
    match a.command {
        PolicyCommand::List => {
            outln!("policies (baton policy show NAME; extends \"NAME\" in a policy file):");
            for (name, _, text) in crate::policy::source::SHIPPED {
                outln!("  {name:<15} {}", description(text));
            }
            outln!("templates (baton policy show NAME; override with --templates DIR):");
            for (name, _) in crate::render::EMBEDDED {
                outln!("  {name}");
            }
            OK
        }
        PolicyCommand::Show { name } => {
            let stem = name.strip_suffix(".policy").unwrap_or(&name);
            let policy = crate::policy::source::SHIPPED
                .iter()
                .find(|(n, _, _)| *n == stem)
                .map(|(_, _, t)| *t);
            let template = crate::render::EMBEDDED
                .iter()
                .find(|(n, _)| *n == name || n.strip_suffix(".j2") == Some(name.as_str()))
                .map(|(_, t)| *t);
            match policy.or(template) {
                Some(text) => {
                    out!("{text}");
                    OK
                }
                None => {
                    let mut known: Vec<&str> = crate::policy::source::SHIPPED
                        .iter()
                        .map(|(n, _, _)| *n)
                        .collect();
                    known.extend(crate::render::EMBEDDED.iter().map(|(n, _)| *n));
                    let hint = crate::suggest::did_you_mean(&name, known.iter().copied())
                        .map(|s| format!("; did you mean `{s}`?"))
                        .unwrap_or_default();
                    eprintln!(
                        "error: no shipped policy or template named `{name}`{hint} (shipped: {})",
                        known.join(", ")
                    );
                    FAIL
                }
            }
        }
    }
}

/// The `description "..."` of a policy's header, or "".
fn description(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("description \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or("")
}

pub(crate) fn init(a: InitArgs) -> u8 {
    match write_init(&a.dir) {
        Ok(()) => {
            let d = a.dir.display();
            outln!("wrote a team policy, its tests, two example states and a CI script to {d}:");
            for (path, _) in INIT_FILES {
                outln!("  {path}");
            }
            outln!("next:");
            if a.dir != Path::new(".") {
                outln!("  cd {d}");
            }
            outln!("  baton test                                    # both cases pass");
            outln!("  baton explain --state states/switch.yaml --policy policies/team.policy");
            outln!("  baton diff --from default --to policies/team.policy --corpus states/ --target all");
            outln!("  sh ci/baton.sh                                # what CI runs");
            OK
        }
        Err(e) => {
            eprintln!("{e}");
            FAIL
        }
    }
}

/// Write every init file under `dir`; refuses (writing nothing) when any of them exists.
fn write_init(dir: &Path) -> Result<(), String> {
    if let Some((p, _)) = INIT_FILES.iter().find(|(p, _)| dir.join(p).exists()) {
        return Err(format!(
            "{}: error: already exists; baton init writes only new files (nothing was written)",
            dir.join(p).display()
        ));
    }
    for (p, text) in INIT_FILES {
        let path = dir.join(p);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                format!(
                    "{}: error: cannot create the directory: {e}",
                    parent.display()
                )
            })?;
        }
        std::fs::write(&path, text)
            .map_err(|e| format!("{}: error: cannot write the file: {e}", path.display()))?;
    }
    Ok(())
}
