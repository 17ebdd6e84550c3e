//! GC of off-band handoff directories.
#![cfg(unix)]

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use baton::deliver::{gc, HandoffLiveness, OffbandStore, Retention};
use tempfile::TempDir;

const DAY: Duration = Duration::from_secs(86_400);

struct World {
    tmp: TempDir,
    root: PathBuf,
    store: OffbandStore,
    now: SystemTime,
    liveness: HashMap<(String, String), HandoffLiveness>,
}

impl World {
    fn new() -> Self {
        let tmp = TempDir::new().expect("tempdir");
        let root = tmp.path().join("root");
        let store = OffbandStore::new(Some(root.clone()));
        World {
            tmp,
            root,
            store,
            now: SystemTime::now(),
            liveness: HashMap::new(),
        }
    }

    /// Write a handoff whose document is `age_days` old.
    fn handoff(&mut self, thread: &str, handoff: &str, age_days: u64, l: HandoffLiveness) {
        let doc = self
            .store
            .write(
                thread,
                handoff,
                &[("handoff.md", b"doc"), ("inline.md", b"i")],
            )
            .expect("write");
        let f = File::options().write(true).open(&doc).expect("open");
        f.set_modified(self.now - DAY * age_days as u32)
            .expect("set mtime");
        self.liveness
            .insert((thread.to_string(), handoff.to_string()), l);
    }

    fn dir(&self, thread: &str, handoff: &str) -> PathBuf {
        self.root.join(thread).join(handoff)
    }

    fn run(&self, retention: Retention, dry_run: bool) -> baton::deliver::GcReport {
        let live = |t: &str, h: &str| {
            self.liveness
                .get(&(t.to_string(), h.to_string()))
                .copied()
                .unwrap_or(HandoffLiveness::Unknown)
        };
        gc(&self.store, &retention, &live, self.now, dry_run).expect("gc")
    }
}

fn populated() -> World {
    use HandoffLiveness::*;
    let mut w = World::new();
    w.handoff("a", "h-old", 30, Live);
    w.handoff("a", "h-mid", 2, Live);
    w.handoff("a", "h-new", 0, Live);
    w.handoff("b", "h-superseded", 1, Superseded);
    w.handoff("b", "h-live", 0, Live);
    w.handoff("c", "h-orphan", 0, Unknown);
    // A foreign directory without the marker, inside a thread dir and at the root.
    fs::create_dir(w.root.join("a/foreign")).expect("foreign");
    fs::write(w.root.join("a/foreign/handoff.md"), b"not ours").expect("foreign doc");
    fs::create_dir(w.root.join("notes")).expect("notes");
    fs::write(w.root.join("README"), b"not ours").expect("readme");
    w
}

fn names(paths: &[PathBuf], root: &Path) -> Vec<String> {
    let mut v: Vec<String> = paths
        .iter()
        .map(|p| {
            p.strip_prefix(root)
                .expect("under root")
                .display()
                .to_string()
        })
        .collect();
    v.sort();
    v
}

fn week() -> Retention {
    Retention {
        max_age: Some(DAY * 7),
        max_per_thread: None,
    }
}

#[test]
fn dry_run_reports_without_deleting() {
    let w = populated();
    let report = w.run(week(), true);
    assert!(report.dry_run);
    assert_eq!(
        names(&report.removed, &w.root),
        vec!["a/h-old", "b/h-superseded", "c/h-orphan"]
    );
    assert_eq!(report.kept, 3);
    for p in &report.removed {
        assert!(p.exists(), "dry run deleted {}", p.display());
    }
}

#[test]
fn real_run_removes_expired_superseded_and_unknown() {
    let w = populated();
    let report = w.run(week(), false);
    assert!(!report.dry_run);
    let reasons: HashMap<String, String> = report
        .reasons
        .iter()
        .map(|(p, r)| {
            (
                p.strip_prefix(&w.root)
                    .expect("under")
                    .display()
                    .to_string(),
                r.clone(),
            )
        })
        .collect();
    assert_eq!(reasons["a/h-old"], "older than 604800s (age 2592000s)");
    assert_eq!(reasons["b/h-superseded"], "superseded by a newer handoff");
    assert_eq!(reasons["c/h-orphan"], "thread or handoff no longer exists");
    assert_eq!(reasons.len(), 3);
    assert!(!w.dir("a", "h-old").exists());
    assert!(!w.dir("b", "h-superseded").exists());
    assert!(!w.dir("c", "h-orphan").exists());
    assert!(!w.root.join("c").exists(), "emptied thread dir removed");
    for (t, h) in [("a", "h-mid"), ("a", "h-new"), ("b", "h-live")] {
        assert!(w.dir(t, h).join("handoff.md").exists(), "{t}/{h} kept");
    }
    assert_eq!(report.kept, 3);
    // Foreign entries are left alone and reported as skipped.
    assert_eq!(
        fs::read(w.root.join("a/foreign/handoff.md")).expect("foreign"),
        b"not ours"
    );
    assert!(w.root.join("notes").is_dir());
    assert!(w.root.join("README").is_file());
    let skipped = names(
        &report
            .skipped
            .iter()
            .map(|(p, _)| p.clone())
            .collect::<Vec<_>>(),
        &w.root,
    );
    // `notes` looks like an (empty) thread directory: nothing in it is a candidate.
    assert_eq!(skipped, vec!["README", "a/foreign"]);
    // A second pass finds nothing more to do.
    let again = w.run(week(), false);
    assert!(again.removed.is_empty());
    assert_eq!(again.kept, 3);
}

#[test]
fn per_thread_count_keeps_the_newest() {
    let w = populated();
    let report = w.run(
        Retention {
            max_age: None,
            max_per_thread: Some(1),
        },
        false,
    );
    assert_eq!(
        names(&report.removed, &w.root),
        vec!["a/h-mid", "a/h-old", "b/h-superseded", "c/h-orphan"]
    );
    let reasons: HashMap<PathBuf, String> = report.reasons.into_iter().collect();
    assert_eq!(
        reasons[&w.dir("a", "h-mid")],
        "beyond the newest 1 handoff(s) of thread a"
    );
    // b keeps its live handoff: the superseded one does not count towards the limit.
    assert!(w.dir("b", "h-live").exists());
    assert!(w.dir("a", "h-new").exists());
    assert_eq!(report.kept, 2);
}

#[test]
fn no_limits_only_removes_superseded_and_unknown() {
    let w = populated();
    let report = w.run(Retention::default(), false);
    assert_eq!(
        names(&report.removed, &w.root),
        vec!["b/h-superseded", "c/h-orphan"]
    );
    assert!(w.dir("a", "h-old").exists());
}

#[test]
fn symlinks_are_never_followed() {
    let mut w = World::new();
    w.handoff("a", "h1", 0, HandoffLiveness::Live);
    // A marked directory outside the root, reachable only through symlinks.
    let outside = w.tmp.path().join("outside");
    let outside_handoff = outside.join("h-victim");
    fs::create_dir_all(&outside_handoff).expect("mkdir");
    fs::write(outside_handoff.join(".baton-handoff"), b"fake").expect("marker");
    fs::write(outside_handoff.join("handoff.md"), b"victim").expect("doc");
    symlink(&outside, w.root.join("linked-thread")).expect("thread link");
    symlink(&outside_handoff, w.root.join("a/linked-handoff")).expect("handoff link");
    let report = w.run(
        Retention {
            max_age: Some(Duration::ZERO),
            max_per_thread: Some(0),
        },
        false,
    );
    assert_eq!(names(&report.removed, &w.root), vec!["a/h1"]);
    assert_eq!(
        fs::read(outside_handoff.join("handoff.md")).expect("victim"),
        b"victim"
    );
    assert!(fs::symlink_metadata(w.root.join("a/linked-handoff")).is_ok());
    assert!(fs::symlink_metadata(w.root.join("linked-thread")).is_ok());
}

#[test]
fn missing_root_is_an_empty_report() {
    let w = World::new();
    let report = w.run(week(), false);
    assert!(report.removed.is_empty());
    assert_eq!(report.kept, 0);
}

#[test]
fn unsafe_root_is_an_error() {
    let w = World::new();
    let elsewhere = w.tmp.path().join("elsewhere");
    fs::create_dir(&elsewhere).expect("mkdir");
    symlink(&elsewhere, &w.root).expect("symlink");
    let live = |_: &str, _: &str| HandoffLiveness::Unknown;
    let err = gc(&w.store, &week(), &live, w.now, false).expect_err("unsafe");
    assert!(err.to_string().contains("it is a symlink"), "{err}");
}

#[test]
fn report_serialises() {
    let w = populated();
    let report = w.run(week(), true);
    let v = serde_json::to_value(&report).expect("json");
    assert_eq!(v["kept"], 3);
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["removed"].as_array().expect("array").len(), 3);
}
