//! Grep and Glob over real trees: .gitignore, hidden and binary files, output modes,
//! ordering, paging. Hidden files are searched (ripgrep's `--hidden`); ignored ones never.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, SystemTime};

use common::Env;
use serde_json::json;

/// A tree with ignored, hidden and binary files that all contain "needle".
fn tree(name: &str) -> Env {
    let env = Env::new(name);
    env.file(".gitignore", "ignored/\n*.log\n");
    env.file("src/main.rs", "fn main() {\n    let needle = 1;\n}\n");
    env.file("src/lib.rs", "// no match here\n");
    env.file("docs/guide.md", "Find the NEEDLE.\nAnother needle line.\n");
    env.file("ignored/secret.rs", "let needle = 2;\n");
    env.file("src/nested/.gitignore", "generated.rs\n");
    env.file("src/nested/generated.rs", "needle\n");
    env.file("src/nested/kept.rs", "needle\n");
    env.file("debug.log", "needle\n");
    env.file(".hidden/tool.rs", "needle\n");
    std::fs::write(env.ws().join("blob.bin"), b"needle\0\x01\x02").unwrap();
    env
}

fn assert_no_ignored(out: &str) {
    for ignored in ["ignored/", "debug.log", "generated.rs", ".git/"] {
        assert!(!out.contains(ignored), "{ignored} appeared in:\n{out}");
    }
}

#[tokio::test]
async fn grep_and_glob_never_show_ignored_files() {
    let env = tree("gitignore");
    let ws = env.ws().display().to_string();

    let out = env.ok("Grep", json!({"pattern": "needle"})).await;
    assert!(out.starts_with("Found 4 files\n"), "{out}");
    for expected in [
        "src/main.rs",
        "docs/guide.md",
        "src/nested/kept.rs",
        ".hidden/tool.rs",
    ] {
        assert!(
            out.contains(&format!("{ws}/{expected}")),
            "{expected} missing:\n{out}"
        );
    }
    assert_no_ignored(&out);
    assert!(
        !out.contains("blob.bin"),
        "binary files are skipped:\n{out}"
    );

    for mode in ["content", "count"] {
        let out = env
            .ok(
                "Grep",
                json!({"pattern": "needle", "output_mode": mode, "-i": true}),
            )
            .await;
        assert_no_ignored(&out);
        assert!(!out.contains("blob.bin"));
    }
    // Filters narrow the walk; they never bring ignored files back.
    for glob in ["*.rs", "**/*.rs", "*.{md,rs,log}", "ignored/*"] {
        let out = env
            .ok("Grep", json!({"pattern": "needle", "glob": glob}))
            .await;
        assert_no_ignored(&out);
    }
    let out = env
        .ok("Grep", json!({"pattern": "needle", "type": "rust"}))
        .await;
    assert_no_ignored(&out);

    for pattern in ["**/*", "**/*.rs", "*.rs", "*.log", "**/secret.rs"] {
        let out = env.ok("Glob", json!({ "pattern": pattern })).await;
        assert_no_ignored(&out);
    }
    let out = env.ok("Glob", json!({"pattern": "**/*.rs"})).await;
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec![
            format!("{ws}/.hidden/tool.rs"),
            format!("{ws}/src/lib.rs"),
            format!("{ws}/src/main.rs"),
            format!("{ws}/src/nested/kept.rs"),
        ]
    );
    // Nothing found because of the ignore rules: said in one line.
    assert_eq!(
        env.ok("Glob", json!({"pattern": "*.log"})).await,
        "No files found (1 matching file is ignored by .gitignore or .ignore rules left out; list it with `find` in Bash if you need it)"
    );
    assert_eq!(
        env.ok("Glob", json!({"pattern": "**/*.none"})).await,
        "No files found"
    );
}

#[tokio::test]
async fn hidden_files_are_searched_like_any_other() {
    let env = tree("hidden");
    let ws = env.ws().display().to_string();
    // The public report: `**/*.yml` said "No files found" when the only match was here.
    env.file(".github/workflows/ci.yml", "on: push\n");
    let out = env.ok("Glob", json!({"pattern": "**/*.yml"})).await;
    assert_eq!(out, format!("{ws}/.github/workflows/ci.yml"));
    let out = env.ok("Grep", json!({"pattern": "on: push"})).await;
    assert_eq!(out, format!("Found 1 file\n{ws}/.github/workflows/ci.yml"));
    let out = env.ok("Glob", json!({"pattern": ".hidden/*.rs"})).await;
    assert_eq!(out, format!("{ws}/.hidden/tool.rs"));
    let out = env.ok("Glob", json!({"pattern": "**/.gitignore"})).await;
    assert!(out.contains(&format!("{ws}/.gitignore")), "{out}");
    let out = env
        .ok("Grep", json!({"pattern": "needle", "path": ".hidden"}))
        .await;
    assert!(out.contains("tool.rs"), "{out}");
}

#[tokio::test]
async fn grep_content_mode_formats_like_ripgrep() {
    let env = tree("content");
    let ws = env.ws().display().to_string();
    let out = env
        .ok(
            "Grep",
            json!({"pattern": "needle", "output_mode": "content", "-i": true}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "{ws}/.hidden/tool.rs:1:needle\n{ws}/docs/guide.md:1:Find the NEEDLE.\n{ws}/docs/guide.md:2:Another needle line.\n{ws}/src/main.rs:2:    let needle = 1;\n{ws}/src/nested/kept.rs:1:needle"
        )
    );
    let out = env
        .ok(
            "Grep",
            json!({"pattern": "needle", "output_mode": "content", "path": "src/main.rs", "-C": 1, "-n": false}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "{ws}/src/main.rs-fn main() {{\n{ws}/src/main.rs:    let needle = 1;\n{ws}/src/main.rs-}}"
        )
    );
    let out = env
        .ok(
            "Grep",
            json!({"pattern": "Another", "output_mode": "content", "path": "docs", "-B": 1}),
        )
        .await;
    assert_eq!(
        out,
        format!("{ws}/docs/guide.md-1-Find the NEEDLE.\n{ws}/docs/guide.md:2:Another needle line.")
    );
}

#[tokio::test]
async fn grep_count_mode_and_filters() {
    let env = tree("count");
    let ws = env.ws().display().to_string();
    let out = env
        .ok(
            "Grep",
            json!({"pattern": "needle", "output_mode": "count", "-i": true}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "{ws}/.hidden/tool.rs:1\n{ws}/docs/guide.md:2\n{ws}/src/main.rs:1\n{ws}/src/nested/kept.rs:1\n\nFound 5 matching lines in 4 files."
        )
    );
    let out = env
        .ok("Grep", json!({"pattern": "needle", "glob": "*.md"}))
        .await;
    assert_eq!(out, format!("Found 1 file\n{ws}/docs/guide.md"));
    let out = env
        .ok("Grep", json!({"pattern": "needle", "type": "rust"}))
        .await;
    assert!(out.starts_with("Found 3 files"), "{out}");
    assert!(!out.contains("guide.md"));
    let out = env
        .ok("Grep", json!({"pattern": "needle", "glob": "*.{md,rs}"}))
        .await;
    assert!(out.starts_with("Found 4 files"), "{out}");
    let error = env
        .err("Grep", json!({"pattern": "needle", "type": "klingon"}))
        .await;
    assert!(error.contains("unknown file type"), "{error}");
    let error = env.err("Grep", json!({"pattern": "(unclosed"})).await;
    assert!(error.contains("invalid regular expression"), "{error}");
    assert_eq!(
        env.ok("Grep", json!({"pattern": "absent-word"})).await,
        "No files found"
    );
}

#[tokio::test]
async fn grep_multiline() {
    let env = Env::new("multiline");
    let ws = env.ws().display().to_string();
    env.file("a.rs", "struct A {\n    x: u8,\n}\n");
    let error = env.err("Grep", json!({"pattern": "A \\{\\n    x"})).await;
    assert!(error.contains("multiline"), "{error}");
    let out = env
        .ok(
            "Grep",
            json!({"pattern": "struct A \\{.*?\\}", "multiline": true, "output_mode": "content"}),
        )
        .await;
    assert_eq!(
        out,
        format!("{ws}/a.rs:1:struct A {{\n{ws}/a.rs:2:    x: u8,\n{ws}/a.rs:3:}}")
    );
}

#[tokio::test]
async fn results_are_newest_first_and_paged() {
    let env = Env::new("order");
    let ws = env.ws().display().to_string();
    let base = SystemTime::now() - Duration::from_secs(3_600);
    for (index, name) in ["b.txt", "c.txt", "a.txt"].iter().enumerate() {
        let path = env.file(name, "needle\n");
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(base + Duration::from_secs(index as u64 * 60))
            .unwrap();
    }
    // a.txt is newest, then c.txt, then b.txt.
    let out = env.ok("Glob", json!({"pattern": "*.txt"})).await;
    assert_eq!(out, format!("{ws}/a.txt\n{ws}/c.txt\n{ws}/b.txt"));
    let out = env.ok("Grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        out,
        format!("Found 3 files\n{ws}/a.txt\n{ws}/c.txt\n{ws}/b.txt")
    );
    let out = env
        .ok(
            "Grep",
            json!({"pattern": "needle", "head_limit": 1, "offset": 1}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "Found 3 files\n{ws}/c.txt\n\n[Showing files 2-2 of 3. Pass offset=2 for more, or narrow the search.]"
        )
    );
}

#[tokio::test]
async fn glob_caps_at_100_and_default_head_limit_is_250() {
    let env = Env::new("caps");
    for index in 0..300 {
        env.file(&format!("many/f{index:03}.txt"), "needle\n");
    }
    let out = env.ok("Glob", json!({"pattern": "many/*.txt"})).await;
    assert_eq!(out.lines().count(), 101);
    assert!(out.ends_with(
        "showing the 100 most recently modified of 300 files. Use a more specific pattern or path.)"
    ));
    let out = env
        .ok(
            "Grep",
            json!({"pattern": "needle", "output_mode": "content"}),
        )
        .await;
    assert!(out.ends_with(
        "[Showing lines 1-250 of 300. Pass offset=250 for more, or narrow the search.]"
    ));
    let out = env
        .ok(
            "Grep",
            json!({"pattern": "needle", "output_mode": "content", "head_limit": 0}),
        )
        .await;
    assert_eq!(out.lines().count(), 300);
}

#[tokio::test]
async fn searches_stay_inside_the_workspace() {
    let env = Env::new("search-confined");
    std::fs::write(env.root.path().join("outside.txt"), "needle\n").unwrap();
    let error = env
        .err("Grep", json!({"pattern": "needle", "path": ".."}))
        .await;
    assert!(error.contains("outside the workspace"), "{error}");
    let error = env
        .err("Glob", json!({"pattern": "*.txt", "path": "/"}))
        .await;
    assert!(error.contains("outside the workspace"), "{error}");
    let error = env.err("Glob", json!({"pattern": "../*.txt"})).await;
    assert!(error.contains("outside the workspace"), "{error}");
}
