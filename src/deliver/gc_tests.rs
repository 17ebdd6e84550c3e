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

// ---- leftovers of interrupted writes (issue 15 item 11) ----

/// A pid that no process has: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let pid = child.id();
    child.wait().expect("wait");
    pid
}

fn temp_name(name: &str, pid: u32) -> String {
    format!(".{name}.tmp.{pid}.0.123456789")
}

impl World {
    fn run_at(&self, now: SystemTime, dry_run: bool) -> baton::deliver::GcReport {
        let live = |_: &str, _: &str| HandoffLiveness::Live;
        gc(&self.store, &Retention::default(), &live, now, dry_run).expect("gc")
    }
}

fn reason_of(report: &baton::deliver::GcReport, p: &Path) -> Option<String> {
    report
        .reasons
        .iter()
        .find(|(q, _)| q == p)
        .map(|(_, r)| r.clone())
}

#[test]
fn a_temp_file_of_a_dead_writer_in_a_live_directory_is_removed() {
    let mut w = World::new();
    w.handoff("a", "h1", 0, HandoffLiveness::Live);
    let pid = dead_pid();
    let temp = w.dir("a", "h1").join(temp_name("handoff.md", pid));
    fs::write(&temp, b"half a docu").expect("temp");
    let dry = w.run_at(w.now, true);
    assert!(temp.exists(), "a dry run deletes nothing");
    assert_eq!(dry.removed, vec![temp.clone()]);
    let report = w.run_at(w.now, false);
    assert_eq!(
        reason_of(&report, &temp).as_deref(),
        Some(format!("temp file of an interrupted write (process {pid} is gone)").as_str())
    );
    assert!(!temp.exists());
    assert!(
        w.dir("a", "h1").join("handoff.md").exists(),
        "the handoff is kept"
    );
    assert_eq!(report.kept, 1);
}

#[test]
fn a_temp_file_of_a_running_writer_is_kept_until_the_grace_period_passes() {
    let mut w = World::new();
    w.handoff("a", "h1", 0, HandoffLiveness::Live);
    let temp = w
        .dir("a", "h1")
        .join(temp_name("inline.md", std::process::id()));
    fs::write(&temp, b"being written").expect("temp");
    let report = w.run_at(w.now, false);
    assert!(report.removed.is_empty(), "{report:?}");
    assert!(temp.exists());
    let later = w.now + baton::deliver::STALE_GRACE + Duration::from_secs(1);
    let report = w.run_at(later, false);
    assert_eq!(
        reason_of(&report, &temp).as_deref(),
        Some("temp file of an interrupted write (older than 600s)")
    );
    assert!(!temp.exists());
}

#[test]
fn a_directory_killed_before_its_marker_is_collected() {
    let w = World::new();
    let pid = dead_pid();
    let dir = w.root.join("a/h1");
    fs::create_dir_all(&dir).expect("mkdir");
    let temp = dir.join(temp_name(".baton-handoff", pid));
    fs::write(&temp, b"thread: a\n").expect("temp marker");
    let report = w.run_at(w.now, false);
    assert_eq!(
        reason_of(&report, &dir).as_deref(),
        Some("left by a write interrupted before its marker (only stale temp files)")
    );
    assert!(!dir.exists());
    assert!(
        !w.root.join("a").exists(),
        "the emptied thread directory goes too"
    );
    assert!(w.root.exists());
}

#[test]
fn an_empty_unmarked_directory_is_collected_only_after_the_grace_period() {
    let w = World::new();
    let dir = w.root.join("a/h1");
    fs::create_dir_all(&dir).expect("mkdir");
    let report = w.run_at(w.now, false);
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(
        report.skipped,
        vec![(
            dir.clone(),
            "no .baton-handoff marker; empty, and newer than 600s (a write may be starting)"
                .to_string()
        )]
    );
    let later = w.now + baton::deliver::STALE_GRACE + Duration::from_secs(1);
    let report = w.run_at(later, false);
    assert_eq!(
        reason_of(&report, &dir).as_deref(),
        Some("empty directory left by an interrupted write (older than 600s)")
    );
    assert!(!dir.exists());
    assert!(!w.root.join("a").exists());
}

#[test]
fn an_empty_thread_directory_is_collected_after_the_grace_period() {
    let w = World::new();
    let dir = w.root.join("a");
    fs::create_dir_all(&dir).expect("mkdir");
    assert!(w.run_at(w.now, false).removed.is_empty());
    let later = w.now + baton::deliver::STALE_GRACE + Duration::from_secs(1);
    let report = w.run_at(later, false);
    assert_eq!(report.removed, vec![dir.clone()]);
    assert!(!dir.exists());
}

/// Never a foreign file: a marker-less directory holding anything but baton's stale temp
/// files is left alone, however old.
#[rstest::rstest]
#[case::foreign_file("notes.txt", "no .baton-handoff marker; not created by baton")]
#[case::almost_a_temp_name(
    ".handoff.md.tmp.12.x.3",
    "no .baton-handoff marker; not created by baton"
)]
#[case::no_name(".tmp.12.0.3", "no .baton-handoff marker; not created by baton")]
fn an_unmarked_directory_with_foreign_files_is_left_alone(
    #[case] foreign: &str,
    #[case] why: &str,
) {
    let w = World::new();
    let dir = w.root.join("a/h1");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join(temp_name(".baton-handoff", dead_pid())), b"x").expect("temp");
    fs::write(dir.join(foreign), b"mine").expect("foreign");
    let later = w.now + DAY * 365;
    let report = w.run_at(later, false);
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.skipped, vec![(dir.clone(), why.to_string())]);
    assert_eq!(fs::read(dir.join(foreign)).expect("kept"), b"mine");
    assert_eq!(fs::read_dir(&dir).expect("dir").count(), 2);
}

#[test]
fn a_symlink_with_a_temp_name_is_never_removed_or_followed() {
    let w = World::new();
    let dir = w.root.join("a/h1");
    fs::create_dir_all(&dir).expect("mkdir");
    let victim = w.tmp.path().join("victim");
    fs::write(&victim, b"victim").expect("victim");
    let link = dir.join(temp_name("handoff.md", dead_pid()));
    symlink(&victim, &link).expect("link");
    let report = w.run_at(w.now + DAY, false);
    assert!(report.removed.is_empty(), "{report:?}");
    assert!(fs::symlink_metadata(&link).is_ok());
    assert_eq!(fs::read(&victim).expect("victim"), b"victim");
}
