//! `baton fmt` on any valid policy, not only the shipped ones: generated policies (every kind
//! of declaration, `let`s, negative numbers, strings holding `#`, comments between any two
//! tokens, odd whitespace) must format idempotently, keep their meaning (the formatted text
//! parses to the same syntax tree, spans aside) and keep every comment.

use baton::fmt::format_source;
use baton::policy::parser::parse;
use baton::policy::Source;
use proptest::prelude::*;
use proptest::strategy::Union;

/// One token of a generated policy.
type Toks = Vec<String>;

fn t(s: &str) -> String {
    s.to_string()
}

fn cat(parts: Vec<Toks>) -> Toks {
    parts.into_iter().flatten().collect()
}

fn int() -> impl Strategy<Value = String> {
    prop_oneof![
        (0i64..300).prop_map(|n| n.to_string()),
        (1i64..300).prop_map(|n| format!("-{n}")),
        Just(t("1_000")),
        Just(t("-0")),
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        r#""""#,
        r#""plain words""#,
        r#""has # a hash""#,
        r#""escaped \" quote and \\ slash""#,
        r#""  spaced   inside  ""#,
        "\"tab\there\"",
        r#""{ [ ( , ) ] }""#,
    ])
    .prop_map(t)
}

fn fact() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "target.has_thread",
        "target.off_provider_runs",
        "request.clean_context",
        "request.kind",
        "stale",
        "limit",
        "max",
        "budget",
        "item.latest",
        "summary.delta_chars",
    ])
    .prop_map(t)
}

fn atom_leaf() -> BoxedStrategy<Toks> {
    prop_oneof![
        int().prop_map(|s| vec![s]),
        string().prop_map(|s| vec![s]),
        fact().prop_map(|s| vec![s]),
        prop::sample::select(vec!["true", "false", "null"]).prop_map(|s| vec![t(s)]),
    ]
    .boxed()
}

/// The grammar's layers over `atom`: or / and / not / comparison / sum.
fn expr_over(atom: BoxedStrategy<Toks>) -> BoxedStrategy<Toks> {
    let sum = (
        atom.clone(),
        prop::collection::vec((prop::sample::select(vec!["+", "-"]), atom), 0..2),
    )
        .prop_map(|(first, rest)| {
            let mut v = first;
            for (op, a) in rest {
                v.push(t(op));
                v.extend(a);
            }
            v
        })
        .boxed();
    let cmp = (
        sum.clone(),
        prop::option::of((
            prop::sample::select(vec!["==", "!=", "<", "<=", ">", ">=", "in", "not in"]),
            sum,
        )),
    )
        .prop_map(|(l, tail)| {
            let mut v = l;
            if let Some((op, r)) = tail {
                v.extend(op.split(' ').map(t));
                v.extend(r);
            }
            v
        });
    let unary = (0usize..3, cmp)
        .prop_map(|(nots, c)| {
            let mut v: Toks = vec![t("not"); nots];
            v.extend(c);
            v
        })
        .boxed();
    (
        unary.clone(),
        prop::collection::vec((prop::sample::select(vec!["and", "or"]), unary), 0..3),
    )
        .prop_map(|(first, rest)| {
            let mut v = first;
            for (op, u) in rest {
                v.push(t(op));
                v.extend(u);
            }
            v
        })
        .boxed()
}

/// An expression; its atoms nest lists and parenthesised expressions.
fn expr() -> BoxedStrategy<Toks> {
    let atom = atom_leaf().prop_recursive(3, 24, 3, |inner| {
        let list = (
            prop::collection::vec(expr_over(inner.clone()), 0..3),
            any::<bool>(),
        )
            .prop_map(|(items, trailing)| {
                let n = items.len();
                let mut v = vec![t("[")];
                for (i, it) in items.into_iter().enumerate() {
                    if i > 0 {
                        v.push(t(","));
                    }
                    v.extend(it);
                }
                if trailing && n > 0 {
                    v.push(t(","));
                }
                v.push(t("]"));
                v
            });
        let paren = expr_over(inner.clone()).prop_map(|e| cat(vec![vec![t("(")], e, vec![t(")")]]));
        prop_oneof![inner, list, paren]
    });
    expr_over(atom.boxed())
}

fn opt(s: impl Strategy<Value = Toks>) -> impl Strategy<Value = Toks> {
    prop::option::of(s).prop_map(Option::unwrap_or_default)
}

fn when() -> impl Strategy<Value = Toks> {
    expr().prop_map(|e| cat(vec![vec![t("when")], e]))
}

fn because() -> impl Strategy<Value = Toks> {
    string().prop_map(|s| vec![t("because"), s])
}

fn ident() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,6}".prop_filter("not a keyword", |s| {
        !matches!(
            s.as_str(),
            "when" | "and" | "or" | "not" | "in" | "otherwise" | "because" | "true" | "false"
        ) && !s.starts_with("null")
    })
}

fn block(name: &'static str, entries: impl Strategy<Value = Toks>) -> impl Strategy<Value = Toks> {
    prop::collection::vec(entries, 0..4)
        .prop_map(move |es| cat(vec![vec![t(name), t("{")], cat(es), vec![t("}")]]))
}

fn ladder_rule() -> impl Strategy<Value = Toks> {
    (
        prop::sample::select(vec![
            "no_handoff",
            "full_new",
            "delta_existing",
            "full_existing",
        ]),
        prop_oneof![Just(vec![t("otherwise")]), when().boxed()],
        opt(ident().prop_map(|i| vec![t("handoff"), i])),
        opt(because()),
    )
        .prop_map(|(s, w, h, b)| cat(vec![vec![t(s)], w, h, b]))
}

fn summary_entry() -> impl Strategy<Value = Toks> {
    let kind = || prop::sample::select(vec!["plan", "command", "user_message", "file_change"]);
    Union::new(vec![
        int().prop_map(|n| vec![t("text"), t("max"), n]).boxed(),
        (ident(), string())
            .prop_map(|(i, s)| vec![t("section"), i, s])
            .boxed(),
        (
            kind(),
            ident(),
            opt(ident().prop_map(|f| vec![t("as"), f])),
            opt(when()),
        )
            .prop_map(|(k, into, f, w)| cat(vec![vec![t("include"), t(k), t("into"), into], f, w]))
            .boxed(),
        (kind(), opt(when()), opt(because()))
            .prop_map(|(k, w, b)| cat(vec![vec![t("exclude"), t(k)], w, b]))
            .boxed(),
        (
            int(),
            prop::option::of(prop::sample::select(vec!["newest_first", "oldest_first"])),
        )
            .prop_map(|(n, o)| cat(vec![vec![t("budget"), n], o.into_iter().map(t).collect()]))
            .boxed(),
        Just(vec![t("source"), t("deterministic")]).boxed(),
        (string(), opt(int().prop_map(|n| vec![t("timeout_ms"), n])))
            .prop_map(|(c, to)| cat(vec![vec![t("source"), t("command"), c], to]))
            .boxed(),
    ])
}

fn delivery_entry() -> impl Strategy<Value = Toks> {
    prop_oneof![
        int().prop_map(|n| vec![t("inline_limit"), n]),
        (
            prop::sample::select(vec!["off_band", "inline"]),
            prop_oneof![Just(vec![t("otherwise")]), when().boxed()],
            opt(because()),
        )
            .prop_map(|(m, w, b)| cat(vec![vec![t(m)], w, b])),
    ]
}

fn pregrant_entry() -> impl Strategy<Value = Toks> {
    prop_oneof![
        opt(when()).prop_map(|w| cat(vec![vec![t("read"), t("handoff.document")], w])),
        (int(), int()).prop_map(|(a, b)| vec![t("turns"), a, t("uses"), b]),
    ]
}

fn header() -> impl Strategy<Value = Toks> {
    (
        string(),
        prop::collection::vec(
            (
                prop::sample::select(vec!["description", "extends", "template"]),
                string(),
            ),
            0..3,
        ),
    )
        .prop_map(|(name, entries)| {
            let mut v = vec![t("policy"), name, t("{")];
            for (k, s) in entries {
                v.push(t(k));
                v.push(s);
            }
            v.push(t("}"));
            v
        })
}

/// The declarations of a policy file: the blocks at most once each, `let`s and `stale`
/// rules any number of times, in any order.
fn decls() -> impl Strategy<Value = Vec<Toks>> {
    (
        opt(header()),
        prop::collection::vec(
            (ident(), expr()).prop_map(|(n, e)| cat(vec![vec![t("let"), n, t("=")], e])),
            0..3,
        ),
        opt(when().prop_map(|w| cat(vec![vec![t("eligible")], w]))),
        prop::collection::vec(
            (ident(), when(), opt(because()))
                .prop_map(|(n, w, b)| cat(vec![vec![t("stale"), n], w, b])),
            0..3,
        ),
        opt(block("strategy", ladder_rule())),
        opt(block("summary", summary_entry())),
        opt(block("delivery", delivery_entry())),
        opt(block("pregrant", pregrant_entry())),
    )
        .prop_map(
            |(h, lets, eligible, stales, strategy, summary, delivery, pregrant)| {
                let mut all = vec![h, eligible, strategy, summary, delivery, pregrant];
                all.extend(lets);
                all.extend(stales);
                all.retain(|d| !d.is_empty());
                all
            },
        )
        .prop_shuffle()
}

/// What goes between two tokens. Comments always end their line.
fn gap() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        " ",
        " ",
        " ",
        "  ",
        "\t",
        "\n",
        "\n\n\n",
        "\r\n",
        " \t \n   ",
        " # a comment\n",
        "# tight comment\n",
        "\n  # own-line comment   \n",
        "\n# comment with \"quotes\" { [ ( and -1 when\n\n",
        " #\n",
        "\t#\ttabbed\t\r\n",
    ])
    .prop_map(t)
}

fn is_punct(s: &str) -> bool {
    matches!(
        s,
        "(" | ")"
            | "["
            | "]"
            | ","
            | "="
            | "=="
            | "!="
            | "<"
            | "<="
            | ">"
            | ">="
            | "+"
            | "-"
            | "{"
            | "}"
    )
}

/// A whole policy text: declarations, tokens joined by generated gaps (none at all next to
/// punctuation, sometimes), leading and trailing whitespace.
fn policy_text() -> impl Strategy<Value = String> {
    decls()
        .prop_flat_map(|decls| {
            let toks: Toks = decls.into_iter().flatten().collect();
            let n = toks.len();
            (
                Just(toks),
                prop::collection::vec((gap(), any::<bool>()), n + 1),
            )
        })
        .prop_map(|(toks, gaps)| {
            let mut text = String::new();
            let mut prev: Option<&str> = None;
            for (tok, (g, tight)) in toks.iter().zip(&gaps) {
                let touching = prev.is_some_and(|p| is_punct(p) || is_punct(tok));
                // `<` `=` or `=` `=` must not fuse into another operator.
                let fuses = prev
                    .is_some_and(|p| matches!(p, "<" | ">" | "=" | "!") && tok.starts_with('='));
                if prev.is_none() {
                    text.push_str(g.trim_start_matches(['\n', '\r']));
                } else if !(touching && *tight && !fuses) {
                    text.push_str(g);
                }
                text.push_str(tok);
                prev = Some(tok);
            }
            if let Some((g, _)) = gaps.last() {
                text.push_str(g);
            }
            text
        })
}

fn ast(text: &str) -> Result<String, String> {
    let sources = vec![Source {
        name: "p.policy".into(),
        text: text.into(),
    }];
    parse(&sources, 0)
        .map(|f| strip_spans(&format!("{f:?}")))
        .map_err(|e| e.to_string())
}

/// The Debug text of a syntax tree with every `Span { .. }` blanked out.
fn strip_spans(debug: &str) -> String {
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug;
    while let Some(i) = rest.find("Span { ") {
        out.push_str(&rest[..i]);
        out.push_str("Span");
        rest = match rest[i..].find('}') {
            Some(j) => &rest[i + j + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The comments of a policy text, in order, as the formatter keeps them (trailing
/// whitespace removed).
fn comments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.split('\n') {
        let mut in_str = false;
        let mut escaped = false;
        for (i, c) in line.char_indices() {
            if in_str {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => in_str = false,
                    _ => {}
                }
            } else if c == '"' {
                in_str = true;
            } else if c == '#' {
                out.push(line[i..].trim_end().to_string());
                break;
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fmt_is_idempotent_keeps_meaning_and_comments(text in policy_text()) {
        let before = ast(&text);
        prop_assume!(before.is_ok(), "generated text must parse: {:?}", before);
        let once = format_source("p.policy", &text)
            .map_err(|e| TestCaseError::fail(format!("refused a valid policy: {e}\n{text}")))?;
        let twice = format_source("p.policy", &once)
            .map_err(|e| TestCaseError::fail(format!("refused its own output: {e}\n{once}")))?;
        prop_assert_eq!(&twice, &once, "not idempotent; input:\n{}", text);
        prop_assert_eq!(ast(&once), before, "meaning changed; input:\n{}\noutput:\n{}", text, once);
        prop_assert_eq!(comments(&once), comments(&text), "comments lost; output:\n{}", once);
    }
}

/// The cases the property found, kept as plain regressions.
#[rstest::rstest]
#[case::negative_after_when("stale s when -1 < target.off_provider_runs\n")]
#[case::negative_after_not("eligible when not -1 == limit\n")]
#[case::negative_after_in("eligible when limit in -1\n")]
#[case::negative_limits("delivery {\n  inline_limit -5\n}\npregrant {\n  turns -1 uses -2\n}\n")]
#[case::negative_text_max(
    "summary {\n  text max -3\n  budget -4 newest_first\n  source command \"x\" timeout_ms -1\n}\n"
)]
#[case::subtraction_kept("let a = limit -1\nlet b = limit - -1\nlet c = (-1) - 1\n")]
fn negative_numbers_keep_their_meaning(#[case] text: &str) {
    let once = format_source("p.policy", text).expect("formats");
    assert_eq!(ast(&once), ast(text), "{once}");
    assert_eq!(format_source("p.policy", &once).expect("formats"), once);
}

/// The canonical layout, exactly: spacing, indentation, blank lines, and the padded columns of
/// ladders and summary rules.
#[rstest::rstest]
#[case::spacing_and_indentation(
    "strategy{\n\n  full_new   when not target.has_thread\n because \"x\"\n\n\n  delta_existing otherwise # keep\n}\nlet  xs = [ -1 ,2 ]\n",
    "strategy {\n  full_new       when not target.has_thread\n                 because \"x\"\n\n  delta_existing otherwise # keep\n}\nlet xs = [-1, 2]\n"
)]
#[case::ladder_conditions_and_summary_kinds_line_up(
    "stale s when request.clean_context\nbecause \"c\"\nstrategy {\nno_handoff when target.has_thread\nand not stale\nfull_new otherwise\n}\nsummary {\n# what goes in\ninclude user_message into goals\ninclude plan into plan when item.latest\nexclude protocol\n}\n",
    "stale s when request.clean_context\n  because \"c\"\nstrategy {\n  no_handoff when target.has_thread\n                  and not stale\n  full_new   otherwise\n}\nsummary {\n  # what goes in\n  include user_message into goals\n  include plan         into plan when item.latest\n  exclude protocol\n}\n"
)]
fn canonical_layout(#[case] src: &str, #[case] want: &str) {
    let out = format_source("t.policy", src).expect("formats");
    assert_eq!(out, want);
    assert_eq!(format_source("t.policy", &out).expect("formats"), out);
}
