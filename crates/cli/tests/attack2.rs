//! Second review of issue 44's fixes, as a hostile repository, model and MCP server. Each test
//! is an attack that succeeds on the code it was written against.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{command, repo};
use serde_json::json;
use testkit::{Reply, Script, Server, Turn};

/// Attack (environment, program look-up): the user's `PATH` holds an absolute folder of the
/// workspace (direnv's `PATH_add bin`, a venv's `bin` activated with an absolute path). The
/// model's sandboxed Bash call writes an executable `bin/git` there (the workspace is
/// writable); the user's own PostToolUse hook runs `git --version`, outside any sandbox,
/// with a `PATH` from which only empty and relative entries were removed: the model's
/// `bin/git` runs unsandboxed and writes outside the workspace.
#[tokio::test]
async fn a_hook_never_runs_a_program_the_model_wrote_into_a_workspace_path_folder() {
    let repo = repo("attack2-path-folder");
    let bin = repo.dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let escaped = repo.home.join("escaped");
    let user = repo.home.join("config/agent");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("settings.json"),
        json!({"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "git --version >/dev/null 2>&1; true"}
        ]}]}})
        .to_string(),
    )
    .unwrap();
    let plant = format!(
        "printf '#!/bin/sh\\ntouch {}\\n' > bin/git && chmod +x bin/git",
        escaped.display()
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for backend in common::sandbox_backends() {
        let _ = std::fs::remove_file(bin.join("git"));
        let _ = std::fs::remove_file(&escaped);
        let server = Server::start_tls(Script::new(vec![
            Reply::turn(Turn::new().tool_use("toolu_p", "Bash", json!({"command": plant}))),
            Reply::turn(Turn::new().text("Done.")),
        ]))
        .await
        .unwrap();
        let output = command(&repo, &server)
            .env("PATH", &path)
            .env("AGENT_SANDBOX_BACKEND", backend)
            .args([
                "-p",
                "go",
                "--allowedTools",
                "Bash",
                "--output-format",
                "json",
            ])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {stderr}");
        assert!(
            bin.join("git").exists(),
            "{backend}: the sandboxed command could not write bin/git: {stderr}"
        );
        assert!(
            !escaped.exists(),
            "{backend}: the hook ran the model's bin/git outside the sandbox (it wrote {})",
            escaped.display()
        );
    }
}

/// Attack (trust fingerprints): a trusted project allows `Bash` and denies one command
/// (`deny` and `ask` rules are not fingerprinted, as they always apply). A `git pull`
/// removes the deny rule: nothing recorded is new, so the folder stays trusted without a
/// word, and the command the user saw denied now runs unasked.
///
/// The same from a record an earlier version wrote, without deny rules in it: a session that
/// finds the folder trusted adds them to the record, so taking one out later is seen too.
#[tokio::test]
async fn removing_a_deny_rule_from_a_trusted_project_is_a_change() {
    deny_rule_removal(false).await;
    deny_rule_removal(true).await;
}

async fn deny_rule_removal(old_record: bool) {
    let repo = repo(&format!("attack2-deny-{old_record}"));
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    let settings =
        |deny: &[&str]| json!({"permissions": {"allow": ["Bash"], "deny": deny}}).to_string();
    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        settings(&["Bash(touch pwned)"]),
    )
    .unwrap();
    let user = repo.home.join("config/agent");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("settings.json"),
        json!({"trustedFolders": [repo.dir]}).to_string(),
    )
    .unwrap();
    let run = |server: &Server| {
        let mut command = command(&repo, server);
        command.args(["-p", "go", "--output-format", "json"]);
        command
    };
    let script = || {
        Script::new(vec![
            Reply::turn(Turn::new().tool_use("toolu_t", "Bash", json!({"command": "touch pwned"}))),
            Reply::turn(Turn::new().text("Done.")),
        ])
    };
    // Trusted as it is (recorded): the deny rule holds.
    let server = Server::start_tls(script()).await.unwrap();
    let output = run(&server).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("is now recorded"), "{stderr}");
    assert!(!repo.dir.join("pwned").exists(), "{stderr}");
    if old_record {
        // As an earlier version recorded it: no deny or ask rules (digests `n:...`).
        let store = user.join("trusted-folders.json");
        let text = std::fs::read_to_string(&store).unwrap();
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        for record in value["fingerprints"].as_object_mut().unwrap().values_mut() {
            for digests in record.as_object_mut().unwrap().values_mut() {
                digests
                    .as_array_mut()
                    .unwrap()
                    .retain(|digest| !digest.as_str().unwrap().starts_with("n:"));
            }
        }
        assert_ne!(value.to_string(), text, "the record held deny rules");
        std::fs::write(&store, value.to_string()).unwrap();
        // A session in the unchanged folder: trusted, and its deny rule is recorded now.
        let server = Server::start_tls(script()).await.unwrap();
        let output = run(&server).output().await.unwrap();
        common::assert_success(&output, "");
        assert!(!repo.dir.join("pwned").exists());
    }

    // The pull takes the deny rule out.
    std::fs::write(repo.dir.join(".claude/settings.json"), settings(&[])).unwrap();
    let server = Server::start_tls(script()).await.unwrap();
    let output = run(&server).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        !repo.dir.join("pwned").exists() || stderr.contains("changed since"),
        "the command the trusted configuration denied ran without a question or warning: {stderr}"
    );
}

/// Attack (MCP lifetime): a stdio MCP server never answers `initialize` (it hangs). Headless,
/// the first request waits `MCP_STARTUP_WAIT_MS` for it, then the run goes on and ends while
/// the server is still connecting (its own limit, `MCP_TIMEOUT`, is longer). The connecting
/// task is dropped: `kill_on_drop` SIGKILLs the guard only, which cannot kill its group when
/// SIGKILLed, so the server is left running, re-parented to init, after the agent is gone.
#[tokio::test]
async fn a_stdio_mcp_server_still_connecting_when_the_run_ends_does_not_outlive_it() {
    let repo = repo("attack2-mcp-hang");
    let sleeper = common::unique_sleep(40, 72);
    let config = repo.home.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"hang": {
            "command": "sh",
            "args": ["-c", format!("{sleeper}; true")],
        }}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = command(&repo, &server)
        .env("MCP_TIMEOUT", "30000")
        .env("MCP_STARTUP_WAIT_MS", "1000")
        .arg("--mcp-config")
        .arg(&config)
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    common::assert_success(&output, "");
    let started = Instant::now();
    while !common::processes_running(&sleeper).is_empty()
        && started.elapsed() < Duration::from_secs(3)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = common::processes_running(&sleeper);
    for pid in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        left.is_empty(),
        "the hung MCP server ({sleeper}, pids {left:?}) outlived the agent by 3 s"
    );
}
