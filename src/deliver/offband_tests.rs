//! Off-band handoff documents: permissions, atomicity, unsafe directories, errors.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use baton::deliver::offband::{default_root, validate_id};
use baton::deliver::{effective_uid, DeliveryError, OffbandStore, MARKER_FILE};
use rstest::rstest;
use tempfile::TempDir;

use super::privilege;
use privilege::{require, Mount};

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o7777
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn setup() -> (TempDir, PathBuf, OffbandStore) {
    let tmp = TempDir::new().expect("tempdir");
    let root = tmp.path().join("root");
    let store = OffbandStore::new(Some(root.clone()));
    (tmp, root, store)
}

const FILES: &[(&str, &[u8])] = &[
    ("handoff.md", b"# Handoff\n\nfull document\n"),
    ("inline.md", b"Read the handoff at ...\n"),
    ("handoff.json", b"{\"strategy\":\"offband\"}\n"),
];

#[test]
fn document_path_is_stable_and_pure() {
    let (_tmp, root, store) = setup();
    let p = store.document_path("thread-1", "h-42");
    assert_eq!(p, root.join("thread-1").join("h-42").join("handoff.md"));
    assert_eq!(p, store.document_path("thread-1", "h-42"));
    assert!(
        !root.exists(),
        "document_path must not touch the filesystem"
    );
}

#[test]
fn write_creates_private_dirs_and_files() {
    let (_tmp, root, store) = setup();
    let doc = store.write("t1", "h1", FILES).expect("write");
    assert_eq!(doc, store.document_path("t1", "h1"));
    for d in [root.clone(), root.join("t1"), root.join("t1/h1")] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    let dir = root.join("t1/h1");
    for (name, contents) in FILES {
        let p = dir.join(name);
        assert_eq!(mode(&p), 0o600, "{}", p.display());
        assert_eq!(fs::read(&p).expect("read"), *contents);
    }
    assert_eq!(mode(&dir.join(MARKER_FILE)), 0o600);
    assert_eq!(
        fs::read_to_string(dir.join(MARKER_FILE)).expect("marker"),
        "thread: t1\nhandoff: h1\n"
    );
}

#[test]
fn atomic_write_leaves_no_temp_files_and_replaces_content() {
    let (_tmp, root, store) = setup();
    store.write("t1", "h1", FILES).expect("write");
    store
        .write("t1", "h1", &[("handoff.md", b"second version")])
        .expect("rewrite");
    let dir = root.join("t1/h1");
    assert_eq!(
        entries(&dir),
        vec![".baton-handoff", "handoff.json", "handoff.md", "inline.md"]
    );
    assert_eq!(
        fs::read(dir.join("handoff.md")).expect("read"),
        b"second version"
    );
    assert_eq!(mode(&dir.join("handoff.md")), 0o600);
}

#[test]
fn file_permissions_ignore_a_permissive_umask_and_existing_modes() {
    let (_tmp, root, store) = setup();
    store.write("t1", "h1", FILES).expect("write");
    let doc = root.join("t1/h1/handoff.md");
    fs::set_permissions(&doc, fs::Permissions::from_mode(0o644)).expect("chmod");
    store.write("t1", "h1", FILES).expect("rewrite");
    assert_eq!(mode(&doc), 0o600);
}

#[test]
fn planted_symlink_at_the_document_is_replaced_not_followed() {
    let (tmp, root, store) = setup();
    store.write("t1", "h1", FILES).expect("write");
    let victim = tmp.path().join("victim");
    fs::write(&victim, b"precious").expect("victim");
    let doc = root.join("t1/h1/handoff.md");
    fs::remove_file(&doc).expect("rm");
    symlink(&victim, &doc).expect("symlink");
    store.write("t1", "h1", FILES).expect("rewrite");
    assert_eq!(fs::read(&victim).expect("victim"), b"precious");
    assert!(fs::symlink_metadata(&doc).expect("meta").is_file());
}

#[rstest]
#[case::empty("")]
#[case::dot(".")]
#[case::dotdot("..")]
#[case::embedded_dotdot("a..b")]
#[case::slash("a/b")]
#[case::absolute("/etc")]
#[case::backslash("a\\b")]
#[case::nul("a\0b")]
fn invalid_ids_are_rejected(#[case] id: &str) {
    let (_tmp, root, store) = setup();
    for (thread, handoff, kind) in [(id, "h1", "thread id"), ("t1", id, "handoff id")] {
        let err = store.write(thread, handoff, FILES).expect_err("invalid");
        assert!(
            matches!(err, DeliveryError::InvalidId { kind: k, .. } if k == kind),
            "{err:?}"
        );
        assert!(err
            .to_string()
            .starts_with(&format!("invalid {kind} {id:?}: ")));
        assert_eq!(err.kind(), "invalid_id");
    }
    assert!(validate_id("thread id", id).is_err());
    assert!(!root.exists(), "nothing is created for invalid ids");
}

#[rstest]
#[case::marker(".baton-handoff")]
#[case::hidden(".hidden")]
#[case::nested("sub/file.md")]
fn invalid_file_names_are_rejected(#[case] name: &str) {
    let (_tmp, _root, store) = setup();
    let err = store
        .write("t1", "h1", &[(name, b"x".as_slice())])
        .expect_err("invalid");
    assert!(
        matches!(
            err,
            DeliveryError::InvalidId {
                kind: "file name",
                ..
            }
        ),
        "{err:?}"
    );
}

/// A root below a symlinked directory (macOS's `/tmp -> /private/tmp`) is held in canonical
/// form, whether it exists yet or not, so the paths the store hands out are canonical.
#[rstest]
#[case::missing_root(false)]
#[case::existing_root(true)]
fn root_below_a_symlinked_directory_is_canonicalised(#[case] exists: bool) {
    let tmp = TempDir::new().expect("tempdir");
    let real = tmp.path().join("real");
    fs::create_dir(&real).expect("mkdir");
    symlink(&real, tmp.path().join("link")).expect("symlink");
    if exists {
        fs::create_dir(real.join("root")).expect("mkdir");
        fs::set_permissions(real.join("root"), fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    let store = OffbandStore::new(Some(tmp.path().join("link/root")));
    let canonical = fs::canonicalize(&real).expect("canonical").join("root");
    assert_eq!(store.root(), canonical);
    let written = store.write("t1", "h1", FILES).expect("written");
    assert_eq!(written, canonical.join("t1/h1/handoff.md"));
    assert_eq!(fs::canonicalize(&written).expect("resolves"), written);
}

/// A root that is itself a symlink is never resolved: it stays as written and is refused.
#[test]
fn a_symlinked_root_is_not_canonicalised() {
    let tmp = TempDir::new().expect("tempdir");
    let real = tmp.path().join("attacker");
    fs::create_dir(&real).expect("mkdir");
    fs::set_permissions(&real, fs::Permissions::from_mode(0o700)).expect("chmod");
    let root = tmp.path().join("root");
    symlink(&real, &root).expect("symlink");
    let store = OffbandStore::new(Some(root.clone()));
    assert_eq!(store.root(), root);
    let err = store.write("t1", "h1", FILES).expect_err("refused");
    assert!(err.to_string().contains("it is a symlink"), "{err}");
}

#[test]
fn symlinked_root_is_refused() {
    let (tmp, root, store) = setup();
    let real = tmp.path().join("attacker");
    fs::create_dir(&real).expect("mkdir");
    fs::set_permissions(&real, fs::Permissions::from_mode(0o700)).expect("chmod");
    symlink(&real, &root).expect("symlink");
    let err = store.write("t1", "h1", FILES).expect_err("refused");
    assert!(matches!(err, DeliveryError::UnsafePath { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to use {}: it is a symlink (possibly planted by another user); \
             remove the symlink or set BATON_HANDOFF_DIR to a private directory",
            root.display()
        )
    );
    assert!(
        entries(&real).is_empty(),
        "nothing written through the link"
    );
}

#[rstest]
#[case::thread_dir("t1")]
#[case::handoff_dir("t1/h1")]
fn planted_symlink_below_root_is_refused(#[case] planted: &str) {
    let (tmp, root, store) = setup();
    store.write("t0", "h0", FILES).expect("create root");
    let target = tmp.path().join("elsewhere");
    fs::create_dir(&target).expect("mkdir");
    fs::set_permissions(&target, fs::Permissions::from_mode(0o700)).expect("chmod");
    let at = root.join(planted);
    if let Some(parent) = at.parent() {
        fs::create_dir_all(parent).expect("parents");
        fs::set_permissions(parent, fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    symlink(&target, &at).expect("symlink");
    let err = store.write("t1", "h1", FILES).expect_err("refused");
    assert!(
        matches!(err, DeliveryError::UnsafePath { ref path, .. } if *path == at),
        "{err:?}"
    );
    assert!(err.to_string().contains("it is a symlink"), "{err}");
    assert!(
        entries(&target).is_empty(),
        "nothing written through the link"
    );
}

#[test]
fn world_writable_root_is_refused() {
    let (_tmp, root, store) = setup();
    fs::create_dir(&root).expect("mkdir");
    fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).expect("chmod");
    let err = store.write("t1", "h1", FILES).expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to use {}: it is writable by group or others (mode 0777); \
             run `chmod 700` on it or set BATON_HANDOFF_DIR to a private directory",
            root.display()
        )
    );
    assert_eq!(err.kind(), "unsafe_path");
}

#[test]
fn group_writable_handoff_dir_is_refused() {
    let (_tmp, root, store) = setup();
    store.write("t1", "h1", FILES).expect("write");
    fs::set_permissions(root.join("t1/h1"), fs::Permissions::from_mode(0o770)).expect("chmod");
    let err = store.write("t1", "h1", FILES).expect_err("refused");
    assert!(err.to_string().contains("mode 0770"), "{err}");
}

#[test]
fn root_that_is_a_file_is_refused() {
    let (_tmp, root, store) = setup();
    fs::write(&root, b"not a dir").expect("file");
    let err = store.write("t1", "h1", FILES).expect_err("refused");
    assert!(
        err.to_string().contains("it exists and is not a directory"),
        "{err}"
    );
}

#[test]
fn root_owned_by_another_user_is_refused() {
    let root_here = if effective_uid() == 0 {
        Ok(())
    } else {
        Err("chown to another uid needs root".to_string())
    };
    if require("root_owned_by_another_user_is_refused", root_here).is_none() {
        return;
    }
    let (_tmp, root, store) = setup();
    fs::create_dir(&root).expect("mkdir");
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).expect("chmod");
    std::os::unix::fs::chown(&root, Some(65534), Some(65534)).expect("chown nobody");
    assert_eq!(fs::metadata(&root).expect("meta").uid(), 65534);
    let err = store.write("t1", "h1", FILES).expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to use {}: it is owned by uid 65534, not by this user (uid 0); \
             remove it or set BATON_HANDOFF_DIR to a directory you own",
            root.display()
        )
    );
}

/// Read-only target. As a normal user a `chmod 0500` directory is used. Root bypasses
/// permission bits, so as root the root goes on a read-only tmpfs instead (the test fails,
/// rather than pass untested, where that cannot be mounted).
#[test]
fn unwritable_location_fails_with_a_clear_error() {
    let tmp = TempDir::new().expect("tempdir");
    let mut _mount = None;
    let (parent, root) = if effective_uid() != 0 {
        let parent = tmp.path().join("ro");
        fs::create_dir(&parent).expect("mkdir");
        fs::set_permissions(&parent, fs::Permissions::from_mode(0o500)).expect("chmod");
        (Some(parent.clone()), parent.join("root"))
    } else {
        let Some(m) = require(
            "unwritable_location_fails_with_a_clear_error",
            Mount::tmpfs("ro,size=1m,mode=0700"),
        ) else {
            return;
        };
        let root = m.dir.join("root");
        _mount = Some(m);
        (None, root)
    };
    let store = OffbandStore::new(Some(root.clone()));
    let err = store.write("t1", "h1", FILES).expect_err("unwritable");
    assert!(matches!(err, DeliveryError::NotWritable { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("cannot write {}: ", root.display())),
        "{msg}"
    );
    assert!(
        msg.contains("permission denied or read-only filesystem"),
        "{msg}"
    );
    assert!(msg.contains("BATON_HANDOFF_DIR"), "{msg}");
    if let Some(parent) = parent {
        fs::set_permissions(&parent, fs::Permissions::from_mode(0o700)).expect("chmod back");
    }
}

/// Works for root too: a root whose parent is a regular file cannot be created.
#[test]
fn root_below_a_regular_file_fails_with_a_clear_error() {
    let tmp = TempDir::new().expect("tempdir");
    let file = tmp.path().join("file");
    fs::write(&file, b"x").expect("file");
    let root = file.join("root");
    let store = OffbandStore::new(Some(root.clone()));
    let err = store.write("t1", "h1", FILES).expect_err("fails");
    let msg = err.to_string();
    assert!(msg.contains(&root.display().to_string()), "{msg}");
    assert!(msg.contains("Not a directory"), "{msg}");
}

#[rstest]
#[case::erofs(libc::EROFS, "not_writable")]
#[case::eacces(libc::EACCES, "not_writable")]
#[case::eperm(libc::EPERM, "not_writable")]
#[case::enospc(libc::ENOSPC, "disk_full")]
#[case::edquot(libc::EDQUOT, "disk_full")]
#[case::eio(libc::EIO, "io")]
fn io_errors_are_classified(#[case] errno: i32, #[case] kind: &str) {
    let err = DeliveryError::from_io("/x/handoff.md", std::io::Error::from_raw_os_error(errno));
    assert_eq!(err.kind(), kind);
    assert!(err.to_string().contains("/x/handoff.md"), "{err}");
    if kind == "disk_full" {
        assert!(err.to_string().contains("disk full"), "{err}");
    }
}

#[test]
fn default_root_ignores_the_environment() {
    // The library reads no environment (the `baton` command passes $BATON_HANDOFF_DIR in).
    // The only test in this binary that changes the environment.
    std::env::set_var("BATON_HANDOFF_DIR", "/var/tmp/custom-handoffs");
    let expected = std::env::temp_dir().join(format!("baton-{}", effective_uid()));
    assert_eq!(default_root(), expected);
    std::env::remove_var("BATON_HANDOFF_DIR");
    assert_eq!(default_root(), expected);
    assert_eq!(OffbandStore::default_root(), default_root());
}
