//! Where a validation problem is in the text: the line and column of the node a state path
//! (`runs[3].provider_thread`) names.
//!
//! serde gives positions for the errors it raises while deserializing, but the validator
//! (`validate.rs`) works on the built [`State`](super::State), which has none. So, on the
//! error path only, the text is read again with a marker-carrying YAML event parser
//! (`saphyr-parser`; JSON is YAML, so it reads both formats) and every wanted path is looked
//! up in one pass. The wanted paths are kept in a trie, so the pass costs one step per event
//! however many problems there are. A path that names a node the text does not hold (an
//! item's default id, say) gets the position of its deepest ancestor that it does hold. A
//! path reached through an alias gets the position of the alias. Text the event parser cannot
//! read gives no positions; the problems are reported without them, as before.

use saphyr_parser::{Event, Parser};
use std::collections::HashMap;

/// One step of a state path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Seg {
    Key(String),
    Index(usize),
}

/// `runs[3].items[0].id` -> [runs, 3, items, 0, id]. None for a path it cannot read.
fn parse_path(path: &str) -> Option<Vec<Seg>> {
    let mut segs = Vec::new();
    for part in path.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (part.get(..i)?, part.get(i..)?),
            None => (part, ""),
        };
        if !name.is_empty() {
            segs.push(Seg::Key(name.to_string()));
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            segs.push(Seg::Index(r.get(..end)?.parse().ok()?));
            rest = r.get(end.saturating_add(1)..)?;
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(segs)
}

#[derive(Default)]
struct TrieNode {
    children: HashMap<Seg, usize>,
    /// 1-based line and column of the node, once seen.
    pos: Option<(usize, usize)>,
}

struct Trie(Vec<TrieNode>);

impl Trie {
    fn insert(&mut self, segs: &[Seg]) {
        let mut at = 0usize;
        for s in segs {
            let next = self.0.len();
            let Some(node) = self.0.get_mut(at) else {
                return;
            };
            at = *node.children.entry(s.clone()).or_insert(next);
            if at == next {
                self.0.push(TrieNode::default());
            }
        }
    }

    fn child(&self, at: usize, seg: &Seg) -> Option<usize> {
        self.0.get(at)?.children.get(seg).copied()
    }

    /// The position of the deepest node along `segs` that was seen.
    fn deepest(&self, segs: &[Seg]) -> Option<(usize, usize)> {
        let mut at = 0usize;
        // The root is no answer: a path none of whose nodes is in the text has no position.
        let mut best = None;
        for s in segs {
            match self.child(at, s) {
                Some(c) => at = c,
                None => break,
            }
            if let Some(p) = self.0.get(at).and_then(|n| n.pos) {
                best = Some(p);
            }
        }
        best
    }
}

/// A collection being read: where its next node goes.
enum Frame {
    /// A mapping: the trie node of the mapping (None when no wanted path goes through it),
    /// and the key whose value comes next (None while a key is expected).
    Map {
        trie: Option<usize>,
        key: Option<Option<String>>,
    },
    /// A sequence: its trie node and the index of the next element.
    Seq { trie: Option<usize>, next: usize },
}

/// The positions of `paths` in `text` (YAML or JSON), in order; None where unknown.
pub(super) fn locate(text: &str, paths: &[&str]) -> Vec<Option<(usize, usize)>> {
    // The empty path is the whole document: no one node to point at.
    let parsed: Vec<Option<Vec<Seg>>> = paths
        .iter()
        .map(|p| parse_path(p).filter(|s| !s.is_empty()))
        .collect();
    let mut trie = Trie(vec![TrieNode::default()]);
    for segs in parsed.iter().flatten() {
        trie.insert(segs);
    }
    if scan(text, &mut trie).is_none() {
        return vec![None; paths.len()];
    }
    parsed
        .iter()
        .map(|s| s.as_ref().and_then(|s| trie.deepest(s)))
        .collect()
}

/// One pass over the first document's events, recording the position of every node the trie
/// names. None when the text is not YAML the event parser reads.
fn scan(text: &str, trie: &mut Trie) -> Option<()> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut root_seen = false;
    for ev in Parser::new_from_str(text) {
        let (event, span) = ev.ok()?;
        let pos = (span.start.line(), span.start.col().saturating_add(1));
        // Where the node this event starts sits in the trie: Some(Some(n)) a wanted node,
        // Some(None) a node no wanted path reaches, None for an event that starts no node
        // (ends, stream and document markers) or a mapping key.
        let starts_node = matches!(
            event,
            Event::Scalar(..)
                | Event::Alias(_)
                | Event::MappingStart(..)
                | Event::SequenceStart(..)
        );
        let mut slot: Option<Option<usize>> = None;
        if starts_node {
            match stack.last_mut() {
                None => {
                    if root_seen {
                        // A second document: serde reads the first only.
                        return Some(());
                    }
                    root_seen = true;
                    slot = Some(Some(0));
                }
                Some(Frame::Map { trie: t, key }) => match key.take() {
                    None => {
                        // This node is a key: a scalar names the value that follows.
                        let name = match &event {
                            Event::Scalar(s, ..) => Some(s.to_string()),
                            _ => None,
                        };
                        *key = Some(name);
                        if !matches!(event, Event::Scalar(..) | Event::Alias(_)) {
                            // A collection as a key: read through it, wanting nothing.
                            *key = Some(None);
                            slot = Some(None);
                        }
                    }
                    Some(name) => {
                        let seg = name.map(Seg::Key);
                        slot = Some(t.and_then(|t| seg.and_then(|s| trie.child(t, &s))));
                    }
                },
                Some(Frame::Seq { trie: t, next }) => {
                    let seg = Seg::Index(*next);
                    *next = next.saturating_add(1);
                    slot = Some(t.and_then(|t| trie.child(t, &seg)));
                }
            }
        }
        if let Some(Some(n)) = slot {
            if let Some(node) = trie.0.get_mut(n) {
                node.pos.get_or_insert(pos);
            }
        }
        match event {
            Event::MappingStart(..) => stack.push(Frame::Map {
                trie: slot.flatten(),
                key: None,
            }),
            Event::SequenceStart(..) => stack.push(Frame::Seq {
                trie: slot.flatten(),
                next: 0,
            }),
            // A collection used as a key leaves its mapping expecting the (unnamed) value.
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            Event::DocumentEnd | Event::StreamEnd if root_seen => return Some(()),
            _ => {}
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse() {
        assert_eq!(
            parse_path("runs[3].items[0].id"),
            Some(vec![
                Seg::Key("runs".into()),
                Seg::Index(3),
                Seg::Key("items".into()),
                Seg::Index(0),
                Seg::Key("id".into())
            ])
        );
        assert_eq!(parse_path("runs[x]"), None);
    }

    #[test]
    fn finds_values_and_falls_back_to_ancestors() {
        let text = "version: 1\nruns:\n  - ordinal: 1\n    items:\n      - {kind: user_message, text: hi}\n  - ordinal: 3\n";
        let got = locate(
            text,
            &[
                "runs[1].ordinal",
                "runs[0].items[0].id",
                "version",
                "nope.x",
            ],
        );
        assert_eq!(got, vec![Some((6, 14)), Some((5, 9)), Some((1, 10)), None]);
    }

    #[test]
    fn reads_json() {
        let text = "{\"version\":1,\"runs\":[{\"ordinal\":1},{\"ordinal\":3}]}";
        assert_eq!(locate(text, &["runs[1].ordinal"]), vec![Some((1, 47))]);
    }
}
