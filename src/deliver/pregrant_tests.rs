//! Scoped pre-grant: every property and every denial, asserting the exact reason text.
#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use baton::deliver::{
    check, issue, CheckRequest, DeliveryError, GrantStore, MemoryGrantStore, OffbandStore, PathArg,
    Verdict,
};
use rstest::rstest;
use serde_json::json;
use tempfile::TempDir;

const THREAD: &str = "t1";
const RUN: u32 = 3;

struct Fixture {
    _tmp: TempDir,
    base: PathBuf,
    doc: PathBuf,
    store: MemoryGrantStore,
}

fn fixture_with_uses(uses: u32) -> Fixture {
    let tmp = TempDir::new().expect("tempdir");
    let base = std::fs::canonicalize(tmp.path()).expect("canonical tempdir");
    let off = OffbandStore::new(Some(base.join("root")));
    let doc = off
        .write(
            THREAD,
            "h1",
            &[("handoff.md", b"# doc\n"), ("inline.md", b"inline\n")],
        )
        .expect("write");
    let mut store = MemoryGrantStore::new();
    let g = issue(&mut store, THREAD, RUN, "Read", &doc, uses).expect("issue");
    assert_eq!(g.path, doc);
    assert_eq!(g.handoff, "h1");
    assert_eq!(g.uses_left, uses);
    Fixture {
        _tmp: tmp,
        base,
        doc,
        store,
    }
}

fn fixture() -> Fixture {
    fixture_with_uses(1)
}

fn req(thread: &str, run: u32, tool: &str, args: PathArg) -> CheckRequest {
    CheckRequest {
        thread: thread.to_string(),
        run,
        tool: tool.to_string(),
        args,
    }
}

fn check_path(f: &mut Fixture, p: &Path) -> Verdict {
    check(
        &mut f.store,
        &req(THREAD, RUN, "Read", PathArg::Path(p.to_path_buf())),
    )
    .expect("check")
}

fn allow_reason(doc: &Path, left: u32) -> String {
    format!(
        "pre-grant for thread t1 turn 3 allows Read of {} ({left} use(s) left)",
        doc.display()
    )
}

fn not_granted(requested: &Path, doc: &Path) -> String {
    format!(
        "path {} is not the granted document {}",
        requested.display(),
        doc.display()
    )
}

#[test]
fn exact_path_is_allowed_once() {
    let mut f = fixture();
    let doc = f.doc.clone();
    let v = check_path(&mut f, &doc);
    assert_eq!(
        v,
        Verdict {
            allow: true,
            reason: allow_reason(&doc, 0)
        }
    );
}

#[test]
fn claude_read_file_path_argument_is_accepted() {
    let mut f = fixture();
    let args = json!({ "file_path": f.doc.to_str().expect("utf8"), "limit": 2000 });
    let v = check(&mut f.store, &req(THREAD, RUN, "Read", PathArg::Args(args))).expect("check");
    assert!(v.allow, "{v:?}");
    assert_eq!(v.reason, allow_reason(&f.doc, 0));
}

#[test]
fn generic_path_argument_is_accepted() {
    let mut f = fixture();
    let args = json!({ "path": f.doc.to_str().expect("utf8") });
    let v = check(&mut f.store, &req(THREAD, RUN, "Read", PathArg::Args(args))).expect("check");
    assert!(v.allow, "{v:?}");
}

#[test]
fn arguments_without_a_path_are_denied() {
    let mut f = fixture();
    let args = json!({ "filename": f.doc.to_str().expect("utf8") });
    let v = check(&mut f.store, &req(THREAD, RUN, "Read", PathArg::Args(args))).expect("check");
    assert_eq!(
        v,
        Verdict {
            allow: false,
            reason: "tool arguments carry no `file_path` or `path` string".into()
        }
    );
}

#[test]
fn ambiguous_arguments_are_denied() {
    let mut f = fixture();
    let args = json!({ "file_path": f.doc.to_str().expect("utf8"), "path": "/etc/shadow" });
    let v = check(&mut f.store, &req(THREAD, RUN, "Read", PathArg::Args(args))).expect("check");
    assert!(!v.allow);
    assert_eq!(
        v.reason,
        format!(
            "tool arguments are ambiguous: file_path {:?} and path \"/etc/shadow\" differ",
            f.doc.to_str().expect("utf8")
        )
    );
}

#[rstest]
#[case::bash("Bash")]
#[case::lowercase("read")]
#[case::write("Write")]
#[case::edit("Edit")]
#[case::suffix("ReadFile")]
#[case::space("Read ")]
fn other_tools_are_denied(#[case] tool: &str) {
    let mut f = fixture();
    let v = check(
        &mut f.store,
        &req(THREAD, RUN, tool, PathArg::Path(f.doc.clone())),
    )
    .expect("check");
    assert_eq!(
        v,
        Verdict {
            allow: false,
            reason: format!("tool {tool} is not granted (only Read)")
        }
    );
    // A denial does not consume the grant.
    let doc = f.doc.clone();
    assert!(check_path(&mut f, &doc).allow);
}

#[rstest]
#[case::next_turn(RUN + 1)]
#[case::previous_turn(RUN - 1)]
#[case::turn_zero(0)]
fn grant_is_turn_scoped(#[case] run: u32) {
    let mut f = fixture();
    let v = check(
        &mut f.store,
        &req(THREAD, run, "Read", PathArg::Path(f.doc.clone())),
    )
    .expect("check");
    assert_eq!(v.reason, format!("no pre-grant for thread t1 turn {run}"));
    assert!(!v.allow);
}

#[test]
fn grant_is_thread_scoped() {
    let mut f = fixture();
    let v = check(
        &mut f.store,
        &req("t2", RUN, "Read", PathArg::Path(f.doc.clone())),
    )
    .expect("check");
    assert_eq!(
        v,
        Verdict {
            allow: false,
            reason: "no pre-grant for thread t2 turn 3".into()
        }
    );
}

#[test]
fn second_use_is_denied() {
    let mut f = fixture();
    let doc = f.doc.clone();
    assert!(check_path(&mut f, &doc).allow);
    let v = check_path(&mut f, &doc);
    assert_eq!(
        v,
        Verdict {
            allow: false,
            reason: "pre-grant already used".into()
        }
    );
    // Still denied via the argument form.
    let args = json!({ "file_path": doc.to_str().expect("utf8") });
    let v = check(&mut f.store, &req(THREAD, RUN, "Read", PathArg::Args(args))).expect("check");
    assert_eq!(v.reason, "pre-grant already used");
}

#[test]
fn uses_are_counted() {
    let mut f = fixture_with_uses(2);
    let doc = f.doc.clone();
    assert_eq!(check_path(&mut f, &doc).reason, allow_reason(&doc, 1));
    assert_eq!(check_path(&mut f, &doc).reason, allow_reason(&doc, 0));
    assert_eq!(check_path(&mut f, &doc).reason, "pre-grant already used");
    let left = f.store.find(THREAD, RUN).expect("find");
    assert_eq!(left[0].uses_left, 0);
}

#[test]
fn dotdot_is_rejected_even_when_it_resolves_to_the_document() {
    let mut f = fixture();
    let dir = f.doc.parent().expect("parent");
    let sneaky = dir.join("..").join("h1").join("handoff.md");
    assert_eq!(std::fs::canonicalize(&sneaky).expect("exists"), f.doc);
    let v = check_path(&mut f, &sneaky);
    assert_eq!(
        v,
        Verdict {
            allow: false,
            reason: format!("path {} contains `..`", sneaky.display())
        }
    );
}

#[test]
fn dotdot_in_arguments_is_rejected() {
    let mut f = fixture();
    let sneaky = format!("{}/../h1/handoff.md", f.doc.parent().expect("p").display());
    let args = json!({ "file_path": sneaky });
    let v = check(&mut f.store, &req(THREAD, RUN, "Read", PathArg::Args(args))).expect("check");
    assert_eq!(v.reason, format!("path {sneaky} contains `..`"));
}

#[test]
fn current_dir_components_are_normalised_away() {
    let mut f = fixture();
    let dir = f.doc.parent().expect("parent");
    let dotted = dir.join(".").join("handoff.md");
    let v = check_path(&mut f, &dotted);
    assert!(v.allow, "{v:?}");
}

#[test]
fn relative_path_is_denied() {
    let mut f = fixture();
    let v = check_path(&mut f, Path::new("handoff.md"));
    assert_eq!(v.reason, "path handoff.md is not absolute");
    assert!(!v.allow);
}

#[rstest]
#[case::sibling("inline.md", true)]
#[case::backup("handoff.md.bak", true)]
#[case::case_variant_existing("HANDOFF.md", true)]
#[case::case_variant_missing("Handoff.md", false)]
#[case::missing_sibling("other.md", false)]
fn other_files_next_to_the_document_are_denied(#[case] name: &str, #[case] create: bool) {
    let mut f = fixture();
    let p = f.doc.parent().expect("parent").join(name);
    if create && !p.exists() {
        std::fs::write(&p, b"x").expect("create");
    }
    let doc = f.doc.clone();
    let v = check_path(&mut f, &p);
    assert_eq!(
        v,
        Verdict {
            allow: false,
            reason: not_granted(&p, &doc)
        }
    );
}

#[test]
fn parent_directory_is_denied() {
    let mut f = fixture();
    let doc = f.doc.clone();
    let dir = doc.parent().expect("parent").to_path_buf();
    assert_eq!(check_path(&mut f, &dir).reason, not_granted(&dir, &doc));
    let root = f.base.join("root");
    assert_eq!(check_path(&mut f, &root).reason, not_granted(&root, &doc));
}

#[test]
fn symlink_elsewhere_pointing_at_the_document_is_denied() {
    let mut f = fixture();
    let link = f.base.join("innocent.md");
    symlink(&f.doc, &link).expect("symlink");
    let v = check_path(&mut f, &link);
    assert_eq!(
        v,
        Verdict {
            allow: false,
            reason: format!("path {} is a symlink", link.display())
        }
    );
}

#[test]
fn path_through_a_symlinked_directory_is_denied() {
    let mut f = fixture();
    let link_dir = f.base.join("linkdir");
    symlink(f.doc.parent().expect("parent"), &link_dir).expect("symlink");
    let via = link_dir.join("handoff.md");
    let v = check_path(&mut f, &via);
    assert_eq!(
        v.reason,
        format!(
            "path {} passes through a symlink at {}",
            via.display(),
            link_dir.display()
        )
    );
    assert!(!v.allow);
}

#[test]
fn document_replaced_by_a_symlink_after_issue_is_denied() {
    let mut f = fixture();
    let secret = f.base.join("secret");
    std::fs::write(&secret, b"secret").expect("secret");
    std::fs::remove_file(&f.doc).expect("rm");
    symlink(&secret, &f.doc).expect("symlink");
    let doc = f.doc.clone();
    let v = check_path(&mut f, &doc);
    assert_eq!(v.reason, format!("path {} is a symlink", doc.display()));
}

#[test]
fn deleted_document_is_denied() {
    let mut f = fixture();
    std::fs::remove_file(&f.doc).expect("rm");
    let doc = f.doc.clone();
    let v = check_path(&mut f, &doc);
    assert!(!v.allow);
    assert!(
        v.reason
            .starts_with(&format!("path {} cannot be resolved: ", doc.display())),
        "{}",
        v.reason
    );
}

#[test]
fn issue_requires_an_existing_file() {
    let tmp = TempDir::new().expect("tempdir");
    let mut store = MemoryGrantStore::new();
    let missing = tmp.path().join("nope.md");
    let err = issue(&mut store, THREAD, RUN, "Read", &missing, 1).expect_err("missing");
    assert!(matches!(err, DeliveryError::InvalidGrant { .. }));
    assert!(err.to_string().contains(&missing.display().to_string()));
    let err = issue(&mut store, THREAD, RUN, "Read", tmp.path(), 1).expect_err("dir");
    assert!(
        err.to_string().ends_with("it is not a regular file"),
        "{err}"
    );
    assert!(store.find(THREAD, RUN).expect("find").is_empty());
}

#[rstest]
#[case::bash("Bash", 1, "only Read can be pre-granted, not Bash")]
#[case::zero_uses("Read", 0, "a grant needs at least one use")]
fn issue_rejects_bad_grants(#[case] tool: &str, #[case] uses: u32, #[case] why: &str) {
    let f = fixture();
    let mut store = MemoryGrantStore::new();
    let err = issue(&mut store, THREAD, RUN, tool, &f.doc, uses).expect_err("rejected");
    assert_eq!(
        err.to_string(),
        format!("cannot issue pre-grant for {}: {why}", f.doc.display())
    );
}

#[test]
fn issue_canonicalises_the_document_path() {
    let f = fixture();
    let mut store = MemoryGrantStore::new();
    let link = f.base.join("link.md");
    symlink(&f.doc, &link).expect("symlink");
    let g = issue(&mut store, "t9", 1, "Read", &link, 1).expect("issue");
    assert_eq!(g.path, f.doc);
}

#[test]
fn verdict_serialises_as_allow_and_reason() {
    let v = Verdict {
        allow: false,
        reason: "pre-grant already used".into(),
    };
    assert_eq!(
        serde_json::to_value(&v).expect("json"),
        json!({"allow": false, "reason": "pre-grant already used"})
    );
}

#[test]
fn memory_store_consume_only_matches_exact_grants() {
    let mut f = fixture();
    let doc = f.doc.clone();
    assert!(!f.store.consume(THREAD, RUN + 1, &doc).expect("consume"));
    assert!(!f.store.consume("t2", RUN, &doc).expect("consume"));
    assert!(!f
        .store
        .consume(THREAD, RUN, &doc.with_extension("bak"))
        .expect("consume"));
    assert!(f.store.consume(THREAD, RUN, &doc).expect("consume"));
    assert!(!f.store.consume(THREAD, RUN, &doc).expect("consume"));
}

/// Issue 15 item 9: a trailing `/` (or `/.`) names a directory. Lexical normalisation used to
/// drop it, so `…/handoff.md/` was allowed and used up the single read.
#[rstest]
#[case::slash("/")]
#[case::slash_dot("/.")]
#[case::double_slash("//")]
fn a_trailing_separator_is_denied_and_uses_nothing(#[case] tail: &str) {
    let mut f = fixture();
    let doc = f.doc.clone();
    let asked = PathBuf::from(format!("{}{tail}", doc.display()));
    let v = check_path(&mut f, &asked);
    assert_eq!(
        v,
        Verdict {
            allow: false,
            reason: format!(
                "path {} ends with `/`, so it names a directory, not the granted document",
                asked.display()
            )
        }
    );
    let v = check_path(&mut f, &doc);
    assert!(v.allow, "the denial used the grant up: {v:?}");
}

/// Issue 15 item 9: arguments that name the path in more than one way are refused, whatever
/// way the tool resolves them, and the refusal uses nothing.
#[rstest]
#[case::array_file_path(json!({"file_path": ["/etc/shadow"], "path": "DOC"}), "tool arguments are ambiguous: `file_path` is an array, not a path string")]
#[case::null_file_path(json!({"file_path": null, "path": "DOC"}), "tool arguments are ambiguous: `file_path` is null, not a path string")]
#[case::object_path(json!({"file_path": "DOC", "path": {"p": "/etc/shadow"}}), "tool arguments are ambiguous: `path` is an object, not a path string")]
#[case::number_path(json!({"path": 7, "file_path": "DOC"}), "tool arguments are ambiguous: `path` is a number, not a path string")]
#[case::other_key(json!({"file_path": "DOC", "target_file": "/etc/shadow"}), "tool arguments are ambiguous: they name a path in `target_file` as well")]
#[case::camel_key(json!({"path": "DOC", "filePath": "DOC"}), "tool arguments are ambiguous: they name a path in `filePath` as well")]
#[case::not_an_object(json!(["DOC"]), "tool arguments are not a JSON object (got an array)")]
fn arguments_naming_the_path_ambiguously_are_denied(
    #[case] args: serde_json::Value,
    #[case] reason: &str,
) {
    let mut f = fixture();
    let doc = f.doc.to_str().expect("utf8").to_string();
    let args: serde_json::Value =
        serde_json::from_str(&args.to_string().replace("DOC", &doc)).expect("json");
    let v = check(&mut f.store, &req(THREAD, RUN, "Read", PathArg::Args(args))).expect("check");
    assert!(!v.allow, "{v:?}");
    assert_eq!(v.reason, reason);
    let again = check_path(&mut f, Path::new(&doc));
    assert!(again.allow, "the denial used the grant up: {again:?}");
}

#[test]
fn the_same_path_under_both_keys_is_allowed() {
    let mut f = fixture();
    let doc = f.doc.to_str().expect("utf8");
    let args = json!({ "file_path": doc, "path": doc });
    let v = check(&mut f.store, &req(THREAD, RUN, "Read", PathArg::Args(args))).expect("check");
    assert!(v.allow, "{v:?}");
}

#[rstest]
#[case::dup_path(
    r#"{"path": "/a", "path": "/b"}"#,
    Err(r#"the arguments are ambiguous: key "path" is given more than once"#)
)]
#[case::dup_same(
    r#"{"file_path": "/a", "file_path": "/a"}"#,
    Err(r#"the arguments are ambiguous: key "file_path" is given more than once"#)
)]
#[case::distinct(r#"{"file_path": "/a", "limit": 3}"#, Ok(()))]
#[case::nested_dup_is_not_top_level(r#"{"file_path": "/a", "x": {"k": 1, "k": 2}}"#, Ok(()))]
#[case::not_json(r#"{"file_path""#, Err("not valid JSON: "))]
fn tool_argument_text_with_a_repeated_key_is_refused(
    #[case] text: &str,
    #[case] want: Result<(), &str>,
) {
    let got = baton::deliver::parse_tool_args(text);
    match want {
        Ok(()) => assert!(got.is_ok(), "{got:?}"),
        Err(msg) => {
            let e = got.expect_err("refused").to_string();
            assert!(e.starts_with(msg), "{e}");
        }
    }
}
