//! Read, Write and Edit on real files: numbering, read-before-write, line endings, atomic
//! replacement.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Env, text};
use executor::ToolError;
use serde_json::json;

#[tokio::test]
async fn read_numbers_lines_from_one_without_padding() {
    let env = Env::new("read-numbers");
    let content: String = (1..=12).map(|n| format!("line {n}\n")).collect();
    env.file("a.txt", &content);
    let out = env.ok("Read", json!({"file_path": "a.txt"})).await;
    let expected: Vec<String> = (1..=12).map(|n| format!("{n}\tline {n}")).collect();
    assert_eq!(out, expected.join("\n"));

    // Absolute paths work the same; CRLF is not shown; no final newline is fine.
    let path = env.file("crlf.txt", "a\r\nb\r\nc");
    let out = env.ok("Read", json!({"file_path": path})).await;
    assert_eq!(out, "1\ta\n2\tb\n3\tc");
}

#[tokio::test]
async fn read_offset_limit_and_the_default_cap() {
    let env = Env::new("read-offset");
    let content: String = (1..=2_500).map(|n| format!("{n}\n")).collect();
    env.file("long.txt", &content);
    let out = env
        .ok(
            "Read",
            json!({"file_path": "long.txt", "offset": 10, "limit": 3}),
        )
        .await;
    assert_eq!(
        out,
        "10\t10\n11\t11\n12\t12\n\n[Showing lines 10-12 of 2500. Continue with offset=13.]"
    );
    let out = env.ok("Read", json!({"file_path": "long.txt"})).await;
    assert!(out.starts_with("1\t1\n2\t2\n"));
    assert!(
        out.contains("\n2000\t2000\n\n[Showing lines 1-2000 of 2500. Continue with offset=2001.]")
    );
    assert!(!out.contains("2001\t"));
    let out = env
        .ok("Read", json!({"file_path": "long.txt", "offset": 2_499}))
        .await;
    assert_eq!(out, "2499\t2499\n2500\t2500");
    let error = env
        .err("Read", json!({"file_path": "long.txt", "offset": 3_000}))
        .await;
    assert!(
        error.contains("2500 lines; offset 3000 is past the end"),
        "{error}"
    );
}

#[tokio::test]
async fn read_cuts_long_lines_and_reports_special_files() {
    let env = Env::new("read-special");
    env.file("wide.txt", &format!("{}\nshort\n", "x".repeat(2_500)));
    let out = env.ok("Read", json!({"file_path": "wide.txt"})).await;
    let first = out.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "1\t{}… [line truncated: 500 more characters]",
            "x".repeat(2_000)
        )
    );
    assert!(out.ends_with("2\tshort"));

    env.file("empty.txt", "");
    let out = env.ok("Read", json!({"file_path": "empty.txt"})).await;
    assert!(out.contains("exists but is empty"), "{out}");

    let error = env.err("Read", json!({"file_path": "missing.txt"})).await;
    assert!(error.contains("File does not exist"), "{error}");

    std::fs::create_dir(env.ws().join("dir")).unwrap();
    let error = env.err("Read", json!({"file_path": "dir"})).await;
    assert!(error.contains("is a directory"), "{error}");

    std::fs::write(env.ws().join("blob.bin"), [0x7f, b'E', b'L', b'F', 0, 1, 2]).unwrap();
    let error = env.err("Read", json!({"file_path": "blob.bin"})).await;
    assert!(error.contains("binary file (7 bytes)"), "{error}");
}

#[tokio::test]
async fn write_creates_files_and_parents() {
    let env = Env::new("write-create");
    let out = env
        .ok(
            "Write",
            json!({"file_path": "deep/er/new.txt", "content": "hello\nworld\n"}),
        )
        .await;
    assert!(out.starts_with("Created "), "{out}");
    assert_eq!(env.read("deep/er/new.txt"), "hello\nworld\n");
    // Written by us, so it counts as read: it can be written again at once.
    let out = env
        .ok(
            "Write",
            json!({"file_path": "deep/er/new.txt", "content": "again"}),
        )
        .await;
    assert!(out.starts_with("Updated "), "{out}");
    assert_eq!(env.read("deep/er/new.txt"), "again");
    // A path ending in `/` names a directory: refused, nothing created.
    let error = env
        .call("Write", json!({"file_path": "newdir/", "content": "x"}))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ToolError::InvalidInput(
            "file_path \"newdir/\" names a directory; give the path of the file to write".into()
        )
    );
    assert!(!env.ws().join("newdir").exists());
}

#[tokio::test]
async fn write_needs_a_fresh_read_of_an_existing_file() {
    let env = Env::new("write-read-first");
    let path = env.file("a.sh", "#!/bin/sh\necho old\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let input = json!({"file_path": "a.sh", "content": "#!/bin/sh\necho new\n"});

    let error = env.err("Write", input.clone()).await;
    assert!(error.contains("has not been read"), "{error}");
    assert_eq!(env.read("a.sh"), "#!/bin/sh\necho old\n");

    env.ok("Read", json!({"file_path": "a.sh"})).await;
    std::fs::write(&path, "#!/bin/sh\necho changed by the user\n").unwrap();
    let error = env.err("Write", input.clone()).await;
    assert!(
        error.contains("changed on disk since it was last read"),
        "{error}"
    );
    assert_eq!(env.read("a.sh"), "#!/bin/sh\necho changed by the user\n");

    env.ok("Read", json!({"file_path": "a.sh"})).await;
    env.ok("Write", input).await;
    assert_eq!(env.read("a.sh"), "#!/bin/sh\necho new\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "permissions kept");
    let leftovers: Vec<_> = std::fs::read_dir(env.ws())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, vec!["a.sh"], "no temporary file left behind");
}

#[tokio::test]
async fn a_touch_is_not_a_change() {
    let env = Env::new("write-touch");
    let path = env.file("a.txt", "same\n");
    env.ok("Read", json!({"file_path": "a.txt"})).await;
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    env.ok("Write", json!({"file_path": "a.txt", "content": "new\n"}))
        .await;
}

#[tokio::test]
async fn read_state_belongs_to_one_session() {
    let env = Env::new("write-sessions");
    env.file("a.txt", "a\n");
    env.ok("Read", json!({"file_path": "a.txt"})).await;
    let other = tools::builtin(
        std::sync::Arc::clone(&env.workspace),
        tools::PermissionConfig::default(),
    )
    .unwrap();
    let write = other.tool("Write").unwrap();
    let result = write
        .call(json!({"file_path": "a.txt", "content": "b"}), env.context())
        .await;
    assert!(
        matches!(result, Err(ToolError::InvalidInput(message)) if message.contains("has not been read"))
    );
}

#[tokio::test]
async fn edit_keeps_crlf_line_endings() {
    let env = Env::new("edit-crlf");
    env.file("win.txt", "alpha\r\nbeta\r\ngamma\r\n");
    env.ok("Read", json!({"file_path": "win.txt"})).await;
    // The model writes `\n`, as Read showed it.
    let out = env
        .ok(
            "Edit",
            json!({"file_path": "win.txt", "old_string": "alpha\nbeta", "new_string": "alpha\nBETA\nbeta"}),
        )
        .await;
    assert_eq!(env.read("win.txt"), "alpha\r\nBETA\r\nbeta\r\ngamma\r\n");
    assert!(
        out.contains("1\talpha\n2\tBETA\n3\tbeta\n4\tgamma"),
        "{out}"
    );
    // A one-line match whose replacement adds lines gets CRLF too.
    env.ok(
        "Edit",
        json!({"file_path": "win.txt", "old_string": "gamma", "new_string": "gamma\ndelta"}),
    )
    .await;
    assert_eq!(
        env.read("win.txt"),
        "alpha\r\nBETA\r\nbeta\r\ngamma\r\ndelta\r\n"
    );
}

#[tokio::test]
async fn edit_with_two_matches_needs_replace_all() {
    let env = Env::new("edit-two");
    env.file("a.rs", "let x = 1;\nlet y = 2;\nlet x = 1;\n");
    env.ok("Read", json!({"file_path": "a.rs"})).await;
    let input =
        json!({"file_path": "a.rs", "old_string": "let x = 1;", "new_string": "let x = 3;"});
    let error = env.err("Edit", input).await;
    assert!(error.contains("Found 2 matches"), "{error}");
    assert!(error.contains("replace_all"), "{error}");
    assert_eq!(env.read("a.rs"), "let x = 1;\nlet y = 2;\nlet x = 1;\n");

    let out = env
        .ok(
            "Edit",
            json!({"file_path": "a.rs", "old_string": "let x = 1;", "new_string": "let x = 3;", "replace_all": true}),
        )
        .await;
    assert!(out.contains("replaced 2 occurrences"), "{out}");
    assert_eq!(env.read("a.rs"), "let x = 3;\nlet y = 2;\nlet x = 3;\n");
}

#[tokio::test]
async fn edit_of_a_file_modified_after_read_fails() {
    let env = Env::new("edit-stale");
    let path = env.file("a.txt", "one\ntwo\n");
    env.ok("Read", json!({"file_path": "a.txt"})).await;
    std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
    let error = env
        .err(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "two", "new_string": "2"}),
        )
        .await;
    assert!(
        error.contains("changed on disk since it was last read"),
        "{error}"
    );
    assert_eq!(env.read("a.txt"), "one\ntwo\nthree\n");
}

#[tokio::test]
async fn edit_refusals_change_nothing() {
    let env = Env::new("edit-refusals");
    env.file("a.txt", "one\ntwo");
    let edit =
        |old: &str, new: &str| json!({"file_path": "a.txt", "old_string": old, "new_string": new});

    let error = env.err("Edit", edit("one", "1")).await;
    assert!(error.contains("has not been read"), "{error}");
    env.ok("Read", json!({"file_path": "a.txt"})).await;
    let error = env.err("Edit", edit("three", "3")).await;
    assert!(error.contains("old_string was not found"), "{error}");
    let error = env.err("Edit", edit("one", "one")).await;
    assert!(error.contains("identical"), "{error}");
    let error = env.err("Edit", edit("", "x")).await;
    assert!(error.contains("old_string is empty"), "{error}");
    let error = env
        .err(
            "Edit",
            json!({"file_path": "nope.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(error.contains("File does not exist"), "{error}");
    assert_eq!(env.read("a.txt"), "one\ntwo");

    // The missing final newline stays missing.
    env.ok("Edit", edit("two", "2")).await;
    assert_eq!(env.read("a.txt"), "one\n2");
}

#[tokio::test]
async fn edit_creates_a_file_from_an_empty_old_string() {
    let env = Env::new("edit-create");
    let out = env
        .ok(
            "Edit",
            json!({"file_path": "new/file.txt", "old_string": "", "new_string": "hi\n"}),
        )
        .await;
    assert!(out.starts_with("Created "), "{out}");
    assert_eq!(env.read("new/file.txt"), "hi\n");
}

#[tokio::test]
async fn edit_returns_a_numbered_snippet_around_the_change() {
    let env = Env::new("edit-snippet");
    let content: String = (1..=20).map(|n| format!("line {n}\n")).collect();
    env.file("a.txt", &content);
    env.ok("Read", json!({"file_path": "a.txt"})).await;
    let out = env
        .ok(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "line 10\n", "new_string": "line ten\nline ten and a half\n"}),
        )
        .await;
    let snippet: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(snippet.first(), Some(&"6\tline 6"));
    assert!(snippet.contains(&"10\tline ten"));
    assert!(snippet.contains(&"11\tline ten and a half"));
    assert_eq!(snippet.last(), Some(&"16\tline 15"));
}

#[tokio::test]
async fn through_the_executor_results_are_errors_where_they_fail() {
    let env = Env::with_mode("files-executor", tools::PermissionMode::AcceptEdits);
    env.file("a.txt", "x\n");
    let (completed, _) = env
        .run(vec![
            (
                "Edit",
                json!({"file_path": "a.txt", "old_string": "x", "new_string": "y"}),
            ),
            ("Read", json!({"file_path": "a.txt"})),
            (
                "Edit",
                json!({"file_path": "a.txt", "old_string": "x", "new_string": "y"}),
            ),
        ])
        .await;
    assert_eq!(completed[0].outcome, executor::Outcome::InvalidInput);
    assert_eq!(completed[0].result.is_error, Some(true));
    assert_eq!(completed[1].outcome, executor::Outcome::Success);
    assert_eq!(completed[2].outcome, executor::Outcome::Success);
    assert_eq!(env.read("a.txt"), "y\n");
    let _ = text;
}

/// A Latin-1 file (the public report's `café crème`): Read says it is not UTF-8 and shows it
/// decoded without loss; Write and Edit keep its bytes and encoding; a character Latin-1
/// cannot hold is refused, changing nothing.
#[tokio::test]
async fn a_latin1_file_round_trips_through_read_write_and_edit() {
    let env = Env::new("latin1");
    let path = env.ws().join("menu.txt");
    std::fs::write(&path, b"caf\xe9 cr\xe8me\nna\xefve\n").unwrap();
    let out = env.ok("Read", json!({"file_path": "menu.txt"})).await;
    assert!(out.starts_with("1\tcafé crème\n2\tnaïve"), "{out}");
    assert!(!out.contains('\u{FFFD}'), "{out}");
    assert!(
        out.contains("not UTF-8: it is shown decoded as windows-1252"),
        "{out}"
    );
    // The model writes back what it saw: the file keeps its original bytes.
    let written = env
        .ok(
            "Write",
            json!({"file_path": "menu.txt", "content": "café crème\nnaïve\n"}),
        )
        .await;
    assert!(written.contains("kept as windows-1252"), "{written}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"caf\xe9 cr\xe8me\nna\xefve\n"
    );
    env.ok(
        "Edit",
        json!({"file_path": "menu.txt", "old_string": "crème", "new_string": "brûlée"}),
    )
    .await;
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"caf\xe9 br\xfbl\xe9e\nna\xefve\n"
    );
    for (tool, input) in [
        (
            "Write",
            json!({"file_path": "menu.txt", "content": "café 😀\n"}),
        ),
        (
            "Edit",
            json!({"file_path": "menu.txt", "old_string": "naïve", "new_string": "naïve ✓"}),
        ),
    ] {
        let error = env.err(tool, input).await;
        assert!(
            error.contains("is a windows-1252 file, which cannot hold"),
            "{tool}: {error}"
        );
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"caf\xe9 br\xfbl\xe9e\nna\xefve\n"
    );
}

/// Mixed line endings (an LF file with one CRLF line, and the reverse): Edit matches an
/// old_string written with `\n`, and each line keeps its own ending.
#[tokio::test]
async fn edit_matches_across_mixed_line_endings() {
    let env = Env::new("mixed-endings");
    env.file("lf.txt", "one\ntwo\r\nthree\nfour\n");
    env.file("crlf.txt", "a\r\nb\nc\r\nd\r\n");
    env.ok("Read", json!({"file_path": "lf.txt"})).await;
    env.ok("Read", json!({"file_path": "crlf.txt"})).await;
    env.ok(
        "Edit",
        json!({"file_path": "lf.txt", "old_string": "two\nthree", "new_string": "TWO\nTHREE"}),
    )
    .await;
    assert_eq!(env.read("lf.txt"), "one\nTWO\r\nTHREE\nfour\n");
    env.ok(
        "Edit",
        json!({"file_path": "crlf.txt", "old_string": "b\nc", "new_string": "B\nC\nC2"}),
    )
    .await;
    assert_eq!(env.read("crlf.txt"), "a\r\nB\nC\r\nC2\r\nd\r\n");
}
