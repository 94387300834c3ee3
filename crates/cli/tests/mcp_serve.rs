//! `agent mcp serve`: the agent's tools as an MCP server on stdio, reached by an MCP client
//! (the `mcp` crate's, on rmcp) as another agent would configure it, and by the official MCP
//! inspector's CLI when `.ci/run` installed it.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::repo;
use serde_json::{Value, json};

/// The server as a client's configuration names it: `agent` with `args` before `mcp serve`,
/// in `dir`, with the test's home.
fn configured(
    dir: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
) -> mcp::config::Configured {
    let mut full: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    full.extend([
        "-C".into(),
        dir.display().to_string(),
        "mcp".into(),
        "serve".into(),
    ]);
    let env: BTreeMap<String, String> = [
        ("HOME", home.to_path_buf()),
        ("XDG_CONFIG_HOME", home.join("config")),
        ("XDG_DATA_HOME", home.join("data")),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.display().to_string()))
    .collect();
    mcp::config::Configured {
        name: "agent".into(),
        config: mcp::config::ServerConfig::Stdio {
            command: env!("CARGO_BIN_EXE_agent").into(),
            args: full,
            env,
        },
        origin: PathBuf::from("test"),
    }
}

/// Calls `tool` of `tools` with `input`: its text and whether it is an error.
async fn call(tools: &[Arc<dyn executor::Tool>], tool: &str, input: Value) -> (String, bool) {
    let tool = tools
        .iter()
        .find(|candidate| candidate.name() == format!("mcp__agent__{tool}"))
        .unwrap_or_else(|| panic!("no {tool}"));
    let workspace = executor::Workspace {
        cwd: std::env::temp_dir(),
        additional_dirs: Vec::new(),
    };
    let context = executor::ToolContext::detached("toolu_test".into(), Arc::new(workspace));
    match tool.call(input, context).await {
        Ok(output) => (
            serde_json::to_string(&output.content).unwrap(),
            output.is_error,
        ),
        Err(error) => (error.to_string(), true),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_agent_lists_and_calls_the_tools_and_a_call_needing_approval_is_refused() {
    let repo = repo("mcp-serve");
    let options = mcp::Options::new(repo.home.join("logs"), Duration::from_secs(30));
    let connected = mcp::connect_all(
        vec![configured(
            &repo.dir,
            &repo.home,
            &["--permission-mode", "acceptEdits"],
        )],
        &options,
    )
    .await;
    let server = &connected[0];
    assert!(
        matches!(server.status, mcp::Status::Connected),
        "{:?}",
        server.status
    );
    let mut names: Vec<&str> = server.tools.iter().map(|tool| tool.name()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "mcp__agent__Bash",
            "mcp__agent__Edit",
            "mcp__agent__Glob",
            "mcp__agent__Grep",
            "mcp__agent__NotebookEdit",
            "mcp__agent__Read",
            "mcp__agent__Write",
        ]
    );

    let (read, failed) = call(&server.tools, "Read", json!({"file_path": "greet.py"})).await;
    assert!(!failed && read.contains("return 'helo'"), "{read}");
    let (edited, failed) = call(
        &server.tools,
        "Edit",
        json!({"file_path": "greet.py", "old_string": "'helo'", "new_string": "'hello'"}),
    )
    .await;
    assert!(!failed, "{edited}");
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("greet.py")).unwrap(),
        "def greet():\n    return 'hello'\n"
    );
    let (said, failed) = call(&server.tools, "Bash", json!({"command": "echo from-bash"})).await;
    assert!(!failed && said.contains("from-bash"), "{said}");

    // Outside the workspace nothing may be written without asking, and nobody can be asked.
    let outside = repo.home.join("outside.txt");
    let (refused, failed) = call(
        &server.tools,
        "Write",
        json!({"file_path": outside.display().to_string(), "content": "x"}),
    )
    .await;
    assert!(failed, "{refused}");
    assert!(!outside.exists());
    assert!(
        refused.to_lowercase().contains("denied") || refused.contains("approval"),
        "{refused}"
    );
}

/// The official MCP inspector's CLI (`@modelcontextprotocol/inspector`, from
/// `tests/mcp-servers`) lists the tools and calls one.
#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_inspector_lists_and_calls_the_tools() {
    let Some(inspector) = inspector() else {
        return;
    };
    let repo = repo("mcp-serve-inspector");
    let run = |method: &[&str]| {
        let mut command = tokio::process::Command::new(&inspector);
        command
            .args(["--cli", env!("CARGO_BIN_EXE_agent"), "-C"])
            .arg(&repo.dir)
            .args(["mcp", "serve", "--method"])
            .args(method)
            .env("HOME", &repo.home)
            .env("XDG_CONFIG_HOME", repo.home.join("config"))
            .env("XDG_DATA_HOME", repo.home.join("data"))
            .kill_on_drop(true);
        command
    };
    let listed = tokio::time::timeout(Duration::from_secs(60), run(&["tools/list"]).output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"Read") && names.contains(&"Bash"),
        "{names:?}"
    );
    let called = run(&[
        "tools/call",
        "--tool-name",
        "Read",
        "--tool-arg",
        "file_path=notes.txt",
    ])
    .output();
    let called = tokio::time::timeout(Duration::from_secs(60), called)
        .await
        .unwrap()
        .unwrap();
    assert!(
        called.status.success(),
        "{}",
        String::from_utf8_lossy(&called.stderr)
    );
    let called: Value = serde_json::from_slice(&called.stdout).unwrap();
    assert_eq!(called["isError"], json!(false), "{called}");
    assert!(
        called["content"].to_string().contains("remember the milk"),
        "{called}"
    );
}

/// The inspector's CLI from the MCP test servers' install; `None` (told) outside CI when it
/// is missing.
fn inspector() -> Option<PathBuf> {
    let bin = "node_modules/.bin/mcp-inspector";
    let dir = common::ci_install(
        "the MCP inspector",
        "AGENT_MCP_SERVERS_DIR",
        "mcp-servers",
        &[bin],
    )?;
    Some(dir.join(bin))
}
