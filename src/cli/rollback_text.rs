//! The line `baton rollback` prints for each provider thread it changed: what the app must do
//! with it, and what the next run on its provider does.

use crate::decision::ThreadAction;
use crate::store::{AppAction, NextRun, ProviderThreadChange};

/// `4-6`, `4, 6`, `2, 4-5`: run ordinals, consecutive ones as a range.
pub(crate) fn runs(list: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0usize;
    while let Some(&start) = list.get(i) {
        let mut end = start;
        let mut j = i.saturating_add(1);
        while list.get(j) == Some(&end.saturating_add(1)) {
            end = end.saturating_add(1);
            j = j.saturating_add(1);
        }
        parts.push(if end == start {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i = j;
    }
    parts.join(", ")
}

/// What the next run does with provider threads, in words.
fn next(provider: &str, n: &NextRun) -> String {
    let id = n.provider_thread.id.as_deref().unwrap_or("?");
    let what = match n.provider_thread.action {
        ThreadAction::Resume => format!("resumes {id}"),
        ThreadAction::Create => "starts a new thread".to_string(),
        ThreadAction::ForkNative => format!("forks {id} natively"),
        ThreadAction::None => "starts no thread".to_string(),
    };
    let mut why = vec![n.strategy.as_str().to_string()];
    if !n.stale.is_empty() {
        why.push(format!("stale: {}", n.stale.join(", ")));
    }
    format!(
        "the next run on {provider} (run {}) {what} ({})",
        n.run,
        why.join("; ")
    )
}

/// One provider thread's line.
pub(crate) fn advice(p: &ProviderThreadChange) -> String {
    let undone = if p.runs_undone.is_empty() {
        "it was handed undone runs, though none of its own turns was undone".to_string()
    } else {
        format!(
            "its turn{} for run{} {} {} undone",
            if p.runs_undone.len() == 1 { "" } else { "s" },
            if p.runs_undone.len() == 1 { "" } else { "s" },
            runs(&p.runs_undone),
            if p.runs_undone.len() == 1 {
                "was"
            } else {
                "were"
            }
        )
    };
    let head = format!("{} thread {}", p.provider, p.id);
    let action = match p.app_action {
        AppAction::RollBack => {
            let kept = match p.turns_kept {
                0 => "undoing all its turns".to_string(),
                1 => "keeping its first turn".to_string(),
                n => format!("keeping its first {n} turns"),
            };
            format!(
                "roll it back with {}'s own rollback, {kept} ({undone})",
                p.provider
            )
        }
        AppAction::Discard => format!("discard it, do not resume it ({undone})"),
        AppAction::Keep => format!(
            "keep it as it is: the policy resumes it, though the provider thread still holds what was undone ({undone})"
        ),
    };
    match &p.next_run {
        Some(n) => format!("{head}: {action}; {}", next(&p.provider, n)),
        None => format!("{head}: {action}"),
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn ranges() {
        assert_eq!(runs(&[4, 5, 6]), "4-6");
        assert_eq!(runs(&[2, 4, 5]), "2, 4-5");
        assert_eq!(runs(&[7]), "7");
        assert_eq!(runs(&[]), "");
    }
}
