//! The history a session keeps across prompts: what the context pipeline remembers of it
//! (microcompact's request count, its L1 decisions, the compaction breaker) lives as long as
//! the history, not one prompt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Repo, assert_success, command, repo};
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// The model's window in these tests: its autocompact level is 42,000 - 4,000 (the output
/// reserve) - 13,000 = 25,000 tokens, or 100,000 bytes of request (testkit reports a
/// request's size / 4 as its input tokens).
const SETTINGS: &str =
    r#"{"models": {"claude-opus-4-8": {"contextWindow": 42000, "maxOutput": 4000}}}"#;

/// How large the history is made at the start, in request bytes: 80 % of the autocompact
/// level once seven results are in (where the first wave's policy cleared), below it after
/// all eleven.
const START_BYTES: usize = 72_000;

/// `count` files of about 2,000 bytes each, `f1.txt`...
fn write_files(repo: &Repo, count: usize) {
    for n in 1..=count {
        let line = format!("file {n} says something worth keeping in mind\n");
        std::fs::write(
            repo.dir.join(format!("f{n}.txt")),
            line.repeat(2000 / line.len()),
        )
        .unwrap();
    }
}

/// A Read call of `f{n}.txt`.
fn read(repo: &Repo, n: usize) -> (String, Value) {
    (
        format!("toolu_read_{n}"),
        json!({"file_path": repo.dir.join(format!("f{n}.txt"))}),
    )
}

/// A response that reads the files `numbers`.
fn reads(repo: &Repo, numbers: std::ops::RangeInclusive<usize>) -> Reply {
    let mut turn = Turn::new();
    for n in numbers {
        let (id, input) = read(repo, n);
        turn = turn.tool_use(&id, "Read", input);
    }
    Reply::turn(turn)
}

/// The bytes every request sends besides the conversation (system prompt, tools, user
/// context), measured on a one-word run in the same repository and home.
async fn overhead_bytes(repo: &Repo) -> usize {
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("ok"))]))
        .await
        .unwrap();
    let output = command(repo, &server)
        .args(["-p", "x"])
        .output()
        .await
        .unwrap();
    assert_success(&output, "the measuring run");
    server.requests()[0].body.len()
}

/// An interactive session (three prompts on stdin, one session) whose history sits near the
/// autocompact level: clearing old Read results would rewrite nearly the whole prompt for
/// savings over the few requests left before compaction, so microcompact's cost model
/// leaves them, and every request across the three prompts reads its predecessor's prefix
/// (the first wave's water mark cleared here, and each prompt's first request could clear
/// again, breaking the prompt cache every time).
#[tokio::test]
async fn microcompact_leaves_a_history_near_compaction_alone_across_prompts() {
    let repo = repo("history-microcompact");
    let config = repo.home.join("config").join("agent");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("settings.json"), SETTINGS).unwrap();
    write_files(&repo, 11);
    let padding = START_BYTES.saturating_sub(overhead_bytes(&repo).await);

    let server = Server::start_tls(
        Script::new(vec![
            reads(&repo, 1..=7),
            Reply::turn(Turn::new().text("Read seven.")),
            reads(&repo, 8..=9),
            Reply::turn(Turn::new().text("Read two more.")),
            reads(&repo, 10..=11),
            Reply::turn(Turn::new().text("And two more.")),
        ])
        .usage_from_request(),
    )
    .await
    .unwrap();
    let mut child = command(&repo, &server)
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = child.stdin.take().unwrap();
        let first = format!(
            "Read the files. Background: {}",
            "lorem ipsum ".repeat(padding / 12)
        );
        for prompt in [first.as_str(), "Read two more.", "And two more."] {
            let line = json!({"type": "user", "message": {"role": "user", "content": prompt}});
            stdin
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
        }
    }
    let output = child.wait_with_output().await.unwrap();
    assert_success(&output, "the three prompts");

    let requests = server.requests();
    assert_eq!(requests.len(), 6, "two requests a prompt, no compaction");
    let cleared: Vec<usize> = requests
        .iter()
        .map(|request| {
            String::from_utf8_lossy(&request.body)
                .matches(context::PLACEHOLDER_PREFIX)
                .count()
        })
        .collect();
    let sizes: Vec<usize> = requests.iter().map(|request| request.body.len()).collect();
    assert_eq!(
        cleared,
        [0, 0, 0, 0, 0, 0],
        "cleared results by request; sizes {sizes:?}"
    );
    assert!(
        sizes[1..]
            .iter()
            .all(|&bytes| (80_000..100_000).contains(&bytes)),
        "every later request between 80 % of the autocompact level and the level: {sizes:?}"
    );
    // Every request shares its predecessor's history as a prefix (breakpoints aside: they
    // move).
    let unmarked = |request: &testkit::RecordedRequest| -> Value {
        let text = String::from_utf8_lossy(&request.body)
            .replace(r#","cache_control":{"type":"ephemeral"}"#, "");
        serde_json::from_str(&text).unwrap()
    };
    for pair in requests.windows(2) {
        let (before, after) = (unmarked(&pair[0]), unmarked(&pair[1]));
        let kept = before["messages"].as_array().unwrap().len() - 1;
        assert_eq!(
            before["messages"].as_array().unwrap()[..kept],
            after["messages"].as_array().unwrap()[..kept],
            "a later request changed an earlier message"
        );
    }
}
