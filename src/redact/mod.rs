//! Secret redaction (docs/redaction.md): every text a handoff carries out of the thread
//! passes through [`redact`] before selection cuts or budgets it, so a secret never crosses to
//! another vendor and a cut never leaves half of one visible.
//!
//! A [`Redactor`] is compiled once per policy (the built-in [`rules::BUILTINS`] less the ones
//! the policy's `redact` block disables, plus its own `redact NAME pattern "..."` rules, minus
//! what its `allow pattern "..."` exceptions match). One [`Context`] per handoff numbers the
//! secrets it replaces, `[REDACTED:github-token#1]`, so that the same secret gets the same
//! number everywhere in the handoff and two secrets stay apart, and records which rule touched
//! which item (counts and ids only; the secrets stay in memory and are never reported).
//!
//! Cost: one Aho-Corasick pass over a text finds the rules whose keywords occur in it (the
//! prefilter); only those rules' patterns (the `regex` crate: linear time) run over it. A text
//! over [`Redactor::max_text_bytes`] is refused: the handoff is not made (fail closed).

pub mod rules;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

pub use rules::{Check, BUILTINS};
#[cfg(any(feature = "unstable", feature = "lsp"))]
pub use rules::Builtin;

/// The largest single text the pass redacts: 64 MiB (a state file holds at most 256 MiB).
/// A text over it makes the handoff `unsupported` rather than send it unredacted.
pub const DEFAULT_MAX_TEXT_BYTES: usize = 64 << 20;

/// One compiled rule.
#[derive(Debug, Clone)]
struct Rule {
    id: String,
    patterns: Vec<Regex>,
    check: Check,
    /// Whether the prefilter gates it (built-ins); a policy's own rules always run.
    gated: bool,
}

/// The compiled rules of one policy. Cheap to share (`Arc`); `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Redactor {
    rules: Vec<Rule>,
    allows: Vec<Regex>,
    prefilter: Option<AhoCorasick>,
    /// Prefilter pattern index -> rule index.
    keyword_rule: Vec<usize>,
    /// A text over this many bytes is refused ([`RedactError::TooLarge`]).
    pub max_text_bytes: usize,
}

/// Why a policy's redaction rules could not be compiled (the checker reports each pattern
/// with its position before this can happen; a built-in that fails is a bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A pattern is not a valid regular expression.
    #[error("redaction rule `{rule}`: invalid pattern: {message}")]
    /// A pattern that does not compile (fields: the rule's name, why).
    Pattern {
        /// The rule's name.
        rule: String,
        /// Why its pattern does not compile.
        message: String,
    },
    /// `disable ID` names no built-in rule.
    #[error("no built-in redaction rule `{0}`")]
    UnknownRule(String),
}

/// Why a text could not be redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedactError {
    /// The policy's redaction rules are not available (a policy that failed to check).
    #[error("redaction cannot run: the policy's redaction rules are not available; the handoff is not made")]
    Unavailable,
    /// The text is over [`Redactor::max_text_bytes`].
    #[error("redaction refused the text of `{item}`: {bytes} bytes, over the redaction limit of {limit} bytes; the handoff is not made")]
    TooLarge {
        /// The item.
        item: String,
        /// Its size in bytes.
        bytes: usize,
        /// The most bytes redaction scans.
        limit: usize,
    },
}

/// The built-in rules compiled once per process (a policy clones the ones it keeps).
fn compiled_builtins() -> &'static Result<Vec<Rule>, BuildError> {
    static BUILT: OnceLock<Result<Vec<Rule>, BuildError>> = OnceLock::new();
    BUILT.get_or_init(|| {
        BUILTINS
            .iter()
            .map(|b| {
                let patterns = b
                    .patterns
                    .iter()
                    .map(|p| compile(b.id, p))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Rule {
                    id: b.id.to_string(),
                    patterns,
                    check: b.check,
                    gated: true,
                })
            })
            .collect()
    })
}

/// Compile one pattern of rule `rule` (the `regex` crate's default size limits hold).
pub fn compile(rule: &str, pattern: &str) -> Result<Regex, BuildError> {
    Regex::new(pattern).map_err(|e| BuildError::Pattern {
        rule: rule.to_string(),
        message: e.to_string(),
    })
}

/// A span of a text to replace.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    /// The rule that names it.
    rule: usize,
    /// The end of that rule's own find: the secret numbered is `start..key_end`, so a
    /// merge with a wider find (`ghp_...` and the assignment value `ghp_....`) does not give
    /// the same secret a new number.
    key_end: usize,
}

/// The policy's `redact` block, as the checker hands it over.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    /// Built-in rule ids turned off (`disable ID`).
    pub disabled: Vec<String>,
    /// The policy's own rules (`redact NAME pattern "..."`), in order.
    pub rules: Vec<(String, String)>,
    /// Exceptions (`allow pattern "..."`).
    pub allows: Vec<String>,
}

impl Redactor {
    /// Every built-in rule, no exception: what a policy without a `redact` block gets.
    pub fn builtin() -> Result<Arc<Redactor>, BuildError> {
        static DEFAULT: OnceLock<Result<Arc<Redactor>, BuildError>> = OnceLock::new();
        DEFAULT
            .get_or_init(|| Redactor::new(&Spec::default()).map(Arc::new))
            .clone()
    }

    /// Compile a `redact` block: the built-ins it keeps (table order), then its own rules.
    pub fn new(spec: &Spec) -> Result<Redactor, BuildError> {
        if let Some(d) = spec.disabled.iter().find(|d| rules::builtin(d).is_none()) {
            return Err(BuildError::UnknownRule(d.clone()));
        }
        let builtins = compiled_builtins().as_ref().map_err(Clone::clone)?;
        let mut rules: Vec<Rule> = builtins
            .iter()
            .filter(|r| !spec.disabled.contains(&r.id))
            .cloned()
            .collect();
        for (name, pattern) in &spec.rules {
            rules.push(Rule {
                id: name.clone(),
                patterns: vec![compile(name, pattern)?],
                check: Check::Any,
                gated: false,
            });
        }
        let allows = spec
            .allows
            .iter()
            .map(|p| compile("allow", p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut keywords: Vec<&str> = Vec::new();
        let mut keyword_rule = Vec::new();
        for (i, r) in rules.iter().enumerate().filter(|(_, r)| r.gated) {
            for k in rules::builtin(&r.id).map(|b| b.keywords).unwrap_or(&[]) {
                keywords.push(k);
                keyword_rule.push(i);
            }
        }
        let prefilter = if keywords.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(&keywords)
                    .map_err(|e| BuildError::Pattern {
                        rule: "prefilter".into(),
                        message: e.to_string(),
                    })?,
            )
        };
        Ok(Redactor {
            rules,
            allows,
            prefilter,
            keyword_rule,
            max_text_bytes: DEFAULT_MAX_TEXT_BYTES,
        })
    }

    /// The ids of the rules in force, in the order they are tried.
    pub fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.id.as_str())
    }

    /// Whether no rule is in force (every built-in disabled and none of the policy's own).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The spans of `text` to replace, sorted, non-overlapping (two overlapping finds are
    /// merged into one span named by the earlier one, so no part of either stays visible).
    fn find(&self, item: &str, text: &str) -> Result<Vec<Span>, RedactError> {
        if text.len() > self.max_text_bytes {
            return Err(RedactError::TooLarge {
                item: item.to_string(),
                bytes: text.len(),
                limit: self.max_text_bytes,
            });
        }
        let mut flagged: Vec<bool> = self.rules.iter().map(|r| !r.gated).collect();
        if let Some(ac) = &self.prefilter {
            let mut left = self.keyword_rule.len();
            for m in ac.find_overlapping_iter(text) {
                if let Some(&rule) = self.keyword_rule.get(m.pattern().as_usize()) {
                    if let Some(f) = flagged.get_mut(rule).filter(|f| !**f) {
                        *f = true;
                        left = left.saturating_sub(1);
                    }
                }
                if left == 0 {
                    break;
                }
            }
        }
        let mut found: Vec<(usize, usize, usize)> = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if !flagged.get(i).copied().unwrap_or(false) {
                continue;
            }
            for re in &rule.patterns {
                self.find_one(re, rule.check, text, i, &mut found);
            }
        }
        if found.is_empty() {
            return Ok(Vec::new());
        }
        // Earlier start first; at the same start the earlier rule (the more specific) wins.
        found.sort_by_key(|&(s, e, r)| (s, r, std::cmp::Reverse(e)));
        let mut spans: Vec<Span> = Vec::with_capacity(found.len());
        for (s, e, r) in found {
            match spans.last_mut() {
                Some(last) if s < last.end => last.end = last.end.max(e),
                _ => spans.push(Span {
                    start: s,
                    end: e,
                    rule: r,
                    key_end: e,
                }),
            }
        }
        Ok(spans)
    }

    fn find_one(
        &self,
        re: &Regex,
        check: Check,
        text: &str,
        rule: usize,
        found: &mut Vec<(usize, usize, usize)>,
    ) {
        let grouped = re.capture_names().flatten().any(|n| n.starts_with("secret"));
        let mut push = |whole: regex::Match<'_>, secret: regex::Match<'_>, key: Option<&str>| {
            if secret.is_empty() {
                return;
            }
            let after = text.get(secret.end()..).and_then(|t| t.chars().next());
            if !rules::plausible(check, secret.as_str(), after, key) {
                return;
            }
            if self.allows.iter().any(|a| a.is_match(whole.as_str())) {
                return;
            }
            found.push((secret.start(), secret.end(), rule));
        };
        if grouped {
            for caps in re.captures_iter(text) {
                let Some(whole) = caps.get(0) else { continue };
                let secret = re
                    .capture_names()
                    .enumerate()
                    .filter(|(_, n)| n.is_some_and(|n| n.starts_with("secret")))
                    .find_map(|(i, _)| caps.get(i));
                if let Some(secret) = secret {
                    push(whole, secret, caps.name("key").map(|k| k.as_str()));
                }
            }
        } else {
            for m in re.find_iter(text) {
                push(m, m, None);
            }
        }
    }
}

/// What one rule redacted in a handoff: how many distinct secrets, in which items. Never the
/// secrets. In the decision (`redactions`), `handoff.json` and the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RedactionReport {
    /// The rule's id (`github-token`, or the name of a policy's own rule).
    pub rule: String,
    /// Distinct secrets it replaced (`[REDACTED:RULE#1]` .. `#count`).
    pub count: usize,
    /// Ids of the items whose text held them (`thread.title` for the thread's title), sorted.
    pub items: Vec<String>,
}

/// The redaction state of one handoff: the number each secret got, and which rule touched
/// which item. Cloned with the selection; the secrets it holds are never serialised.
#[derive(Clone)]
pub struct Context {
    /// `None`: no rules are available and every text is refused.
    redactor: Option<Arc<Redactor>>,
    /// (rule index, secret) -> its number within the rule.
    numbers: HashMap<(usize, Box<str>), u32>,
    /// Numbers given so far, per rule index.
    last: BTreeMap<usize, u32>,
    /// (rule index, number, item id) of every replacement.
    hits: BTreeSet<(usize, u32, String)>,
    /// The first text that could not be redacted.
    failure: Option<RedactError>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        f.debug_struct("Context")
            .field("secrets", &self.numbers.len())
            .field("failure", &self.failure)
            .finish()
    }
}

impl PartialEq for Context {
    fn eq(&self, other: &Self) -> bool {
        self.hits == other.hits && self.failure == other.failure
    }
}

impl Eq for Context {}

impl Context {
    /// A fresh context for one handoff under `redactor`.
    pub fn new(redactor: Arc<Redactor>) -> Context {
        Context::with(Some(redactor))
    }

    /// A context under `redactor`, or one that refuses every text when it is `None`.
    pub fn with(redactor: Option<Arc<Redactor>>) -> Context {
        Context {
            redactor,
            numbers: HashMap::new(),
            last: BTreeMap::new(),
            hits: BTreeSet::new(),
            failure: None,
        }
    }

    /// `redact`, for callers that cannot stop on an error: a text that cannot be redacted
    /// is replaced whole by a notice and the failure is kept ([`Context::failure`]), so that
    /// the handoff is refused.
    pub fn text<'t>(&mut self, item: &str, text: &'t str) -> Cow<'t, str> {
        match redact(self, item, text) {
            Ok(t) => t,
            Err(e) => {
                self.failure.get_or_insert(e);
                Cow::Borrowed("[NOT SHOWN: redaction could not run]")
            }
        }
    }

    /// The first text that could not be redacted, if any: the handoff must not be made.
    pub fn failure(&self) -> Option<&RedactError> {
        self.failure.as_ref()
    }

    /// Whether a text of `item` had something replaced (every replacement is recorded with
    /// its item): a text of an item not named here came back as it was given.
    pub(crate) fn replaced_in(&self, item: &str) -> bool {
        self.hits.iter().any(|(_, _, i)| i == item)
    }

    /// What was redacted in the items `keep` accepts (the ones the handoff carries), per
    /// rule in rule order.
    pub fn report(&self, keep: impl Fn(&str) -> bool) -> Vec<RedactionReport> {
        let mut per_rule: BTreeMap<usize, (BTreeSet<u32>, BTreeSet<&str>)> = BTreeMap::new();
        for (rule, n, item) in &self.hits {
            if keep(item) {
                let e = per_rule.entry(*rule).or_default();
                e.0.insert(*n);
                e.1.insert(item.as_str());
            }
        }
        per_rule
            .into_iter()
            .filter_map(|(rule, (numbers, items))| {
                Some(RedactionReport {
                    rule: self.redactor.as_ref()?.rules.get(rule)?.id.clone(),
                    count: numbers.len(),
                    items: items.into_iter().map(str::to_string).collect(),
                })
            })
            .collect()
    }

    fn number(&mut self, rule: usize, secret: &str) -> u32 {
        if let Some(n) = self.numbers.get(&(rule, Box::from(secret))) {
            return *n;
        }
        let n = self.last.entry(rule).or_insert(0);
        *n = n.saturating_add(1);
        let n = *n;
        self.numbers.insert((rule, Box::from(secret)), n);
        n
    }
}

/// Redact `text`, a text of item `item`, in the handoff's context `cx`: each secret the
/// rules find is replaced by `[REDACTED:RULE#N]` (the same secret, the same `N`, within the
/// handoff). Borrowed back unchanged when nothing is found (the common case costs no copy).
/// Fails only when the text is over [`Redactor::max_text_bytes`].
///
/// This is the one entry point for every text that leaves the thread: selection calls it
/// for each item text, the thread's title, the fork anchor and the compaction summary, and
/// anything else built from the selection (a transcript of omitted items) must call it with
/// the context the selection carries (`Summary::redaction`).
pub fn redact<'t>(cx: &mut Context, item: &str, text: &'t str) -> Result<Cow<'t, str>, RedactError> {
    let spans = match cx.redactor.as_deref() {
        None => return Err(RedactError::Unavailable),
        Some(r) if r.is_empty() || text.is_empty() => return Ok(Cow::Borrowed(text)),
        Some(r) => r.find(item, text)?,
    };
    if spans.is_empty() {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0usize;
    for Span {
        start,
        end,
        rule,
        key_end,
    } in spans
    {
        out.push_str(text.get(at..start).unwrap_or(""));
        let n = cx.number(rule, text.get(start..key_end).unwrap_or(""));
        let id = cx
            .redactor
            .as_deref()
            .and_then(|r| r.rules.get(rule))
            .map(|r| r.id.as_str())
            .unwrap_or("?");
        let _ = write!(out, "[REDACTED:{id}#{n}]");
        cx.hits.insert((rule, n, item.to_string()));
        at = end;
    }
    out.push_str(text.get(at..).unwrap_or(""));
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx() -> Context {
        Context::new(Redactor::builtin().unwrap())
    }

    #[test]
    fn same_secret_same_number_two_secrets_two_numbers() {
        let mut c = cx();
        let a = "ghp_".to_string() + &"a1".repeat(18);
        let b = "ghp_".to_string() + &"b2".repeat(18);
        let t = format!("use {a} then {b} then {a}");
        let r = redact(&mut c, "i1", &t).unwrap();
        assert_eq!(
            r,
            "use [REDACTED:github-token#1] then [REDACTED:github-token#2] then [REDACTED:github-token#1]"
        );
        let xb = format!("x {b}");
        let again = redact(&mut c, "i2", &xb).unwrap();
        assert_eq!(again, "x [REDACTED:github-token#2]");
        let rep = c.report(|_| true);
        assert_eq!(
            rep,
            vec![RedactionReport {
                rule: "github-token".into(),
                count: 2,
                items: vec!["i1".into(), "i2".into()]
            }]
        );
        assert_eq!(c.report(|i| i == "i2").first().map(|r| r.count), Some(1));
    }

    #[test]
    fn nothing_found_borrows() {
        let mut c = cx();
        assert!(matches!(
            redact(&mut c, "i", "cargo test -p core").unwrap(),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn too_large_is_refused() {
        let mut r = Redactor::new(&Spec::default()).unwrap();
        r.max_text_bytes = 8;
        let mut c = Context::new(Arc::new(r));
        let e = redact(&mut c, "r1-2", "123456789").unwrap_err();
        assert_eq!(e.to_string(), "redaction refused the text of `r1-2`: 9 bytes, over the redaction limit of 8 bytes; the handoff is not made");
        assert_eq!(c.text("r1-2", "123456789"), "[NOT SHOWN: redaction could not run]");
        assert!(c.failure().is_some());
    }

    #[test]
    fn overlapping_finds_merge() {
        let mut c = cx();
        let t = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlXzEyMw";
        let r = redact(&mut c, "i", t).unwrap();
        assert_eq!(r, "Authorization: Bearer [REDACTED:jwt#1]");
    }

    #[test]
    fn own_rules_disable_and_allow() {
        let spec = Spec {
            disabled: vec!["jwt".into()],
            rules: vec![("employee-id".into(), r"\bEMP-[0-9]{6}\b".into())],
            allows: vec!["AKIAIOSFODNN7EXAMPLE".into()],
        };
        let mut c = Context::new(Arc::new(Redactor::new(&spec).unwrap()));
        let t = "EMP-123456 AKIAIOSFODNN7EXAMPLE AKIAIOSFODNN7EXAMPLF eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig";
        let r = redact(&mut c, "i", t).unwrap();
        assert_eq!(
            r,
            "[REDACTED:employee-id#1] AKIAIOSFODNN7EXAMPLE [REDACTED:aws-access-key-id#1] eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig"
        );
        assert_eq!(
            Redactor::new(&Spec {
                disabled: vec!["nope".into()],
                ..Spec::default()
            })
            .unwrap_err()
            .to_string(),
            "no built-in redaction rule `nope`"
        );
    }
}

#[cfg(test)]
mod redaction_tests;
