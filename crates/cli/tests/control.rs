//! The control protocol's bad input, sent raw on stdin as a careless or hostile program
//! would: every request gets an answer (an error response naming what was wrong), a line
//! that is not understood is named on stderr, and a program that goes away in the middle of
//! a turn leaves a finished turn in the transcript and a process that exits, never a hang.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{command, lines, repo};
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};
use tokio::io::AsyncWriteExt as _;

/// Runs the agent under the control protocol with `args`, writes `input` (one JSON value
/// or raw text per line) and closes stdin; its output, within 60 s.
async fn drive(
    repo: &common::Repo,
    server: &Server,
    args: &[&str],
    input: &[String],
) -> std::process::Output {
    let mut child = command(repo, server)
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in input {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the agent did not exit within 60 s of its stdin closing")
        .unwrap()
}

fn request(id: &str, request: Value) -> String {
    json!({"type": "control_request", "request_id": id, "request": request}).to_string()
}

fn user(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": null})
        .to_string()
}

/// The `control_response` answering `id`.
fn response<'a>(lines: &'a [Value], id: &str) -> &'a Value {
    lines
        .iter()
        .find(|line| line["type"] == "control_response" && line["response"]["request_id"] == id)
        .unwrap_or_else(|| panic!("no control_response to {id} in {lines:#?}"))
}

#[tokio::test]
async fn every_request_is_answered_and_bad_lines_are_named_while_the_session_goes_on() {
    let repo = repo("control-bad-input");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "planned.txt", "content": "x\n"}),
        )),
        Reply::turn(Turn::new().text("Hi.")),
    ]))
    .await
    .unwrap();
    let input = [
        request("i1", json!({"subtype": "initialize", "hooks": null, "mystery": 1})),
        request("u1", json!({"subtype": "no_such_thing"})),
        "{not json".to_owned(),
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": "never-sent"}}).to_string(),
        request("m1", json!({"subtype": "set_permission_mode", "mode": "bypassPermissions"})),
        request("m2", json!({"subtype": "set_permission_mode", "mode": "dontKnow"})),
        request("m3", json!({"subtype": "set_permission_mode", "mode": "plan"})),
        request("s1", json!({"subtype": "set_model", "model": "sonnet"})),
        request("i2", json!({"subtype": "initialize"})),
        json!({"type": "control_request", "request_id": "x1", "request": {}}).to_string(),
        user("hello"),
        request("t1", json!({"subtype": "mcp_status"})),
        request("k1", json!({"subtype": "stop_task", "task_id": "b9"})),
    ];
    let output = drive(&repo, &server, &[], &input).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines = lines(&output);

    let init = &response(&lines, "i1")["response"];
    assert_eq!(init["subtype"], "success");
    assert!(init["response"]["commands"].is_array(), "{init}");
    assert_eq!(init["response"]["models"][0]["value"], "claude-opus-4-8");
    let system = lines.iter().find(|line| line["subtype"] == "init").unwrap();
    assert_eq!(system["unsupported"], json!(["initialize.mystery"]));

    let refused = |id: &str, says: &str| {
        let answer = &response(&lines, id)["response"];
        assert_eq!(answer["subtype"], "error", "{id}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(says), "{id}: {error}");
    };
    refused("u1", "unsupported control request subtype: no_such_thing");
    refused(
        "m1",
        "bypassPermissions needs --allow-dangerously-skip-permissions",
    );
    refused("m2", "\"dontKnow\" is not one of");
    refused("i2", "already initialized");
    refused("x1", "no request.subtype");
    refused("k1", "no background task \"b9\"");
    assert_eq!(response(&lines, "m3")["response"]["subtype"], "success");
    assert_eq!(response(&lines, "s1")["response"]["subtype"], "success");
    let status = &response(&lines, "t1")["response"];
    assert_eq!(status["response"]["mcpServers"], json!([]), "{status}");

    assert!(stderr.contains("not JSON"), "{stderr}");
    assert!(
        stderr.contains("\"never-sent\", which is no request"),
        "{stderr}"
    );
    // The turn ran in plan mode, as the program switched it.
    let result = lines.iter().find(|line| line["type"] == "result").unwrap();
    assert_eq!(result["result"], "Hi.");
    // The model was told it plans, with the prompt.
    let first = server.requests()[0].json()["messages"].to_string();
    assert!(first.contains("Plan mode is on"), "{first}");
    let refusal = server.requests()[1].json()["messages"].to_string();
    assert!(
        refusal.contains("plan mode"),
        "not refused as in plan mode: {refusal}"
    );
    assert!(!repo.dir.join("planned.txt").exists());
    // And on the model it asked for, by its alias.
    let body = server.requests()[0].json();
    assert!(
        body["model"].as_str().unwrap().starts_with("claude-sonnet"),
        "{}",
        body["model"]
    );
}

#[tokio::test]
async fn a_program_that_goes_away_mid_turn_leaves_a_finished_turn_and_no_process() {
    let repo = repo("control-closed");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "asked.txt", "content": "x\n"}),
        )),
        Reply::turn(Turn::new().text("Could not write it.")),
    ]))
    .await
    .unwrap();
    // The program says it answers questions, then closes its input without answering.
    let input = [
        request("i1", json!({"subtype": "initialize"})),
        user("write asked.txt"),
    ];
    let output = drive(
        &repo,
        &server,
        &["--permission-prompt-tool", "stdio"],
        &input,
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!repo.dir.join("asked.txt").exists());
    let lines = lines(&output);
    let result = lines.iter().find(|line| line["type"] == "result").unwrap();
    assert_eq!(result["result"], "Could not write it.");
    // The model heard why: nobody was left to ask.
    let answer = server.requests()[1].json()["messages"].to_string();
    assert!(answer.contains("closed its input"), "{answer}");
    // The transcript holds the whole turn: the call, its refusal, the answer.
    let transcript = transcripts(&repo.home).pop().expect("a transcript");
    let text = std::fs::read_to_string(&transcript).unwrap();
    for expected in ["toolu_w", "closed its input", "Could not write it."] {
        assert!(text.contains(expected), "{expected} missing from {text}");
    }
}

/// The transcripts under `home`.
fn transcripts(home: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![home.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "jsonl") {
                found.push(path);
            }
        }
    }
    found
}

/// `--tools` (the SDK's `tools` option): only the built-in tools named are offered; an empty
/// list offers none.
#[tokio::test]
async fn tools_names_the_built_in_tools_offered() {
    for (list, expected) in [("Read,Grep", vec!["Grep", "Read"]), ("", vec![])] {
        let repo = repo("control-tools");
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
            .await
            .unwrap();
        let output = drive(&repo, &server, &["--tools", list], &[user("hello")]).await;
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let body = server.requests()[0].json();
        let mut offered: Vec<&str> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["name"].as_str())
            .collect();
        offered.sort_unstable();
        assert_eq!(offered, expected, "--tools {list:?}");
    }
}
