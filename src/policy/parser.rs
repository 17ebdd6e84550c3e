//! Source text to [`PolicyFile`]: the pest grammar in `grammar/policy.pest`, then a walk of the
//! parse tree into the AST. Nothing here resolves names; that is the checker's job.

use super::ast::*;
use super::diag::{Diagnostic, PolicyError, Severity, Source};
use pest::iterators::Pair;
use pest::Parser as _;

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/policy.pest"]
struct PolicyParser;

/// Deepest nesting of `(` and `[` a policy may use. Deeper input is rejected before parsing,
/// so that no input can exhaust the stack of the parser, the checker or the evaluator.
pub const MAX_NESTING: usize = 64;

/// Parse source `index` of `sources`.
pub fn parse(sources: &[Source], index: usize) -> Result<PolicyFile, PolicyError> {
    let text = match sources.get(index) {
        Some(s) => &*s.text,
        None => {
            return Err(PolicyError::single(Diagnostic::file_level(
                "<policy>",
                "no such source",
            )))
        }
    };
    check_nesting(sources, index, text)?;
    let mut pairs = PolicyParser::parse(Rule::file, text).map_err(|e| PolicyError {
        diagnostics: super::recover::diagnose(sources, index, text, pest_failure(text, e)),
    })?;
    let mut b = Builder {
        sources,
        index,
        text,
        lines: LineIndex::new(text),
        errors: Vec::new(),
    };
    let mut file = PolicyFile::default();
    if let Some(top) = pairs.next() {
        for decl in top.kids() {
            b.decl(decl, &mut file);
        }
    }
    if b.errors.is_empty() {
        Ok(file)
    } else {
        Err(PolicyError {
            diagnostics: b.errors,
        })
    }
}

fn check_nesting(sources: &[Source], index: usize, text: &str) -> Result<(), PolicyError> {
    let mut depth = 0usize;
    let mut in_str = false;
    let mut in_comment = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_comment {
            if c == '\n' {
                in_comment = false;
            }
            continue;
        }
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' || c == '\n' {
                in_str = false;
            }
            continue;
        }
        match c {
            '#' => in_comment = true,
            '"' => in_str = true,
            '(' | '[' => {
                depth = depth.saturating_add(1);
                if depth > MAX_NESTING {
                    let span = span_at(text, index, i, i.saturating_add(1));
                    return Err(PolicyError::single(
                        Diagnostic::new(
                            sources,
                            Severity::Error,
                            span,
                            format!("expression nested deeper than {MAX_NESTING} levels"),
                        )
                        .with_help(Some(
                            "split the condition into `let` values or separate rules".into(),
                        )),
                    ));
                }
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// A span for byte range `start..end` of `text`.
pub fn span_at(text: &str, source: usize, start: usize, end: usize) -> Span {
    let start = start.min(text.len());
    let before = &text[..start];
    let line = before.matches('\n').count().saturating_add(1);
    let line_start = before
        .rfind('\n')
        .map(|i| i.saturating_add(1))
        .unwrap_or(0);
    let col = text[line_start..start].chars().count().saturating_add(1);
    Span {
        source,
        start,
        end: end.max(start),
        line,
        col,
    }
}

fn rule_name(r: &Rule) -> String {
    match r {
        Rule::EOI => "end of file".into(),
        Rule::ident => "a name".into(),
        Rule::path => "a fact name".into(),
        Rule::string | Rule::str_inner => "a quoted string".into(),
        Rule::int => "a number".into(),
        Rule::expr
        | Rule::or_expr
        | Rule::and_expr
        | Rule::unary
        | Rule::comparison
        | Rule::sum => "an expression".into(),
        Rule::when_clause | Rule::kw_when => "`when`".into(),
        Rule::kw_and => "`and`".into(),
        Rule::kw_or => "`or`".into(),
        Rule::kw_not => "`not`".into(),
        Rule::kw_in => "`in`".into(),
        Rule::kw_because => "`because`".into(),
        Rule::kw_eligible => "`eligible`".into(),
        Rule::kw_stale => "`stale`".into(),
        Rule::otherwise => "`otherwise`".into(),
        Rule::because => "`because`".into(),
        Rule::cmp_op | Rule::cmp_tail => "a comparison".into(),
        Rule::in_op | Rule::not_in => "`in`".into(),
        Rule::header => "`policy`".into(),
        Rule::let_decl => "`let`".into(),
        Rule::eligible_decl => "`eligible`".into(),
        Rule::stale_decl => "`stale`".into(),
        Rule::strategy_block => "`strategy`".into(),
        Rule::summary_block => "`summary`".into(),
        Rule::delivery_block => "`delivery`".into(),
        Rule::pregrant_block => "`pregrant`".into(),
        Rule::providers_block => "`providers`".into(),
        Rule::redact_block => "`redact`".into(),
        Rule::log_block => "`log`".into(),
        Rule::log_entry | Rule::log_action => "`drop FIELD`, `hash FIELD` or `keep FIELD`".into(),
        Rule::redact_rule | Rule::kw_redact => "`redact NAME pattern \"...\"`".into(),
        Rule::redact_allow | Rule::kw_allow => "`allow pattern \"...\"`".into(),
        Rule::redact_disable | Rule::kw_disable => "`disable RULE`".into(),
        Rule::kw_pattern => "`pattern`".into(),
        Rule::rule_id => "a rule id (`github-token`)".into(),
        Rule::provider_entry => "a provider (`cursor { ... }`)".into(),
        Rule::provider_setting => "a capability (`file_read false`)".into(),
        Rule::provider_value => "a value (`true`, `false`, a number or a word)".into(),
        Rule::kw_force => "`force`".into(),
        Rule::ladder_rule => "a strategy rule".into(),
        Rule::include_rule => "`include`".into(),
        Rule::exclude_rule => "`exclude`".into(),
        Rule::section_decl => "`section`".into(),
        Rule::text_rule | Rule::text_cut => "`text`".into(),
        Rule::cut_form => "`whole`, `head`, `tail`, `head_tail` or `compact`".into(),
        Rule::cut_for | Rule::kw_for => "`for`".into(),
        Rule::kw_drop => "`drop`".into(),
        Rule::kw_tail => "`tail`".into(),
        Rule::kw_paths => "`paths`".into(),
        Rule::kw_shorten => "`shorten`".into(),
        Rule::cut_in => "`in`".into(),
        Rule::cut_strict => "`strict`".into(),
        Rule::document_budget => "`document max`".into(),
        Rule::turn_budget => "`turn max`".into(),
        Rule::turn_none => "`none`".into(),
        Rule::degrade_rule => "`degrade`".into(),
        Rule::degrade_oldest | Rule::degrade_text | Rule::degrade_drop | Rule::degrade_tail | Rule::degrade_paths | Rule::degrade_shorten | Rule::degrade_kinded | Rule::degrade_verb => "a degradation step (`drop KIND`, `tail KIND N`, `paths KIND`, `drop_oldest_runs`, `text_rules`, `shorten N`, `drop_output KIND`, `first_line KIND`, `group KIND`, `count KIND`)".into(),
        Rule::budget_rule => "`budget`".into(),
        Rule::source_rule => "`source`".into(),
        Rule::delivery_rule => "`off_band` or `inline`".into(),
        Rule::inline_limit => "`inline_limit`".into(),
        Rule::grant_rule => "a grant (`read handoff.document`)".into(),
        Rule::grant_limits => "`turns N uses N`".into(),
        Rule::description => "`description`".into(),
        Rule::extends => "`extends`".into(),
        Rule::template_decl => "`template`".into(),
        Rule::known_providers => "`known_providers`".into(),
        Rule::form => "`as`".into(),
        Rule::handoff_as => "`handoff`".into(),
        Rule::list => "a list".into(),
        Rule::add_op => "`+` or `-`".into(),
        Rule::budget_order => "`newest_first` or `oldest_first`".into(),
        other => format!("{other:?}"),
    }
}

/// The keywords a rule starts with, for "did you mean" on a misspelt keyword.
fn rule_words(r: &Rule) -> &'static [&'static str] {
    match r {
        Rule::header => &["policy"],
        Rule::let_decl => &["let"],
        Rule::eligible_decl | Rule::kw_eligible => &["eligible"],
        Rule::stale_decl | Rule::kw_stale => &["stale"],
        Rule::strategy_block => &["strategy"],
        Rule::summary_block => &["summary"],
        Rule::delivery_block => &["delivery"],
        Rule::pregrant_block => &["pregrant"],
        Rule::redact_block => &["redact"],
        Rule::log_block => &["log"],
        Rule::log_entry | Rule::log_action => &["drop", "hash", "keep"],
        Rule::redact_rule | Rule::kw_redact => &["redact"],
        Rule::redact_allow | Rule::kw_allow => &["allow"],
        Rule::redact_disable | Rule::kw_disable => &["disable"],
        Rule::kw_pattern => &["pattern"],
        Rule::description => &["description"],
        Rule::extends => &["extends"],
        Rule::template_decl => &["template"],
        Rule::known_providers => &["known_providers"],
        Rule::when_clause | Rule::kw_when => &["when"],
        Rule::otherwise => &["otherwise"],
        Rule::because | Rule::kw_because => &["because"],
        Rule::handoff_as => &["handoff"],
        Rule::delivery_rule | Rule::delivery_mode => &["off_band", "inline"],
        Rule::inline_limit => &["inline_limit"],
        Rule::text_rule | Rule::text_cut => &["text"],
        Rule::section_decl => &["section"],
        Rule::include_rule => &["include"],
        Rule::exclude_rule => &["exclude"],
        Rule::budget_rule => &["budget"],
        Rule::document_budget => &["document"],
        Rule::turn_budget => &["turn"],
        Rule::degrade_rule => &["degrade"],
        Rule::source_rule => &["source"],
        Rule::source_deterministic | Rule::source_command => &["deterministic", "command"],
        Rule::grant_limits => &["turns"],
        Rule::form => &["as"],
        Rule::cut_form => &["whole", "head", "tail", "head_tail", "compact"],
        Rule::cut_for | Rule::kw_for => &["for"],
        Rule::cut_in | Rule::kw_in | Rule::in_op => &["in"],
        Rule::cut_strict => &["strict"],
        Rule::degrade_oldest => &["drop_oldest_runs"],
        Rule::degrade_text => &["text_rules"],
        Rule::degrade_drop | Rule::kw_drop => &["drop"],
        Rule::degrade_tail | Rule::kw_tail => &["tail"],
        Rule::degrade_paths | Rule::kw_paths => &["paths"],
        Rule::degrade_shorten | Rule::kw_shorten => &["shorten"],
        Rule::degrade_kinded | Rule::degrade_verb => &["drop_output", "first_line", "group", "count"],
        Rule::budget_order => &["newest_first", "oldest_first"],
        Rule::kw_and => &["and"],
        Rule::kw_or => &["or"],
        Rule::kw_not | Rule::not_op => &["not"],
        _ => &[],
    }
}

fn pest_failure(text: &str, e: pest::error::Error<Rule>) -> super::recover::Failure {
    let expected_words = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => {
            positives.iter().flat_map(rule_words).copied().collect()
        }
        pest::error::ErrorVariant::CustomError { .. } => Vec::new(),
    };
    let expects_operator = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => positives.iter().any(|r| {
            matches!(
                r,
                Rule::cmp_tail | Rule::cmp_op | Rule::kw_and | Rule::kw_or | Rule::add_op
            )
        }),
        pest::error::ErrorVariant::CustomError { .. } => false,
    };
    let pos = match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    };
    let found: String = text[pos.min(text.len())..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .take(24)
        .collect();
    let found = if found.is_empty() {
        if pos >= text.len() {
            "end of file".to_string()
        } else {
            "a line break".to_string()
        }
    } else {
        format!("`{found}`")
    };
    let message = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<String> = positives.iter().map(rule_name).collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                format!("unexpected {found}")
            } else {
                let list = match names.len() {
                    1 => names.pop().unwrap_or_default(),
                    _ => {
                        let last = names.pop().unwrap_or_default();
                        format!("{} or {last}", names.join(", "))
                    }
                };
                format!("expected {list}, found {found}")
            }
        }
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    let end = pos.saturating_add(
        text[pos.min(text.len())..]
            .chars()
            .take_while(|c| !c.is_whitespace())
            .map(|c| c.len_utf8())
            .sum::<usize>(),
    );
    super::recover::Failure {
        pos,
        end,
        expected_words,
        expects_operator,
        message,
    }
}

/// Children of a pair without keyword tokens.
type KidsIter<'i> =
    std::iter::Filter<pest::iterators::Pairs<'i, Rule>, fn(&Pair<'i, Rule>) -> bool>;

trait Kids<'i> {
    fn kids(self) -> KidsIter<'i>;
}

impl<'i> Kids<'i> for Pair<'i, Rule> {
    fn kids(self) -> KidsIter<'i> {
        fn keep(p: &Pair<'_, Rule>) -> bool {
            !matches!(
                p.as_rule(),
                Rule::kw_when
                    | Rule::kw_and
                    | Rule::kw_or
                    | Rule::kw_not
                    | Rule::kw_in
                    | Rule::kw_because
                    | Rule::kw_eligible
                    | Rule::kw_stale
                    | Rule::kw_for
                    | Rule::kw_drop
                    | Rule::kw_tail
                    | Rule::kw_paths
                    | Rule::kw_shorten
            )
        }
        self.into_inner()
            .filter(keep as fn(&Pair<'i, Rule>) -> bool)
    }
}

struct Builder<'a> {
    sources: &'a [Source],
    index: usize,
    text: &'a str,
    lines: LineIndex,
    errors: Vec<Diagnostic>,
}

/// Line starts of a source, so that a span's line and column cost a binary search instead of
/// a scan from the start of the file (which made large policies quadratic to parse).
struct LineIndex {
    /// (byte offset of the line start, whether the line is ASCII)
    lines: Vec<(usize, bool)>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let mut lines = Vec::new();
        let mut start = 0usize;
        for line in text.split_inclusive('\n') {
            lines.push((start, line.is_ascii()));
            start = start.saturating_add(line.len());
        }
        if text.is_empty() || text.ends_with('\n') {
            // The empty line after a final newline (where EOF is).
            lines.push((start, true));
        }
        LineIndex { lines }
    }

    fn span(&self, text: &str, source: usize, start: usize, end: usize) -> Span {
        let start = start.min(text.len());
        let i = self
            .lines
            .partition_point(|(s, _)| *s <= start)
            .saturating_sub(1);
        let (line_start, ascii) = self.lines.get(i).copied().unwrap_or((0, true));
        let col = if ascii {
            start.saturating_sub(line_start).saturating_add(1)
        } else {
            text[line_start..start].chars().count().saturating_add(1)
        };
        Span {
            source,
            start,
            end: end.max(start),
            line: i.saturating_add(1),
            col,
        }
    }
}

impl<'a> Builder<'a> {
    fn span(&self, p: &Pair<'_, Rule>) -> Span {
        let s = p.as_span();
        self.lines.span(self.text, self.index, s.start(), s.end())
    }

    fn error(&mut self, span: Span, msg: impl Into<String>, help: Option<String>) {
        self.errors
            .push(Diagnostic::new(self.sources, Severity::Error, span, msg).with_help(help));
    }

    fn spanned_str(&self, p: Pair<'_, Rule>) -> Spanned<String> {
        Spanned {
            span: self.span(&p),
            node: p.as_str().to_string(),
        }
    }

    fn string(&self, p: Pair<'_, Rule>) -> String {
        // string = "\"" str_inner "\""
        let inner = p.into_inner().next().map(|x| x.as_str()).unwrap_or("");
        unescape(inner)
    }

    fn int(&mut self, p: Pair<'_, Rule>) -> i64 {
        let span = self.span(&p);
        let raw: String = p.as_str().chars().filter(|c| *c != '_').collect();
        match raw.parse::<i64>() {
            Ok(v) => v,
            Err(_) => {
                self.error(
                    span,
                    format!(
                        "number `{}` is out of range: numbers are between {} and {}",
                        p.as_str(),
                        i64::MIN,
                        i64::MAX
                    ),
                    None,
                );
                0
            }
        }
    }

    fn spanned_string(&self, p: Pair<'_, Rule>) -> Spanned<String> {
        Spanned {
            span: self.span(&p),
            node: self.string(p),
        }
    }

    fn spanned_int(&mut self, p: Pair<'_, Rule>) -> Spanned<i64> {
        let span = self.span(&p);
        Spanned {
            node: self.int(p),
            span,
        }
    }

    /// The string of an entry such as `extends "base.policy"`.
    fn entry_string(&self, p: Pair<'_, Rule>) -> Option<Spanned<String>> {
        p.kids().next().map(|s| self.spanned_string(s))
    }

    /// Fill a block slot, reporting a second block of the same kind in one file.
    fn once<T>(&mut self, slot: &mut Option<T>, value: T, what: &str, span: Span) {
        if slot.is_some() {
            self.error(
                span,
                format!("a policy file has at most one `{what}` block"),
                Some("merge the two blocks into one".into()),
            );
        }
        *slot = Some(value);
    }

    fn decl(&mut self, p: Pair<'_, Rule>, file: &mut PolicyFile) {
        let span = self.span(&p);
        match p.as_rule() {
            Rule::header => self.header(p, span, file),
            Rule::let_decl => {
                let mut it = p.kids();
                if let (Some(n), Some(v)) = (it.next(), it.next()) {
                    let name = self.spanned_str(n);
                    let value = self.expr(v);
                    file.lets.push(Let { name, value });
                }
            }
            Rule::eligible_decl => {
                if let Some(w) = p.kids().next() {
                    let when = self.when(w);
                    self.once(
                        &mut file.eligible,
                        Condition { span, when },
                        "eligible",
                        span,
                    );
                }
            }
            Rule::stale_decl => {
                let mut it = p.kids();
                let (Some(n), Some(w)) = (it.next(), it.next()) else {
                    return;
                };
                let name = self.spanned_str(n);
                let when = self.when(w);
                let because = it.next().map(|b| self.because(b));
                file.stales.push(StaleRule {
                    name,
                    span,
                    when,
                    because,
                });
            }
            Rule::strategy_block => {
                let ladder = self.ladder(p, span);
                self.once(&mut file.strategy, ladder, "strategy", span);
            }
            Rule::summary_block => {
                let summary = self.summary(p, span);
                self.once(&mut file.summary, summary, "summary", span);
            }
            Rule::delivery_block => {
                let delivery = self.delivery(p, span);
                self.once(&mut file.delivery, delivery, "delivery", span);
            }
            Rule::pregrant_block => {
                let pregrant = self.pregrant(p, span);
                self.once(&mut file.pregrant, pregrant, "pregrant", span);
            }
            Rule::providers_block => {
                let providers = self.providers(p, span);
                self.once(&mut file.providers, providers, "providers", span);
            }
            Rule::redact_block => {
                let redact = self.redact(p, span);
                self.once(&mut file.redact, redact, "redact", span);
            }
            Rule::log_block => {
                let log = self.log(p);
                self.once(&mut file.log, log, "log", span);
            }
            _ => {}
        }
    }

    /// `redact { disable ID  redact NAME pattern "..."  allow pattern "..." }`.
    fn redact(&mut self, p: Pair<'_, Rule>, span: Span) -> RedactBlock {
        let mut block = RedactBlock {
            span,
            disabled: Vec::new(),
            rules: Vec::new(),
            allows: Vec::new(),
        };
        for e in p.kids() {
            let espan = self.span(&e);
            let rule = e.as_rule();
            let mut words = Vec::new();
            let mut pattern = None;
            for x in e.kids() {
                match x.as_rule() {
                    Rule::rule_id => words.push(self.spanned_str(x)),
                    Rule::string => {
                        let pspan = self.span(&x);
                        let inner = x.into_inner().next().map(|i| i.as_str()).unwrap_or("");
                        pattern = Some(RedactPattern {
                            span: pspan,
                            text: pattern_text(inner),
                        });
                    }
                    _ => {}
                }
            }
            match (rule, words.pop(), pattern) {
                (Rule::redact_disable, Some(id), _) => block.disabled.push(id),
                (Rule::redact_rule, Some(name), Some(pattern)) => block.rules.push(RedactRule {
                    span: espan,
                    name,
                    pattern,
                }),
                (Rule::redact_allow, _, Some(pattern)) => block.allows.push(pattern),
                _ => {}
            }
        }
        block
    }

    /// `log { drop FIELD  hash FIELD  keep FIELD }`.
    fn log(&mut self, p: Pair<'_, Rule>) -> LogBlock {
        let mut block = LogBlock {
            entries: Vec::new(),
        };
        for e in p.kids() {
            let mut action = None;
            let mut field = None;
            for x in e.kids() {
                match x.as_rule() {
                    Rule::log_action => action = Some(self.spanned_str(x)),
                    Rule::ident => field = Some(self.spanned_str(x)),
                    _ => {}
                }
            }
            if let (Some(action), Some(field)) = (action, field) {
                block.entries.push(LogEntry { action,
                    field,
                });
            }
        }
        block
    }

    /// `providers { NAME { KEY VALUE [force] ... } ... }`.
    fn providers(&mut self, p: Pair<'_, Rule>, span: Span) -> ProvidersBlock {
        let mut block = ProvidersBlock {
            span,
            providers: Vec::new(),
        };
        for e in p.kids() {
            let espan = self.span(&e);
            let mut it = e.kids();
            let Some(n) = it.next() else { continue };
            let name = match n.as_rule() {
                Rule::string => self.spanned_string(n),
                _ => self.spanned_str(n),
            };
            let mut settings = Vec::new();
            for s in it {
                let sspan = self.span(&s);
                let mut parts = s.kids();
                let (Some(k), Some(v)) = (parts.next(), parts.next()) else {
                    continue;
                };
                let key = self.spanned_str(k);
                let vspan = self.span(&v);
                let node = match v.kids().next() {
                    Some(x) => match x.as_rule() {
                        Rule::boolean => SettingValue::Bool(x.as_str() == "true"),
                        Rule::int => SettingValue::Int(self.int(x)),
                        Rule::string => SettingValue::Str(self.string(x)),
                        Rule::null => SettingValue::Null,
                        _ => SettingValue::Word(x.as_str().to_string()),
                    },
                    None => SettingValue::Null,
                };
                let force = parts.any(|x| x.as_rule() == Rule::kw_force);
                settings.push(ProviderSetting {
                    key,
                    value: Spanned {
                        node,
                        span: vspan,
                    },
                    force,
                    span: sspan,
                });
            }
            block.providers.push(ProviderEntry {
                name,
                span: espan,
                settings,
            });
        }
        block
    }

    fn header(&mut self, p: Pair<'_, Rule>, span: Span, file: &mut PolicyFile) {
        let mut it = p.kids();
        if let Some(n) = it.next() {
            let name = self.spanned_string(n);
            self.once(&mut file.name, name, "policy", span);
        }
        for e in it {
            match e.as_rule() {
                Rule::description => file.description = self.entry_string(e).map(|s| s.node),
                Rule::extends => file.extends.extend(self.entry_string(e)),
                Rule::template_decl => file.template = self.entry_string(e),
                Rule::known_providers => {
                    for s in e.kids() {
                        let name = self.spanned_string(s);
                        file.known_providers.push(name);
                    }
                }
                _ => {}
            }
        }
    }

    fn ladder(&mut self, p: Pair<'_, Rule>, span: Span) -> Ladder {
        let mut rules = Vec::new();
        for r in p.kids() {
            let rspan = self.span(&r);
            let mut strategy = None;
            let mut when = None;
            let mut handoff = None;
            let mut because = None;
            for part in r.kids() {
                match part.as_rule() {
                    Rule::ident => strategy = Some(self.spanned_str(part)),
                    Rule::when_clause => when = Some(self.when(part)),
                    Rule::handoff_as => handoff = part.kids().next().map(|x| self.spanned_str(x)),
                    Rule::because => because = Some(self.because(part)),
                    _ => {}
                }
            }
            if let Some(strategy) = strategy {
                rules.push(LadderRule {
                    strategy,
                    span: rspan,
                    when,
                    handoff,
                    because,
                });
            }
        }
        Ladder { span, rules }
    }

    fn delivery(&mut self, p: Pair<'_, Rule>, span: Span) -> DeliveryBlock {
        let mut block = DeliveryBlock {
            span,
            rules: Vec::new(),
            inline_limit: None,
        };
        for e in p.kids() {
            let espan = self.span(&e);
            match e.as_rule() {
                Rule::inline_limit => {
                    block.inline_limit = e.kids().next().map(|n| self.spanned_int(n));
                }
                Rule::delivery_rule => {
                    let mut rule = DeliveryRule {
                        span: espan,
                        off_band: false,
                        when: None,
                        because: None,
                    };
                    for part in e.kids() {
                        match part.as_rule() {
                            Rule::delivery_mode => rule.off_band = part.as_str() == "off_band",
                            Rule::when_clause => rule.when = Some(self.when(part)),
                            Rule::because => rule.because = Some(self.because(part)),
                            _ => {}
                        }
                    }
                    block.rules.push(rule);
                }
                _ => {}
            }
        }
        block
    }

    fn pregrant(&mut self, p: Pair<'_, Rule>, span: Span) -> PregrantBlock {
        let mut block = PregrantBlock {
            span,
            grants: Vec::new(),
            turns: Spanned { node: 1, span },
            uses: Spanned { node: 1, span },
        };
        for e in p.kids() {
            let espan = self.span(&e);
            let rule = e.as_rule();
            let mut it = e.kids();
            match rule {
                Rule::grant_rule => {
                    let (Some(t), Some(target)) = (it.next(), it.next()) else {
                        continue;
                    };
                    let tool = self.spanned_str(t);
                    let target = self.spanned_str(target);
                    let when = it.next().map(|w| self.when(w));
                    block.grants.push(GrantRule {
                        span: espan,
                        tool,
                        target,
                        when,
                    });
                }
                Rule::grant_limits => {
                    if let (Some(t), Some(u)) = (it.next(), it.next()) {
                        block.turns = self.spanned_int(t);
                        block.uses = self.spanned_int(u);
                    }
                }
                _ => {}
            }
        }
        block
    }

    // Long by design: one arm per statement of the `summary` grammar (grammar/policy.pest),
    // in the grammar's order, so that a new statement is one new arm beside its rule.
    #[allow(clippy::too_many_lines)]
    fn summary(&mut self, p: Pair<'_, Rule>, span: Span) -> SummaryBlock {
        let mut block = SummaryBlock {
            span,
            text_max: None,
            sections: Vec::new(),
            includes: Vec::new(),
            excludes: Vec::new(),
            budget: None,
            source: None,
            text_cuts: Vec::new(),
            document_max: None,
            turn_max: None,
            degrade: Vec::new(),
        };
        for e in p.kids() {
            let espan = self.span(&e);
            match e.as_rule() {
                Rule::text_rule => block.text_max = e.kids().next().map(|n| self.spanned_int(n)),
                Rule::text_cut => {
                    let mut cut = TextCutDecl {
                        span: espan,
                        form: String::new(),
                        chars: None,
                        kind: None,
                        section: None,
                        strict: false,
                    };
                    for part in e.kids() {
                        match part.as_rule() {
                            Rule::cut_form => cut.form = part.as_str().to_string(),
                            Rule::int => cut.chars = Some(self.spanned_int(part)),
                            Rule::cut_for => {
                                cut.kind = part.kids().next().map(|k| self.spanned_str(k))
                            }
                            Rule::cut_in => {
                                cut.section = part.kids().next().map(|k| self.spanned_str(k))
                            }
                            Rule::cut_strict => cut.strict = true,
                            _ => {}
                        }
                    }
                    block.text_cuts.push(cut);
                }
                Rule::document_budget => {
                    block.document_max = e.kids().next().map(|n| self.spanned_int(n))
                }
                Rule::turn_budget => {
                    block.turn_max = e.kids().next().map(|n| {
                        let span = self.span(&n);
                        let node = match n.as_rule() {
                            Rule::int => Some(self.spanned_int(n).node),
                            _ => None,
                        };
                        Spanned { node, span }
                    })
                }
                Rule::degrade_rule => {
                    let Some(step) = e.kids().next() else {
                        continue;
                    };
                    let rule = step.as_rule();
                    let mut it = step.kids();
                    let node = match rule {
                        Rule::degrade_oldest => Some(DegradeDecl::DropOldestRuns),
                        Rule::degrade_text => Some(DegradeDecl::TextRules),
                        Rule::degrade_drop => {
                            it.next().map(|k| DegradeDecl::Drop(self.spanned_str(k)))
                        }
                        Rule::degrade_paths => {
                            it.next().map(|k| DegradeDecl::Paths(self.spanned_str(k)))
                        }
                        Rule::degrade_tail => match (it.next(), it.next()) {
                            (Some(k), Some(n)) => {
                                let kind = self.spanned_str(k);
                                Some(DegradeDecl::Tail(kind, self.int(n)))
                            }
                            _ => None,
                        },
                        Rule::degrade_shorten => {
                            it.next().map(|n| DegradeDecl::Shorten(self.int(n)))
                        }
                        Rule::degrade_kinded => match (it.next(), it.next()) {
                            (Some(v), Some(k)) => Some(DegradeDecl::Kinded(
                                v.as_str().to_string(),
                                self.spanned_str(k),
                            )),
                            _ => None,
                        },
                        _ => None,
                    };
                    if let Some(node) = node {
                        block.degrade.push(Spanned { node, span: espan });
                    }
                }
                Rule::section_decl => {
                    let mut it = e.kids();
                    if let (Some(n), Some(t)) = (it.next(), it.next()) {
                        let name = self.spanned_str(n);
                        let title = self.string(t);
                        block.sections.push(SectionDecl { name, title });
                    }
                }
                Rule::include_rule => {
                    let mut it = e.kids();
                    let (Some(k), Some(s)) = (it.next(), it.next()) else {
                        continue;
                    };
                    let kind = self.spanned_str(k);
                    let section = self.spanned_str(s);
                    let mut form = None;
                    let mut when = None;
                    for part in it {
                        match part.as_rule() {
                            Rule::form => form = part.kids().next().map(|x| self.spanned_str(x)),
                            Rule::when_clause => when = Some(self.when(part)),
                            _ => {}
                        }
                    }
                    block.includes.push(IncludeRule {
                        span: espan,
                        kind,
                        section,
                        form,
                        when,
                    });
                }
                Rule::exclude_rule => {
                    let mut it = e.kids();
                    let Some(k) = it.next() else { continue };
                    let kind = self.spanned_str(k);
                    let mut when = None;
                    let mut because = None;
                    for part in it {
                        match part.as_rule() {
                            Rule::when_clause => when = Some(self.when(part)),
                            Rule::because => because = Some(self.because(part)),
                            _ => {}
                        }
                    }
                    block.excludes.push(ExcludeRule {
                        span: espan,
                        kind,
                        when,
                        because,
                    });
                }
                Rule::budget_rule => {
                    let mut it = e.kids();
                    if let Some(n) = it.next() {
                        let chars = self.spanned_int(n);
                        let newest_first = it
                            .next()
                            .map(|o| o.as_str() == "newest_first")
                            .unwrap_or(true);
                        block.budget = Some(Budget {
                            span: espan,
                            chars,
                            newest_first,
                        });
                    }
                }
                Rule::source_rule => {
                    if let Some(s) = e.kids().next() {
                        match s.as_rule() {
                            Rule::source_deterministic => {
                                block.source = Some(SourceDecl::Deterministic)
                            }
                            Rule::source_command => {
                                let mut it = s.kids();
                                let command = it.next().map(|c| self.string(c)).unwrap_or_default();
                                let timeout_ms = it.next().map(|t| self.spanned_int(t));
                                block.source = Some(SourceDecl::Command {
                                    span: espan,
                                    command,
                                    timeout_ms,
                                });
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        block
    }

    fn because(&self, p: Pair<'_, Rule>) -> String {
        p.kids().next().map(|s| self.string(s)).unwrap_or_default()
    }

    fn when(&mut self, p: Pair<'_, Rule>) -> Expr {
        let span = self.span(&p);
        match p.kids().next() {
            Some(e) => self.expr(e),
            None => Expr::Bool(true, span),
        }
    }

    fn expr(&mut self, p: Pair<'_, Rule>) -> Expr {
        let span = self.span(&p);
        match p.as_rule() {
            Rule::expr => match p.kids().next() {
                Some(x) => self.expr(x),
                None => Expr::Null(span),
            },
            Rule::or_expr | Rule::and_expr => {
                let is_or = p.as_rule() == Rule::or_expr;
                let mut parts: Vec<Expr> = p.kids().map(|x| self.expr(x)).collect();
                if parts.len() == 1 {
                    parts.pop().unwrap_or(Expr::Null(span))
                } else if is_or {
                    Expr::Or(parts, span)
                } else {
                    Expr::And(parts, span)
                }
            }
            Rule::unary => {
                let mut nots = 0usize;
                let mut inner = None;
                for x in p.kids() {
                    match x.as_rule() {
                        Rule::not_op => nots = nots.saturating_add(1),
                        _ => inner = Some(self.expr(x)),
                    }
                }
                let inner = inner.unwrap_or(Expr::Null(span));
                match nots {
                    0 => inner,
                    // `not not x` is `x` as a boolean; keep one `not` per odd count so that
                    // a long run of `not`s never builds a deep tree.
                    n if n % 2 == 1 => Expr::Not(Box::new(inner), span),
                    _ => Expr::Not(Box::new(Expr::Not(Box::new(inner), span)), span),
                }
            }
            Rule::comparison => {
                let mut it = p.kids();
                let lhs = match it.next() {
                    Some(x) => self.expr(x),
                    None => return Expr::Null(span),
                };
                match it.next() {
                    None => lhs,
                    Some(tail) => {
                        let mut t = tail.kids();
                        let (Some(op), Some(rhs)) = (t.next(), t.next()) else {
                            return lhs;
                        };
                        let op = match op.as_rule() {
                            Rule::in_op => CmpOp::In,
                            Rule::not_in => CmpOp::NotIn,
                            _ => match op.as_str() {
                                "==" => CmpOp::Eq,
                                "!=" => CmpOp::Ne,
                                "<" => CmpOp::Lt,
                                "<=" => CmpOp::Le,
                                ">" => CmpOp::Gt,
                                _ => CmpOp::Ge,
                            },
                        };
                        let rhs = self.expr(rhs);
                        Expr::Cmp(Box::new(lhs), op, Box::new(rhs), span)
                    }
                }
            }
            Rule::sum => {
                let mut parts = Vec::new();
                let mut minus = false;
                for x in p.kids() {
                    if x.as_rule() == Rule::add_op {
                        minus = x.as_str() == "-";
                    } else {
                        parts.push((minus, self.expr(x)));
                        minus = false;
                    }
                }
                if parts.len() == 1 {
                    parts.pop().map(|(_, e)| e).unwrap_or(Expr::Null(span))
                } else {
                    Expr::Sum(parts, span)
                }
            }
            Rule::int => Expr::Int(self.int(p), span),
            Rule::string => Expr::Str(self.string(p), span),
            Rule::boolean => Expr::Bool(p.as_str() == "true", span),
            Rule::null => Expr::Null(span),
            Rule::list => Expr::List(p.kids().map(|x| self.expr(x)).collect(), span),
            Rule::path => Expr::Path(p.as_str().to_string(), span),
            _ => Expr::Null(span),
        }
    }
}

/// A pattern string's text: the regex as written, with only `\"` unescaped (so `\b`, `\d`
/// and `\\` reach the regex crate as they are).
fn pattern_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&'"') {
            continue;
        }
        out.push(c);
    }
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}
