//! Name resolution: facts, staleness signals and `let`s (resolved on first use), duplicate
//! names, and the "did you mean" help for unknown names.

use crate::policy::ast::*;
use crate::policy::CExpr;
use crate::facts::{Fact, Type, Value};
use crate::suggest::did_you_mean;
use std::collections::HashMap;
use super::{Checker, Ctx, Ty};

impl<'a> Checker<'a> {
    pub(super) fn names_in(&self, ctx: Ctx) -> Vec<String> {
        let mut v: Vec<String> = Fact::ALL
            .iter()
            .filter(|d| ctx.allows(d.scope))
            .map(|d| d.name.to_string())
            .collect();
        v.extend(self.lets.keys().cloned());
        if ctx.stale() {
            v.push("stale".into());
            v.extend(self.signals.iter().map(|s| format!("stale.{s}")));
        }
        v
    }

    pub(super) fn resolve(&mut self, path: &str, span: Span, ctx: Ctx) -> Option<(CExpr, Ty)> {
        if let Some((v, t, _)) = self.lets.get(path).cloned() {
            self.used_lets.insert(path.to_string());
            return Some((
                CExpr::Let(path.to_string(), v),
                Ty {
                    ty: t,
                    nullable: false,
                },
            ));
        }
        if path == "stale" {
            if ctx.stale() {
                self.observed_any_stale = true;
                return Some((
                    CExpr::AnyStale,
                    Ty {
                        ty: Type::Bool,
                        nullable: false,
                    },
                ));
            }
            self.err(
                span,
                format!("`stale` cannot be read {}", ctx.what()),
                Some("`stale` is known only after every staleness signal ran: read it in `strategy`, `delivery` or `pregrant`".into()),
            );
            return None;
        }
        if let Some(sig) = path.strip_prefix("stale.") {
            if let Some(&i) = self.signal_index.get(sig) {
                if ctx.stale() {
                    self.observed_signals.insert(sig.to_string());
                    return Some((
                        CExpr::Signal(i, sig.to_string()),
                        Ty {
                            ty: Type::Bool,
                            nullable: false,
                        },
                    ));
                }
                self.err(
                    span,
                    format!("`{path}` cannot be read {}", ctx.what()),
                    Some(
                        "staleness signals are known in `strategy`, `delivery` and `pregrant`"
                            .into(),
                    ),
                );
                return None;
            }
            // Suggestions scan every name: only the first errors get them, so that a policy
            // with many errors still checks in linear time.
            let help = if self.take_suggestion() {
                did_you_mean(sig, self.signals.iter().map(|s| s.as_str()))
                    .map(|s| format!("did you mean `stale.{s}`?"))
                    .or_else(|| {
                        Some(format!(
                            "the policy's signals are: {}",
                            if self.signals.is_empty() {
                                "(none)".to_string()
                            } else {
                                self.signals.join(", ")
                            }
                        ))
                    })
            } else {
                None
            };
            self.err(span, format!("unknown staleness signal `{sig}`"), help);
            return None;
        }
        if let Some(def) = Fact::by_name(path) {
            if !ctx.allows(def.scope) {
                self.err(
                    span,
                    format!("`{path}` cannot be read {}", ctx.what()),
                    Some(format!("`{path}` is available {}", def.scope.describe())),
                );
                return None;
            }
            return Some((
                CExpr::Fact(def.fact),
                Ty {
                    ty: def.ty,
                    nullable: def.nullable,
                },
            ));
        }
        if self.let_failed.contains(path) {
            return None; // its own error is already reported
        }
        let suggest = if self.take_suggestion() {
            let names = self.names_in(ctx);
            did_you_mean(path, names.iter().map(|s| s.as_str()))
                .map(|s| format!("did you mean `{s}`?"))
        } else {
            None
        };
        let help = suggest.or_else(|| Some("docs/facts.md lists every fact".to_string()));
        let what = if path.contains('.') { "fact" } else { "name" };
        self.err(span, format!("unknown {what} `{path}`"), help);
        None
    }


    /// Report every name defined twice in one file.
    pub(super) fn no_duplicates<'n>(
        &mut self,
        names: impl Iterator<Item = &'n Spanned<String>>,
        describe: impl Fn(&str) -> String,
    ) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for n in names {
            if let Some(prev) = seen.insert(n.node.as_str(), n.span) {
                let msg = format!(
                    "{} is defined twice in this file (first at line {})",
                    describe(&n.node),
                    prev.line
                );
                self.err(n.span, msg, None);
            }
        }
    }

    /// Resolve `let name` (already resolved, or now); false when it is not a `let` or does not
    /// check. Iterative (an explicit stack, not one call per link), so a chain of any length
    /// resolves in constant stack space and linear time.
    pub(super) fn resolve_let(&mut self, name: &str) -> bool {
        if self.lets.contains_key(name) {
            return true;
        }
        let Some(&key) = self.let_defs.get_key_value(name).map(|(k, _)| k) else {
            return false;
        };
        if self.let_failed.contains(key) {
            return false;
        }
        let frame = |key: &'a str, def: &'a Let| {
            let mut deps = Vec::new();
            def.value.paths(&mut deps);
            LetFrame { key, deps, next: 0 }
        };
        let Some(&def) = self.let_defs.get(key) else {
            return false;
        };
        let mut stack = vec![frame(key, def)];
        // Position of each `let` on the stack, to report a cycle.
        let mut on_stack: HashMap<&'a str, usize> = HashMap::from([(key, 0)]);
        while let Some(top) = stack.last_mut() {
            let Some((path, span)) = top.deps.get(top.next).cloned() else {
                // Every name the value reads is resolved: compute it.
                let k = top.key;
                stack.pop();
                on_stack.remove(k);
                let def = self.let_defs.get(k).copied();
                match def.and_then(|d| self.constant(&d.value).map(|v| (v, d.name.span))) {
                    Some(((v, t), span)) => {
                        self.lets.insert(k.to_string(), (v, t, span));
                    }
                    None => self.fail_lets(k, &mut stack),
                }
                continue;
            };
            top.next = top.next.saturating_add(1);
            let top_key = top.key;
            if self.lets.contains_key(path.as_str()) {
                continue;
            }
            let Some((&dep, &dep_def)) = self.let_defs.get_key_value(path.as_str()) else {
                self.err(
                    span,
                    format!("`let` values are constants; `{path}` is not a constant"),
                    Some("a `let` holds a number, string, bool or list; use facts in rules".into()),
                );
                self.fail_lets(top_key, &mut stack);
                continue;
            };
            if self.let_failed.contains(dep) {
                // Already reported where that `let` is defined.
                self.fail_lets(top_key, &mut stack);
                continue;
            }
            if let Some(&i) = on_stack.get(dep) {
                let mut chain: Vec<&str> = stack.iter().skip(i).map(|f| f.key).collect();
                chain.push(dep);
                self.err(
                    span,
                    format!("`let {dep}` depends on itself: {}", chain.join(" -> ")),
                    None,
                );
                self.let_failed.insert(dep);
                self.fail_lets(top_key, &mut stack);
                continue;
            }
            on_stack.insert(dep, stack.len());
            stack.push(frame(dep, dep_def));
        }
        self.lets.contains_key(key)
    }

    /// `key` does not check, and neither does any `let` waiting for it on `stack` (each of
    /// them reads the one above it); the diagnostic is already recorded.
    pub(super) fn fail_lets(&mut self, key: &'a str, stack: &mut Vec<LetFrame<'a>>) {
        self.let_failed.insert(key);
        for f in stack.drain(..) {
            self.let_failed.insert(f.key);
        }
    }

    /// The value of a `let` whose names are all resolved: only literals and other lets.
    pub(super) fn constant(&mut self, e: &Expr) -> Option<(Value, Type)> {
        let (c, t) = self.expr(e, Ctx::Let)?;
        let v = crate::policy::eval_const(&c);
        Some((v, t.ty))
    }
}

/// A `let` being resolved: the names its value reads, and how many of them are resolved.
pub(super) struct LetFrame<'a> {
    pub(super) key: &'a str,
    pub(super) deps: Vec<(String, Span)>,
    pub(super) next: usize,
}

/// Help for an unknown name: "did you mean `x`? (LABEL: a, b)" when one is close, else the list.
pub(super) fn help(name: &str, candidates: &[&str], label: &str, quote: char) -> Option<String> {
    let list = format!("{label}: {}", candidates.join(", "));
    Some(match did_you_mean(name, candidates.iter().copied()) {
        Some(s) => format!("did you mean {quote}{s}{quote}? ({list})"),
        None => list,
    })
}
