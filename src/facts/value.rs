//! Values and their types.

use serde::Serialize;
use std::borrow::Cow;
use std::fmt;

/// The static type of a fact or expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Bool,
    Int,
    Str,
    /// A string drawn from a fixed set of values.
    Enum(&'static [&'static str]),
    StrList,
    IntList,
    /// The literal `null`.
    Null,
    /// An empty list literal, compatible with any list.
    EmptyList,
}

impl Type {
    pub fn name(self) -> String {
        match self {
            Type::Bool => "bool".into(),
            Type::Int => "int".into(),
            Type::Str => "string".into(),
            Type::Enum(vs) => format!("enum({})", vs.join("|")),
            Type::StrList => "list of string".into(),
            Type::IntList => "list of int".into(),
            Type::Null => "null".into(),
            Type::EmptyList => "list".into(),
        }
    }

    /// A short name for tables (`enum` rather than every value); src/facts/doc_tests.rs checks
    /// docs/facts.md's table with it.
    #[cfg(any(test, feature = "unstable"))]
    pub fn short_name(self) -> &'static str {
        match self {
            Type::Bool => "bool",
            Type::Int => "int",
            Type::Str => "string",
            Type::Enum(_) => "enum",
            Type::StrList => "list<string>",
            Type::IntList => "list<int>",
            Type::Null => "null",
            Type::EmptyList => "list",
        }
    }

    pub fn is_stringy(self) -> bool {
        matches!(self, Type::Str | Type::Enum(_))
    }

    pub fn element(self) -> Option<Type> {
        match self {
            Type::StrList => Some(Type::Str),
            Type::IntList => Some(Type::Int),
            Type::EmptyList => Some(Type::Null),
            _ => None,
        }
    }
}

/// A runtime value. Serializes as plain JSON (`null`, `true`, `3`, `"x"`, `[..]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// No value.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// Borrowed for the fixed vocabulary (statuses, kinds), owned for text from the state.
    Str(Cow<'static, str>),
    /// A list of values.
    List(Vec<Value>),
}

impl Value {
    /// Truthiness in a condition: only `true` is true (`null` is false).
    pub fn truthy(&self) -> bool {
        matches!(self, Value::Bool(true))
    }

    /// `a + b - c`: terms with their signs (`true` = minus), saturating; null when any term
    /// is not an int.
    pub fn sum(terms: impl IntoIterator<Item = (bool, Value)>) -> Value {
        let mut acc: i64 = 0;
        for (minus, v) in terms {
            let Value::Int(i) = v else {
                return Value::Null;
            };
            acc = if minus {
                acc.saturating_sub(i)
            } else {
                acc.saturating_add(i)
            };
        }
        Value::Int(acc)
    }

    /// A string, or `Null` for `None`.
    pub fn opt_str(s: Option<&str>) -> Value {
        match s {
            Some(s) => Value::Str(Cow::Owned(s.to_string())),
            None => Value::Null,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::List(xs) => {
                write!(f, "[")?;
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    if i >= 20 {
                        write!(f, "... {} more", xs.len().saturating_sub(20))?;
                        break;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
        }
    }
}
