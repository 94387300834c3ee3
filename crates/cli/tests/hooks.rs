//! Hooks as Claude Code 2.1.197 runs them, end to end: the real `agent` binary against
//! testkit, with hook scripts that record every event they receive and answer as a user's
//! hooks would.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{repo, run as agent};
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// Records the event in `.events.jsonl` and answers as the event's hook would.
const HOOK: &str = r#"
import json, os, sys
event = json.load(sys.stdin)
name = event["hook_event_name"]
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], ".events.jsonl"), "a") as f:
    f.write(json.dumps(event) + "\n")
def answer(fields):
    print(json.dumps({"hookSpecificOutput": dict(hookEventName=name, **fields)}))
tool_input = event.get("tool_input") or {}
if name == "SessionStart":
    print("SESSION-START-CONTEXT")
elif name == "UserPromptSubmit":
    if "forbidden" in event["prompt"]:
        print("not on this project", file=sys.stderr)
        sys.exit(2)
    answer({"additionalContext": "PROMPT-CONTEXT"})
elif name == "PreToolUse" and tool_input.get("command") == "echo original":
    answer({"permissionDecision": "allow", "updatedInput": {"command": "echo rewritten"},
            "additionalContext": "PRE-CONTEXT"})
elif name == "PermissionRequest":
    answer({"decision": {"behavior": "allow"}})
elif name == "PostToolUse" and event["tool_name"] == "Read":
    answer({"updatedToolOutput": "READ-REPLACED"})
elif name == "PostToolUseFailure":
    answer({"additionalContext": "FAILURE-CONTEXT"})
elif name == "SubagentStart":
    answer({"additionalContext": "SUBAGENT-CONTEXT"})
"#;

/// Every event of `.events.jsonl`, in the order the hooks ran.
fn events(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join(".events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A project whose settings run [`HOOK`] for every event `events` names.
fn hooked_repo(name: &str, events: &[&str]) -> common::Repo {
    let repo = repo(name);
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    std::fs::write(repo.dir.join(".claude/hook.py"), HOOK).unwrap();
    let command = "python3 \"$CLAUDE_PROJECT_DIR/.claude/hook.py\"";
    let hooks: serde_json::Map<String, Value> = events
        .iter()
        .map(|event| {
            (
                (*event).to_owned(),
                json!([{"hooks": [{"type": "command", "command": command}]}]),
            )
        })
        .collect();
    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        json!({"hooks": hooks}).to_string(),
    )
    .unwrap();
    repo
}

fn text_of(message: &Value) -> String {
    message.to_string()
}

/// One headless session with a hook on every event that has a meaning in it: each runs at
/// its moment with Claude Code's input, and what each answers takes effect.
#[tokio::test]
async fn every_hook_runs_at_its_moment_with_claude_codes_input() {
    let repo = hooked_repo(
        "hooks-all",
        &[
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PermissionRequest",
            "PostToolUse",
            "PostToolUseFailure",
            "SubagentStart",
            "SubagentStop",
            "Stop",
            "SessionEnd",
            "Notification",
        ],
    );
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(
                Turn::new()
                    .tool_use("toolu_b", "Bash", json!({"command": "echo original"}))
                    .tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"})),
            ),
            Reply::turn(
                Turn::new()
                    .tool_use(
                        "toolu_w",
                        "Write",
                        json!({"file_path": "made.txt", "content": "made\n"}),
                    )
                    .tool_use("toolu_f", "Bash", json!({"command": "ls nothing-here"})),
            ),
            Reply::turn(Turn::new().tool_use(
                "toolu_t",
                "Task",
                json!({"description": "look", "prompt": "SUB: look around", "subagent_type": "general-purpose"}),
            )),
            Reply::turn(Turn::new().text("All done.")),
        ])
        .route("SUB:", vec![Reply::turn(Turn::new().text("Looked."))]),
    )
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &["-p", "go", "--trust", "--output-format", "json"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // No hook failed or said anything on stderr.
    assert!(!stderr.contains("hook"), "{stderr}");

    let events = events(&repo.dir);
    let names: Vec<&str> = events
        .iter()
        .map(|event| event["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names[..2],
        ["SessionStart", "UserPromptSubmit"],
        "{names:?}"
    );
    assert_eq!(
        names[names.len() - 2..],
        ["Stop", "SessionEnd"],
        "{names:?}"
    );
    let count = |name: &str| names.iter().filter(|&&n| n == name).count();
    // Bash twice, Read, Write and Task: PreToolUse for each call.
    assert_eq!(count("PreToolUse"), 5, "{names:?}");
    // The Write needed approval: the hook gave it in the user's place (headless, so no
    // Notification).
    assert_eq!(count("PermissionRequest"), 1, "{names:?}");
    assert_eq!(count("Notification"), 0, "{names:?}");
    assert_eq!(count("PostToolUseFailure"), 1, "{names:?}");
    assert_eq!(count("SubagentStart"), 1, "{names:?}");
    assert_eq!(count("SubagentStop"), 1, "{names:?}");

    // Every input carries the session's facts.
    let session_id = events[0]["session_id"].as_str().unwrap().to_owned();
    for event in &events {
        assert_eq!(event["session_id"], session_id.as_str(), "{event}");
        assert_eq!(event["permission_mode"], "default", "{event}");
        assert!(
            event["transcript_path"]
                .as_str()
                .unwrap()
                .ends_with(&format!("{session_id}.jsonl")),
            "{event}"
        );
        assert_eq!(
            std::path::Path::new(event["cwd"].as_str().unwrap()),
            repo.dir.canonicalize().unwrap(),
            "{event}"
        );
    }
    let find = |name: &str| {
        events
            .iter()
            .find(|event| event["hook_event_name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(find("SessionStart")["source"], "startup");
    assert_eq!(find("UserPromptSubmit")["prompt"], "go");
    assert_eq!(find("SessionEnd")["reason"], "other");
    assert_eq!(find("Stop")["stop_hook_active"], false);
    assert_eq!(find("Stop")["last_assistant_message"], "All done.");
    let request = find("PermissionRequest");
    assert_eq!(request["tool_name"], "Write");
    assert_eq!(request["tool_input"]["file_path"], "made.txt");
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("made.txt")).unwrap(),
        "made\n",
        "the approved call ran"
    );
    let failure = find("PostToolUseFailure");
    assert_eq!(failure["tool_use_id"], "toolu_f");
    assert_eq!(failure["is_interrupt"], false);
    assert!(failure["duration_ms"].is_u64(), "{failure}");
    assert!(
        failure["error"].as_str().unwrap().contains("nothing-here"),
        "{failure}"
    );
    let start = find("SubagentStart");
    assert_eq!(start["agent_type"], "general-purpose");
    let stop = find("SubagentStop");
    assert_eq!(stop["agent_id"], start["agent_id"]);
    assert_eq!(stop["last_assistant_message"], "Looked.");
    assert!(
        stop["agent_transcript_path"]
            .as_str()
            .unwrap()
            .contains("subagents"),
        "{stop}"
    );
    // The PostToolUse of the rewritten Bash call saw what ran.
    let post_bash = events
        .iter()
        .find(|event| event["hook_event_name"] == "PostToolUse" && event["tool_name"] == "Bash")
        .unwrap();
    assert_eq!(
        post_bash["tool_input"],
        json!({"command": "echo rewritten"})
    );
    assert_eq!(post_bash["tool_response"]["stdout"], "rewritten");

    // What the hooks answered reached the model.
    let requests = server.requests();
    let first = requests[0].json();
    let prompt = text_of(&first["messages"][0]);
    assert!(
        prompt.contains("SessionStart hook additional context: SESSION-START-CONTEXT"),
        "{prompt}"
    );
    assert!(
        prompt.contains("UserPromptSubmit hook additional context: PROMPT-CONTEXT"),
        "{prompt}"
    );
    let second = requests[1].json();
    let results = second["messages"][2]["content"].as_array().unwrap();
    let bash = text_of(&results[0]);
    assert!(
        bash.contains("rewritten") && !bash.contains("original"),
        "{bash}"
    );
    assert!(bash.contains("PRE-CONTEXT"), "{bash}");
    assert_eq!(results[1]["content"], "READ-REPLACED");
    let third = requests[2].json();
    let failed = text_of(third["messages"].as_array().unwrap().last().unwrap());
    assert!(failed.contains("FAILURE-CONTEXT"), "{failed}");
    let sub = requests
        .iter()
        .map(|request| request.json())
        .find(|request| request.to_string().contains("SUB: look around"))
        .unwrap();
    assert!(
        text_of(&sub["messages"][0]).contains("SUBAGENT-CONTEXT"),
        "{sub}"
    );
}

/// A UserPromptSubmit hook that blocks: nothing is sent, the reason is told, the run fails;
/// the SessionEnd hooks still run.
#[tokio::test]
async fn a_blocked_prompt_is_never_sent() {
    let repo = hooked_repo("hooks-blocked", &["UserPromptSubmit", "SessionEnd"]);
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("no"))]))
        .await
        .unwrap();
    let output = agent(&repo, &server, &["-p", "a forbidden thing", "--trust"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("a UserPromptSubmit hook blocked the prompt: not on this project"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 0);
    let names: Vec<Value> = events(&repo.dir)
        .iter()
        .map(|event| event["hook_event_name"].clone())
        .collect();
    assert_eq!(names, [json!("UserPromptSubmit"), json!("SessionEnd")]);
}
