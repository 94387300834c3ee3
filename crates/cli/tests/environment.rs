//! What the processes the agent starts get from it, end to end (issue 44): the environment
//! of commands, hooks and MCP servers is an allow-list plus settings' `env`, never the
//! agent's keys and tokens; the programs the agent runs itself (bash, git, bwrap) are never
//! found through an empty or relative `PATH` entry in the repository; hooks run in a session
//! of their own and die with the agent.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{command, processes_running, repo, result_text, unique_sleep, wait_for_process};
use serde_json::json;
use testkit::{Reply, Script, Server, Turn};

/// Secrets the agent is started with, as a user's shell would hold them: the provider's key,
/// a cloud key, tokens. None may reach a command, a hook or an MCP server.
const SECRETS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "sk-openai-LEAKED"),
    ("ANTHROPIC_API_KEY", "sk-ant-LEAKED"),
    ("GITHUB_TOKEN", "ghp-LEAKED"),
    ("AWS_SECRET_ACCESS_KEY", "aws-secret-LEAKED"),
    ("AWS_ACCESS_KEY_ID", "aws-id-LEAKED"),
    ("NPM_TOKEN", "npm-LEAKED"),
];

fn with_secrets(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    command.envs(SECRETS.iter().copied())
}

fn executable(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `name` as the test's own shell finds it.
fn real_program(name: &str) -> Option<String> {
    let output = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    let path = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    (output.status.success() && path.starts_with('/')).then_some(path)
}

/// The names of the variables of an `env` listing.
fn names(listing: &str) -> Vec<&str> {
    listing
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect()
}

/// Attack: a Bash command and a hook print their environment. The agent runs with the
/// provider's key, cloud keys and tokens in its own environment, and settings' `env` names a
/// provider entry's key variable: none of them reaches the command or the hook, while the
/// allow-listed basics (`PATH`, `HOME`) and settings' `env` do.
#[tokio::test]
async fn commands_and_hooks_never_get_the_agents_keys_and_tokens() {
    for backend in common::sandbox_backends() {
        commands_and_hooks_never_get_the_agents_keys_and_tokens_under(backend).await;
    }
}

async fn commands_and_hooks_never_get_the_agents_keys_and_tokens_under(backend: &str) {
    let repo = repo(&format!("env-commands-{backend}"));
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    let hook_env = repo.home.join("hook-env.txt");
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({
            "env": {"LINT_LEVEL": "strict", "SIDE_PROVIDER_KEY": "side-LEAKED"},
            "providers": {"side": {"type": "openai", "apiKeyEnv": "SIDE_PROVIDER_KEY"}},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": format!("env > {}", hook_env.display())}
            ]}]},
        })
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_env", "Bash", json!({"command": "env"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = with_secrets(&mut command(&repo, &server))
        .env("AGENT_SANDBOX_BACKEND", backend)
        .args([
            "-p",
            "show the environment",
            "--allowedTools",
            "Bash(env)",
            "--output-format",
            "json",
            "--trust",
        ])
        .output()
        .await
        .unwrap();
    common::assert_success(&output, "");
    let command_env = result_text(&server, "toolu_env");
    let hook_env = std::fs::read_to_string(&hook_env).unwrap();
    for (what, listing) in [("the command", &command_env), ("the hook", &hook_env)] {
        assert!(
            !listing.contains("LEAKED"),
            "{backend}: {what} got a secret: {listing}"
        );
        assert!(
            listing.contains("LINT_LEVEL=strict"),
            "{backend}: {what}: {listing}"
        );
        assert!(listing.contains("PATH=/"), "{backend}: {what}: {listing}");
        assert!(
            listing.contains(&format!("HOME={}", repo.home.display())),
            "{what}: {listing}"
        );
    }
    assert!(
        hook_env.contains(&format!("CLAUDE_PROJECT_DIR={}", repo.dir.display())),
        "{hook_env}"
    );
}

fn testkit() -> Option<PathBuf> {
    common::testkit_binary("the MCP environment test is")
}

/// Attack: a stdio MCP server (a shell that writes its environment, then the testkit
/// server) gets only the MCP SDK's default variables and what its configuration's `env`
/// names, as Claude Code starts servers: none of the agent's keys and tokens, nothing else of
/// its environment.
#[tokio::test]
async fn mcp_servers_get_only_the_default_variables_and_their_configured_env() {
    let Some(kit) = testkit() else {
        return;
    };
    let repo = repo("env-mcp");
    let server_env = repo.home.join("server-env.txt");
    let config = repo.home.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"kit": {
            "command": "sh",
            "args": ["-c", format!("env > {}; exec {} mcp-server", server_env.display(), kit.display())],
            "env": {"KIT_LEVEL": "info"},
        }}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = with_secrets(&mut command(&repo, &server))
        .env("MCP_STARTUP_WAIT_MS", "10000")
        .env("LINT_LEVEL", "not-for-servers")
        .arg("--mcp-config")
        .arg(&config)
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    common::assert_success(&output, "");
    let listing = std::fs::read_to_string(&server_env).unwrap();
    assert!(!listing.contains("LEAKED"), "{listing}");
    assert!(listing.contains("KIT_LEVEL=info"), "{listing}");
    assert!(listing.contains("PATH=/"), "{listing}");
    assert!(
        listing.contains(&format!("HOME={}", repo.home.display())),
        "{listing}"
    );
    // What the shell adds itself (PWD, SHLVL, `_`) aside, nothing else.
    let allowed = [
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "KIT_LEVEL",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
    ];
    for name in names(&listing) {
        assert!(
            allowed.contains(&name),
            "{name} reached the server: {listing}"
        );
    }
}

/// Attack: the repository holds its own `bash`, `git` and `bwrap` (each leaves a mark outside
/// the repository, then runs the real one), and the agent's `PATH` starts with an empty
/// entry and `.` (as `PATH=:$PATH` or `PATH=.:$PATH` setups have it). The agent never runs
/// them: not for the sandbox (bwrap), a hook (bash), `git status` at start-up, a Bash call
/// with the sandbox off, nor a program that call names (`git --version`).
#[tokio::test]
async fn programs_are_never_found_through_the_repository() {
    let repo = repo("env-path");
    let marks = repo.home.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let mut planted = Vec::new();
    for name in ["bash", "git", "bwrap"] {
        let Some(real) = real_program(name) else {
            eprintln!("NOTE: {name} is not installed: its attack is not tried");
            continue;
        };
        executable(
            &repo.dir.join(name),
            &format!(
                "echo \"$@\" >> {}\nexec {real} \"$@\"",
                marks.join(name).display()
            ),
        );
        planted.push(name);
    }
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "echo hook-ran >&2"}
        ]}]}})
        .to_string(),
    )
    .unwrap();
    let path = format!(":.:{}", std::env::var("PATH").unwrap_or_default());
    let modes = common::sandbox_backends()
        .into_iter()
        .map(|backend| ("auto", backend))
        .chain([("off", "none")]);
    for (sandbox, backend) in modes {
        let server = Server::start_tls(Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_git",
                "Bash",
                json!({"command": "git --version"}),
            )),
            Reply::turn(Turn::new().text("Done.")),
        ]))
        .await
        .unwrap();
        let output = command(&repo, &server)
            .current_dir(&repo.dir)
            .env("PATH", &path)
            .env("AGENT_SANDBOX_BACKEND", backend)
            // Prefetch off: the first request waits for `git status`, so it surely ran.
            .env("AGENT_NO_PREFETCH", "1")
            .args([
                "-p",
                "which git?",
                "--allowedTools",
                "Bash(git --version)",
                "--sandbox",
                sandbox,
                "--output-format",
                "json",
                "--trust",
            ])
            .output()
            .await
            .unwrap();
        common::assert_success(&output, &format!("{sandbox} ({backend}): "));
        let result = result_text(&server, "toolu_git");
        assert!(
            result.contains("git version"),
            "{sandbox} ({backend}): {result}"
        );
        let first = server.requests()[0].json()["messages"].to_string();
        assert!(
            first.contains("Git status:"),
            "{sandbox} ({backend}): {first}"
        );
        let ran: Vec<String> = planted
            .iter()
            .filter_map(|name| {
                let args = std::fs::read_to_string(marks.join(name)).ok()?;
                Some(format!("{name} ({})", args.trim().replace('\n', "; ")))
            })
            .collect();
        assert!(
            ran.is_empty(),
            "{sandbox} ({backend}): the repository's own programs ran: {ran:?}"
        );
    }
}

/// The session id (`/proc/PID/stat`'s sixth field) and process group of `pid`.
fn session_and_group(pid: i32) -> (i32, i32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, after) = stat.rsplit_once(')').unwrap();
    let fields: Vec<i32> = after
        .split_whitespace()
        .skip(1)
        .take(4)
        .map(|field| field.parse().unwrap())
        .collect();
    // ppid, pgrp, session, tty_nr.
    (fields[2], fields[1])
}

async fn wait_gone(command: &str, within: Duration) -> Vec<i32> {
    let started = Instant::now();
    while !processes_running(command).is_empty() && started.elapsed() < within {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = processes_running(command);
    for pid in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    left
}

/// Attack: a hook is running (it sleeps) when the agent is SIGKILLed. The hook runs in a
/// session and process group of its own (not the agent's, so not the user's terminal's), and
/// is gone within 2 s of the agent, checked by its pid.
#[tokio::test]
async fn a_hook_runs_in_its_own_session_and_dies_with_a_killed_agent() {
    let repo = repo("env-hook-kill");
    let sleeper = unique_sleep(30, 44);
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": sleeper}
        ]}]}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_b", "Bash", json!({"command": "true"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let mut agent = command(&repo, &server)
        .args(["-p", "run it", "--allowedTools", "Bash(true)", "--trust"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let agent_pid = i32::try_from(agent.id().unwrap()).unwrap();
    let hook = wait_for_process(&sleeper).await;
    let (hook_session, hook_group) = session_and_group(hook);
    let (agent_session, agent_group) = session_and_group(agent_pid);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = agent.wait().await;
    let left = wait_gone(&sleeper, Duration::from_secs(2)).await;
    assert!(
        left.is_empty(),
        "the hook (pid {hook}) outlived the SIGKILLed agent by 2 s"
    );
    assert_ne!(
        hook_session, agent_session,
        "the hook shares the agent's session"
    );
    assert_ne!(hook_group, agent_group);
    assert_eq!(
        hook_session, hook_group,
        "the hook's group leads its own session"
    );
}

/// A hook that leaves a process in the background, in its group or out of it (`setsid`): it
/// is killed when the hook exits, so nothing a hook started outlives the agent.
#[tokio::test]
async fn what_a_hook_leaves_in_the_background_does_not_outlive_it() {
    let repo = repo("env-hook-background");
    let sleeper = unique_sleep(29, 44);
    let escaper = unique_sleep(29, 45);
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": format!("{sleeper} </dev/null >/dev/null 2>&1 & exit 0")},
            // One that leaves the hook's process group and session (a daemon's `setsid`).
            {"type": "command", "command": format!("setsid {escaper} </dev/null >/dev/null 2>&1 & exit 0")}
        ]}]}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_b", "Bash", json!({"command": "true"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "run it", "--allowedTools", "Bash(true)", "--trust"])
        .output()
        .await
        .unwrap();
    common::assert_success(&output, "");
    let left = wait_gone(&sleeper, Duration::from_secs(2)).await;
    assert!(
        left.is_empty(),
        "the hook's background process outlived the agent"
    );
    let left = wait_gone(&escaper, Duration::from_secs(2)).await;
    assert!(
        left.is_empty(),
        "the hook's background process that left its session outlived the agent"
    );
}
