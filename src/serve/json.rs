//! JSON text with every object's members in key order, written straight from a [`Serialize`]
//! value: byte for byte what `serde_json::to_vec(&serde_json::to_value(v)?)` gives (a
//! `serde_json::Value` keeps its objects' members sorted, and the service has always answered
//! with one), without building the `Value` tree with its keys and map nodes.
//!
//! Public entry point: [`to_vec`]. An object's members are written one after the other as
//! they come and put in key order when the object ends (a later duplicate key wins, as in a
//! `Value`). Scalars are written by serde_json itself, so numbers and strings come out exactly
//! as serde_json writes them; an `f32` is written as the `f64` a `Value` would hold.

use serde::ser::{self, Serialize};
use serde_json::{Error, Value};
use std::borrow::Cow;

/// `v` as compact JSON with sorted object members. With `strip_trace`, a decision's `trace`
/// is left out as [`crate::store::report::strip_trace`] leaves it out of the `Value`: the
/// top-level object's when it is a decision (it has `decided_by`), and that of the object
/// under the top-level `decision`.
pub fn to_vec<T: Serialize + ?Sized>(v: &T, strip_trace: bool) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(8192);
    v.serialize(Ser {
        out: &mut out,
        at: if strip_trace { At::Top } else { At::Inner },
    })?;
    Ok(out)
}

/// Where a value stands, for the trace stripping.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// The top-level value (stripping on).
    Top,
    /// The value of the top-level `decision` member (stripping on).
    TopDecision,
    /// Anywhere else, or stripping off.
    Inner,
}

struct Ser<'a> {
    out: &'a mut Vec<u8>,
    at: At,
}

fn custom(msg: &str) -> Error {
    <Error as ser::Error>::custom(msg)
}

impl<'a> Ser<'a> {
    fn scalar<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        serde_json::to_writer(&mut *self.out, v)
    }

    fn object(self) -> Obj<'a> {
        let start = self.out.len();
        Obj {
            out: self.out,
            at: self.at,
            start,
            members: Vec::new(),
            key: None,
        }
    }

    fn array(self) -> Arr<'a> {
        self.out.push(b'[');
        Arr {
            out: self.out,
            first: true,
        }
    }

    /// `{"variant":`, which the variant's content and a `}` follow.
    fn open_variant(self, variant: &'static str) -> Result<Ser<'a>, Error> {
        self.out.push(b'{');
        serde_json::to_writer(&mut *self.out, variant)?;
        self.out.push(b':');
        Ok(Ser {
            out: self.out,
            at: At::Inner,
        })
    }
}

/// An object being written: its members' bytes follow `start` in `out`, in arrival order.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    at: At,
    start: usize,
    /// Each member's key and the range of its value's bytes in `out`.
    members: Vec<(Cow<'static, str>, usize, usize)>,
    /// The key of the map entry whose value comes next.
    key: Option<String>,
}

impl<'a> Obj<'a> {
    fn member<T: Serialize + ?Sized>(
        &mut self,
        key: Cow<'static, str>,
        value: &T,
    ) -> Result<(), Error> {
        let at = if self.at == At::Top && key == "decision" {
            At::TopDecision
        } else {
            At::Inner
        };
        let from = self.out.len();
        value.serialize(Ser {
            out: &mut *self.out,
            at,
        })?;
        self.members.push((key, from, self.out.len()));
        Ok(())
    }

    /// Write the members in key order; gives the output back.
    fn finish(self) -> Result<&'a mut Vec<u8>, Error> {
        let Obj {
            out,
            at,
            start,
            mut members,
            ..
        } = self;
        // Stable: equal keys keep their arrival order, and the last of them is kept below.
        members.sort_by(|a, b| a.0.cmp(&b.0));
        let strip = match at {
            At::Top => members.iter().any(|m| m.0 == "decided_by"),
            At::TopDecision => true,
            At::Inner => false,
        };
        let values = out.split_off(start);
        out.push(b'{');
        let mut first = true;
        let mut rest = members.iter().peekable();
        while let Some((key, from, to)) = rest.next() {
            if rest.peek().is_some_and(|next| next.0 == *key) || (strip && key == "trace") {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut *out, key.as_ref())?;
            out.push(b':');
            let bytes = values
                .get(from.saturating_sub(start)..to.saturating_sub(start))
                .ok_or_else(|| custom("a member outside its object"))?;
            out.extend_from_slice(bytes);
        }
        out.push(b'}');
        Ok(out)
    }
}

/// An array being written.
struct Arr<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Arr<'a> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        v.serialize(Ser {
            out: &mut *self.out,
            at: At::Inner,
        })
    }

    fn finish(self) -> &'a mut Vec<u8> {
        self.out.push(b']');
        self.out
    }
}

/// A tuple or struct variant's content, closed with the variant's `}` after its own.
struct Variant<T>(T);

impl<'a> ser::Serializer for Ser<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Arr<'a>;
    type SerializeTuple = Arr<'a>;
    type SerializeTupleStruct = Arr<'a>;
    type SerializeTupleVariant = Variant<Arr<'a>>;
    type SerializeMap = Obj<'a>;
    type SerializeStruct = Obj<'a>;
    type SerializeStructVariant = Variant<Obj<'a>>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        // A `Value` holds numbers that fit 64 bits.
        if let Ok(n) = i64::try_from(v) {
            self.scalar(&n)
        } else if let Ok(n) = u64::try_from(v) {
            self.scalar(&n)
        } else {
            Err(custom("number out of range"))
        }
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        match u64::try_from(v) {
            Ok(n) => self.scalar(&n),
            Err(_) => Err(custom("number out of range")),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // A `Value` holds an f32 as the f64 it converts to.
        self.scalar(&f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.scalar(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        let Ser { out, at } = self.open_variant(variant)?;
        v.serialize(Ser {
            out: &mut *out,
            at,
        })?;
        out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Arr<'a>, Error> {
        Ok(self.array())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Arr<'a>, Error> {
        Ok(self.array())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Arr<'a>, Error> {
        Ok(self.array())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Variant<Arr<'a>>, Error> {
        Ok(Variant(self.open_variant(variant)?.array()))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Obj<'a>, Error> {
        Ok(self.object())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Obj<'a>, Error> {
        Ok(self.object())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Variant<Obj<'a>>, Error> {
        Ok(Variant(self.open_variant(variant)?.object()))
    }
}

impl ser::SerializeSeq for Arr<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.element(v)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTuple for Arr<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.element(v)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Arr<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.element(v)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Variant<Arr<'_>> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.0.element(v)
    }
    fn end(self) -> Result<(), Error> {
        self.0.finish().push(b'}');
        Ok(())
    }
}

impl ser::SerializeMap for Obj<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(map_key(key)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| custom("a map value without its key"))?;
        self.member(Cow::Owned(key), v)
    }
    fn end(self) -> Result<(), Error> {
        self.finish().map(drop)
    }
}

impl ser::SerializeStruct for Obj<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.member(Cow::Borrowed(key), v)
    }
    fn end(self) -> Result<(), Error> {
        self.finish().map(drop)
    }
}

impl ser::SerializeStructVariant for Variant<Obj<'_>> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.0.member(Cow::Borrowed(key), v)
    }
    fn end(self) -> Result<(), Error> {
        self.0.finish()?.push(b'}');
        Ok(())
    }
}

/// A map key as the string a `Value`'s map holds it under: a string as it is, a number or a
/// boolean as its JSON text, a unit variant as its name; any other key is an error.
fn map_key<T: Serialize + ?Sized>(key: &T) -> Result<String, Error> {
    match serde_json::to_value(key)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(custom("key must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use std::collections::{BTreeMap, HashMap};

    fn via_value<T: Serialize>(v: &T, strip: bool) -> Vec<u8> {
        let mut value = serde_json::to_value(v).unwrap();
        if strip {
            crate::store::report::strip_trace(&mut value);
        }
        serde_json::to_vec(&value).unwrap()
    }

    #[derive(Serialize)]
    enum E {
        Unit,
        New(u8),
        Tuple(i32, String),
        Struct { z: bool, a: Option<f32> },
    }

    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        One { zeta: u32, alpha: &'static str },
    }

    #[derive(Serialize)]
    struct Inner {
        zz: Vec<E>,
        trace: Vec<u8>,
        decided_by: &'static str,
    }

    #[derive(Serialize)]
    struct Outer {
        zebra: f64,
        #[serde(flatten)]
        flat: BTreeMap<String, i64>,
        decision: Inner,
        trace: &'static str,
        apple: HashMap<u32, char>,
        tagged: Tagged,
        bytes: &'static [u8],
        nan: f64,
        unit: (),
        tuple: (u8, &'static str),
        big: u128,
        text: &'static str,
    }

    fn sample() -> Outer {
        Outer {
            zebra: 1.5e300,
            flat: [("mid".to_string(), -3), ("b".to_string(), 7)].into(),
            decision: Inner {
                zz: vec![
                    E::Unit,
                    E::New(9),
                    E::Tuple(-1, "x".into()),
                    E::Struct {
                        z: true,
                        a: Some(0.1),
                    },
                ],
                trace: vec![1, 2],
                decided_by: "rule",
            },
            trace: "top",
            apple: [(10, 'é'), (2, '"')].into(),
            tagged: Tagged::One {
                zeta: 1,
                alpha: "a",
            },
            bytes: b"ab",
            nan: f64::NAN,
            unit: (),
            tuple: (1, "t"),
            big: u128::from(u64::MAX),
            text: "line\nbreak \u{1} \\ \"quoted\" ✓",
        }
    }

    #[test]
    fn writes_what_the_value_writes() {
        for strip in [false, true] {
            let v = sample();
            assert_eq!(
                String::from_utf8(to_vec(&v, strip).unwrap()).unwrap(),
                String::from_utf8(via_value(&v, strip)).unwrap(),
                "strip_trace {strip}"
            );
        }
    }

    /// The service's results: every example state's `explain` and `render` report, with and
    /// without its trace, for every provider, come out as the `Value` path wrote them.
    #[test]
    fn writes_the_reports_as_the_value_does() {
        let engine = crate::Engine::new("default").unwrap();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
        let mut checked = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let Ok(state) = crate::state::parse_str(&text, crate::state::Format::Yaml, "x")
            else {
                continue;
            };
            for target in [None, Some("codex"), Some("claude"), Some("cursor")] {
                let Ok(d) = engine.decide(&state, target) else {
                    continue;
                };
                let explained = crate::store::report::ExplainReport {
                    policy: d.policy.clone(),
                    explanation: crate::explain::render(&d, true),
                    decision: d,
                };
                let rendered = crate::store::report::RenderReport::new(
                    engine.run(&state, target).unwrap(),
                );
                for strip in [false, true] {
                    assert_eq!(
                        to_vec(&explained, strip).unwrap(),
                        via_value(&explained, strip),
                        "{}",
                        path.display()
                    );
                    assert_eq!(
                        to_vec(&rendered, strip).unwrap(),
                        via_value(&rendered, strip),
                        "{}",
                        path.display()
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 20, "only {checked} decisions checked");
    }

    #[test]
    fn strips_the_top_level_trace_of_a_decision() {
        let d = Inner {
            zz: vec![],
            trace: vec![3],
            decided_by: "r",
        };
        for strip in [false, true] {
            assert_eq!(to_vec(&d, strip).unwrap(), via_value(&d, strip));
        }
    }
}
