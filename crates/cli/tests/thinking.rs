//! Thinking and effort end to end: the request bodies `agent` sends for each effort level on
//! each provider family, and thinking blocks sent back as they came.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::repo;
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// The first request of `agent -p hi` with `args` (and `env`), against a fresh server.
async fn first_request(args: &[&str], env: &[(&str, &str)]) -> Value {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let repo = repo(&format!("thinking-{number}"));
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let mut command = common::command(&repo, &server);
    command
        .env_remove("OPENAI_API_KEY")
        .args(["-p", "hi"])
        .args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().await.unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    server.requests()[0].json()
}

#[tokio::test]
async fn each_effort_reaches_the_anthropic_api_as_the_model_takes_it() {
    // Claude Code's default: adaptive thinking, the API's own effort.
    let request = first_request(&[], &[]).await;
    assert_eq!(request["thinking"], json!({"type": "adaptive"}));
    assert_eq!(request.get("output_config"), None);
    for level in ["low", "medium", "high", "xhigh", "max"] {
        let request = first_request(&["--effort", level], &[]).await;
        assert_eq!(
            request["output_config"],
            json!({"effort": level}),
            "{level}"
        );
        assert_eq!(request["thinking"], json!({"type": "adaptive"}), "{level}");
    }
    // Sonnet 4.6 takes no xhigh: high is sent.
    let request = first_request(&["--model", "claude-sonnet-4-6", "--effort", "xhigh"], &[]).await;
    assert_eq!(request["output_config"], json!({"effort": "high"}));
    // An earlier model thinks with a budget, by effort, and takes no effort level.
    for (level, budget) in [("low", 2_048), ("medium", 8_192), ("high", 16_384)] {
        let request =
            first_request(&["--model", "claude-sonnet-4-5", "--effort", level], &[]).await;
        assert_eq!(
            request["thinking"],
            json!({"type": "enabled", "budget_tokens": budget}),
            "{level}"
        );
        assert_eq!(request.get("output_config"), None, "{level}");
        assert!(request["max_tokens"].as_u64().unwrap() > budget, "{level}");
    }
    let request = first_request(
        &["--model", "claude-sonnet-4-5"],
        &[("MAX_THINKING_TOKENS", "5000")],
    )
    .await;
    assert_eq!(
        request["thinking"],
        json!({"type": "enabled", "budget_tokens": 5000})
    );
    // Thinking off; a model that does not think.
    let request = first_request(&["--effort", "low"], &[("MAX_THINKING_TOKENS", "0")]).await;
    assert_eq!(request.get("thinking"), None);
    assert_eq!(request["output_config"], json!({"effort": "low"}));
    let request = first_request(&["--settings", r#"{"alwaysThinkingEnabled": false}"#], &[]).await;
    assert_eq!(request.get("thinking"), None);
    let request = first_request(&["--model", "claude-3-5-haiku", "--effort", "high"], &[]).await;
    assert_eq!(
        (request.get("thinking"), request.get("output_config")),
        (None, None)
    );
    // The setting, and the flag over it.
    let request = first_request(&["--settings", r#"{"effortLevel": "medium"}"#], &[]).await;
    assert_eq!(request["output_config"], json!({"effort": "medium"}));
    let request = first_request(
        &[
            "--settings",
            r#"{"effortLevel": "medium"}"#,
            "--effort",
            "low",
        ],
        &[],
    )
    .await;
    assert_eq!(request["output_config"], json!({"effort": "low"}));
}

#[tokio::test]
async fn openai_formats_get_the_effort_as_theirs() {
    let request = first_request(
        &[
            "--provider",
            "openai",
            "--model",
            "gpt-5",
            "--effort",
            "low",
        ],
        &[],
    )
    .await;
    assert_eq!(request["reasoning_effort"], "low");
    assert_eq!(request.get("thinking"), None);
    let request = first_request(
        &[
            "--provider",
            "openai",
            "--model",
            "gpt-5",
            "--effort",
            "max",
        ],
        &[],
    )
    .await;
    assert_eq!(request["reasoning_effort"], "high");
    let request = first_request(&["--provider", "openai", "--model", "gpt-5"], &[]).await;
    assert_eq!(request.get("reasoning_effort"), None);
    let request = first_request(
        &[
            "--provider",
            "openai-responses",
            "--model",
            "gpt-5",
            "--effort",
            "medium",
        ],
        &[],
    )
    .await;
    assert_eq!(
        request["reasoning"],
        json!({"summary": "auto", "effort": "medium"})
    );
}

#[tokio::test]
async fn a_bad_effort_is_named() {
    let repo = repo("thinking-bad");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = common::run(&repo, &server, &["-p", "hi", "--effort", "ultra"]).await;
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"ultra\" is not a level: low, medium, high, xhigh or max"),
        "{stderr}"
    );
    let output = common::run(
        &repo,
        &server,
        &["-p", "hi", "--settings", r#"{"effortLevel": 3}"#],
    )
    .await;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("effortLevel 3"), "{stderr}");
    assert!(server.requests().is_empty());
}

/// A thinking block and its signature go back byte for byte with the tool result that
/// follows it, as the API requires.
#[tokio::test]
async fn thinking_blocks_go_back_as_they_came() {
    let repo = repo("thinking-replay");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .thinking(
                    "Let me look at the notes first.\nThen answer.",
                    "c2lnbmF0dXJlLTEyMw==",
                )
                .tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"})),
        ),
        Reply::turn(Turn::new().text("Milk.")),
    ]))
    .await
    .unwrap();
    let output = common::run(&repo, &server, &["-p", "what do the notes say?"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let second = server.requests()[1].json();
    let assistant = &second["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "Let me look at the notes first.\nThen answer.", "signature": "c2lnbmF0dXJlLTEyMw=="})
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(second["thinking"], json!({"type": "adaptive"}));
}

/// Claude Code's `[1m]` spelling: the model id without it, with the 1M-window beta flag.
#[tokio::test]
async fn a_model_written_with_the_1m_suffix_is_sent_as_the_api_expects() {
    let repo = repo("thinking-1m");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = common::run(
        &repo,
        &server,
        &[
            "-p",
            "hi",
            "--model",
            "Sonnet[1M]",
            "--output-format",
            "json",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let request = &server.requests()[0];
    assert_eq!(request.json()["model"], "claude-sonnet-5");
    assert_eq!(
        request.header("anthropic-beta"),
        Some("context-1m-2025-08-07")
    );
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = common::run(
        &repo,
        &server,
        &["-p", "hi", "--model", "opus[1m]", "--output-format", "json"],
    )
    .await;
    assert!(output.status.success());
    let request = &server.requests()[0];
    assert_eq!(request.json()["model"], "claude-opus-4-8");
    assert_eq!(
        request.header("anthropic-beta"),
        Some("context-1m-2025-08-07")
    );
}

/// Time to first token, per request: a `--verbose` line each, and a summary in the result.
#[tokio::test]
async fn the_time_to_first_token_is_measured_per_request() {
    let repo = repo("thinking-ttft");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().text("Milk.")),
    ]))
    .await
    .unwrap();
    let output = common::run(
        &repo,
        &server,
        &["-p", "notes?", "--verbose", "--output-format", "json"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("agent: first token after ").count(),
        2,
        "{stderr}"
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    let ttft = &result["ttft_ms"];
    assert_eq!(ttft["requests"], 2, "{result}");
    assert!(ttft["max"].as_u64().unwrap() >= ttft["median"].as_u64().unwrap());
    assert!(ttft["last"].as_u64().is_some());
}

/// A redacted_thinking block survives unchanged beside a thinking block: in the next request
/// of the turn, and in the first request of the session continued later (`--continue`).
#[tokio::test]
async fn thinking_and_redacted_thinking_survive_a_turn_and_a_resume() {
    let repo = repo("thinking-redacted");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .thinking("Plan: read the notes.", "c2lnLTE=")
                .redacted_thinking("RU5DUllQVEVELWJsb2I=")
                .tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"})),
        ),
        Reply::turn(Turn::new().text("Milk.")),
        Reply::turn(Turn::new().text("Still milk.")),
    ]))
    .await
    .unwrap();
    let output = common::run(&repo, &server, &["-p", "notes?"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = common::run(&repo, &server, &["-p", "and now?", "--continue"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = json!([
        {"type": "thinking", "thinking": "Plan: read the notes.", "signature": "c2lnLTE="},
        {"type": "redacted_thinking", "data": "RU5DUllQVEVELWJsb2I="},
    ]);
    for index in [1, 2] {
        let request = server.requests()[index].json();
        let assistant = &request["messages"][1];
        assert_eq!(assistant["role"], "assistant", "request {index}");
        assert_eq!(
            json!([assistant["content"][0], assistant["content"][1]]),
            expected,
            "request {index}"
        );
    }
}

/// A response cut at max_tokens after its thinking: the first recovery asks again with a
/// higher cap (nothing of the cut response is sent); a second cut is kept and continued,
/// its thinking block sent back unchanged, never edited.
#[tokio::test]
async fn max_tokens_recovery_keeps_a_thinking_block_whole() {
    let repo = repo("thinking-max-tokens");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .thinking("Long plan, first part.", "c2lnLW1heA==")
                .text("The answer beg")
                .stop("max_tokens"),
        ),
        // Cut again at the raised cap: this time the loop keeps it and asks to go on.
        Reply::turn(
            Turn::new()
                .thinking("Long plan, first part.", "c2lnLW1heA==")
                .text("The answer beg")
                .stop("max_tokens"),
        ),
        Reply::turn(Turn::new().text("ins and ends.")),
    ]))
    .await
    .unwrap();
    let output = common::run(&repo, &server, &["-p", "answer"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let mut kept = 0;
    for request in &requests[1..] {
        let body = request.json();
        for message in body["messages"].as_array().unwrap() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "thinking" {
                    kept += 1;
                    assert_eq!(
                        block,
                        &json!({"type": "thinking", "thinking": "Long plan, first part.", "signature": "c2lnLW1heA=="})
                    );
                }
            }
        }
        assert!(body["max_tokens"].as_u64().unwrap() > 0);
    }
    // The second cut response went back whole, its thinking first.
    assert_eq!(kept, 1);
}

/// The fallback model answers without the configured model's thinking and effort (adaptive
/// thinking sent to a model that takes only budgets is refused).
#[tokio::test]
async fn the_fallback_model_is_not_sent_the_first_ones_thinking() {
    let repo = repo("thinking-fallback");
    let overloaded = || {
        let mut reply = Reply::error(529, "overloaded_error", "Overloaded");
        reply.headers.push(("retry-after".into(), "0".into()));
        reply
    };
    let server = Server::start_tls(Script::new(vec![
        overloaded(),
        overloaded(),
        overloaded(),
        Reply::turn(Turn::new().text("From the fallback.")),
    ]))
    .await
    .unwrap();
    let output = common::run(
        &repo,
        &server,
        &[
            "-p",
            "hi",
            "--effort",
            "high",
            "--fallback-model",
            "claude-sonnet-4-5",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = server.requests();
    let first = requests[0].json();
    assert_eq!(first["thinking"], json!({"type": "adaptive"}));
    let last = requests.last().unwrap().json();
    assert_eq!(last["model"], "claude-sonnet-4-5");
    assert_eq!(
        (last.get("thinking"), last.get("output_config")),
        (None, None)
    );
}

/// Autocompaction mid-task: the turn kept after the summary keeps its thinking and
/// redacted_thinking blocks byte for byte (they belong to the tool_use whose result follows),
/// and the summary request (a fork of the main request) carries every turn's thinking
/// unchanged, with the main request's thinking configuration.
#[tokio::test]
async fn autocompaction_keeps_the_kept_turns_thinking_whole() {
    let repo = repo("thinking-compact");
    // Two results of about 11,000 tokens each; the autocompact threshold set to 12 % of the
    // usable window (21,600 tokens) is crossed once the second comes in.
    for name in ["alpha", "bravo"] {
        let text: String = (0..700)
            .map(|n| format!("{name} {n:04} of a long file that fills the context window\n"))
            .collect();
        std::fs::write(repo.dir.join(format!("{name}.txt")), text).unwrap();
    }
    let first_thinking =
        json!({"type": "thinking", "thinking": "Alpha first.", "signature": "c2lnLWFscGhh"});
    let kept = json!([
        {"type": "thinking", "thinking": "Now bravo,\nthen answer.", "signature": "c2lnLWJyYXZv"},
        {"type": "redacted_thinking", "data": "RU5DLWJyYXZv"},
    ]);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .thinking("Alpha first.", "c2lnLWFscGhh")
                .tool_use("toolu_a", "Read", json!({"file_path": "alpha.txt"})),
        ),
        Reply::turn(
            Turn::new()
                .thinking("Now bravo,\nthen answer.", "c2lnLWJyYXZv")
                .redacted_thinking("RU5DLWJyYXZv")
                .tool_use("toolu_b", "Read", json!({"file_path": "bravo.txt"}))
                .usage(15_000, 50),
        ),
        Reply::turn(Turn::new().text("SUMMARY-OF-WORK: alpha.txt was read.")),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let mut command = common::command(&repo, &server);
    command
        .env("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "12")
        .args(["-p", "read both files"]);
    let output = command.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{stderr}");

    // The summary request, a fork of the main request: its thinking configuration is the main
    // request's (a change would make the API drop the cached messages), and every turn's
    // thinking goes as it came.
    let summary = requests[2].json();
    assert_eq!(summary["thinking"], requests[1].json()["thinking"]);
    let summarized: Vec<&Value> = summary["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|message| message["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "thinking" || block["type"] == "redacted_thinking")
        .collect();
    let kept_blocks: Vec<&Value> = kept.as_array().unwrap().iter().collect();
    assert_eq!(
        summarized,
        [vec![&first_thinking], kept_blocks].concat(),
        "every turn's thinking, unchanged"
    );

    // After it: the summary, then the kept turn with its thinking first and whole.
    let after = requests[3].json();
    assert_eq!(after["thinking"], json!({"type": "adaptive"}));
    let messages = after["messages"].as_array().unwrap();
    assert!(messages[0].to_string().contains("SUMMARY-OF-WORK"));
    let assistant = messages
        .iter()
        .find(|message| message.to_string().contains("toolu_b"))
        .expect("the kept turn");
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        json!([assistant["content"][0], assistant["content"][1]]),
        kept
    );
    assert_eq!(assistant["content"][2]["id"], "toolu_b");
    // The summarized turn's thinking is gone with it.
    assert!(!after.to_string().contains("Alpha first."));
}
