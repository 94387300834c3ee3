//! The control protocol's bad input, sent raw on stdin as a careless or hostile program
//! would: every request gets an answer (an error response naming what was wrong), a line
//! that is not understood is named on stderr, and a program that goes away in the middle of
//! a turn leaves a finished turn in the transcript and a process that exits, never a hang.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{command, lines, repo, result_text};
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};
use tokio::io::AsyncWriteExt as _;

/// The agent under the control protocol with `args`, its stdin, stdout and stderr piped.
fn spawn(repo: &common::Repo, server: &Server, args: &[&str]) -> tokio::process::Child {
    command(repo, server)
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
        .unwrap()
}

/// Runs the agent under the control protocol with `args`, writes `input` (one JSON value
/// or raw text per line) and closes stdin; its output, within 60 s.
async fn drive(
    repo: &common::Repo,
    server: &Server,
    args: &[&str],
    input: &[impl AsRef<[u8]>],
) -> std::process::Output {
    let mut child = spawn(repo, server, args);
    let mut stdin = child.stdin.take().unwrap();
    for line in input {
        stdin.write_all(line.as_ref()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
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
    let aliases: Vec<&Value> = init["response"]["models"].as_array().unwrap()[1..]
        .iter()
        .collect();
    assert!(
        aliases.iter().any(|model| model["value"] == "sonnet"
            && model["resolvedModel"]
                .as_str()
                .is_some_and(|id| id.starts_with("claude-sonnet"))),
        "{aliases:?}"
    );
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

/// Runs the agent under the control protocol with `args`, sends `input`, and answers each
/// of its control requests with `answer` (a `response` object, or an error when `Err`) until
/// its result line; then closes stdin. Its requests and its output, within 60 s.
async fn converse(
    repo: &common::Repo,
    server: &Server,
    args: &[&str],
    input: &[String],
    mut answer: impl FnMut(&Value) -> Result<Value, String>,
) -> (Vec<Value>, std::process::Output) {
    use tokio::io::AsyncBufReadExt as _;
    let mut child = spawn(repo, server, args);
    let mut stdin = child.stdin.take().unwrap();
    for line in input {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut asked = Vec::new();
    let mut seen = Vec::new();
    let talk = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["type"] == "control_request" {
                let id = value["request_id"].clone();
                let response = match answer(&value["request"]) {
                    Ok(response) => {
                        json!({"subtype": "success", "request_id": id, "response": response})
                    }
                    Err(error) => json!({"subtype": "error", "request_id": id, "error": error}),
                };
                let reply = json!({"type": "control_response", "response": response});
                stdin
                    .write_all(format!("{reply}\n").as_bytes())
                    .await
                    .unwrap();
                asked.push(value["request"].clone());
            }
            let done = value["type"] == "result";
            seen.push(value);
            if done {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), talk)
        .await
        .expect("no result within 60 s");
    drop(stdin);
    let mut output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the agent did not exit within 60 s of its stdin closing")
        .unwrap();
    let mut stdout = seen
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    stdout.push('\n');
    output.stdout = [stdout.into_bytes(), output.stdout].concat();
    (asked, output)
}

/// From an attack: a command the read-only sandbox stopped is asked about again; an approval
/// that rewrites the command runs nothing after the fact (it once ran the model's command
/// with the workspace writable), and the program's PermissionRequest hook is asked first.
#[tokio::test]
async fn a_rewritten_escalation_runs_nothing_and_permission_hooks_come_first() {
    // The read-only sandbox must be there to stop the write.
    if common::sandbox_backends().is_empty() {
        return;
    }
    for hooked in [false, true] {
        let repo = repo(&format!("control-escalation-{hooked}"));
        let server = Server::start_tls(Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_b",
                "Bash",
                json!({"command": "rm notes.txt; echo pwned > victim.txt"}),
            )),
            Reply::turn(Turn::new().text("Done.")),
        ]))
        .await
        .unwrap();
        let hooks = if hooked {
            json!({"PermissionRequest": [{"hookCallbackIds": ["deny_all"]}]})
        } else {
            Value::Null
        };
        let input = [
            request("i1", json!({"subtype": "initialize", "hooks": hooks})),
            user("clean up"),
        ];
        let args = ["--permission-prompt-tool", "stdio"];
        let (asked, output) = converse(&repo, &server, &args, &input, |request| {
            Ok(match request["subtype"].as_str() {
                Some("hook_callback") => json!({"hookSpecificOutput": {
                    "hookEventName": "PermissionRequest",
                    "decision": {"behavior": "deny", "message": "never"},
                }}),
                _ => json!({"behavior": "allow", "updatedInput": {"command": "echo safe > safe.txt"}}),
            })
        })
        .await;
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(repo.dir.join("notes.txt").exists(), "the model's rm ran");
        assert!(!repo.dir.join("victim.txt").exists());
        assert!(!repo.dir.join("safe.txt").exists());
        let kinds: Vec<&str> = asked.iter().filter_map(|r| r["subtype"].as_str()).collect();
        let result = result_text(&server, "toolu_b");
        if hooked {
            assert_eq!(kinds, ["hook_callback"], "the hook answers first");
            assert!(result.contains("never"), "{result}");
        } else {
            assert_eq!(kinds, ["can_use_tool"]);
            assert!(result.contains("changed the command"), "{result}");
        }
    }
}

/// From an attack: the mode plan mode is left for is the approver's, never the model's: an
/// ExitPlanMode call asking for acceptEdits, approved as it came, leaves for default mode,
/// so the next Write is asked again.
#[tokio::test]
async fn the_model_cannot_choose_the_mode_after_its_plan() {
    let repo = repo("control-plan-mode");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_p",
            "ExitPlanMode",
            json!({"plan": "write evil.txt", "mode": "acceptEdits"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "evil.txt", "content": "x\n"}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let input = [
        request("i1", json!({"subtype": "initialize"})),
        user("plan it"),
    ];
    let args = [
        "--permission-prompt-tool",
        "stdio",
        "--permission-mode",
        "plan",
    ];
    let (asked, output) = converse(&repo, &server, &args, &input, |request| {
        Ok(match request["tool_name"].as_str() {
            // Approved with the input it was shown, as SDK hosts often answer.
            Some("ExitPlanMode") => json!({"behavior": "allow", "updatedInput": request["input"]}),
            _ => json!({"behavior": "deny", "message": "no writes"}),
        })
    })
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!repo.dir.join("evil.txt").exists());
    let tools: Vec<&str> = asked
        .iter()
        .filter_map(|r| r["tool_name"].as_str())
        .collect();
    assert_eq!(tools, ["ExitPlanMode", "Write"]);
    assert!(asked[0]["input"].get("mode").is_none(), "{}", asked[0]);
    assert!(result_text(&server, "toolu_p").contains("default mode"));
}

/// From an attack: Monitor's command obeys Bash's deny rules, and in bypassPermissions its
/// ask rules (it was decided by the tool's name alone and ran unsandboxed).
#[tokio::test]
async fn monitor_commands_obey_bash_deny_and_ask_rules() {
    let ask = json!({"permissions": {"ask": ["Bash(touch:*)"]}}).to_string();
    monitor_obeys(
        &["--disallowedTools", "Bash(touch:*)"],
        "refused as a Bash command",
    )
    .await;
    monitor_obeys(&["--settings", &ask], "needs approval as a Bash command").await;
}

/// A Monitor call of `touch via-monitor.txt` in bypassPermissions without a sandbox, with
/// `rule` given: refused, saying `says`.
async fn monitor_obeys(rule: &[&str], says: &str) {
    let repo = repo("control-monitor-rules");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_m",
            "Monitor",
            json!({"command": "touch via-monitor.txt", "description": "touch"}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let mut args = vec!["--sandbox", "off", "--permission-mode", "bypassPermissions"];
    args.extend(rule);
    let output = drive(&repo, &server, &args, &[user("watch")]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!repo.dir.join("via-monitor.txt").exists());
    let result = result_text(&server, "toolu_m");
    assert!(result.contains(says), "{result}");
}

/// From an attack: a line that is not UTF-8 is one bad line; it ended the input, and with it
/// the session.
#[tokio::test]
async fn a_line_that_is_not_utf8_is_skipped() {
    let repo = repo("control-utf8");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let input: [&[u8]; 2] = [
        b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"caf\xe9\"}}",
        br#"{"type":"user","message":{"role":"user","content":"hello"}}"#,
    ];
    let output = drive(&repo, &server, &[], &input).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("stdin line 1: not UTF-8"), "{stderr}");
    let lines = lines(&output);
    let result = lines.iter().find(|line| line["type"] == "result").unwrap();
    assert_eq!(result["result"], "Hi.");
}

/// From an attack: an answer to an SDK MCP request that is no JSON-RPC response to it ends
/// the call at once with an error (it waited for MCP_TOOL_TIMEOUT, 10 minutes); an allow
/// whose updatedInput is no object runs nothing (it ran the model's input).
#[tokio::test]
async fn garbage_answers_and_bad_bytes_fail_closed_and_fast() {
    let repo = repo("control-garbage");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use("toolu_add", "mcp__calc__add", json!({}))
                .tool_use(
                    "toolu_w",
                    "Write",
                    json!({"file_path": "evil.txt", "content": "x"}),
                ),
        ),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let config = json!({"mcpServers": {"calc": {"type": "sdk", "name": "calc"}}}).to_string();
    let args = ["--permission-prompt-tool", "stdio", "--mcp-config", &config];
    let input = [
        request(
            "i1",
            json!({"subtype": "initialize", "sdkMcpServers": ["calc"]}),
        ),
        user("add"),
    ];
    let started = std::time::Instant::now();
    let (_, output) = converse(&repo, &server, &args, &input, |request| {
        if request["tool_name"] == "Write" {
            let input = "{\"file_path\": \"evil.txt\"}";
            return Ok(json!({"behavior": "allow", "updatedInput": input}));
        }
        if request["subtype"] == "can_use_tool" {
            return Ok(json!({"behavior": "allow"}));
        }
        let message = &request["message"];
        let id = message["id"].clone();
        Ok(match message["method"].as_str() {
            Some("initialize") => json!({"mcp_response": {"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "calc", "version": "1"}}}}),
            Some("tools/list") => json!({"mcp_response": {"jsonrpc": "2.0", "id": id, "result": {
                "tools": [{"name": "add", "inputSchema": {"type": "object"}}]}}}),
            Some("tools/call") => json!({"mcp_response": "garbage"}),
            _ => json!({"mcp_response": {"jsonrpc": "2.0", "result": {}, "id": 0}}),
        })
    })
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let add = result_text(&server, "toolu_add");
    assert!(add.contains("not a JSON-RPC response"), "{add}");
    assert!(!repo.dir.join("evil.txt").exists());
    assert!(result_text(&server, "toolu_w").contains("not an object"));
}

/// `--permission-mode dontAsk`: nobody is asked, not even a program that answers questions;
/// what would be asked is refused.
#[tokio::test]
async fn dont_ask_asks_nobody() {
    let repo = repo("control-dont-ask");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "asked.txt", "content": "x\n"}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let args = [
        "--permission-prompt-tool",
        "stdio",
        "--permission-mode",
        "dontAsk",
    ];
    let input = [
        request("i1", json!({"subtype": "initialize"})),
        user("write"),
    ];
    let (asked, output) = converse(&repo, &server, &args, &input, |request| {
        Err(format!("asked: {request}"))
    })
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(asked.is_empty(), "{asked:?}");
    assert!(!repo.dir.join("asked.txt").exists());
    assert!(result_text(&server, "toolu_w").contains("denied"));
}
