//! "Did you mean" suggestions for misspelt names.

/// The closest candidate to `name`, if one is close enough to be a plausible typo.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut best: Option<(f64, &'a str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let score = strsim::jaro_winkler(name, c);
        // A suffix match (`runs_since_lastseen` vs `target.runs_since_last_seen`) helps too.
        let tail = name.rsplit('.').next().unwrap_or(name);
        let ctail = c.rsplit('.').next().unwrap_or(c);
        let tail_score = if tail.len() >= 4 {
            strsim::jaro_winkler(tail, ctail) - 0.02
        } else {
            0.0
        };
        let s = score.max(tail_score);
        if s >= 0.82 && best.map(|(b, _)| s > b).unwrap_or(true) {
            best = Some((s, c));
        }
    }
    best.map(|(_, c)| c)
}
