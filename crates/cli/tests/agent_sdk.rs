//! The Claude Agent SDK drives `agent`: the programs of `tests/agent-sdk/programs`, written
//! against the TypeScript (`@anthropic-ai/claude-agent-sdk` 0.3.197) and Python
//! (`claude-agent-sdk` 0.2.110) SDKs as their quickstarts are, run with our binary as the
//! executable the SDK spawns, against a testkit server. Each program asserts on what its SDK
//! returns; the test asserts on the requests the model got and the files left behind.
//!
//! The SDKs come from `.ci/run`, pinned, in cache folders (`AGENT_SDK_TS_DIR`,
//! `AGENT_SDK_PY_DIR`); without them these tests skip loudly, except under `CI=true`.
//! `AGENT_SDK_TARGET` set to another executable (Claude Code's) runs the same programs
//! against it: the comparison run of docs/agent-sdk.md.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Repo, repo};
use serde_json::{Value, json};
use testkit::{Script, Server};

/// The two SDKs.
#[derive(Clone, Copy, Debug)]
enum Sdk {
    TypeScript,
    Python,
}

impl Sdk {
    /// The folder it was installed in, or `None` (told) when it is missing outside CI.
    fn installed(self) -> Option<PathBuf> {
        let (variable, folder, probe) = match self {
            Self::TypeScript => (
                "AGENT_SDK_TS_DIR",
                "agent-sdk-ts",
                "node_modules/@anthropic-ai/claude-agent-sdk/sdk.mjs",
            ),
            Self::Python => (
                "AGENT_SDK_PY_DIR",
                "agent-sdk-py",
                // Written by .ci/run once the SDK is installed in the venv.
                "requirements.txt",
            ),
        };
        common::ci_install(
            &format!("the {self:?} Agent SDK"),
            variable,
            folder,
            &[probe],
        )
    }

    fn extension(self) -> &'static str {
        match self {
            Self::TypeScript => "mjs",
            Self::Python => "py",
        }
    }
}

/// What one program run left: its output, the server's requests, the repository.
struct Ran {
    output: std::process::Output,
    server: Server,
    repo: Repo,
}

impl Ran {
    /// The request bodies the model got, in order.
    fn requests(&self) -> Vec<Value> {
        self.server
            .requests()
            .iter()
            .map(testkit::RecordedRequest::json)
            .collect()
    }

    /// The program's summary (its `OK` line), after checking it succeeded.
    fn summary(&self, what: &str) -> Value {
        let stdout = String::from_utf8_lossy(&self.output.stdout);
        let stderr = String::from_utf8_lossy(&self.output.stderr);
        assert!(
            self.output.status.success(),
            "{what} failed ({}):\n{stdout}\n{stderr}",
            self.output.status
        );
        let line = stdout
            .lines()
            .find_map(|line| line.strip_prefix("OK "))
            .unwrap_or_else(|| panic!("{what}: no OK line in\n{stdout}\n{stderr}"));
        serde_json::from_str(line).unwrap()
    }
}

/// Runs `program` of `sdk` (installed in `sdk_dir`) in a fresh repository against a server
/// playing `turns` (testkit's JSON turns).
async fn run(sdk: Sdk, sdk_dir: &Path, program: &str, turns: Value) -> Ran {
    let name = format!("sdk-{program}-{}", sdk.extension());
    let repo = repo(&name);
    let server = Server::start(Script::from_json(&turns.to_string()).unwrap())
        .await
        .unwrap();
    // The programs beside the SDK: ES modules find packages from where they are.
    let programs = repo.home.join("programs");
    std::fs::create_dir_all(&programs).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/agent-sdk/programs");
    for entry in std::fs::read_dir(&source).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, programs.join(path.file_name().unwrap())).unwrap();
    }
    let interpreter = match sdk {
        Sdk::TypeScript => {
            std::os::unix::fs::symlink(sdk_dir.join("node_modules"), programs.join("node_modules"))
                .unwrap();
            PathBuf::from("node")
        }
        Sdk::Python => sdk_dir.join("bin/python"),
    };
    let target = std::env::var_os("AGENT_SDK_TARGET")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_agent")), PathBuf::from);
    let mut command = tokio::process::Command::new(interpreter);
    command
        .arg(programs.join(format!("{program}.{}", sdk.extension())))
        .current_dir(&programs)
        .env("AGENT_BIN", target)
        .env("WORK", &repo.dir)
        .env("HOME", &repo.home)
        .env("XDG_DATA_HOME", repo.home.join("data"))
        .env("XDG_CONFIG_HOME", repo.home.join("config"))
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("AGENT_DISABLE_BACKGROUND_REQUESTS", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("ANTHROPIC_MODEL")
        .env_remove("AGENT_TRUST")
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .unwrap_or_else(|_| panic!("{program} ({sdk:?}) did not end within 120 s"))
        .unwrap();
    Ran {
        output,
        server,
        repo,
    }
}

/// Every program, each against both SDKs: the scripts and what must hold of the requests
/// and files afterwards.
async fn every_program(sdk: Sdk) {
    let Some(dir) = sdk.installed() else {
        return;
    };
    let text = |text: &str| json!({"text": text, "stop_reason": "end_turn"});
    let tool = |id: &str, name: &str, input: Value| json!({"tool_uses": [{"id": id, "name": name, "input": input}], "stop_reason": "tool_use"});

    let ran = run(
        sdk,
        &dir,
        "one_shot",
        json!([text("Hello from the model.")]),
    )
    .await;
    ran.summary("one_shot");
    let requests = ran.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0]["messages"][0].to_string().contains("Say hello"));
    // The Python SDK asks for an empty system prompt: no empty text block goes to the API,
    // which refuses one.
    for block in requests[0]["system"].as_array().into_iter().flatten() {
        assert_ne!(block["text"], "", "{}", requests[0]["system"]);
    }

    let turns = json!([text("Nice to meet you, Ada."), text("Your name is Ada.")]);
    let ran = run(sdk, &dir, "client", turns).await;
    ran.summary("client");
    let second = ran.requests()[1]["messages"].to_string();
    let order: Vec<Option<usize>> = [
        "My name is Ada.",
        "Nice to meet you, Ada.",
        "What is my name?",
    ]
    .iter()
    .map(|text| second.find(text))
    .collect();
    assert!(
        order.is_sorted() && order[0].is_some(),
        "{order:?} in {second}"
    );

    let turns = json!([
        {"tool_uses": [
            {"id": "toolu_deny", "name": "Write", "input": {"file_path": "denied.txt", "content": "no\n"}},
            {"id": "toolu_rewrite", "name": "Write", "input": {"file_path": "rewritten.txt", "content": "original\n"}}
        ], "stop_reason": "tool_use"},
        text("Done.")
    ]);
    let ran = run(sdk, &dir, "permissions", turns).await;
    ran.summary("permissions");
    assert!(!ran.repo.dir.join("denied.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ran.repo.dir.join("rewritten.txt")).unwrap(),
        "rewritten by the callback\n"
    );

    let turns = json!([
        tool(
            "toolu_bash",
            "Bash",
            json!({"command": "touch blocked.txt"})
        ),
        text("Done.")
    ]);
    let ran = run(sdk, &dir, "hooks", turns).await;
    ran.summary("hooks");
    assert!(!ran.repo.dir.join("blocked.txt").exists());

    let turns = json!([
        tool("toolu_add", "mcp__calc__add", json!({"a": 2, "b": 3})),
        text("2 + 3 = 5.")
    ]);
    let ran = run(sdk, &dir, "sdk_mcp", turns).await;
    ran.summary("sdk_mcp");
    let requests = ran.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(offered.contains(&"mcp__calc__add"), "{offered:?}");
    let answer = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        answer.contains("toolu_add") && answer.contains('5'),
        "{answer}"
    );

    let story = "Once upon a time ".repeat(40) + "the end.";
    let turns = json!([
        {"text": story, "stop_reason": "end_turn", "stream_ms": 4000},
        text("Done.")
    ]);
    let ran = run(sdk, &dir, "interrupt", turns).await;
    ran.summary("interrupt");
    assert_eq!(ran.requests().len(), 2);

    let turns = json!([text("One."), text("Two.")]);
    let ran = run(sdk, &dir, "set_model", turns).await;
    ran.summary("set_model");
    let models: Vec<Value> = ran.requests().iter().map(|r| r["model"].clone()).collect();
    assert_eq!(
        models,
        [json!("claude-opus-4-8"), json!("claude-sonnet-4-5")]
    );

    let turns = json!([text("Noted."), text("It was 42.")]);
    let ran = run(sdk, &dir, "resume", turns).await;
    let summary = ran.summary("resume");
    let second = ran.requests()[1]["messages"].to_string();
    assert!(
        second.contains("Remember the number 42.") && second.contains("Noted."),
        "{second}"
    );
    assert_eq!(
        summary["first"], summary["second"],
        "a resumed session keeps its id"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_sdk_drives_agent() {
    every_program(Sdk::TypeScript).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_drives_agent() {
    every_program(Sdk::Python).await;
}
