//! The built-in redaction rules, as data (docs/redaction.md#the-rules).
//!
//! Each rule has an id (what `[REDACTED:ID#N]` and the reports name, and what `disable ID`
//! turns off), one or more patterns (the `regex` crate's syntax: linear time, no
//! backreferences or look-around), the keywords that must occur in a text before its patterns
//! run (the prefilter; matched without regard to ASCII case), and a plausibility check on what a
//! pattern found. A pattern's group named `secret` (or `secret2`, ...) is the part masked; the
//! rest of the match (a key name, `Bearer `, a URL's user) stays. Their positive and negative
//! samples are tested in this module and in src/redact/redaction_tests.rs.

/// What a rule's match must also satisfy to count as a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Every match is a secret.
    Any,
    /// The secret holds at least one ASCII digit (random tokens do; words and names rarely).
    Digit,
    /// An assignment's value: not a placeholder, a reference to another value, a boolean,
    /// a number or code (`getpass()`, `req.body.password`).
    Value,
}

/// One built-in rule.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The rule's id (`github-token`).
    pub id: &'static str,
    /// What the rule finds, in a few words (`baton`'s docs and the language server's hover).
    pub about: &'static str,
    /// Its patterns; a match of any of them is a candidate.
    pub patterns: &'static [&'static str],
    /// Keywords one of which a text must hold before the patterns run.
    pub keywords: &'static [&'static str],
    /// What a candidate must also satisfy.
    pub check: Check,
}

/// The built-in rules, most specific first: where two rules find the same text, the earlier
/// one names it.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        id: "private-key",
        about: "a PEM private key block (`-----BEGIN ... PRIVATE KEY-----` to its END line, or to the end of the text when it has none)",
        patterns: &[
            r"-----BEGIN[A-Z0-9 ]{0,32}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]{0,32}PRIVATE KEY(?: BLOCK)?-----|\z)",
        ],
        keywords: &["PRIVATE KEY"],
        check: Check::Any,
    },
    Builtin {
        id: "aws-access-key-id",
        about: "an AWS access key id (`AKIA...`, `ASIA...`)",
        patterns: &[r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"],
        keywords: &["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
        check: Check::Any,
    },
    Builtin {
        id: "aws-secret-key",
        about: "an AWS secret access key next to its name (`aws_secret_access_key = ...`, `\"SecretAccessKey\": \"...\"`)",
        patterns: &[
            r#"(?i)(?:aws_?secret_?access_?key|aws_?secret_?key|secretaccesskey)["']?\s*(?:[:=]|:=|=>)\s*["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|\z)"#,
        ],
        keywords: &["secret"],
        check: Check::Any,
    },
    Builtin {
        id: "github-token",
        about: "a GitHub token (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`)",
        patterns: &[
            r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b",
            r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
        ],
        keywords: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        check: Check::Any,
    },
    Builtin {
        id: "gitlab-token",
        about: "a GitLab token (`glpat-`, `gldt-`, `glrt-`, `glptt-`, `glcbt-`, `glsoat-`, `GR1348941`)",
        patterns: &[
            r"\b(?:glpat|gldt|glrt|glptt|glcbt|glsoat|glft|glimt|glagent)-[A-Za-z0-9_\-]{20,}",
            r"\bGR1348941[A-Za-z0-9_\-]{20,}",
        ],
        keywords: &[
            "glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-", "glft-", "glimt-",
            "glagent-", "GR1348941",
        ],
        check: Check::Any,
    },
    Builtin {
        id: "slack-token",
        about: "a Slack token (`xoxb-`, `xoxp-`, `xapp-`, ...) or incoming-webhook URL",
        patterns: &[
            r"\bxox[abposre]-[A-Za-z0-9\-]{10,}",
            r"\bxapp-[0-9]-[A-Za-z0-9\-]{10,}",
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{20,}",
        ],
        keywords: &["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xapp-", "hooks.slack.com"],
        check: Check::Any,
    },
    Builtin {
        id: "stripe-key",
        about: "a Stripe secret or restricted key (`sk_live_`, `rk_test_`, ...; publishable `pk_` keys are not secret)",
        patterns: &[r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"],
        keywords: &["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
        check: Check::Any,
    },
    Builtin {
        id: "anthropic-key",
        about: "an Anthropic API key (`sk-ant-api03-...`, `sk-ant-admin01-...`)",
        patterns: &[r"\bsk-ant-[a-z]{2,10}[0-9]{2}-[A-Za-z0-9_\-]{20,}"],
        keywords: &["sk-ant-"],
        check: Check::Any,
    },
    Builtin {
        id: "openai-key",
        about: "an OpenAI API key (`sk-proj-...`, `sk-svcacct-...`, `sk-...`)",
        patterns: &[r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"],
        keywords: &["sk-"],
        check: Check::Digit,
    },
    Builtin {
        id: "google-api-key",
        about: "a Google API key (`AIza...`)",
        patterns: &[r"\bAIza[0-9A-Za-z_\-]{35}"],
        keywords: &["AIza"],
        check: Check::Any,
    },
    Builtin {
        id: "jwt",
        about: "a JSON Web Token (`eyJ...`.`eyJ...`.signature)",
        patterns: &[r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"],
        keywords: &["eyJ"],
        check: Check::Any,
    },
    Builtin {
        id: "url-password",
        about: "the password of a URL (`scheme://user:PASSWORD@host`); the user and host stay",
        patterns: &[
            r#"\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s:/?#@"'<>`]{0,}:(?P<secret>[^\s/?#@"'<>`]{1,})@[^\s/@"'<>`]"#,
        ],
        keywords: &["://"],
        check: Check::Any,
    },
    Builtin {
        id: "authorization-header",
        about: "the credentials of an `Authorization:` (or `Proxy-Authorization:`) header; the scheme (`Bearer`, `Basic`) stays",
        patterns: &[
            r#"(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest|bot|apikey|negotiate)\s+)?(?P<secret>[^\s"',;]{6,})"#,
        ],
        keywords: &["authorization"],
        check: Check::Any,
    },
    Builtin {
        id: "secret-assignment",
        about: "the value of an assignment whose key names a secret (`*_TOKEN`, `*SECRET*`, `*PASSWORD*`, `*_API_KEY`, `private_key`, ...) in shell, `.env`, YAML, JSON or TOML form; the key stays",
        patterns: &[
            // Quoted value, any form: `KEY="v"`, `key: 'v'`, `"key": "v"`, `key = "v"`.
            concat!(
                r#"(?i)(?:^|[^A-Za-z0-9_.\-])(?P<key>"#,
                r"[A-Za-z0-9_.\-]*(?:secret|passw(?:or)?d|passphrase|credential)[A-Za-z0-9_.\-]*",
                "|",
                r"[A-Za-z0-9_.\-]*(?:token|api[_\-]?key|apikey|private[_\-]?key|access[_\-]?key|auth[_\-]?key|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key|session[_\-]?key)",
                r#")["']?[ \t]*(?::=|=>|[:=])[ \t]*(?:"(?P<secret>(?:[^"\\\r\n]|\\.){4,})"|'(?P<secret2>[^'\r\n]{4,})')"#,
            ),
            // Unquoted after `=` with no space before it: shell, `.env`, query strings.
            concat!(
                r#"(?i)(?:^|[^A-Za-z0-9_.\-])(?P<key>"#,
                r"[A-Za-z0-9_.\-]*(?:secret|passw(?:or)?d|passphrase|credential)[A-Za-z0-9_.\-]*",
                "|",
                r"[A-Za-z0-9_.\-]*(?:token|api[_\-]?key|apikey|private[_\-]?key|access[_\-]?key|auth[_\-]?key|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key|session[_\-]?key)",
                r#")=(?P<secret>[^\s"'`;&|<>(){}\[\],]{4,})"#,
            ),
            // Unquoted YAML value filling the rest of its line: `password: hunter2`.
            concat!(
                r#"(?im)^[ \t]*(?:-[ \t]+)?(?P<key>"#,
                r"[A-Za-z0-9_.\-]*(?:secret|passw(?:or)?d|passphrase|credential)[A-Za-z0-9_.\-]*",
                "|",
                r"[A-Za-z0-9_.\-]*(?:token|api[_\-]?key|apikey|private[_\-]?key|access[_\-]?key|auth[_\-]?key|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key|session[_\-]?key)",
                r#"):[ \t]+(?P<secret>[^\s"'#|>&*!\[{][^\s#]{3,})[ \t]*\r?$"#,
            ),
            // `key: value` inside a line (a flattened YAML document, a log line): the value
            // must hold a digit, so that prose (`password: reset it`) and code
            // (`password: newPassword`) stay.
            concat!(
                r#"(?i)(?:^|[^A-Za-z0-9_.\-])(?P<key>"#,
                r"[A-Za-z0-9_.\-]*(?:secret|passw(?:or)?d|passphrase|credential)[A-Za-z0-9_.\-]*",
                "|",
                r"[A-Za-z0-9_.\-]*(?:token|api[_\-]?key|apikey|private[_\-]?key|access[_\-]?key|auth[_\-]?key|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key|session[_\-]?key)",
                r#"):[ \t]+(?P<secret>[^\s"'#,;]*[0-9][^\s#,;]*)"#,
            ),
        ],
        keywords: &[
            "secret",
            "passwd",
            "password",
            "passphrase",
            "credential",
            "token",
            "api_key",
            "api-key",
            "apikey",
            "private_key",
            "private-key",
            "privatekey",
            "access_key",
            "access-key",
            "accesskey",
            "auth_key",
            "auth-key",
            "authkey",
            "signing",
            "encryption",
            "master",
            "session",
        ],
        check: Check::Value,
    },
];

/// The ids of the built-in rules, in table order.
pub fn ids() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|b| b.id)
}

/// The built-in rule named `id`.
pub fn builtin(id: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.id == id)
}

/// Values an assignment's key may name that are not secrets: booleans, nulls, type names and
/// words used as placeholders.
const NOT_VALUES: &[&str] = &[
    "true", "false", "null", "nil", "none", "undefined", "yes", "no", "on", "off", "string",
    "str", "bool", "required", "optional", "redacted", "hidden", "masked", "example", "empty",
    "secret", "password", "token", "your_token", "your-token", "changeme_later",
];

/// Last words of a key name that make it name something about a secret rather than the
/// secret itself (`password_reset_url`, `secret_name`, `token_ttl`).
const NOT_SECRET_KEYS: &[&str] = &[
    "url", "uri", "path", "file", "dir", "name", "length", "len", "min", "max", "count",
    "policy", "hint", "field", "type", "label", "reset", "expiry", "expires", "expiration",
    "ttl", "timeout", "endpoint", "required", "enabled", "prompt", "placeholder", "id", "ref",
    "arn", "version", "env", "header", "param", "regex", "pattern", "format",
];

/// Whether `value`, found by a rule with `check` after the key name `key` (assignments) and
/// followed in its text by `after`, is a secret.
pub fn plausible(check: Check, value: &str, after: Option<char>, key: Option<&str>) -> bool {
    match check {
        Check::Any => true,
        Check::Digit => value.bytes().any(|b| b.is_ascii_digit()),
        Check::Value => {
            let about = key.is_some_and(|k| {
                let last = k
                    .rsplit(['_', '-', '.'])
                    .next()
                    .unwrap_or(k)
                    .to_ascii_lowercase();
                NOT_SECRET_KEYS.contains(&last.as_str())
            });
            !about && plausible_value(value, after)
        }
    }
}

fn plausible_value(value: &str, after: Option<char>) -> bool {
    let v = value.trim();
    if v.chars().count() < 4 {
        return false;
    }
    // A call (`getpass()`) or a member access cut at `(`.
    if after == Some('(') {
        return false;
    }
    let lower = v.to_ascii_lowercase();
    if NOT_VALUES.contains(&lower.as_str()) {
        return false;
    }
    // References to other values and placeholders: `$TOKEN`, `${{ secrets.X }}`, `<token>`,
    // `%(pw)s`, `{{ .Values.pw }}`, `***`, `xxxx`, an earlier redaction.
    let first = v.chars().next().unwrap_or(' ');
    if matches!(first, '$' | '<' | '%' | '{' | '*' | '@' | '&' | '(' | '[') {
        return false;
    }
    let mut chars = v.chars();
    let c0 = chars.next().unwrap_or(' ');
    if chars.all(|c| c == c0) {
        return false;
    }
    // A number (`3600`, `1.5`).
    if v.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'-' || b == b'_') {
        return false;
    }
    // Code: a member access (`req.body.password`, `os.environ.get`), a trailing separator.
    if v.ends_with([',', ';', ')']) {
        return false;
    }
    let is_ident = |s: &str| {
        let mut cs = s.chars();
        cs.next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
            && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    let parts: Vec<&str> = v.split('.').collect();
    if parts.len() > 1 && parts.iter().all(|p| is_ident(p)) {
        // Dotted words with no digit are a path in code; a hostname-like secret has digits.
        if !v.bytes().any(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for b in BUILTINS {
            assert!(seen.insert(b.id), "duplicate id {}", b.id);
            assert!(b
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
            assert!(!b.keywords.is_empty(), "{} has no prefilter keyword", b.id);
        }
    }

    #[test]
    fn values_that_are_not_secrets() {
        for v in [
            "true",
            "null",
            "$GITHUB_TOKEN",
            "${{ secrets.NPM }}",
            "<your-token>",
            "********",
            "xxxxxxxx",
            "3600",
            "req.body.password",
            "process.env.API_KEY",
            "value,",
            "abc",
        ] {
            assert!(!plausible(Check::Value, v, None, None), "{v}");
        }
        assert!(!plausible(Check::Value, "getpass", Some('('), None));
        assert!(!plausible(Check::Value, "/reset", None, Some("password_reset_url")));
        for v in ["hunter2!", "s3cr3t-value", "Zm9vYmFy", "db1.internal.pw9"] {
            assert!(plausible(Check::Value, v, None, Some("DB_PASSWORD")), "{v}");
        }
    }
}
