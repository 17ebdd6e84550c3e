//! `baton schema`, `baton completions`, `baton man`: reference material generated from the
//! types and the command-line definition, so it cannot drift from them.

use super::commands::{FAIL, OK};
use super::Cli;
use clap::{Args, CommandFactory, ValueEnum};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// The document: state (a state file), decision (`explain --json`), test-file (`baton
    /// test`), service (a request to `baton serve`).
    #[arg(value_enum)]
    pub document: SchemaName,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum SchemaName {
    State,
    Decision,
    TestFile,
    Service,
}

impl SchemaName {
    fn as_str(self) -> &'static str {
        match self {
            SchemaName::State => "state",
            SchemaName::Decision => "decision",
            SchemaName::TestFile => "test-file",
            SchemaName::Service => "service",
        }
    }
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write baton.1 and one baton-COMMAND.1 per command into this directory instead of
    /// printing baton.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub(crate) fn schema(a: SchemaArgs) -> u8 {
    match crate::schema::schema(a.document.as_str()) {
        Some(s) => {
            outln!(
                "{}",
                serde_json::to_string_pretty(&s).unwrap_or_else(|_| s.to_string())
            );
            OK
        }
        None => {
            eprintln!("error: no schema named `{}`", a.document.as_str());
            FAIL
        }
    }
}

pub(crate) fn completions(a: CompletionsArgs) -> u8 {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(a.shell, &mut cmd, "baton", &mut out);
    OK
}

pub(crate) fn man(a: ManArgs) -> u8 {
    let cmd = Cli::command();
    match a.out {
        None => {
            let mut buf = Vec::new();
            if let Err(e) = clap_mangen::Man::new(cmd).render(&mut buf) {
                eprintln!("error: cannot render the man page: {e}");
                return FAIL;
            }
            out!("{}", String::from_utf8_lossy(&buf));
            OK
        }
        Some(dir) => match write_pages(cmd, &dir) {
            Ok(files) => {
                outln!("wrote {} man pages to {}", files, dir.display());
                OK
            }
            Err(e) => {
                eprintln!("{}: error: cannot write the man pages: {e}", dir.display());
                FAIL
            }
        },
    }
}

/// baton.1 and a page per subcommand (`baton-db.1`, `baton-db-init.1`, ...).
fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd;
    cmd.build();
    let mut n = 0;
    write_page(&cmd, "baton", dir, &mut n)?;
    Ok(n)
}

fn write_page(cmd: &clap::Command, name: &str, dir: &Path, n: &mut usize) -> std::io::Result<()> {
    let page = cmd.clone().name(name.to_string());
    let mut buf = Vec::new();
    clap_mangen::Man::new(page).render(&mut buf)?;
    std::fs::write(dir.join(format!("{name}.1")), buf)?;
    *n = n.saturating_add(1);
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write_page(sub, &format!("{name}-{}", sub.get_name()), dir, n)?;
    }
    Ok(())
}

/// For a mistyped command, keep only the nearest of clap's suggestions by edit distance:
/// clap ranks by a similarity that puts `complete` before `completions` for `completion`
/// (and lists both), where one answer, the closest spelling, is what a reader wants.
pub(crate) fn nearest_suggestion(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidSubcommand {
        return e;
    }
    let typo = match e.get(ContextKind::InvalidSubcommand) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => return e,
    };
    let best = match e.get(ContextKind::SuggestedSubcommand) {
        Some(ContextValue::Strings(v)) => v
            .iter()
            .min_by_key(|c| strsim::levenshtein(&typo, c))
            .cloned(),
        _ => None,
    };
    if let Some(best) = best {
        e.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(vec![best]),
        );
    }
    e
}
