//! Type checking: every expression typed and compiled to a [`CExpr`].

use crate::policy::ast::*;
use crate::policy::CExpr;
use crate::facts::{Type, Value};
use super::{Checker, Ctx, Ty};
use super::resolve::help;

impl<'a> Checker<'a> {
    /// Type-check and compile `e`.
    // Long by design: one arm per expression form (`Expr`), each typing its operands and
    // compiling them; the match is exhaustive over the language's expressions.
    #[allow(clippy::too_many_lines)]
    pub(super) fn expr(&mut self, e: &Expr, ctx: Ctx) -> Option<(CExpr, Ty)> {
        let lit = |ty| Ty {
            ty,
            nullable: false,
        };
        match e {
            Expr::Int(i, _) => Some((CExpr::Const(Value::Int(*i)), lit(Type::Int))),
            Expr::Str(s, _) => Some((CExpr::Const(Value::Str(s.clone().into())), lit(Type::Str))),
            Expr::Bool(b, _) => Some((CExpr::Const(Value::Bool(*b)), lit(Type::Bool))),
            Expr::Null(_) => Some((
                CExpr::Const(Value::Null),
                Ty {
                    ty: Type::Null,
                    nullable: true,
                },
            )),
            Expr::Path(p, span) => self.resolve(p, *span, ctx),
            Expr::List(xs, span) => {
                let mut elem: Option<Type> = None;
                let mut out = Vec::new();
                let mut ok = true;
                for x in xs {
                    match self.expr(x, ctx) {
                        Some((c, t)) => {
                            let base = match t.ty {
                                Type::Enum(_) => Type::Str,
                                other => other,
                            };
                            match (elem, base) {
                                (None, b) => elem = Some(b),
                                (Some(a), b) if a == b => {}
                                (Some(a), b) => {
                                    self.err(
                                        x.span(),
                                        format!(
                                            "a list holds values of one type: this is {}, earlier ones are {}",
                                            b.name(),
                                            a.name()
                                        ),
                                        None,
                                    );
                                    ok = false;
                                }
                            }
                            out.push(c);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                let ty = match elem {
                    None => Type::EmptyList,
                    Some(Type::Int) => Type::IntList,
                    Some(Type::Str) => Type::StrList,
                    Some(other) => {
                        self.err(
                            *span,
                            format!("lists hold strings or ints, not {}", other.name()),
                            None,
                        );
                        return None;
                    }
                };
                Some((CExpr::List(out), lit(ty)))
            }
            Expr::Not(x, _) => {
                let (c, t) = self.expr(x, ctx)?;
                self.want_bool(x, t, "`not`")?;
                Some((CExpr::Not(Box::new(c)), lit(Type::Bool)))
            }
            Expr::And(xs, _) | Expr::Or(xs, _) => {
                let word = if matches!(e, Expr::And(..)) {
                    "`and`"
                } else {
                    "`or`"
                };
                let mut out = Vec::new();
                let mut ok = true;
                for x in xs {
                    match self.expr(x, ctx) {
                        Some((c, t)) => {
                            if self.want_bool(x, t, word).is_none() {
                                ok = false;
                            }
                            out.push(c);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                Some((
                    if matches!(e, Expr::And(..)) {
                        CExpr::And(out)
                    } else {
                        CExpr::Or(out)
                    },
                    lit(Type::Bool),
                ))
            }
            Expr::Sum(xs, _) => {
                let mut out = Vec::new();
                let mut ok = true;
                for (neg, x) in xs {
                    match self.expr(x, ctx) {
                        Some((c, t)) if t.ty == Type::Int => out.push((*neg, c)),
                        Some((_, t)) => {
                            let labels = self.defined_at(&[x]);
                            let help = self.quoted_number_help(&[(x, t.ty)], true);
                            self.err_labelled(
                                x.span(),
                                format!("`+` and `-` need ints, but this is {}", t.ty.name()),
                                help,
                                labels,
                            );
                            ok = false;
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                Some((
                    CExpr::Sum(out),
                    Ty {
                        ty: Type::Int,
                        nullable: true,
                    },
                ))
            }
            Expr::Cmp(a, op, b, span) => {
                let ra = self.expr(a, ctx);
                let rb = self.expr(b, ctx);
                let ((ca, ta), (cb, tb)) = (ra?, rb?);
                match op {
                    CmpOp::Eq | CmpOp::Ne => {
                        if !comparable(ta.ty, tb.ty) {
                            let labels = self.defined_at(&[a, b]);
                            let help = self.quoted_number_help(&[(a, ta.ty), (b, tb.ty)], false);
                            self.err_labelled(
                                *span,
                                format!("cannot compare {} with {}", ta.ty.name(), tb.ty.name()),
                                help,
                                labels,
                            );
                            return None;
                        }
                        if tb.ty == Type::Null && !ta.nullable {
                            self.warn(
                                b.span(),
                                format!(
                                    "`{}` is never null, so this comparison is constant",
                                    show(a)
                                ),
                                None,
                            );
                        }
                        self.check_enum_literal(ta.ty, b);
                        self.check_enum_literal(tb.ty, a);
                    }
                    CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => {
                        for (x, t) in [(a, ta), (b, tb)] {
                            if t.ty != Type::Int {
                                let labels = self.defined_at(&[x]);
                                let help = self.quoted_number_help(&[(x, t.ty)], true);
                                self.err_labelled(
                                    x.span(),
                                    format!(
                                        "`{}` needs ints, but `{}` is {}",
                                        op.as_str(),
                                        show(x),
                                        t.ty.name()
                                    ),
                                    help,
                                    labels,
                                );
                                return None;
                            }
                        }
                    }
                    CmpOp::In | CmpOp::NotIn => {
                        let Some(elem) = tb.ty.element() else {
                            let labels = self.defined_at(&[b]);
                            self.err_labelled(
                                b.span(),
                                format!(
                                    "`{}` needs a list on its right, but this is {}",
                                    op.as_str(),
                                    tb.ty.name()
                                ),
                                Some("write a list: `x in [\"a\", \"b\"]`".into()),
                                labels,
                            );
                            return None;
                        };
                        if elem != Type::Null && !comparable(ta.ty, elem) {
                            let labels = self.defined_at(&[a, b]);
                            self.err_labelled(
                                *span,
                                format!("cannot look for {} in a {}", ta.ty.name(), tb.ty.name()),
                                None,
                                labels,
                            );
                            return None;
                        }
                        if let (Type::Enum(values), Expr::List(xs, _)) = (ta.ty, &**b) {
                            for x in xs {
                                self.check_enum_value(values, x, a);
                            }
                        }
                        if let (Type::Enum(values), CExpr::Let(name, Value::List(vs))) =
                            (ta.ty, &cb)
                        {
                            for v in vs {
                                if let Value::Str(s) = v {
                                    if !values.contains(&s.as_ref()) {
                                        let labels = self
                                            .let_string(name, s)
                                            .map(|sp| vec![(sp, format!("`{name}` is defined here"))])
                                            .unwrap_or_default();
                                        self.err_labelled(
                                            b.span(),
                                            format!(
                                                "`{name}` holds \"{s}\", which `{}` never is",
                                                show(a)
                                            ),
                                            Some(format!("values: {}", values.join(", "))),
                                            labels,
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
                Some((CExpr::Cmp(Box::new(ca), *op, Box::new(cb)), lit(Type::Bool)))
            }
        }
    }

    pub(super) fn check_enum_literal(&mut self, ty: Type, other: &Expr) {
        if let (Type::Enum(values), Expr::Str(..)) = (ty, other) {
            self.check_enum_value(values, other, other);
        }
    }

    pub(super) fn check_enum_value(&mut self, values: &'static [&'static str], lit: &Expr, subject: &Expr) {
        if let Expr::Str(s, span) = lit {
            if !values.contains(&s.as_str()) {
                let help = help(s, values, "values", '"');
                let about = if std::ptr::eq(lit, subject) {
                    "this value".to_string()
                } else {
                    format!("`{}`", show(subject))
                };
                self.err(
                    *span,
                    format!("\"{s}\" is not a possible value of {about}"),
                    help,
                );
            }
        }
    }

    pub(super) fn want_bool(&mut self, x: &Expr, t: Ty, what: &str) -> Option<()> {
        if t.ty == Type::Bool {
            Some(())
        } else {
            let labels = self.defined_at(&[x]);
            self.err_labelled(
                x.span(),
                format!("{what} needs a bool, but `{}` is {}", show(x), t.ty.name()),
                match t.ty {
                    Type::Int => Some(format!("compare it: `{} > 0`", show(x))),
                    Type::Str | Type::Enum(_) => {
                        Some(format!("compare it: `{} == \"...\"`", show(x)))
                    }
                    _ => None,
                },
                labels,
            );
            None
        }
    }

    pub(super) fn condition(&mut self, e: &Expr, ctx: Ctx) -> Option<CExpr> {
        let (c, t) = self.expr(e, ctx)?;
        if t.ty != Type::Bool {
            let labels = self.defined_at(&[e]);
            self.err_labelled(
                e.span(),
                format!(
                    "a `when` condition must be a bool, but `{}` is {}",
                    show(e),
                    t.ty.name()
                ),
                None,
                labels,
            );
            return None;
        }
        Some(c)
    }

    /// Check an optional `when`: `Ok(None)` for an unconditional rule, `Err` when it does
    /// not check (the diagnostic is already recorded).
    /// A secondary label at the definition of every operand that is a `let`: a type error
    /// at a use points to where the value was written too.
    pub(super) fn defined_at(&self, operands: &[&Expr]) -> Vec<(Span, String)> {
        let mut out = Vec::new();
        for x in operands {
            if let Expr::Path(p, _) = x {
                if let (Some(def), Some((_, ty, _))) = (self.let_defs.get(p.as_str()), self.lets.get(p)) {
                    out.push((
                        def.value.span(),
                        format!("`{p}` is defined here, as {}", ty.name()),
                    ));
                }
            }
        }
        out
    }

    /// The span of string `s` in the list value of `let name`, if it is written there.
    pub(super) fn let_string(&self, name: &str, s: &str) -> Option<Span> {
        let def = self.let_defs.get(name)?;
        match &def.value {
            Expr::List(xs, _) => xs.iter().find_map(|x| match x {
                Expr::Str(v, sp) if v == s => Some(*sp),
                _ => None,
            }),
            _ => None,
        }
    }

    /// Help for a number written in quotes where an int is needed: the literal itself, or
    /// the `let` that holds it. `(operand, its type)`; only string operands are looked at.
    /// `at_literal`: the diagnostic's span is the operand itself, so "did you mean" (which
    /// editors offer as a replacement of that span) is right.
    pub(super) fn quoted_number_help(
        &self,
        operands: &[(&Expr, Type)],
        at_literal: bool,
    ) -> Option<String> {
        for (x, ty) in operands {
            if !matches!(ty, Type::Str) {
                continue;
            }
            match x {
                Expr::Str(s, _) if s.trim().parse::<i64>().is_ok() => {
                    let n = s.trim();
                    return Some(if at_literal {
                        format!("did you mean `{n}`? a number in quotes is a string")
                    } else {
                        format!("write `{n}` without quotes: a number in quotes is a string")
                    });
                }
                Expr::Path(p, _) => {
                    if let Some(Expr::Str(s, _)) = self.let_defs.get(p.as_str()).map(|d| &d.value) {
                        if let Ok(n) = s.trim().parse::<i64>() {
                            return Some(format!(
                                "`{p}` holds the string \"{s}\": remove the quotes where it is defined: `let {p} = {n}`"
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        None
    }

    pub(super) fn optional_condition(&mut self, when: Option<&Expr>, ctx: Ctx) -> Result<Option<CExpr>, ()> {
        match when {
            None => Ok(None),
            Some(w) => self.condition(w, ctx).map(Some).ok_or(()),
        }
    }
}

pub(super) fn comparable(a: Type, b: Type) -> bool {
    a == b
        || (a.is_stringy() && b.is_stringy())
        || a == Type::Null
        || b == Type::Null
        || (a.element().is_some() && b.element().is_some())
}

/// The source text of an expression is not kept; show a compact rendering instead.
pub(super) fn show(e: &Expr) -> String {
    match e {
        Expr::Int(i, _) => i.to_string(),
        Expr::Str(s, _) => format!("{s:?}"),
        Expr::Bool(b, _) => b.to_string(),
        Expr::Null(_) => "null".into(),
        Expr::Path(p, _) => p.clone(),
        Expr::List(..) => "[...]".into(),
        Expr::Not(x, _) => format!("not {}", show(x)),
        Expr::And(..) => "(... and ...)".into(),
        Expr::Or(..) => "(... or ...)".into(),
        Expr::Cmp(a, op, b, _) => format!("{} {} {}", show(a), op.as_str(), show(b)),
        Expr::Sum(..) => "(... + ...)".into(),
    }
}
