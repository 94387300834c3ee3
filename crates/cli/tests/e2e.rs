//! End-to-end: the real `agent` binary against testkit over TLS, in a temporary git repository.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{
    command, lines, processes_running, repo, result_text, run as agent, unique_sleep,
    wait_for_process,
};

use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// Every request's tool_results answer exactly the previous request's tool_uses... checked as:
/// the last user message's tool_result ids equal the previous assistant message's tool_use ids.
fn check_pairing(request: &Value) {
    let messages = request["messages"].as_array().unwrap();
    for pair in messages.windows(2) {
        if pair[0]["role"] == "assistant" {
            let uses: Vec<&Value> = pair[0]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| &b["id"])
                .collect();
            let results: Vec<&Value> = pair[1]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| &b["tool_use_id"])
                .collect();
            assert_eq!(
                uses, results,
                "tool_results pair with the previous tool_uses"
            );
        }
    }
}

/// The same four turns from OpenAI's Responses API (`--provider openai-responses`, testkit's
/// Responses mode): the requests are `/responses` bodies (the history whole, `store: false`,
/// each tool call answered by its `function_call_output`), and the file ends as it does
/// with the other providers.
#[tokio::test]
async fn a_four_turn_session_over_the_responses_api() {
    let repo = repo("four-responses");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/four-turn.json");
    let script = Script::from_json(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let server = Server::start_tls(script).await.unwrap();
    let output = command(&repo, &server)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .args([
            "--provider",
            "openai-responses",
            "--model",
            "gpt-5",
            "-p",
            "fix the greeting",
            "--output-format",
            "stream-json",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash(cat:*)",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("greet.py")).unwrap(),
        "def greet():\n    return 'hello'\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert!(request.path.ends_with("/responses"), "{}", request.path);
        let body = request.json();
        assert_eq!(body["store"], false);
        assert!(body.get("previous_response_id").is_none(), "{body}");
    }
    let last = requests[3].json();
    assert_eq!(last["model"], "gpt-5");
    assert!(last["instructions"].is_string());
    assert_eq!(last["tools"][0]["type"], "function");
    let input = last["input"].as_array().unwrap();
    // Every function_call is answered by its output, in order, and the history is whole.
    let calls: Vec<&Value> = input
        .iter()
        .filter(|item| item["type"] == "function_call")
        .map(|item| &item["call_id"])
        .collect();
    let outputs: Vec<&Value> = input
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| &item["call_id"])
        .collect();
    assert_eq!(calls.len(), 4, "{last}");
    assert_eq!(calls, outputs);
    assert_eq!(input[0]["role"], "user");
    let bash = input.last().unwrap()["output"].as_str().unwrap_or_default();
    assert!(bash.contains("return 'hello'"), "{bash}");
    let lines = lines(&output);
    let result = lines.last().unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["num_turns"], 4);
    assert_eq!(result["stop_reason"], "end_turn");
}

/// The same four turns from an OpenAI-compatible Chat Completions server (`--provider
/// openai`): the requests are Chat Completions bodies (tool results as `tool` messages after
/// the assistant's `tool_calls`), and the file ends as it does with the Messages API.
#[tokio::test]
async fn a_four_turn_session_over_chat_completions() {
    let repo = repo("four-chat");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/four-turn.json");
    let script = Script::from_json(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let server = Server::start_tls(script).await.unwrap();
    let output = command(&repo, &server)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .args([
            "--provider",
            "openai",
            "--model",
            "qwen3-coder",
            "-p",
            "fix the greeting",
            "--output-format",
            "stream-json",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash(cat:*)",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("greet.py")).unwrap(),
        "def greet():\n    return 'hello'\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert!(
            request.path.ends_with("/chat/completions"),
            "{}",
            request.path
        );
        assert!(
            !request
                .headers
                .iter()
                .any(|(name, _)| name == "anthropic-version"),
            "{:?}",
            request.headers
        );
    }
    let last = requests[3].json();
    assert_eq!(last["model"], "qwen3-coder");
    assert_eq!(last["stream"], true);
    assert_eq!(last["messages"][0]["role"], "system");
    assert!(
        last["tools"][0]["function"]["name"].is_string(),
        "{}",
        last["tools"]
    );
    let messages = last["messages"].as_array().unwrap();
    // Every tool_calls id is answered by the `tool` message right after.
    for (at, message) in messages.iter().enumerate() {
        for (offset, call) in message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let answer = &messages[at + 1 + offset];
            assert_eq!(answer["role"], "tool", "{answer}");
            assert_eq!(answer["tool_call_id"], call["id"], "{answer}");
        }
    }
    let bash = messages.last().unwrap()["content"]
        .as_str()
        .unwrap_or_default();
    assert!(bash.contains("return 'hello'"), "{bash}");
    let lines = lines(&output);
    let result = lines.last().unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["num_turns"], 4);
    assert_eq!(result["result"], "Fixed the typo in greet.py.");
    assert_eq!(result["usage"]["input_tokens"], 400);
}

/// The user guide's recipe for a local model (docs/user-guide.md, Models), against a scripted stand-in of Ollama's
/// OpenAI-compatible endpoint: a `providers` entry in the user's settings and a
/// `NAME/model` model choose the server; the `models` entry sets the window.
#[tokio::test]
async fn the_local_model_recipe_runs_against_an_ollama_stand_in() {
    let repo = repo("ollama");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().text("It says to remember the milk.")),
    ]))
    .await
    .unwrap();
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("settings.json"),
        json!({
            "providers": {"ollama": {"type": "openai", "baseUrl": format!("{}/v1", server.base_url())}},
            "models": {"qwen3-coder": {
                "contextWindow": 65536, "maxOutput": 8192,
                "prices": {"input": 1.0, "output": 2.0, "cacheRead": 0.5},
            }},
        })
        .to_string(),
    )
    .unwrap();
    // The stand-in is the test server itself: --base-url is not given, the entry's URL is.
    let cert = repo.home.join("ca.pem");
    std::fs::write(&cert, server.cert_pem().unwrap()).unwrap();
    let mut run = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"));
    run.arg("-C")
        .arg(&repo.dir)
        .arg("--ca-cert")
        .arg(&cert)
        .env("HOME", &repo.home)
        .env("XDG_CONFIG_HOME", repo.home.join("config"))
        .env("XDG_DATA_HOME", repo.home.join("data"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_MODEL")
        .args([
            "--model",
            "ollama/qwen3-coder",
            "-p",
            "what do the notes say?",
        ])
        .args(["--output-format", "json"]);
    let output = run.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("is not known"), "{stderr}");
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["result"], "It says to remember the milk.");
    // The cost comes from the entry's prices (a model the built-in table does not know).
    let usage = &result["usage"];
    let tokens = |key: &str| usage[key].as_f64().unwrap_or(0.0);
    let expected = (tokens("input_tokens") * 1.0
        + tokens("output_tokens") * 2.0
        + tokens("cache_read_input_tokens") * 0.5
        + tokens("cache_creation_input_tokens") * 1.0)
        / 1_000_000.0;
    assert!(expected > 0.0, "{usage}");
    let cost = result["total_cost_usd"].as_f64().unwrap();
    assert!(
        (cost - expected).abs() < 1e-12,
        "{cost} != {expected}: {usage}"
    );
    // The session list shows the same cost (it showed `?`: it priced the usage again with
    // the built-in table, which does not know the model), taken from the transcript.
    let listed = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"))
        .args(["sessions", "--json", "-C"])
        .arg(&repo.dir)
        .env("HOME", &repo.home)
        .env("XDG_CONFIG_HOME", repo.home.join("config"))
        .env("XDG_DATA_HOME", repo.home.join("data"))
        .output()
        .await
        .unwrap();
    let list: Value = serde_json::from_slice(&listed.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&listed.stderr)));
    let listed_cost = list[0]["total_cost_usd"].as_f64();
    assert!(
        listed_cost.is_some_and(|listed| (listed - cost).abs() < 1e-12),
        "{list}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].json()["model"], "qwen3-coder");
    assert_eq!(requests[0].json()["max_tokens"], 8192);
    assert!(
        requests[1].json()["messages"]
            .to_string()
            .contains("remember the milk"),
        "the Read result went back as a tool message"
    );
}

/// A Claude Code user's `.claude/` folder works unchanged: `.claude/settings.json` allows
/// Edit (in a trusted folder), `.agent/settings.json` wins over it where both speak,
/// `.claude/settings.local.json`'s deny rule applies even untrusted, and `.claude/CLAUDE.md`
/// and `CLAUDE.local.md` reach the model. A typo in a key is warned about.
#[tokio::test]
async fn a_claude_code_folder_works_unchanged() {
    for trusted in [true, false] {
        let repo = repo(&format!("claude-folder-{trusted}"));
        std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
        std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
        std::fs::write(
            repo.dir.join(".claude/settings.json"),
            json!({"permissions": {"allow": ["Edit"]}, "model": "from-claude", "permisions": {}})
                .to_string(),
        )
        .unwrap();
        std::fs::write(
            repo.dir.join(".agent/settings.json"),
            json!({"model": "from-agent"}).to_string(),
        )
        .unwrap();
        std::fs::write(
            repo.dir.join(".claude/settings.local.json"),
            json!({"permissions": {"deny": ["Read(./notes.txt)"]}}).to_string(),
        )
        .unwrap();
        // The user's own Claude Code settings: a mode agent does not have, a key it ignores.
        std::fs::create_dir_all(repo.home.join(".claude")).unwrap();
        std::fs::write(
            repo.home.join(".claude/settings.json"),
            json!({"permissions": {"defaultMode": "dontAsk"}, "theme": "dark"}).to_string(),
        )
        .unwrap();
        std::fs::write(
            repo.dir.join(".claude/CLAUDE.md"),
            "claude-folder-memory-marker",
        )
        .unwrap();
        std::fs::write(repo.dir.join("CLAUDE.local.md"), "local-memory-marker").unwrap();
        let server = Server::start_tls(Script::new(vec![
            Reply::turn(
                Turn::new()
                    .tool_use("toolu_r", "Read", json!({"file_path": "greet.py"}))
                    .tool_use("toolu_n", "Read", json!({"file_path": "notes.txt"})),
            ),
            Reply::turn(Turn::new().tool_use(
                "toolu_e",
                "Edit",
                json!({"file_path": "greet.py", "old_string": "helo", "new_string": "hello"}),
            )),
            Reply::turn(Turn::new().text("Done.")),
        ]))
        .await
        .unwrap();
        let mut run = command(&repo, &server);
        if trusted {
            run.arg("--trust");
        }
        let output = run
            .args(["-p", "fix the greeting", "--output-format", "stream-json"])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("unknown setting \"permisions\" is ignored"),
            "{stderr}"
        );
        assert!(
            stderr.contains(
                "permissions.defaultMode \"dontAsk\" (a Claude Code mode) is not supported"
            ),
            "{stderr}"
        );
        // Claude Code's own screens' settings (`theme`) change nothing here: not a word.
        assert!(!stderr.contains("theme"), "{stderr}");
        let first = server.requests()[0].json();
        assert_eq!(first["model"], "from-agent", "{trusted}");
        let context = first["messages"].to_string();
        assert!(context.contains("claude-folder-memory-marker"), "{context}");
        assert!(context.contains("local-memory-marker"), "{context}");
        let denied = result_text(&server, "toolu_n");
        assert!(denied.contains("denied"), "{trusted}: {denied}");
        let greet = std::fs::read_to_string(repo.dir.join("greet.py")).unwrap();
        if trusted {
            assert!(greet.contains("'hello'"), "{greet}");
        } else {
            assert!(greet.contains("'helo'"), "the untrusted allow rule applied");
        }
    }
}

/// Custom slash commands from `.claude/commands/`: `-p "/git:fix 42 high"` sends the
/// command's prompt with its arguments, and `system/init` lists the commands.
#[tokio::test]
async fn a_custom_command_runs_headless() {
    let repo = repo("commands");
    std::fs::create_dir_all(repo.dir.join(".claude/commands/git")).unwrap();
    std::fs::write(
        repo.dir.join(".claude/commands/git/fix.md"),
        "---\ndescription: Fix an issue\nargument-hint: [issue] [priority]\n---\nFix issue #$1 ($2 priority). Context: $ARGUMENTS\n",
    )
    .unwrap();
    std::fs::write(
        repo.dir.join(".claude/commands/review.md"),
        "Review the diff.",
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Fixed."))]))
        .await
        .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "/git:fix 42 high", "--output-format", "stream-json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let init = &lines(&output)[0];
    assert_eq!(
        init["slash_commands"],
        json!(["git:fix", "review"]),
        "{init}"
    );
    let messages = server.requests()[0].json()["messages"].to_string();
    assert!(
        messages.contains("Fix issue #42 (high priority). Context: 42 high"),
        "{messages}"
    );
    assert!(!messages.contains("/git:fix"), "{messages}");
}

/// A model nothing configures gets its window from the server: vLLM's `max_model_len` in
/// `/v1/models`, else llama.cpp's `n_ctx` in `/props`, else the window Ollama runs the
/// loaded model with (`/api/ps`), else a `num_ctx` of the model's parameters in Ollama's
/// `/api/show`; the output cap follows (a quarter of a small window).
/// Without any, 32,768 tokens are assumed, with a warning.
#[tokio::test]
async fn an_openai_compatible_server_reports_the_models_window() {
    for (path, body, max_tokens) in [
        // The test server's URL is the base (no `/v1`), so vLLM's `/v1/models` is `/models`.
        (
            "/models",
            json!({"object": "list", "data": [
                {"id": "other", "max_model_len": 4096},
                {"id": "local-model-x", "object": "model", "max_model_len": 16384},
            ]}),
            Some(4096),
        ),
        // LM Studio's own listing: the window the model is loaded with, not its maximum.
        (
            "/api/v0/models",
            json!({"object": "list", "data": [
                {"id": "local-model-x", "type": "llm", "state": "loaded", "max_context_length": 131072, "loaded_context_length": 14000},
            ]}),
            Some(3500),
        ),
        // (A 10,240-token window cannot hold the tools, the system prompt and Claude Code's
        // buffers: the first request would be blocked.)
        (
            "/props",
            json!({"default_generation_settings": {"n_ctx": 14336}}),
            Some(3584),
        ),
        // Ollama with the model loaded: the window it runs with (`/api/ps`).
        (
            "/api/ps",
            json!({"models": [
                {"name": "llama3:latest", "model": "llama3:latest", "context_length": 4096},
                {"name": "local-model-x:latest", "model": "local-model-x:latest", "context_length": 14000},
            ]}),
            Some(3500),
        ),
        // Ollama, not loaded: only a num_ctx of the model's parameters counts.
        (
            "/api/show",
            json!({"parameters": "stop \"<|im_end|>\"\nnum_ctx 14000", "model_info": {"qwen3.context_length": 262144}}),
            Some(3500),
        ),
        ("/nothing", json!({}), None),
    ] {
        let repo = repo("chat-window");
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
            .await
            .unwrap();
        server.answer_get(path, body);
        let output = command(&repo, &server)
            .env_remove("OPENAI_API_KEY")
            .args([
                "--provider",
                "openai",
                "--model",
                "local-model-x",
                "-p",
                "hi",
            ])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{path}: {stderr}");
        let sent = server.requests()[0].json()["max_tokens"].clone();
        match max_tokens {
            Some(cap) => {
                assert_eq!(sent, cap, "{path}");
                assert!(!stderr.contains("is not known"), "{path}: {stderr}");
            }
            None => {
                assert_eq!(sent, 8192, "{path}");
                assert!(stderr.contains("assuming 32768 tokens"), "{stderr}");
                assert_eq!(
                    server.gets(),
                    [
                        "/models",
                        "/api/v0/models",
                        "/props",
                        "/api/ps",
                        "/api/show"
                    ]
                );
            }
        }
    }
}

/// An open model of the data table (`qwen3-coder`) that the server says nothing about gets
/// the table's window and output cap, and no warning; a window the server reports still
/// decides (Ollama may serve less).
#[tokio::test]
async fn an_open_model_takes_the_tables_window_unless_the_server_reports_one() {
    for (reported, max_tokens) in [(None, 32_000), (Some(16_384), 4_096)] {
        let repo = repo("open-model-window");
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
            .await
            .unwrap();
        if let Some(window) = reported {
            server.answer_get(
                "/props",
                json!({"default_generation_settings": {"n_ctx": window}}),
            );
        }
        let output = command(&repo, &server)
            .env_remove("OPENAI_API_KEY")
            .args([
                "--provider",
                "openai",
                "--model",
                "qwen3-coder:30b",
                "-p",
                "hi",
            ])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert_eq!(
            server.requests()[0].json()["max_tokens"],
            max_tokens,
            "{reported:?}"
        );
        assert!(!stderr.contains("is not known"), "{stderr}");
        assert_eq!(
            stderr.contains("using its model card's 262144 tokens"),
            reported.is_none(),
            "{stderr}"
        );
    }
}

/// `--fallback-model NAME/model` may name another provider: after three overloaded answers
/// from an OpenAI-compatible server, the run goes on with a Messages API server from
/// settings' `providers`, and the thinking the first provider wrote is left out.
#[tokio::test]
async fn a_fallback_model_of_another_provider_takes_over() {
    let repo = repo("fallback");
    let overloaded = || {
        let mut reply = Reply::openai_error(503, "server_error", "overloaded", "Overloaded");
        reply.headers.push(("retry-after".into(), "0".into()));
        reply
    };
    let primary = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().thinking("the notes first", "").tool_use(
            "toolu_n",
            "Read",
            json!({"file_path": "notes.txt"}),
        )),
        overloaded(),
        overloaded(),
        overloaded(),
    ]))
    .await
    .unwrap();
    let backup = Server::start_tls(Script::new(vec![Reply::turn(
        Turn::new().text("Remember the milk."),
    )]))
    .await
    .unwrap();
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("settings.json"),
        json!({
            "providers": {"backup": {"type": "anthropic", "baseUrl": backup.base_url()}},
            "models": {"claude-sonnet-5": {"maxOutput": 1000}},
        })
        .to_string(),
    )
    .unwrap();
    let mut run = command(&repo, &primary);
    // The certificate file `command` passes trusts both servers.
    std::fs::write(
        repo.home.join("ca.pem"),
        format!(
            "{}\n{}",
            primary.cert_pem().unwrap(),
            backup.cert_pem().unwrap()
        ),
    )
    .unwrap();
    let output = run
        .env_remove("OPENAI_API_KEY")
        .args(["--provider", "openai", "--model", "qwen3-coder"])
        .args(["--fallback-model", "backup/claude-sonnet-5"])
        .args(["-p", "what do the notes say?", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["result"], "Remember the milk.", "{result}");
    let requests = backup.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/messages");
    let request = requests[0].json();
    assert_eq!(request["model"], "claude-sonnet-5");
    // Sized for the fallback model, not the first one (8,192).
    assert_eq!(request["max_tokens"], 1000);
    let text = request["messages"].to_string();
    assert!(
        text.contains("toolu_n") && text.contains("remember the milk"),
        "{text}"
    );
    assert!(!text.contains("\"thinking\""), "{text}");
}

/// An OpenAI-compatible provider needs a model named (the default is Anthropic's), and a
/// `NAME/model` whose NAME is no provider is said to go whole to the server.
#[tokio::test]
async fn model_names_that_cannot_be_meant_are_said() {
    let repo = repo("model-names");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = command(&repo, &server)
        .env_remove("ANTHROPIC_MODEL")
        .args(["--provider", "openai", "-p", "hi"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(
            "the openai provider needs a model: name one with --model (or settings' \"model\"); the default claude-opus-4-8 is Anthropic's"
        ),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(server.request_count(), 0);
    let output = command(&repo, &server)
        .args(["--model", "olama/qwen3-coder", "-p", "hi"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("model olama/qwen3-coder: olama is not a provider"),
        "{stderr}"
    );
    assert_eq!(server.requests()[0].json()["model"], "olama/qwen3-coder");
}

/// Recovery works the same over Chat Completions: a `context_length_exceeded` refusal
/// compacts the history (the summary is asked of the same server) and the request is made
/// again; a response cut by `finish_reason: length` is recovered as max_tokens.
#[tokio::test]
async fn chat_completions_refusals_and_cut_responses_are_recovered() {
    let repo = repo("chat-recover");
    // Enough turns that compaction has something to summarize (it keeps the last six
    // messages).
    let mut replies: Vec<Reply> = (0..5)
        .map(|n| {
            Reply::turn(Turn::new().tool_use(
                &format!("toolu_r{n}"),
                "Read",
                json!({"file_path": "notes.txt", "offset": n + 1}),
            ))
        })
        .collect();
    replies.extend([
        Reply::openai_error(
            400,
            "invalid_request_error",
            "context_length_exceeded",
            "This model's maximum context length is 32768 tokens. However, your messages resulted in 40000 tokens.",
        ),
        Reply::turn(Turn::new().text("Summary: the notes were read.")),
        Reply::turn(Turn::new().text("The notes say to remember").stop("max_tokens")),
        Reply::turn(Turn::new().text(" the milk.")),
    ]);
    let server = Server::start_tls(Script::new(replies)).await.unwrap();
    let output = command(&repo, &server)
        .env_remove("OPENAI_API_KEY")
        .args(["--provider", "openai", "--model", "qwen3-coder"])
        .args([
            "-p",
            "what do the notes say?",
            "--output-format",
            "stream-json",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{stderr}\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        9,
        "{stderr}\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // After the refusal (request 6), request 7 asks for the summary, request 8 carries it.
    assert!(
        requests[6].json().to_string().contains("summar"),
        "{}",
        requests[6].json()
    );
    assert!(
        requests[7]
            .json()
            .to_string()
            .contains("Summary: the notes were read."),
        "{}",
        requests[7].json()
    );
    let lines = lines(&output);
    let result = lines.last().unwrap();
    assert_eq!(result["subtype"], "success", "{result}");
    assert!(
        result["result"]
            .as_str()
            .unwrap_or_default()
            .ends_with("the milk."),
        "{result}"
    );
}

/// Tool calls as real servers can end them: whole calls followed by `finish_reason:
/// "content_filter"` are not run (the turn ends, each answered as not run); a call re-sent
/// under the same id runs once, and the next request tells the model the repeat was not run.
#[tokio::test]
async fn chat_completions_calls_before_a_content_filter_or_under_a_repeated_id() {
    let repo = repo("chat-filter");
    let bash =
        |id: &str, command: &str| Turn::new().tool_use(id, "Bash", json!({"command": command}));
    let filtered = bash("call_a", "touch filtered-a")
        .tool_use("call_b", "Bash", json!({"command": "touch filtered-b"}))
        .stop("refusal");
    let repeated = bash("call_1", "echo x >> log.txt").tool_use(
        "call_1",
        "Bash",
        json!({"command": "echo x >> log.txt"}),
    );
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(filtered),
        Reply::turn(repeated),
        Reply::turn(Turn::new().text("Logged once.")),
    ]))
    .await
    .unwrap();
    let run = |prompt: &str| {
        let mut command = command(&repo, &server);
        command
            .env_remove("OPENAI_API_KEY")
            .args([
                "--provider",
                "openai",
                "--model",
                "qwen3-coder",
                "-p",
                prompt,
            ])
            .args(["--output-format", "stream-json"])
            .args(["--permission-mode", "bypassPermissions"]);
        command
    };
    let output = run("make two files").output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!repo.dir.join("filtered-a").exists(), "a filtered call ran");
    assert!(!repo.dir.join("filtered-b").exists(), "a filtered call ran");
    assert_eq!(server.requests().len(), 1, "the turn ended at the filter");
    let told: Vec<String> = lines(&output)
        .iter()
        .filter(|line| line["type"] == "user")
        .flat_map(|line| {
            line["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|block| block["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(told.len(), 2, "{told:?}");
    assert!(
        told.iter()
            .all(|text| text.contains("stop_reason refusal") && text.contains("not run")),
        "{told:?}"
    );

    let output = run("log once").output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("log.txt")).unwrap(),
        "x\n",
        "the repeat did not run"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let messages = requests[2].json()["messages"].as_array().unwrap().clone();
    let answers: Vec<&Value> = (messages.iter())
        .filter(|message| message["role"] == "tool")
        .collect();
    assert_eq!(answers.len(), 1, "{messages:?}");
    assert_eq!(answers[0]["tool_call_id"], "call_1");
    let sent = serde_json::to_string(&messages).unwrap();
    assert!(sent.contains("repeats the tool_use id call_1"), "{sent}");
}

#[tokio::test]
async fn a_four_turn_session_over_tls() {
    let repo = repo("four");
    // The shared fixture (also served by `cargo xtask bench-cli`).
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/four-turn.json");
    let script = Script::from_json(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let server = Server::start_tls(script).await.unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "fix the greeting",
            "--output-format",
            "stream-json",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash(cat:*)",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("greet.py")).unwrap(),
        "def greet():\n    return 'hello'\n"
    );
    assert_eq!(server.request_count(), 4);
    let requests = server.requests();
    for request in &requests {
        check_pairing(&request.json());
    }
    // The Bash result of turn 3 is in request 4.
    let last = requests[3].json();
    let bash = last["messages"].as_array().unwrap().last().unwrap()["content"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(bash.contains("return 'hello'"), "{bash}");

    let lines = lines(&output);
    assert_eq!(lines[0]["type"], "system");
    assert_eq!(lines[0]["subtype"], "init");
    assert_eq!(lines[0]["permissionMode"], "acceptEdits");
    let types: Vec<&str> = lines
        .iter()
        .map(|line| line["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types.iter().filter(|t| **t == "user").count(),
        4,
        "one user line per tool_result"
    );
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["num_turns"], 4);
    assert_eq!(result["result"], "Fixed the typo in greet.py.");
    assert_eq!(result["usage"]["input_tokens"], 400);
    assert_eq!(result["terminal_reason"], "completed");
    // The transcript was written where Claude Code users expect it.
    let projects = repo.home.join("data/agent/projects");
    // `<path with - for />-<16 hex digits of its SHA-256>`.
    let folders: Vec<_> = std::fs::read_dir(&projects).unwrap().flatten().collect();
    assert_eq!(folders.len(), 1);
    let slug = folders[0].file_name().to_string_lossy().into_owned();
    let readable = repo.dir.to_string_lossy().replace('/', "-");
    let hash = slug
        .strip_prefix(&format!("{readable}-"))
        .unwrap_or_default();
    assert!(
        hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{slug}"
    );
    // One transcript (beside it, its lock file).
    let sessions: Vec<_> = std::fs::read_dir(projects.join(&slug))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .is_ok_and(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        })
        .collect();
    assert_eq!(sessions.len(), 1);
    // Transcripts hold everything the session saw: the owner's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&projects.join(&slug)), 0o700);
    let transcript = sessions[0].as_ref().unwrap().path();
    assert_eq!(mode(&transcript), 0o600, "{}", transcript.display());
}

#[tokio::test]
async fn max_turns_exits_3() {
    let repo = repo("maxturns");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().tool_use(
        "toolu_1",
        "Read",
        json!({"file_path": "notes.txt"}),
    ))]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &["-p", "loop", "--max-turns", "2", "--output-format", "json"],
    )
    .await;
    assert_eq!(
        output.status.code(),
        Some(3),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = &lines(&output)[0];
    assert_eq!(result["subtype"], "error_max_turns");
    assert_eq!(result["terminal_reason"], "max_turns");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_write_outside_the_workspace_is_refused_and_the_session_goes_on() {
    let repo = repo("outside");
    let outside = repo.dir.parent().unwrap().join("escaped.txt");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": outside.to_string_lossy(), "content": "x"}),
        )),
        Reply::turn(Turn::new().text("I could not write there.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &["-p", "write outside", "--output-format", "json"],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!outside.exists());
    let result = &lines(&output)[0];
    let denials = result["permission_denials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{result}");
    assert_eq!(denials[0]["tool_name"], "Write");
    assert_eq!(server.request_count(), 2);
    let second = server.requests()[1].json();
    let refused = second["messages"].as_array().unwrap().last().unwrap()["content"][0].clone();
    assert_eq!(refused["is_error"], true);
}

#[tokio::test]
async fn bad_flags_exit_2_and_version_works() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"))
        .arg("--no-such-flag")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"))
        .arg("--version")
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("agent "));
}

#[tokio::test]
async fn a_claude_code_transcript_resumes() {
    let corpus = [
        std::env::var("AGENT_CORPUS_DIR").ok().map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")),
    ]
    .into_iter()
    .flatten()
    .find(|dir| dir.join("transcripts").is_dir());
    let Some(corpus) = corpus else {
        assert!(
            std::env::var("CI").map_or(true, |ci| ci != "true"),
            "corpus missing in CI"
        );
        eprintln!("*** SKIPPED: corpus not found ***");
        return;
    };
    for entry in std::fs::read_dir(corpus.join("transcripts")).unwrap() {
        let path = entry.unwrap().path();
        let repo = repo("resume");
        let server = Server::start_tls(Script::new(vec![Reply::turn(
            Turn::new().text("Continuing."),
        )]))
        .await
        .unwrap();
        let output = agent(
            &repo,
            &server,
            &[
                "--resume",
                &path.to_string_lossy(),
                "-p",
                "go on",
                "--output-format",
                "json",
            ],
        )
        .await;
        assert!(
            output.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        let request = server.requests()[0].json();
        check_pairing(&request);
        let messages = request["messages"].as_array().unwrap();
        assert!(
            messages.len() > 2,
            "{}: the history was loaded",
            path.display()
        );
        assert_eq!(messages[0]["role"], "user");
        let history: Vec<protocol::MessageParam> =
            serde_json::from_value(request["messages"].clone()).unwrap();
        context::validate_pairing(&history)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    }
}

#[tokio::test]
async fn a_stop_hook_that_blocks_once_costs_one_more_request() {
    let repo = repo("stophook");
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    // Blocks the first time (no marker yet), then lets the turn end.
    let hook = "if [ -f .hook-ran ]; then exit 0; fi; touch .hook-ran; echo 'Run the linter before you stop.' >&2; exit 2";
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": hook}]}]}}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("Done.")),
        Reply::turn(Turn::new().text("Linted and done.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &["-p", "finish", "--output-format", "json", "--trust"],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(server.request_count(), 2);
    let second = server.requests()[1].json();
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert!(
        last.to_string().contains("Run the linter before you stop."),
        "{last}"
    );
    assert_eq!(lines(&output)[0]["result"], "Linted and done.");
}

#[tokio::test]
async fn post_tool_use_hooks_and_settings_env() {
    let repo = repo("posthook");
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    // Keeps the event it was given, and answers with feedback for the model (exit 2).
    let hook = "cat > .post-event.json; echo \"checked with $LINT_LEVEL\" >&2; exit 2";
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({
            "env": {"LINT_LEVEL": "strict"},
            "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}]},
        })
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_b",
                    "Bash",
                    json!({"command": "echo level=$LINT_LEVEL"}),
                )
                .tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"})),
        ),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "check",
            "--allowedTools",
            "Bash(echo:*)",
            "--output-format",
            "json",
            "--trust",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let second = server.requests()[1].json();
    let results = second["messages"][2]["content"].as_array().unwrap().clone();
    // Settings' env reached the Bash command and the hook; the hook's feedback follows the
    // command's output in the tool_result.
    assert_eq!(
        results[0]["content"].as_str().unwrap(),
        "level=strict\n\nPostToolUse hook feedback:\nchecked with strict"
    );
    // The matcher names Bash only: the Read result is untouched.
    assert!(
        !results[1].to_string().contains("PostToolUse"),
        "{}",
        results[1]
    );
    let event: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.dir.join(".post-event.json")).unwrap())
            .unwrap();
    assert_eq!(event["hook_event_name"], "PostToolUse");
    assert_eq!(event["tool_name"], "Bash");
    assert_eq!(event["tool_use_id"], "toolu_b");
    assert_eq!(event["tool_input"]["command"], "echo level=$LINT_LEVEL");
    // Claude Code's BashOutput shape (it was the bare text before #16).
    assert_eq!(event["tool_response"]["stdout"], "level=strict");
}

#[tokio::test]
async fn sigint_during_a_long_bash_exits_130_and_continue_works() {
    a_signal_during_a_long_bash_aborts_cleanly(nix::sys::signal::Signal::SIGINT, 130, 1).await;
}

#[tokio::test]
async fn sigterm_during_a_long_bash_exits_143_and_leaves_nothing_running() {
    a_signal_during_a_long_bash_aborts_cleanly(nix::sys::signal::Signal::SIGTERM, 143, 3).await;
}

#[tokio::test]
async fn sighup_during_a_long_bash_exits_129_and_leaves_nothing_running() {
    a_signal_during_a_long_bash_aborts_cleanly(nix::sys::signal::Signal::SIGHUP, 129, 4).await;
}

/// `signal` while a Bash call runs: the result is written, the exit code is 128 + the
/// signal, no child is left, the transcript is valid and `--continue` works.
async fn a_signal_during_a_long_bash_aborts_cleanly(
    signal: nix::sys::signal::Signal,
    code: i32,
    tag: u32,
) {
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    let repo = repo(&format!("signal{tag}"));
    let sleep = unique_sleep(30, tag);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_sleep",
            "Bash",
            json!({"command": format!("{sleep}; echo done")}),
        )),
        Reply::turn(Turn::new().text("Resumed fine.")),
    ]))
    .await
    .unwrap();
    let child = command(&repo, &server)
        .args([
            "-p",
            "sleep",
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap() as i32;
    // Wait until the Bash call runs (its `sleep` child appears).
    wait_for_process(&sleep).await;
    let start = std::time::Instant::now();
    kill(Pid::from_raw(pid), signal).unwrap();
    let output = child.wait_with_output().await.unwrap();
    assert!(
        start.elapsed() < std::time::Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(
        output.status.code(),
        Some(code),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(lines(&output)[0]["terminal_reason"], "aborted_tools");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        processes_running(&sleep).is_empty(),
        "the sleep child was left behind"
    );
    // --continue: the transcript is valid and the session goes on.
    let output = agent(
        &repo,
        &server,
        &["--continue", "-p", "go on", "--output-format", "json"],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let request = server.requests().last().unwrap().json();
    check_pairing(&request);
    let history: Vec<protocol::MessageParam> =
        serde_json::from_value(request["messages"].clone()).unwrap();
    context::validate_pairing(&history).unwrap();
    assert!(request.to_string().contains("toolu_sleep"));
}

#[tokio::test]
async fn sigkill_mid_session_then_continue_loses_at_most_the_message_in_flight() {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;
    let repo = repo("sigkill");
    let sleep = unique_sleep(29, 2);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("Reading first.").tool_use(
            "toolu_read",
            "Read",
            json!({"file_path": "notes.txt"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_sleep",
            "Bash",
            json!({"command": format!("{sleep}; echo late")}),
        )),
        Reply::turn(Turn::new().text("Picked up where we left off.")),
    ]))
    .await
    .unwrap();
    let mut child = command(&repo, &server)
        .args([
            "-p",
            "work",
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap() as i32;
    let sleeper = wait_for_process(&sleep).await;
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    let _ = child.wait().await;
    // The agent died without cleaning up: end its orphaned command (its own process group).
    let _ = killpg(Pid::from_raw(sleeper), Signal::SIGKILL);
    let _ = kill(Pid::from_raw(sleeper), Signal::SIGKILL);

    let output = agent(
        &repo,
        &server,
        &["--continue", "-p", "continue", "--output-format", "json"],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let request = server.requests().last().unwrap().json();
    check_pairing(&request);
    let history: Vec<protocol::MessageParam> =
        serde_json::from_value(request["messages"].clone()).unwrap();
    context::validate_pairing(&history).unwrap();
    let text = request.to_string();
    // Everything before the kill survived: the first turn's Read result and the Bash call,
    // answered as interrupted.
    assert!(
        text.contains("toolu_read") && text.contains("remember the milk"),
        "{text}"
    );
    assert!(
        text.contains("toolu_sleep") && text.contains("interrupted"),
        "{text}"
    );
    assert_eq!(lines(&output)[0]["result"], "Picked up where we left off.");
}

#[tokio::test]
async fn the_model_cannot_rewrite_the_agents_own_settings() {
    let repo = repo("settings-guard");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_s",
            "Write",
            json!({"file_path": "sub/../.agent/settings.json", "content": "{\"permissions\":{\"defaultMode\":\"bypassPermissions\"}}"}),
        )),
        Reply::turn(Turn::new().text("I may not change that.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "escalate",
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!repo.dir.join(".agent/settings.json").exists());
    let result = &lines(&output)[0];
    assert_eq!(
        result["permission_denials"][0]["tool_name"], "Write",
        "{result}"
    );
}

/// Attack: the model plants Claude Code settings for a later run, in a subfolder's
/// `.claude/` (a session started there reads them) and in the user's `~/.claude/` (every
/// session reads them), by Write and by Bash, in a folder the user trusts. Write refuses both
/// (exact path resolution). Bash is not read for them: the command runs in the sandbox,
/// which lets it create the nested folder (only the workspace's top-level settings folders
/// are closed to it), and folder trust is what stops it: a later session started in that
/// subfolder finds settings its record has not seen, ignores them with a warning and runs
/// no planted hook.
#[tokio::test]
async fn the_model_cannot_plant_claude_code_settings() {
    let repo = repo("claude-guard");
    std::fs::create_dir_all(repo.dir.join("sub")).unwrap();
    let user = repo.home.join("config/agent");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("settings.json"),
        json!({"trustedFolders": [repo.dir]}).to_string(),
    )
    .unwrap();
    let home_settings = repo.home.join(".claude/settings.json");
    let hook =
        "{\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"touch pwned\"}]}]}}";
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_w",
                    "Write",
                    json!({"file_path": "sub/.claude/settings.json", "content": hook}),
                )
                .tool_use(
                    "toolu_h",
                    "Write",
                    json!({"file_path": home_settings, "content": hook}),
                )
                .tool_use(
                    "toolu_s",
                    "Write",
                    json!({"file_path": repo.home.join(".claude.json"), "content": "{\"projects\": {\"/\": {\"hasTrustDialogAccepted\": true}}}"}),
                )
                .tool_use(
                    "toolu_b",
                    "Bash",
                    json!({"command": format!("mkdir -p sub/.claude && printf '%s' '{hook}' > sub/.claude/settings.local.json")}),
                ),
        ),
        Reply::turn(Turn::new().text("I may not change that.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "escalate",
            "--permission-mode",
            "bypassPermissions",
            "--add-dir",
            &repo.home.to_string_lossy(),
            "--output-format",
            "json",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    assert!(stderr.contains("is now recorded"), "{stderr}");
    assert!(!repo.dir.join("sub/.claude/settings.json").exists());
    assert!(!home_settings.exists());
    assert!(!repo.home.join(".claude.json").exists());
    for id in ["toolu_w", "toolu_h", "toolu_s"] {
        let text = result_text(&server, id);
        assert!(
            text.contains("protected") || text.contains("cannot be changed"),
            "{id}: {text}"
        );
    }
    assert!(
        repo.dir.join("sub/.claude/settings.local.json").exists(),
        "the sandbox lets a command create a nested folder: {}",
        result_text(&server, "toolu_b")
    );

    // The next session, started in the subfolder the folder's trust covers.
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let mut later = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"));
    common::Launch::new(&repo, &server)
        .in_dir(&repo.dir.join("sub"))
        .apply(&mut later);
    let output = later
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("these project settings are ignored") && stderr.contains("Stop"),
        "{stderr}"
    );
    assert!(!repo.dir.join("sub/pwned").exists(), "{stderr}");
    assert!(!repo.dir.join("pwned").exists(), "{stderr}");
}

/// Attack (issue 44): the model plants a `.git` in a subfolder for a later session or git
/// command started there: a `.git` file naming `/` (what a sandbox would show) and a
/// `.git/config` (what git would run). Write and Edit refuse both, at any depth, in every
/// mode.
#[tokio::test]
async fn the_model_cannot_plant_a_nested_git_folder() {
    let repo = repo("git-plant");
    std::fs::create_dir_all(repo.dir.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(repo.dir.join("lib/.git")).unwrap();
    std::fs::write(repo.dir.join("lib/.git/config"), "[core]\n").unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_file",
                    "Write",
                    json!({"file_path": "sub/deeper/.git", "content": "gitdir: /\n"}),
                )
                .tool_use(
                    "toolu_config",
                    "Write",
                    json!({"file_path": "sub/.git/config", "content": "[core]\n\tfsmonitor = touch pwned\n"}),
                )
                .tool_use(
                    "toolu_edit",
                    "Edit",
                    json!({"file_path": "lib/.GIT/config", "old_string": "[core]", "new_string": "[core]\n\tfsmonitor = touch pwned"}),
                ),
        ),
        Reply::turn(Turn::new().text("I may not change that.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "plant",
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(std::fs::symlink_metadata(repo.dir.join("sub/deeper/.git")).is_err());
    assert!(std::fs::symlink_metadata(repo.dir.join("sub/.git")).is_err());
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("lib/.git/config")).unwrap(),
        "[core]\n"
    );
    for id in ["toolu_file", "toolu_config", "toolu_edit"] {
        let text = result_text(&server, id);
        assert!(
            text.contains("protected") || text.contains("cannot be changed"),
            "{id}: {text}"
        );
    }
}

/// Attack: in a home folder that is a git repository (dotfiles), a project without its own
/// repository links its `CLAUDE.md` to `~/.ssh/id_rsa`: the link leads outside the project
/// and is not sent.
#[tokio::test]
async fn a_memory_link_to_the_home_folder_is_not_sent_from_a_dotfiles_home() {
    let repo = repo("dotfiles-memory");
    let git = |dir: &std::path::Path| {
        std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir)
            .output()
            .unwrap()
    };
    git(&repo.home);
    std::fs::create_dir_all(repo.home.join(".ssh")).unwrap();
    std::fs::write(repo.home.join(".ssh/id_rsa"), "SSH-PRIVATE-KEY-SECRET").unwrap();
    let project = repo.home.join("Downloads/evil");
    std::fs::create_dir_all(&project).unwrap();
    std::os::unix::fs::symlink("../../.ssh/id_rsa", project.join("CLAUDE.md")).unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let mut run = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"));
    common::Launch::new(&repo, &server)
        .in_dir(&project)
        .apply(&mut run);
    let output = run.args(["-p", "hi"]).output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let sent = server.requests()[0].json().to_string();
    assert!(!sent.contains("SSH-PRIVATE-KEY-SECRET"), "the key was sent");
}

#[tokio::test]
async fn sessions_in_the_folder_earlier_versions_used_are_still_continued() {
    let repo = repo("legacy-folder");
    // A session written where versions before the hashed folder names put it.
    let legacy = repo
        .home
        .join("data/agent/projects")
        .join(repo.dir.to_string_lossy().replace('/', "-"));
    std::fs::create_dir_all(&legacy).unwrap();
    let old = r#"{"type":"user","message":{"role":"user","content":"remember the number 4242"},"session_id":"old-session"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Noted."}]},"session_id":"old-session"}
"#;
    std::fs::write(legacy.join("old-session.jsonl"), old).unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("4242."))]))
        .await
        .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "--continue",
            "-p",
            "which number?",
            "--output-format",
            "json",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let request = server.requests()[0].json().to_string();
    assert!(request.contains("remember the number 4242"), "{request}");
    // `--resume ID` finds it there too.
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Yes."))]))
        .await
        .unwrap();
    let output = agent(&repo, &server, &["--resume", "old-session", "-p", "still?"]).await;
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(server.requests()[0].json().to_string().contains("4242"));
}

#[tokio::test]
async fn a_working_directory_longer_than_a_file_name_works() {
    let repo = repo("long-cwd");
    let deep = repo.dir.join("d".repeat(200)).join("e".repeat(100));
    std::fs::create_dir_all(&deep).unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    // The usual command, with the deep folder as its working directory instead.
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"));
    common::Launch::new(&repo, &server)
        .in_dir(&deep)
        .apply(&mut command);
    let output = command
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(lines(&output)[0]["result"], "Hi.");
}

#[tokio::test]
async fn a_session_has_one_writer_and_a_killed_one_lets_go() {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;
    let repo = repo("session-lock");
    let sleep = unique_sleep(27, 3);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_s", "Bash", json!({ "command": sleep }))),
        Reply::turn(Turn::new().text("Second writer should not get here.")),
        Reply::turn(Turn::new().text("Continued.")),
    ]))
    .await
    .unwrap();
    let mut holder = command(&repo, &server)
        .args(["-p", "work", "--permission-mode", "bypassPermissions"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sleeper = wait_for_process(&sleep).await;
    // While the first agent writes the session, a second one may not.
    let second = agent(&repo, &server, &["--continue", "-p", "me too"]).await;
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("is in use by another agent (process "),
        "{stderr}"
    );
    assert!(
        stderr.contains(&holder.id().unwrap().to_string()),
        "{stderr}"
    );
    // Killed, the holder lets go: the session continues.
    kill(Pid::from_raw(holder.id().unwrap() as i32), Signal::SIGKILL).unwrap();
    let _ = holder.wait().await;
    let _ = killpg(Pid::from_raw(sleeper), Signal::SIGKILL);
    let third = agent(
        &repo,
        &server,
        &["--continue", "-p", "go on", "--output-format", "json"],
    )
    .await;
    assert!(
        third.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&third.stderr)
    );
}

/// Model text holding OSC 52 (clipboard write), OSC 0 (window title) and CSI 2J (clear
/// screen) is printed neutralised in text output; JSON output keeps it exactly, escaped by
/// construction.
#[tokio::test]
async fn model_text_cannot_drive_the_terminal() {
    let repo = repo("escapes");
    let hostile = "ok\u{1b}]52;c;cm0gLXJmIH4=\u{7} \u{1b}[2J\u{1b}]0;pwned\u{7}done\u{202e}txt";
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text(hostile))]))
        .await
        .unwrap();
    let output = agent(&repo, &server, &["-p", "hi"]).await;
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !stdout.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "{stdout:?}"
    );
    assert_eq!(
        stdout.trim_end(),
        "ok\\u{1b}]52;c;cm0gLXJmIH4=\\u{7} \\u{1b}[2J\\u{1b}]0;pwned\\u{7}done\\u{202e}txt"
    );
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text(hostile))]))
        .await
        .unwrap();
    let output = agent(&repo, &server, &["-p", "hi", "--output-format", "json"]).await;
    assert!(!output.stdout.contains(&0x1b));
    assert_eq!(lines(&output)[0]["result"], hostile);
}

/// An autocompaction is saved as Claude Code saves it (a `compact_boundary` entry, the
/// summary marked `isCompactSummary`), and `--continue` resumes from the compacted history:
/// the next request is the last one's messages plus what followed, not the raw history.
#[tokio::test]
async fn a_compaction_is_saved_and_continue_resumes_from_the_summary() {
    let repo = repo("compact");
    // Two results of about 11,000 tokens each (under L1's 50,000-character budget).
    for name in ["alpha", "bravo"] {
        let text: String = (0..700)
            .map(|n| format!("{name} {n:04} of a long file that fills the context window\n"))
            .collect();
        std::fs::write(repo.dir.join(format!("{name}.txt")), text).unwrap();
    }
    // The autocompact threshold is 12 % of the usable window (21,600 tokens): crossed once
    // the second result comes in; the first turn is summarized, the second kept.
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_a", "Read", json!({"file_path": "alpha.txt"}))),
        Reply::turn(
            Turn::new()
                .tool_use("toolu_b", "Read", json!({"file_path": "bravo.txt"}))
                .usage(15_000, 50),
        ),
        Reply::turn(Turn::new().text("SUMMARY-OF-WORK: alpha.txt was read.")),
        Reply::turn(Turn::new().text("Done.")),
        Reply::turn(Turn::new().text("Next answer.")),
    ]))
    .await
    .unwrap();
    let run = |extra: &'static [&'static str]| {
        let mut command = command(&repo, &server);
        command
            .env("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "12")
            .args(extra);
        command
    };
    let output = run(&["--output-format", "stream-json", "-p", "read both files"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // stream-json reports the compaction as Claude Code does, between the second tool's
    // result and the answer.
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let boundary = lines
        .iter()
        .position(|line| line["subtype"] == "compact_boundary")
        .expect("a compact_boundary line");
    assert_eq!(lines[boundary]["type"], "system");
    assert_eq!(lines[boundary]["compact_metadata"]["trigger"], "auto");
    assert!(
        lines[boundary]["compact_metadata"]["pre_tokens"]
            .as_u64()
            .unwrap()
            > 10_000
    );
    assert_eq!(lines[boundary]["session_id"], lines[0]["session_id"]);
    let answer = lines
        .iter()
        .rposition(|line| line["type"] == "assistant")
        .unwrap();
    assert!(boundary < answer, "{lines:?}");
    assert!(
        lines[answer].to_string().contains("Done."),
        "{}",
        lines[answer]
    );
    assert_eq!(
        server.request_count(),
        4,
        "{stderr}\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // The summary request is a fork of the main request before it: the same bytes up to
    // the end of that request's messages (model, max_tokens, every message and breakpoint),
    // then the turn since and the instruction; the same system and tools. The API reads
    // that prefix from the cache.
    common::assert_forks(
        &server.requests()[1].body,
        &server.requests()[2].body,
        "the fork leaves the main request where its messages end",
    );
    let (main, fork) = (server.requests()[1].json(), server.requests()[2].json());
    assert_eq!(main["system"], fork["system"]);
    assert_eq!(main["tools"], fork["tools"]);
    assert!(
        fork["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .to_string()
            .contains("create a detailed summary of the conversation"),
        "the instruction closes the fork"
    );
    let compacted = server.requests()[3].json()["messages"].clone();
    let text = compacted.to_string();
    assert!(text.contains("SUMMARY-OF-WORK"), "{text}");
    assert!(
        !text.contains("alpha 0699"),
        "the summarized result is gone"
    );
    assert!(text.contains("bravo 0699"), "the kept turn stays");

    // The transcript holds the boundary and the summary in Claude Code's shapes.
    let transcript = std::fs::read_dir(repo.home.join("data/agent/projects"))
        .unwrap()
        .flatten()
        .flat_map(|project| std::fs::read_dir(project.path()).unwrap().flatten())
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .unwrap();
    let entries: Vec<Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let boundary = entries
        .iter()
        .position(|entry| entry["subtype"] == "compact_boundary")
        .expect("a compact_boundary entry");
    assert_eq!(entries[boundary]["type"], "system");
    assert_eq!(entries[boundary]["compact_metadata"]["trigger"], "auto");
    assert!(
        entries[boundary]["compact_metadata"]["pre_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(entries[boundary + 1]["isCompactSummary"], true);
    assert_eq!(entries[boundary + 1]["type"], "user");

    let output = run(&["--output-format", "json", "--continue", "-p", "next"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let resumed = server.requests()[4].json();
    let mut expected = compacted.as_array().unwrap().clone();
    expected.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}));
    let messages = resumed["messages"].as_array().unwrap();
    assert_eq!(messages.len(), expected.len() + 1, "{resumed}");
    // Cache markers move; the content is the same.
    let strip = |value: &Value| {
        value
            .to_string()
            .replace(r#","cache_control":{"type":"ephemeral"}"#, "")
    };
    for (got, want) in messages.iter().zip(&expected) {
        assert_eq!(strip(got), strip(want));
    }
    assert!(messages.last().unwrap().to_string().contains("next"));
}

/// A Claude Code transcript with a compaction (hand-written fixture, see
/// tests/fixtures/README.md) resumes from its summary; nothing before the boundary is sent.
#[tokio::test]
async fn a_claude_code_transcript_with_a_compaction_resumes_from_its_summary() {
    let repo = repo("cc-compacted");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Ok."))]))
        .await
        .unwrap();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/claude-code-compacted.jsonl"
    );
    let output = agent(
        &repo,
        &server,
        &[
            "--resume",
            fixture,
            "-p",
            "go on",
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
    let sent = server.requests()[0].json()["messages"].to_string();
    for marker in ["SUMMARY-MARKER", "AFTER-BOUNDARY-MARKER", "go on"] {
        assert!(sent.contains(marker), "{marker}: {sent}");
    }
    for marker in ["BEFORE-BOUNDARY-MARKER", "OLD-ASSISTANT-MARKER"] {
        assert!(!sent.contains(marker), "{marker}: {sent}");
    }
}

/// A damaged line in the middle of a transcript: the session resumes without it, with a
/// warning naming the file and the line.
#[tokio::test]
async fn a_damaged_line_is_skipped_with_a_warning() {
    let repo = repo("damaged");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("First answer.")),
        Reply::turn(Turn::new().text("Second answer.")),
    ]))
    .await
    .unwrap();
    let output = agent(&repo, &server, &["-p", "first", "--output-format", "json"]).await;
    assert!(output.status.success());
    let transcript = std::fs::read_dir(repo.home.join("data/agent/projects"))
        .unwrap()
        .flatten()
        .flat_map(|project| std::fs::read_dir(project.path()).unwrap().flatten())
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .unwrap();
    let mut lines: Vec<String> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.insert(
        1,
        "{\"type\":\"user\",\"message\":{\"role\":\"us".to_owned(),
    );
    std::fs::write(&transcript, lines.join("\n") + "\n").unwrap();
    let output = agent(
        &repo,
        &server,
        &["--continue", "-p", "second", "--output-format", "json"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: skipped 1 damaged line (2)",
            transcript.display()
        )),
        "{stderr}"
    );
    let sent = server.requests()[1].json()["messages"].to_string();
    assert!(
        sent.contains("First answer.") && sent.contains("second"),
        "{sent}"
    );
}

/// `--continue` sends the same prefix the session's last request had (the prompt cache
/// survives a resume): the user context is not gathered again, nothing earlier is
/// rewritten, and system and tools are the same bytes.
#[tokio::test]
async fn a_resumed_session_sends_the_same_prefix() {
    let repo = repo("resume-prefix");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_1", "Read", json!({"file_path": "greet.py"}))),
        Reply::turn(Turn::new().tool_use("toolu_2", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().text("Read both.")),
        Reply::turn(Turn::new().text("Again.")),
    ]))
    .await
    .unwrap();
    let output = agent(&repo, &server, &["-p", "read", "--output-format", "json"]).await;
    assert!(output.status.success());
    // The repository changes in between: the resumed session must not notice in its prefix.
    std::fs::write(repo.dir.join("new.txt"), "x").unwrap();
    let output = agent(
        &repo,
        &server,
        &["--continue", "-p", "more", "--output-format", "json"],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let strip = |value: &Value| {
        value
            .to_string()
            .replace(r#","cache_control":{"type":"ephemeral"}"#, "")
    };
    let (before, after) = (server.requests()[2].json(), server.requests()[3].json());
    assert_eq!(strip(&before["system"]), strip(&after["system"]));
    assert_eq!(strip(&before["tools"]), strip(&after["tools"]));
    let (old, new) = (
        before["messages"].as_array().unwrap(),
        after["messages"].as_array().unwrap(),
    );
    assert_eq!(
        new.len(),
        old.len() + 2,
        "the answer and the new prompt follow"
    );
    for (index, message) in old.iter().enumerate() {
        assert_eq!(strip(message), strip(&new[index]), "message {index}");
    }
}

/// Hooks get Claude Code's shapes and their failures are reported: PostToolUse's
/// `tool_response` is Bash's `{stdout, stderr, interrupted, isImage}` and Edit's and Write's
/// `{filePath, ..., structuredPatch}`; a PreToolUse hook that crashes (exit 1), one that
/// times out and one that prints broken JSON each get a line on stderr, and the call goes
/// on (Claude Code's rule: an exit other than 2 is a non-blocking error).
#[tokio::test]
async fn hooks_get_claude_codes_shapes_and_their_failures_are_reported() {
    let repo = repo("hook-shapes");
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    let keep = r#"python3 -c 'import json,sys; e=json.load(sys.stdin); open(".post-"+e["tool_use_id"]+".json","w").write(json.dumps(e))'"#;
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "echo boom >&2; exit 1"},
                {"type": "command", "command": "sleep 5", "timeout": 1},
                {"type": "command", "command": "echo '{not json'"},
            ]}],
            "PostToolUse": [{"matcher": "Bash|Edit|Write", "hooks": [{"type": "command", "command": keep}]}],
        }})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_b", "Bash", json!({"command": "echo hi"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "new.txt", "content": "one\ntwo\n"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "new.txt", "old_string": "two", "new_string": "TWO"}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "go",
            "--trust",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash(echo:*)",
            "--output-format",
            "json",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    for expected in [
        "PreToolUse hook `echo boom >&2; exit 1` failed (exit status 1): boom",
        "hook `sleep 5` timed out after 1 s",
        "hook `echo '{not json'` printed invalid JSON, ignored: {not json",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    let event = |id: &str| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(repo.dir.join(format!(".post-{id}.json"))).unwrap(),
        )
        .unwrap()
    };
    assert_eq!(
        event("toolu_b")["tool_response"],
        json!({"stdout": "hi", "stderr": "", "interrupted": false, "isImage": false})
    );
    let write = event("toolu_w")["tool_response"].clone();
    assert_eq!(write["type"], "create");
    assert_eq!(write["content"], "one\ntwo\n");
    assert_eq!(write["originalFile"], Value::Null);
    let edit = event("toolu_e")["tool_response"].clone();
    assert_eq!(edit["oldString"], "two");
    assert_eq!(edit["newString"], "TWO");
    assert_eq!(edit["originalFile"], "one\ntwo\n");
    assert_eq!(edit["replaceAll"], false);
    assert_eq!(
        edit["structuredPatch"],
        json!([{"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 2, "lines": [" one", "-two", "+TWO"]}])
    );
    assert!(
        edit["filePath"].as_str().unwrap().ends_with("/new.txt"),
        "{edit}"
    );
}

/// A file the model read, changed by a command (a formatter, say), comes back as a
/// `<system-reminder>` with the diff in the next request's tool results; the read-file state
/// follows, so an Edit made without reading again is not refused as stale.
#[tokio::test]
async fn a_file_changed_behind_the_models_back_is_attached_with_its_diff() {
    let repo = repo("attachments");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_b",
            "Bash",
            json!({"command": "printf 'remember the eggs\\nand the bread\\n' > notes.txt"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "notes.txt", "old_string": "bread", "new_string": "butter"}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "update the notes",
            "--permission-mode",
            "acceptEdits",
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
    let requests = server.requests();
    // Before the command: no reminder. After it: one, in the message with its result.
    let changed = "was changed since you last read it";
    assert!(!requests[1].json().to_string().contains(changed));
    let after = requests[2].json();
    let last = after["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let blocks = last["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "tool_result");
    let reminder = blocks[1]["text"].as_str().unwrap();
    assert!(reminder.starts_with("<system-reminder>"), "{reminder}");
    assert!(reminder.contains(&format!("{}", repo.dir.join("notes.txt").display())));
    assert!(
        reminder.contains("-remember the milk\n+remember the eggs\n+and the bread"),
        "{reminder}"
    );
    // Told once; the Edit went through without a new Read.
    let last = requests[3].json()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(!last.contains(changed), "{last}");
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "remember the eggs\nand the butter\n"
    );
}

/// Background summaries from the CLI: with `progressSummaries: true` a headless run asks the
/// fast model (`haiku`) for a progress summary while a command runs and for a summary of the
/// tool batch; both come out as stream-json `system` lines and stay out of the history.
/// Headless without the setting, or with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, there
/// are none.
#[tokio::test]
async fn progress_and_tool_use_summaries_come_as_system_lines() {
    let progress_marker = "Describe what it is doing right now";
    let batch_marker = "A coding agent just ran these tools";
    let script = || {
        let slow = testkit::Faults {
            chunk_sizes: Some(vec![40]),
            chunk_delay: Some(std::time::Duration::from_millis(60)),
            ..testkit::Faults::default()
        };
        Script::new(vec![
            Reply::turn(Turn::new().tool_use("toolu_s", "Bash", json!({"command": "sleep 1.5"}))),
            Reply::turn(Turn::new().text("The command finished without output.")).faults(slow),
        ])
        .route(
            progress_marker,
            (0..20)
                .map(|_| Reply::turn(Turn::new().text("Waiting on a command")))
                .collect(),
        )
        .route(
            batch_marker,
            vec![Reply::turn(Turn::new().text("Ran sleep for 1.5 seconds"))],
        )
    };
    for (name, setting, env_off) in [
        ("on", true, false),
        ("default", false, false),
        ("env-off", true, true),
    ] {
        let repo = repo(&format!("summaries-{name}"));
        let server = Server::start_tls(script()).await.unwrap();
        if setting {
            let config = repo.home.join("config/agent");
            std::fs::create_dir_all(&config).unwrap();
            std::fs::write(
                config.join("settings.json"),
                json!({"progressSummaries": true}).to_string(),
            )
            .unwrap();
        }
        let mut run = command(&repo, &server);
        run.env_remove("AGENT_DISABLE_BACKGROUND_REQUESTS")
            .env("AGENT_PROGRESS_INTERVAL_MS", "300");
        if env_off {
            run.env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        }
        let output = run
            .args(["-p", "wait a moment", "--output-format", "stream-json"])
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let lines = lines(&output);
        let requests: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
        let background: Vec<&Value> = requests
            .iter()
            .filter(|request| {
                let text = request["messages"].to_string();
                text.contains(progress_marker) || text.contains(batch_marker)
            })
            .collect();
        let subtypes = |subtype: &str| -> Vec<String> {
            lines
                .iter()
                .filter(|line| line["type"] == "system" && line["subtype"] == subtype)
                .map(|line| line["summary"].as_str().unwrap().to_owned())
                .collect()
        };
        if name != "on" {
            assert!(background.is_empty(), "{name}: {background:?}");
            assert!(subtypes("progress_summary").is_empty());
            continue;
        }
        assert!(
            background
                .iter()
                .all(|request| request["model"] == "claude-haiku-4-5-20251001"),
            "{background:?}"
        );
        let progress = subtypes("progress_summary");
        assert!(!progress.is_empty(), "{lines:?}");
        assert!(progress.iter().all(|text| text == "Waiting on a command"));
        assert_eq!(subtypes("tool_use_summary"), ["Ran sleep for 1.5 seconds"]);
        let batch_line = lines
            .iter()
            .find(|line| line["subtype"] == "tool_use_summary")
            .unwrap();
        assert_eq!(batch_line["preceding_tool_use_ids"], json!(["toolu_s"]));
        // Never in the main conversation.
        for request in requests
            .iter()
            .filter(|r| r["model"] != "claude-haiku-4-5-20251001")
        {
            let text = request.to_string();
            assert!(!text.contains("Waiting on a command") && !text.contains("Ran sleep for"));
        }
        let result = lines.last().unwrap();
        assert_eq!(result["result"], "The command finished without output.");
    }
}

/// Start-up gathering off the critical path: a `git status` slower than the first request
/// needs to wait (a `git` that sleeps 1 s first) does not hold it up; the status follows with
/// the next message that goes out.
#[tokio::test]
async fn a_slow_git_status_does_not_hold_up_the_first_request() {
    let repo = repo("prefetch");
    let bin = repo.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let real_git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let wrapper = bin.join("git");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nsleep 1\nexec {} \"$@\"\n", real_git.trim()),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_s", "Bash", json!({"command": "sleep 3"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = command(&repo, &server)
        .env("PATH", &path)
        .args(["-p", "wait", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = server.requests();
    let first = requests[0].json()["messages"].to_string();
    assert!(!first.contains("Git status:"), "{first}");
    let second = requests[1].json();
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        last.contains("The repository's state at the start of this session")
            && last.contains("## master"),
        "{last}"
    );
    // Without the prefetch, the first request waits for it.
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = command(&repo, &server)
        .env("PATH", &path)
        .env("AGENT_NO_PREFETCH", "1")
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    let first = server.requests()[0].json()["messages"].to_string();
    assert!(first.contains("Git status:\\n## master"), "{first}");
}

/// An attack on attachments: a file the model read, replaced by a link to a secret outside
/// the workspace, is reported changed but never read through the link.
#[tokio::test]
async fn a_read_file_swapped_for_a_link_is_not_read_through_it() {
    let repo = repo("attachments-link");
    let secret = repo.home.join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-VALUE\n").unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_l",
            "Bash",
            json!({"command": format!("ln -sf {} notes.txt", secret.display())}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "go",
            "--permission-mode",
            "acceptEdits",
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
    assert!(
        repo.dir
            .join("notes.txt")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink(),
        "the command did not make the link"
    );
    let after = server.requests()[2].json().to_string();
    assert!(!after.contains("TOP-SECRET-VALUE"), "{after}");
    assert!(
        after.contains("notes.txt was changed since you last read it"),
        "{after}"
    );
}

/// Claude Code's command line: piped input and `-p` together send both (the input first, in
/// a fenced block); a positional prompt is the prompt (headless when stdin is not a
/// terminal); `agent -- demo` is a prompt, not the subcommand.
#[tokio::test]
async fn piped_input_and_positional_prompts_reach_the_model() {
    let repo = repo("prompts");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("It prints one.")),
        Reply::turn(Turn::new().text("A positional answer.")),
        Reply::turn(Turn::new().text("Not the demo.")),
    ]))
    .await
    .unwrap();
    let mut child = command(&repo, &server)
        .args(["-p", "explain this", "--output-format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"print(1)\n").await.unwrap();
    }
    let output = child.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let sent = server.requests()[0].json()["messages"].to_string();
    assert!(
        sent.contains("```\\nprint(1)\\n```\\n\\nexplain this"),
        "{sent}"
    );
    // The session list shows the prompt, not the piped input (it showed the input).
    let listed = command(&repo, &server)
        .args(["sessions", "--json"])
        .output()
        .await
        .unwrap();
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(list[0]["first_prompt"], "explain this", "{list}");

    for (args, expected) in [
        (
            &["what is this repository?"][..],
            "what is this repository?",
        ),
        (&["--", "demo"][..], "demo"),
    ] {
        let output = command(&repo, &server)
            .args(["--output-format", "json"])
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let last = server.requests().last().unwrap().json();
        let prompt = last["messages"][0]["content"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(prompt, expected);
    }
}

/// From an attack on attachments: a file under a Read deny rule that changes is named, never
/// shown; a change shown without its diff (not UTF-8 here) drops the file from the read
/// state, so a Write that would overwrite the unseen change is refused until it is read again.
#[tokio::test]
async fn attachments_respect_read_rules_and_stale_writes() {
    let repo = repo("attachments-rules");
    std::fs::write(repo.dir.join("legacy.txt"), b"caf\xe9 line one\nline two\n").unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_w",
                    "Write",
                    json!({"file_path": "secret.txt", "content": "placeholder\n"}),
                )
                .tool_use("toolu_r", "Read", json!({"file_path": "legacy.txt"})),
        ),
        Reply::turn(Turn::new().tool_use(
            "toolu_b",
            "Bash",
            json!({"command": "sleep 1.5; printf 'caf\\351 USER FIX\\n' > legacy.txt"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_o",
            "Write",
            json!({"file_path": "legacy.txt", "content": "model version\n"}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    // The user (outside the sandbox, which hides the file from commands) changes the secret
    // while the command runs.
    let secret = repo.dir.join("secret.txt");
    let user = tokio::spawn(async move {
        while std::fs::read_to_string(&secret).ok().as_deref() != Some("placeholder\n") {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        std::fs::write(&secret, "API_KEY=hunter2\n").unwrap();
    });
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "go",
            "--permission-mode",
            "acceptEdits",
            "--disallowedTools",
            "Read(./secret.txt)",
            "--output-format",
            "json",
        ],
    )
    .await;
    user.await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let after = server.requests()[2].json().to_string();
    assert!(
        after.contains("secret.txt was changed since you last read it"),
        "{after}"
    );
    assert!(!after.contains("hunter2"), "{after}");
    assert!(
        after.contains("legacy.txt was changed since you last read it"),
        "{after}"
    );
    let refused = result_text(&server, "toolu_o");
    assert!(refused.contains("has not been read"), "{refused}");
    assert_eq!(
        std::fs::read(repo.dir.join("legacy.txt")).unwrap(),
        b"caf\xe9 USER FIX\n"
    );
}

/// Claude Code's headless shapes: a tool denied by a blanket rule is not offered (Write,
/// Task through its alias); a text-mode run whose calls were refused says so on stderr; the
/// result's `stop_reason` is the API's, `terminal_reason` the loop's.
#[tokio::test]
async fn denied_tools_are_not_offered_and_refusals_are_reported() {
    let repo = repo("denied-tools");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "new.py", "old_string": "", "new_string": "print()\n"}),
        )),
        Reply::turn(Turn::new().text("Could not edit.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &["-p", "fix it", "--disallowedTools", "Write,Agent"],
    )
    .await;
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("agent: 1 tool call was refused (Edit)"),
        "{stderr}"
    );
    let offered: Vec<String> = server.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        offered,
        [
            "Read",
            "Edit",
            "Glob",
            "Grep",
            "Bash",
            "NotebookEdit",
            "TaskCreate",
            "TaskGet",
            "TaskUpdate",
            "TaskList",
            "TaskOutput",
            "TaskStop",
            "Monitor",
            "WebFetch",
            "WebSearch",
            "EnterWorktree",
            "ExitWorktree",
        ]
    );

    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = agent(&repo, &server, &["-p", "hi", "--output-format", "json"]).await;
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["stop_reason"], "end_turn");
    assert_eq!(result["terminal_reason"], "completed");
    // Every description offered, the session's own tools (Task, the worktree tools) too,
    // reads as prose (the tools crate checks its own the same way).
    for tool in server.requests()[0].json()["tools"].as_array().unwrap() {
        let description = tool["description"].as_str().unwrap();
        assert!(description.len() >= 150, "{tool}");
        assert!(!description.contains("  "), "{tool}");
        assert!(
            description.ends_with('.') || description.ends_with(".)"),
            "{tool}"
        );
    }
}

/// A failure that waiting will not heal (nothing listening on this machine's port, a name
/// that does not resolve) is tried twice, not ten times over two minutes.
#[tokio::test]
async fn an_unreachable_local_server_fails_fast() {
    let repo = repo("fail-fast");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    for base in [url.as_str(), "http://no-such-host.invalid"] {
        let started = std::time::Instant::now();
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"))
            .args(["-p", "hi", "--base-url", base, "-C"])
            .arg(&repo.dir)
            .env("HOME", &repo.home)
            .env("XDG_DATA_HOME", repo.home.join("data"))
            .env("XDG_CONFIG_HOME", repo.home.join("config"))
            .env("ANTHROPIC_API_KEY", "test")
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "{stderr}"
        );
        assert!(!stderr.contains("attempt 2"), "{stderr}");
        assert!(stderr.contains("connection error"), "{stderr}");
    }
}

/// `--settings` (a JSON text or a file) wins over the settings files and names itself in
/// errors; `--dangerously-skip-permissions` is bypassPermissions (an Edit runs headless) and
/// cannot be combined with `--permission-mode`.
#[tokio::test]
async fn settings_and_skip_permissions_flags() {
    let repo = repo("settings-flag");
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({"model": "from-project"}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "greet.py"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "greet.py", "old_string": "helo", "new_string": "hello"}),
        )),
        Reply::turn(Turn::new().text("Fixed.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "fix it",
            "--settings",
            r#"{"model": "from-flag"}"#,
            "--dangerously-skip-permissions",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(server.requests()[0].json()["model"], "from-flag");
    assert!(
        std::fs::read_to_string(repo.dir.join("greet.py"))
            .unwrap()
            .contains("'hello'")
    );
    let file = repo.home.join("extra.json");
    std::fs::write(&file, r#"{"modle": "x", "permissions": {"allow": 3}}"#).unwrap();
    let output = agent(
        &repo,
        &server,
        &["-p", "hi", "--settings", file.to_str().unwrap()],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:1:", file.display())),
        "{stderr}"
    );
    assert!(stderr.contains("permissions.allow"), "{stderr}");
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "hi",
            "--dangerously-skip-permissions",
            "--permission-mode",
            "plan",
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
}

/// `system/init`'s `apiKeySource` says where the key came from.
#[tokio::test]
async fn init_names_the_api_key_source() {
    let repo = repo("api-key-source");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    for (key, expected) in [(Some("sk-test"), "ANTHROPIC_API_KEY"), (None, "none")] {
        let mut run = command(&repo, &server);
        if let Some(key) = key {
            run.env("ANTHROPIC_API_KEY", key);
        }
        let output = run
            .args(["-p", "hi", "--output-format", "stream-json"])
            .output()
            .await
            .unwrap();
        let lines = lines(&output);
        assert_eq!(lines[0]["apiKeySource"], expected);
        // Assistant lines carry the response's usage, as Claude Code's do.
        let assistant = lines
            .iter()
            .find(|line| line["type"] == "assistant")
            .unwrap();
        assert!(
            assistant["message"]["usage"]["input_tokens"].is_u64(),
            "{assistant}"
        );
    }
}

/// Budgets from the CLI: `--max-budget-usd` stops before the request that would go past the
/// limit (result subtype `error_max_budget_usd`, exit 3); `--max-tokens-budget` sends a model
/// that stops early back to work until the budget is used up.
#[tokio::test]
async fn budgets_stop_or_continue_the_run() {
    let repo = repo("budgets");
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    // testkit answers as `claude-test`, 100 input and 20 output tokens a turn: $0.012 a turn.
    std::fs::write(
        config.join("settings.json"),
        json!({"models": {"claude-test": {"prices": {"input": 100.0, "output": 100.0}}}})
            .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_1", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().tool_use("toolu_2", "Read", json!({"file_path": "greet.py"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "read",
            "--max-budget-usd",
            "0.02",
            "--output-format",
            "json",
        ],
    )
    .await;
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["subtype"], "error_max_budget_usd");
    assert_eq!(result["terminal_reason"], "max_budget_usd");
    assert_eq!(server.request_count(), 2);

    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("Part one.")),
        Reply::turn(Turn::new().text("Part two.")),
        Reply::turn(Turn::new().text("Part three.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "write",
            "--max-tokens-budget",
            "50",
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
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["terminal_reason"], "token_budget_reached");
    assert_eq!(result["result"], "Part three.");
    assert_eq!(server.request_count(), 3);
    let nudge = server.requests()[1].json()["messages"].to_string();
    assert!(
        nudge.contains("Keep working on the task: 20 of your 50-token output budget"),
        "{nudge}"
    );
}

/// `--input-format stream-json`: three user messages on stdin, answered turn by turn in one
/// process and one session (each turn ends with its result line); a line that is not a user
/// message is named on stderr and skipped; `--include-partial-messages` adds `stream_event`
/// lines.
#[tokio::test]
async fn stream_json_input_runs_turn_by_turn() {
    let repo = repo("stream-input");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("One.")),
        Reply::turn(Turn::new().text("Two.")),
        Reply::turn(Turn::new().text("Three.")),
    ]))
    .await
    .unwrap();
    let mut child = command(&repo, &server)
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--include-partial-messages",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = child.stdin.take().unwrap();
        let lines = [
            json!({"type": "user", "message": {"role": "user", "content": "first"}, "parent_tool_use_id": null}),
            json!({"type": "assistant", "message": {}}),
            json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "second"}]}, "parent_tool_use_id": null}),
            json!({"type": "user", "message": {"role": "user", "content": "third"}, "parent_tool_use_id": null}),
        ];
        for line in lines {
            stdin
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
        }
    }
    let output = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("stdin line 2: \"type\" is \"assistant\", not user"),
        "{stderr}"
    );
    let lines = lines(&output);
    let results: Vec<&Value> = lines
        .iter()
        .filter(|line| line["type"] == "result")
        .collect();
    assert_eq!(results.len(), 3);
    assert_eq!(
        results
            .iter()
            .map(|r| r["result"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["One.", "Two.", "Three."]
    );
    assert_eq!(
        lines
            .iter()
            .filter(|line| line["subtype"] == "init")
            .count(),
        1
    );
    let sessions: std::collections::HashSet<&str> = results
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(sessions.len(), 1);
    // One conversation: the third request holds the first two exchanges.
    let third = server.requests()[2].json()["messages"].to_string();
    for text in ["first", "One.", "second", "Two.", "third"] {
        assert!(third.contains(text), "{text}: {third}");
    }
    let partial: Vec<&Value> = lines
        .iter()
        .filter(|line| line["type"] == "stream_event")
        .collect();
    assert!(
        partial
            .iter()
            .any(|line| line["event"]["type"] == "message_start")
    );
    assert!(
        partial
            .iter()
            .any(|line| line["event"]["type"] == "content_block_delta")
    );
    assert!(
        partial
            .iter()
            .all(|line| line["parent_tool_use_id"].is_null())
    );
}

/// `--verbose` names each request and each transition of the loop on stderr.
#[tokio::test]
async fn verbose_names_requests_and_transitions() {
    let repo = repo("verbose");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = agent(&repo, &server, &["-p", "read", "--verbose"]).await;
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("agent: request 1 (turn 1) to claude-opus-4-8"),
        "{stderr}"
    );
    assert!(stderr.contains("agent: transition: next_turn"), "{stderr}");
    assert!(
        stderr.contains("agent: request 2 (turn 2) to claude-opus-4-8"),
        "{stderr}"
    );
}

/// `--json-schema`: an answer that does not fit is refused with the reason, the model tries
/// again, and the result carries the accepted value; a model that never gives one ends with
/// `error_max_structured_output_retries` after 3 tries.
#[tokio::test]
async fn json_schema_answers_are_checked_and_retried() {
    let repo = repo("json-schema");
    let schema = json!({
        "type": "object",
        "properties": {
            "bug": {"type": "string", "pattern": "^[a-z_]+\\.py$"},
            "line": {"type": "integer", "minimum": 1}
        },
        "required": ["bug", "line"],
        "additionalProperties": false
    })
    .to_string();
    let server = Server::start_tls(Script::new(vec![
        // Not the shape: refused by the schema check.
        Reply::turn(Turn::new().tool_use(
            "toolu_1",
            "StructuredOutput",
            json!({"bug": "greet", "line": 0}),
        )),
        // Ends without it: sent back once.
        Reply::turn(Turn::new().text("The bug is in greet.py.")),
        Reply::turn(Turn::new().tool_use(
            "toolu_2",
            "StructuredOutput",
            json!({"bug": "greet.py", "line": 2}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "find the bug",
            "--json-schema",
            &schema,
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
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(
        result["structured_output"],
        json!({"bug": "greet.py", "line": 2})
    );
    let refused = result_text(&server, "toolu_1");
    assert!(refused.contains("must match the pattern"), "{refused}");
    assert!(refused.contains("`line` must be at least 1"), "{refused}");
    let sent_back = server.requests()[2].json()["messages"].to_string();
    assert!(
        sent_back.contains("You ended your turn without calling StructuredOutput"),
        "{sent_back}"
    );
    assert!(
        server.requests()[0].json()["system"]
            .to_string()
            .contains("call the StructuredOutput tool once")
    );

    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("No."))]))
        .await
        .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "find the bug",
            "--json-schema",
            &schema,
            "--output-format",
            "json",
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(3));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["subtype"], "error_max_structured_output_retries");
    assert_eq!(
        result["terminal_reason"],
        "structured_output_retry_exhausted"
    );
    assert_eq!(result["is_error"], true);
    assert!(result.get("structured_output").is_none());
    assert_eq!(server.request_count(), 3);
}

/// `-p` is a flag, as Claude Code's: the prompt is the argument wherever it stands, or stdin.
#[tokio::test]
async fn print_is_a_flag_as_in_claude_code() {
    let repo = repo("print-flag");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Ok."))]))
        .await
        .unwrap();
    for args in [
        &["-p", "--output-format", "json", "first form"][..],
        &["first form", "-p", "--output-format", "json"][..],
        &["--print", "--output-format=json", "first form"][..],
    ] {
        let output = agent(&repo, &server, args).await;
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let result: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(result["result"], "Ok.");
        let prompt = server.requests().last().unwrap().json()["messages"][0]["content"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["text"]
            .clone();
        assert_eq!(prompt, "first form", "{args:?}");
    }
    let mut child = command(&repo, &server)
        .args(["-p", "--output-format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"from stdin with ``` inside")
            .await
            .unwrap();
    }
    let output = child.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let sent = server.requests().last().unwrap().json()["messages"].to_string();
    assert!(sent.contains("from stdin with ``` inside"), "{sent}");
}

/// `--fork-session` starts a new session from an old one's history and leaves the old file
/// byte for byte; `--session-id` names a new session; both are listed by `agent sessions`.
#[tokio::test]
async fn fork_session_and_session_id() {
    let repo = repo("fork-session");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("First.")),
        Reply::turn(Turn::new().text("Forked.")),
    ]))
    .await
    .unwrap();
    let id = "0b9f8a52-3c1d-4e6f-9a7b-2c3d4e5f6a7b";
    let output = agent(
        &repo,
        &server,
        &["-p", "start", "--session-id", id, "--output-format", "json"],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let first: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(first["session_id"], id);
    let sessions = repo.home.join("data/agent/projects");
    let file = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .map(|project| project.path().join(format!("{id}.jsonl")))
        .find(|path| path.is_file())
        .unwrap();
    let before = std::fs::read(&file).unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "--resume",
            id,
            "--fork-session",
            "-p",
            "go on",
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
    let forked: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_ne!(forked["session_id"], id);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the old session changed"
    );
    let sent = server.requests()[1].json()["messages"].to_string();
    assert!(
        sent.contains("start") && sent.contains("First.") && sent.contains("go on"),
        "{sent}"
    );
    // The fork sends the context its session sent: the first message is the same.
    let strip = |value: Value| {
        value
            .to_string()
            .replace(r#","cache_control":{"type":"ephemeral"}"#, "")
    };
    assert_eq!(
        strip(server.requests()[1].json()["messages"][0].clone()),
        strip(server.requests()[0].json()["messages"][0].clone())
    );
    let output = agent(&repo, &server, &["sessions", "--json"]).await;
    let list: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let ids: Vec<&str> = list
        .iter()
        .map(|row| row["session_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&id) && ids.contains(&forked["session_id"].as_str().unwrap()),
        "{ids:?}"
    );
    // The id of a resumed session is its own.
    let output = agent(
        &repo,
        &server,
        &["--resume", id, "--session-id", id, "-p", "x"],
    )
    .await;
    assert_ne!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stderr).contains("needs --fork-session"));
}

/// A headless run in plan mode offers ExitPlanMode and refuses it with how to go on: the
/// plan cannot be approved without a user, and the mode stays plan.
#[tokio::test]
async fn headless_plan_mode_refuses_exit_plan_mode() {
    let repo = repo("headless-plan");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_p",
            "ExitPlanMode",
            json!({"plan": "1. edit", "mode": "acceptEdits"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "x.txt", "content": "x"}),
        )),
        Reply::turn(Turn::new().text("Here is the plan.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &["-p", "plan it", "--permission-mode", "plan"],
    )
    .await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = server.requests();
    let offered: Vec<String> = requests[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        offered.iter().any(|name| name == "ExitPlanMode"),
        "{offered:?}"
    );
    let refused = requests[1].json()["messages"][2]["content"][0].clone();
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["content"]
            .to_string()
            .contains("run again with --permission-mode default or acceptEdits"),
        "{refused}"
    );
    // Still plan mode: the write after it is refused too.
    let write = requests[2].json()["messages"][4]["content"][0].clone();
    assert_eq!(write["is_error"], true, "{write}");
    assert!(!repo.dir.join("x.txt").exists());
}

/// An allow rule that does not parse is left out with a warning naming its file (the
/// session only asks more); a deny rule that does not parse still stops the start.
#[tokio::test]
async fn a_bad_allow_rule_is_ignored_and_a_bad_deny_rule_stops() {
    let repo = repo("bad-rules");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    let file = config.join("settings.json");
    std::fs::write(
        &file,
        json!({"permissions": {"allow": ["Edit(./notes\\)", "Bash(ls:*)"]}}).to_string(),
    )
    .unwrap();
    let output = agent(&repo, &server, &["-p", "hi"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: permissions.allow:", file.display()))
            && stderr.contains("the rule is ignored"),
        "{stderr}"
    );
    std::fs::write(
        &file,
        json!({"permissions": {"deny": ["Edit(./notes\\)"]}}).to_string(),
    )
    .unwrap();
    let output = agent(&repo, &server, &["-p", "hi"]).await;
    assert_ne!(output.status.code(), Some(0));
}

/// A stream that breaks mid-answer is asked again; a `--include-partial-messages` reader,
/// who saw the first attempt's text arrive, is told that partial message was withdrawn (the
/// seeds' tombstone) before the new one starts, and the result holds only the new answer.
#[tokio::test]
async fn a_retried_stream_withdraws_the_partial_message() {
    let repo = repo("withdrawn");
    let turn = Turn::new()
        .id("msg_first")
        .text("The whole answer, in three parts.");
    let bytes = turn.sse();
    let text = String::from_utf8_lossy(&bytes);
    let first = text.find("text_delta").unwrap();
    let cut = text[first..].find("\n\n").unwrap() + first + 2;
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(turn).faults(testkit::Faults {
            reset_after: Some(cut),
            ..testkit::Faults::default()
        }),
        Reply::turn(
            Turn::new()
                .id("msg_second")
                .text("The whole answer, in three parts."),
        ),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &[
            "-p",
            "answer",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = lines(&output);
    let withdrawn = lines
        .iter()
        .position(|line| line["subtype"] == "message_withdrawn")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(lines[withdrawn]["message_id"], "msg_first");
    assert_eq!(lines[withdrawn]["reason"], "stream_retry");
    // The first attempt's text had been streamed to the reader before it was withdrawn.
    assert!(lines[..withdrawn].iter().any(|line| {
        line["type"] == "stream_event" && line["event"]["type"] == "content_block_delta"
    }));
    assert!(lines[withdrawn..].iter().any(|line| {
        line["type"] == "stream_event" && line["event"]["message"]["id"] == "msg_second"
    }));
    let result = lines.last().unwrap();
    assert_eq!(result["result"], "The whole answer, in three parts.");
    assert_eq!(server.request_count(), 2);
}

/// Headless: TodoWrite (accepted, not offered) works and stream-json carries Claude Code's
/// `{oldTodos, newTodos}`; AskUserQuestion (not offered either, as in Claude Code, with
/// nobody to ask) is refused with a result that sends the model on with its own judgment.
#[tokio::test]
async fn headless_todos_and_questions() {
    let repo = repo("headless-todo-ask");
    let todos = json!([{"content": "Fix it", "status": "in_progress", "activeForm": "Fixing it"}]);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use("toolu_todo", "TodoWrite", json!({"todos": todos}))
                .tool_use(
                    "toolu_q",
                    "AskUserQuestion",
                    json!({"questions": [{"question": "Which one?", "header": "Pick",
                        "multiSelect": false, "options": [
                            {"label": "a", "description": "x"},
                            {"label": "b", "description": "y"}]}]}),
                ),
        ),
        Reply::turn(Turn::new().text("Went with a.")),
    ]))
    .await
    .unwrap();
    let output = agent(
        &repo,
        &server,
        &["-p", "go", "--output-format", "stream-json", "--verbose"],
    )
    .await;
    assert!(output.status.success());
    // Claude Code 2.1's task tools are offered; TodoWrite, its earlier form, is accepted only.
    let offered = server.requests()[0].json()["tools"].to_string();
    assert!(offered.contains("\"TaskCreate\"") && !offered.contains("\"TodoWrite\""));
    assert!(!offered.contains("\"AskUserQuestion\""), "{offered}");
    let lines = lines(&output);
    let todo_result = lines
        .iter()
        .find(|line| line["type"] == "user" && line["tool_use_result"]["newTodos"].is_array())
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(todo_result["tool_use_result"]["newTodos"], todos);
    assert_eq!(todo_result["tool_use_result"]["oldTodos"], json!([]));
    let asked = result_text(&server, "toolu_q");
    assert!(
        asked.contains("cannot ask the user") && asked.contains("own best judgment"),
        "{asked}"
    );
}

/// A 1x1 PNG (the Messages API documentation's example image).
const TINY_PNG: [u8; 69] = [
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0,
    0, 0, 144, 119, 83, 222, 0, 0, 0, 12, 73, 68, 65, 84, 120, 156, 99, 248, 207, 192, 0, 0, 3, 1,
    1, 0, 201, 254, 146, 239, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

/// Images reach the model: `@shot.png` in a headless prompt attaches the image block, and a
/// Read of an image answers with one (the tool_result holds the image).
#[tokio::test]
async fn images_reach_the_model_by_mention_and_by_read() {
    let repo = repo("images");
    std::fs::write(repo.dir.join("shot.png"), TINY_PNG).unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "shot.png"}))),
        Reply::turn(Turn::new().text("A single pixel.")),
    ]))
    .await
    .unwrap();
    let output = agent(&repo, &server, &["-p", "what is in @shot.png?"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let first = server.requests()[0].json();
    let prompt = first["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    let image = prompt
        .as_array()
        .unwrap()
        .iter()
        .find(|block| block["type"] == "image")
        .unwrap_or_else(|| panic!("{prompt:#}"));
    assert_eq!(image["source"]["media_type"], "image/png");
    assert_eq!(
        image["source"]["data"],
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    );
    let second = server.requests()[1].json();
    let result = second["messages"].as_array().unwrap().last().unwrap()["content"][0].clone();
    assert_eq!(result["tool_use_id"], "toolu_r");
    assert_eq!(result["content"][1]["type"], "image", "{result:#}");
}

/// The last message of request `n` of `server`, as the model received it.
fn last_message(server: &Server, n: usize) -> Value {
    let request = server.requests()[n].json();
    request["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone()
}

/// A PDF reaches the model as a document block: whole by `@` mention, a page range by Read's
/// `pages`, which is cut out as a document of its own.
#[tokio::test]
async fn pdfs_reach_the_model_by_mention_and_by_read() {
    use base64::Engine as _;
    let repo = repo("pdfs");
    let pdf = testkit::pdf::document(3, 100).unwrap();
    std::fs::write(repo.dir.join("report.pdf"), &pdf).unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_p",
            "Read",
            json!({"file_path": "report.pdf", "pages": "2"}),
        )),
        Reply::turn(Turn::new().text("Three pages.")),
    ]))
    .await
    .unwrap();
    let output = agent(&repo, &server, &["-p", "summarize @report.pdf"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let prompt = last_message(&server, 0);
    let document = prompt["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|block| block["type"] == "document")
        .unwrap_or_else(|| panic!("{prompt:#}"))
        .clone();
    let decode = |block: &Value| {
        base64::engine::general_purpose::STANDARD
            .decode(block["source"]["data"].as_str().unwrap())
            .unwrap()
    };
    assert_eq!(document["source"]["media_type"], "application/pdf");
    assert_eq!(decode(&document), pdf);
    let result = last_message(&server, 1)["content"][0].clone();
    assert_eq!(result["tool_use_id"], "toolu_p");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("pages 2-2 of 3"),
        "{result:#}"
    );
    let page = decode(&result["content"][1]);
    let cut = lopdf::Document::load_mem(&page).unwrap();
    assert_eq!(cut.get_pages().len(), 1);
    assert_eq!(cut.extract_text(&[1]).unwrap().trim(), "Page 2 of 3");

    // The transcript keeps both documents: a resumed session sends them again.
    let output = agent(&repo, &server, &["--continue", "-p", "and the last page?"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let resumed = server.requests()[2].json()["messages"].to_string();
    assert_eq!(
        resumed.matches("\"type\":\"document\"").count(),
        2,
        "{resumed}"
    );
}

/// A model that takes no images never gets one: marked `"vision": false` in settings, its
/// requests carry a note instead; unmarked, a server's refusal of an image sends the request
/// again with notes, and the run goes on rather than stopping on a 400.
#[tokio::test]
async fn text_only_models_get_notes_in_place_of_images() {
    let repo = repo("text-only");
    std::fs::write(repo.dir.join("shot.png"), TINY_PNG).unwrap();
    let kinds = |message: &Value| -> Vec<String> {
        message["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|block| block["type"].as_str().unwrap().to_owned())
            .collect()
    };
    let server = Server::start_tls(Script::new(vec![
        Reply::error(
            400,
            "invalid_request_error",
            "messages.0.content.3.image.source.base64: Could not process image",
        ),
        Reply::turn(Turn::new().text("I cannot see images.")),
    ]))
    .await
    .unwrap();
    let output = agent(&repo, &server, &["-p", "what is in @shot.png?"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("I cannot see images."));
    assert_eq!(server.requests().len(), 2);
    assert!(kinds(&last_message(&server, 0)).contains(&"image".to_owned()));
    let retried = last_message(&server, 1);
    assert!(
        !kinds(&retried).contains(&"image".to_owned()),
        "{retried:#}"
    );
    assert!(
        retried.to_string().contains("this model takes no images"),
        "{retried:#}"
    );

    // Marked in settings: the note from the first request on.
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Noted."))]))
        .await
        .unwrap();
    let settings = json!({"models": {"claude-sonnet-4-5": {"vision": false}}}).to_string();
    let output = agent(
        &repo,
        &server,
        &[
            "--model",
            "claude-sonnet-4-5",
            "--settings",
            &settings,
            "-p",
            "what is in @shot.png?",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let sent = last_message(&server, server.requests().len() - 1);
    assert!(!kinds(&sent).contains(&"image".to_owned()), "{sent:#}");
    assert!(sent.to_string().contains("this model takes no images"));
}

/// Only the user's own prompt is read for `@` mentions: a file's text piped beside `-p`
/// (which may come from anywhere) attaches nothing.
#[tokio::test]
async fn mentions_in_piped_input_attach_nothing() {
    use tokio::io::AsyncWriteExt as _;
    let repo = repo("piped-mention");
    std::fs::write(repo.dir.join("shot.png"), TINY_PNG).unwrap();
    // Beside a prompt, and in its place: piped text is never the user's own.
    for args in [&["-p", "summarize this log"][..], &["-p"][..]] {
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Ok."))]))
            .await
            .unwrap();
        let mut child = command(&repo, &server)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"error: see @shot.png and @notes.txt\n")
            .await
            .unwrap();
        drop(stdin);
        let output = child.wait_with_output().await.unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let prompt = server.requests()[0].json()["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"]
            .to_string();
        assert!(prompt.contains("see @shot.png"), "{prompt}");
        assert!(!prompt.contains("\"image\""), "{prompt}");
        assert!(!prompt.contains("Called the Read tool"), "{prompt}");
    }
}

/// A settings `additionalDirectories` folder that is not there (another machine's path) is
/// one warning and is skipped; the run goes on, as in Claude Code. `--add-dir` of a missing
/// folder stays an error.
#[tokio::test]
async fn a_missing_additional_directory_is_skipped_with_a_warning() {
    let repo = repo("missing-add-dir");
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("settings.json"),
        json!({"permissions": {"additionalDirectories": ["/nonexistent/shared-libs"]}}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = agent(&repo, &server, &["-p", "hi"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("permissions.additionalDirectories entry skipped")
            && stderr.contains("/nonexistent/shared-libs"),
        "{stderr}"
    );
    let output = agent(
        &repo,
        &server,
        &["-p", "hi", "--add-dir", "/nonexistent/other"],
    )
    .await;
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--add-dir"));
}
