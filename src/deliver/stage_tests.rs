//! The delivery stage: an off-band decision is written and pre-granted, or falls back to
//! inline delivery with the reason, through the public pipeline API.
#![cfg(unix)]

use std::fs;
use std::path::Path;

use baton::decision::DeliveryMode;
use baton::deliver::{
    check, deliver, CheckRequest, Delivered, GrantStore, MemoryGrantStore, OffbandStore, PathArg,
};
use baton::eval::EvalOptions;
use baton::pipeline::{run, Outcome};
use baton::render::RenderOptions;
use tempfile::TempDir;

const STATE: &str = "examples/seed-switch.yaml";
const THREAD: &str = "T1";

/// The pipeline on the seed example with off-band documents under `root`.
fn outcome(root: &Path) -> Outcome {
    let state = baton::state::load_file(Path::new(STATE)).expect("fixture loads");
    let policy = baton::policy::load("default").expect("policy checks");
    let eval = EvalOptions {
        target: None,
        document_root: Some(root.to_path_buf()),
    };
    run(&policy, &state, &eval, &RenderOptions::default()).expect("pipeline runs")
}

fn thread_id() -> String {
    baton::state::load_file(Path::new(STATE))
        .expect("fixture loads")
        .thread
        .id
}

fn deliver_into(root: &Path) -> (Outcome, Delivered, MemoryGrantStore) {
    let mut o = outcome(root);
    assert_eq!(
        o.decision.delivery.as_ref().map(|d| d.mode),
        Some(DeliveryMode::OffBand),
        "the seed example is delivered off-band by the default policy"
    );
    let mut grants = MemoryGrantStore::new();
    let store = OffbandStore::new(Some(root.to_path_buf()));
    let d = deliver(&mut o, &store, &thread_id(), &mut grants);
    (o, d, grants)
}

#[test]
fn off_band_writes_the_three_files_and_issues_the_grant() {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    let (o, d, mut grants) = deliver_into(&root);
    assert_eq!(d.fallback_reason, None);
    let path = d.document_path.clone().expect("a document was written");
    let rendered = o.rendered.as_ref().unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), rendered.document);
    let dir = path.parent().unwrap();
    assert_eq!(
        fs::read_to_string(dir.join("inline.md")).unwrap(),
        rendered.inline
    );
    let prov: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("handoff.json")).unwrap()).unwrap();
    assert_eq!(prov["delivery"], "off_band");
    // The decision, the rendered handoff and the written file agree on the path.
    let shown = path.display().to_string();
    let delivery = o.decision.delivery.as_ref().unwrap();
    assert_eq!(delivery.document.as_deref(), Some(shown.as_str()));
    assert_eq!(rendered.document_path.as_deref(), Some(shown.as_str()));
    assert!(rendered.inline.contains(&shown), "{}", rendered.inline);
    // The grant is for this thread and the run about to start, and works once.
    let grant = d.grant.expect("the default policy pre-grants Read");
    assert_eq!(grant.thread, thread_id());
    assert_eq!(grant.run, o.decision.run);
    assert_eq!(
        o.decision.pregrant.as_ref().map(|p| p.path.clone()),
        Some(grant.path.display().to_string()),
        "the decision names the path the grant allows"
    );
    assert_eq!(grants.find(&thread_id(), o.decision.run).unwrap().len(), 1);
    let req = CheckRequest {
        thread: thread_id(),
        run: o.decision.run,
        tool: "Read".into(),
        args: PathArg::Args(serde_json::json!({ "file_path": shown })),
    };
    assert!(check(&mut grants, &req).unwrap().allow);
    let again = check(&mut grants, &req).unwrap();
    assert_eq!(
        (again.allow, again.reason.as_str()),
        (false, "pre-grant already used")
    );
}

#[test]
fn an_inline_decision_is_left_alone() {
    let tmp = TempDir::new().unwrap();
    let state = baton::state::load_file(Path::new(STATE)).unwrap();
    let policy = baton::policy::load("t3code").unwrap();
    let eval = EvalOptions {
        target: None,
        document_root: Some(tmp.path().join("docs")),
    };
    let mut o = run(&policy, &state, &eval, &RenderOptions::default()).unwrap();
    assert_eq!(
        o.decision.delivery.as_ref().map(|d| d.mode),
        Some(DeliveryMode::Inline)
    );
    let before = o.decision.clone();
    let store = OffbandStore::new(Some(tmp.path().join("docs")));
    let d = deliver(&mut o, &store, THREAD, &mut MemoryGrantStore::new());
    assert_eq!(d, Delivered::default());
    assert_eq!(o.decision, before);
    assert!(!tmp.path().join("docs").exists(), "nothing is written");
}

/// A failed write: inline delivery carrying the whole document, the reason everywhere.
fn assert_fell_back(o: &Outcome, d: &Delivered, reason_has: &[&str]) {
    let reason = d.fallback_reason.clone().expect("a fallback reason");
    for part in reason_has {
        assert!(reason.contains(part), "{reason:?} lacks {part:?}");
    }
    assert_eq!(d.document_path, None);
    assert_eq!(d.grant, None);
    let delivery = o.decision.delivery.as_ref().unwrap();
    assert_eq!(delivery.mode, DeliveryMode::Inline);
    assert_eq!(delivery.document, None);
    assert_eq!(delivery.fallback_reason.as_deref(), Some(reason.as_str()));
    assert_eq!(o.decision.pregrant, None);
    let json: serde_json::Value = serde_json::from_str(&o.decision.to_json()).unwrap();
    assert_eq!(json["delivery"]["mode"], "inline");
    assert_eq!(json["delivery"]["fallback_reason"], reason.as_str());
    assert!(json["pregrant"].is_null());
    let r = o.rendered.as_ref().unwrap();
    assert!(
        r.inline.contains(r.document.trim_end()),
        "the inline prompt carries the whole document"
    );
    assert_eq!(r.document_path, None);
    assert_eq!(r.provenance.delivery, "inline");
    assert_eq!(
        r.provenance.delivery_fallback_reason.as_deref(),
        Some(reason.as_str())
    );
    assert_eq!(r.provenance.chars.inline, r.inline.chars().count());
    // The kind beside the reason, the same in every record.
    let kind = d.fallback_kind.expect("a fallback kind");
    assert_eq!(delivery.fallback_kind, Some(kind));
    assert_eq!(json["delivery"]["fallback_kind"], kind.as_str());
    assert_eq!(r.provenance.delivery_fallback_kind, Some(kind));
}

#[test]
fn a_root_below_a_regular_file_falls_back_to_inline() {
    let tmp = TempDir::new().unwrap();
    let file = tmp.path().join("not-a-dir");
    fs::write(&file, "x").unwrap();
    let root = file.join("docs");
    let (o, d, _) = deliver_into(&root);
    assert_fell_back(&o, &d, &[&root.display().to_string()]);
}

#[test]
fn a_root_that_is_a_planted_symlink_falls_back_to_inline() {
    let tmp = TempDir::new().unwrap();
    let elsewhere = tmp.path().join("attacker");
    fs::create_dir(&elsewhere).unwrap();
    let root = tmp.path().join("docs");
    std::os::unix::fs::symlink(&elsewhere, &root).unwrap();
    let (o, d, _) = deliver_into(&root);
    assert_fell_back(
        &o,
        &d,
        &[&format!("refusing to use {}", root.display()), "symlink"],
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn a_missing_handoff_id_is_a_fallback_not_a_panic() {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    let mut o = outcome(&root);
    o.decision.handoff_id = None;
    let store = OffbandStore::new(Some(root));
    let d = deliver(&mut o, &store, THREAD, &mut MemoryGrantStore::new());
    assert_fell_back(&o, &d, &["handoff id"]);
}

use super::privilege;
use privilege::{require, Mount};

#[test]
fn a_read_only_filesystem_falls_back_to_inline() {
    let Some(m) = require(
        "a_read_only_filesystem_falls_back_to_inline",
        Mount::tmpfs("ro,size=1m,mode=0700"),
    ) else {
        return;
    };
    let root = m.dir.join("docs");
    let (o, d, _) = deliver_into(&root);
    assert_fell_back(
        &o,
        &d,
        &[
            &format!("cannot write {}: ", root.display()),
            "Read-only file system",
            "point BATON_HANDOFF_DIR at a writable private directory",
        ],
    );
}

#[test]
fn a_full_disk_falls_back_to_inline() {
    let Some(m) = require(
        "a_full_disk_falls_back_to_inline",
        Mount::tmpfs("size=64k,mode=0700"),
    ) else {
        return;
    };
    // Fill the filesystem; the write that hits ENOSPC is expected to fail.
    let _ = fs::write(m.dir.join("filler"), vec![b'x'; 256 * 1024]);
    let root = m.dir.join("docs");
    let (o, d, _) = deliver_into(&root);
    assert_fell_back(&o, &d, &["disk full", "No space left on device"]);
    // The recorded fact names no command: the `baton` command adds "run `baton gc`" by kind.
    assert_eq!(d.fallback_kind, Some(baton::decision::FallbackKind::DiskFull));
    let reason = d.fallback_reason.clone().unwrap_or_default();
    assert!(
        reason.ends_with(": disk full (No space left on device (os error 28))"),
        "{reason:?}"
    );
}

#[rstest::rstest]
#[case::other_writable(0o777, "it is writable by group or others (mode 0777)")]
#[case::group_writable(0o770, "it is writable by group or others (mode 0770)")]
fn a_root_with_loose_permissions_falls_back_to_inline(#[case] mode: u32, #[case] problem: &str) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(mode)).unwrap();
    let (o, d, _) = deliver_into(&root);
    assert_fell_back(
        &o,
        &d,
        &[
            &format!("refusing to use {}: {problem}", root.display()),
            "chmod 700",
        ],
    );
}

#[test]
fn a_thread_directory_with_loose_permissions_falls_back_to_inline() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    let thread_dir = root.join(thread_id());
    fs::create_dir_all(&thread_dir).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(&thread_dir, fs::Permissions::from_mode(0o757)).unwrap();
    let (o, d, _) = deliver_into(&root);
    assert_fell_back(
        &o,
        &d,
        &[&format!(
            "refusing to use {}: it is writable by group or others (mode 0757)",
            thread_dir.display()
        )],
    );
}

#[test]
fn a_root_owned_by_another_user_falls_back_to_inline() {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    fs::create_dir(&root).unwrap();
    let chown = std::os::unix::fs::chown(&root, Some(65534), Some(65534))
        .map_err(|e| format!("chown to uid 65534 failed ({e}); it needs root"));
    if require("a_root_owned_by_another_user_falls_back_to_inline", chown).is_none() {
        return;
    }
    let (o, d, _) = deliver_into(&root);
    assert_fell_back(
        &o,
        &d,
        &[&format!(
            "refusing to use {}: it is owned by uid 65534, not by this user (uid {})",
            root.display(),
            baton::deliver::effective_uid()
        )],
    );
}

#[test]
fn a_planted_symlink_for_the_handoff_directory_falls_back_to_inline() {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    let o = outcome(&root);
    let hid = o.decision.handoff_id.clone().unwrap();
    let thread_dir = root.join(thread_id());
    fs::create_dir_all(&thread_dir).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
        fs::set_permissions(&thread_dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
    let target = tmp.path().join("attacker");
    fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&target, thread_dir.join(&hid)).unwrap();
    let (o, d, _) = deliver_into(&root);
    assert_fell_back(
        &o,
        &d,
        &[&format!(
            "refusing to use {}: it is a symlink",
            thread_dir.join(&hid).display()
        )],
    );
    assert_eq!(
        fs::read_dir(&target).unwrap().count(),
        0,
        "nothing written through it"
    );
}

/// Deciding with one off-band root and delivering into another would tell the child a path
/// its pre-grant does not allow: the stage refuses and delivers inline instead.
#[test]
fn a_decision_naming_another_root_falls_back_to_inline() {
    let tmp = TempDir::new().unwrap();
    let decided = tmp.path().join("decided");
    let written = tmp.path().join("written");
    let mut o = outcome(&decided);
    let mut grants = MemoryGrantStore::new();
    let store = OffbandStore::new(Some(written.clone()));
    let d = deliver(&mut o, &store, &thread_id(), &mut grants);
    let announced = decided.join(format!("{}/H2/handoff.md", thread_id()));
    assert_fell_back(
        &o,
        &d,
        &[
            &written
                .join(format!("{}/H2/handoff.md", thread_id()))
                .display()
                .to_string(),
            &format!("the first-turn prompt names {}", announced.display()),
        ],
    );
    assert!(grants
        .find(&thread_id(), o.decision.run)
        .unwrap()
        .is_empty());
}
