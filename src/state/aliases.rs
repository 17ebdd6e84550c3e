//! The alias expansion limit of YAML state documents. An alias (`*name`) repeats the node its
//! anchor (`&name`) marks, so a small file can stand for gigabytes: a 1 MB string referenced
//! 2,000 times is 2 GB once deserialized. Before the state is built, a first pass walks the
//! document as serde sees it (aliases expanded) without keeping anything, and counts what
//! building it would hold: the bytes of every scalar plus [`NODE_COST`] per node. A document
//! whose count passes [`limit`] is refused, at the node that crossed it, before any memory is
//! spent on it.
//!
//! Without aliases the count stays within `NODE_COST` times the text's size (every node takes
//! at least one byte of text, and a scalar's bytes are no more than its text), so the limit
//! only ever refuses what aliases multiplied.

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};
use std::cell::Cell;
use std::fmt;

/// What one node (scalar, sequence, mapping) counts for, beyond its scalar bytes.
pub const NODE_COST: usize = 8;

/// What aliases may add beyond [`NODE_COST`] times the text's size: 16 MiB.
pub const ALIAS_SLACK: usize = 16 * 1024 * 1024;

/// The expansion limit of a document of `len` bytes.
pub fn limit(len: usize) -> usize {
    len.saturating_mul(NODE_COST).saturating_add(ALIAS_SLACK)
}

/// The message of a document past the limit.
pub fn message(len: usize) -> String {
    format!(
        "YAML aliases expand this document past the alias expansion limit of {} bytes ({NODE_COST} times its {len} bytes plus 16 MiB); write the repeated values out instead of aliasing them",
        limit(len)
    )
}

/// Marks our own error among serde_yaml's.
const MARK: &str = "baton: alias expansion limit";

/// serde_yaml's error when aliases jump more than 100 times per event of the document.
const REPETITION: &str = "repetition limit exceeded";

/// `Err((line, column))` when the aliases of `text` expand past [`limit`]. Text that is not
/// YAML passes: the real parse reports that.
pub fn check(text: &str) -> Result<(), Option<(usize, usize)>> {
    // Every alias starts with `*`: text without one has nothing to expand.
    if !text.contains('*') {
        return Ok(());
    }
    let left = Cell::new(limit(text.len()));
    for doc in serde_yaml::Deserializer::from_str(text) {
        match (Measure { left: &left }).deserialize(doc) {
            Ok(()) => {}
            // serde_yaml's own bound on alias jumps (nested aliases) is the same limit.
            Err(e) if e.to_string().contains(MARK) || e.to_string().contains(REPETITION) => {
                return Err(e.location().map(|l| (l.line(), l.column())));
            }
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// A seed that walks any node, charging it to `left`, and keeps nothing.
#[derive(Clone, Copy)]
struct Measure<'a> {
    left: &'a Cell<usize>,
}

impl Measure<'_> {
    fn charge<E: de::Error>(self, n: usize) -> Result<(), E> {
        let left = self.left.get();
        match left.checked_sub(n.saturating_add(NODE_COST)) {
            Some(rest) => {
                self.left.set(rest);
                Ok(())
            }
            None => Err(E::custom(MARK)),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Measure<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Measure<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.charge(0)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.charge(0)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.charge(0)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.charge(0)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.charge(0)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.charge(0)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.charge(v.len())
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<(), E> {
        self.charge(v.len())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.charge(0)
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.charge(0)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.charge(0)?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.charge(0)?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged node (`!tag value`): the tag, then the value.
        use de::VariantAccess;
        let ((), variant) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_without_aliases_passes_however_dense() {
        let dense = format!("runs: [{}]\n", vec!["{a: 1}"; 100_000].join(", "));
        assert_eq!(check(&dense), Ok(()));
        let text = format!("a: &x [{}]\nb: *x\n", vec!["1"; 1000].join(", "));
        assert_eq!(check(&text), Ok(()));
    }

    #[test]
    fn an_alias_bomb_is_found() {
        let big = "a".repeat(64 * 1024);
        let mut text = format!("x: &big \"{big}\"\nl:\n");
        for _ in 0..2000 {
            text.push_str("  - *big\n");
        }
        assert!(check(&text).is_err());
        // Nested (billion laughs): each level lists the previous one ten times.
        let mut laughs = String::from("l0: &l0 [\"lol\"]\n");
        for i in 1..30 {
            laughs.push_str(&format!(
                "l{i}: &l{i} [{}]\n",
                vec![format!("*l{}", i - 1); 10].join(", ")
            ));
        }
        assert!(check(&laughs).is_err());
    }
}
