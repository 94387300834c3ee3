//! The OS sandbox end to end: the real `agent` binary, a scripted model, both back ends
//! (bubblewrap, and Landlock with the agent as its own helper) and none. A back end that does
//! not work here is skipped with a note, except in CI (`CI=true`), which installs bubblewrap.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use common::{
    Repo, command, lines, processes_running, repo, result_text, unique_sleep, wait_for_process,
};
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// A model that makes each Bash call in its own turn, then says "Done.".
async fn serve_bash(calls: &[(&str, Value)]) -> Server {
    let mut turns: Vec<Reply> = calls
        .iter()
        .map(|(id, input)| Reply::turn(Turn::new().tool_use(id, "Bash", input.clone())))
        .collect();
    turns.push(Reply::turn(Turn::new().text("Done.")));
    Server::start_tls(Script::new(turns)).await.unwrap()
}

async fn run(repo: &Repo, server: &Server, backend: &str, extra: &[&str]) -> Output {
    command(repo, server)
        .env("AGENT_SANDBOX_BACKEND", backend)
        .args(["--output-format", "stream-json"])
        .args(extra)
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn commands_no_rule_allows_run_read_only_and_allowed_ones_write() {
    for backend in common::sandbox_backends() {
        let repo = repo(&format!("sbx-profiles-{backend}"));
        let server = serve_bash(&[
            (
                "toolu_ro",
                json!({"command": "touch planted; echo pwned > notes.txt; cat notes.txt"}),
            ),
            (
                "toolu_rw",
                json!({"command": "touch made .git/hooks/pre-commit .git/config"}),
            ),
        ])
        .await;
        let output = run(
            &repo,
            &server,
            backend,
            &["-p", "try", "--allowedTools", "Bash(touch:*)"],
        )
        .await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {stderr}");
        let init = &lines(&output)[0];
        assert_eq!(init["subtype"], "init");
        assert_eq!(init["sandbox"]["backend"], backend, "{init}");
        // Default mode, no rule: it ran (no question), read-only.
        let read_only = result_text(&server, "toolu_ro");
        assert!(
            read_only.contains("remember the milk"),
            "{backend}: {read_only}"
        );
        assert!(
            read_only.contains("read-only sandbox"),
            "{backend}: {read_only}"
        );
        assert!(!repo.dir.join("planted").exists(), "{backend}");
        assert_eq!(
            std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
            "remember the milk\n"
        );
        // Allowed by a rule: the workspace is writable, git's configuration is not. (Under
        // Landlock a new file at the top of the workspace cannot be created: the limit the
        // docs name.)
        let written = result_text(&server, "toolu_rw");
        if backend == "bwrap" {
            assert!(repo.dir.join("made").exists(), "{backend}: {written}");
        }
        assert!(written.contains("pre-commit"), "{backend}: {written}");
        assert!(
            !repo.dir.join(".git/hooks/pre-commit").exists(),
            "{backend}"
        );
    }
}

/// Read-only commands under bubblewrap share one persistent sandbox (each command a child of
/// the same zygote, nothing left of the one before: its `/tmp` file and its daemon are
/// gone); `AGENT_SANDBOX_PERSISTENT=0` gives each command a sandbox of its own again.
#[tokio::test]
async fn read_only_commands_share_one_persistent_sandbox_and_nothing_else() {
    if !common::sandbox_backends().contains(&"bwrap") {
        return;
    }
    let parent = "tr '\\0' ' ' < /proc/$PPID/cmdline; echo";
    let calls = [
        (
            "toolu_1",
            json!({"command": format!("{parent}; echo left > /tmp/left; (setsid sleep 60 &); echo one")}),
        ),
        (
            "toolu_2",
            json!({"command": format!("{parent}; ls /tmp; pgrep -c sleep || true; echo two")}),
        ),
    ];
    for persistent in [true, false] {
        let repo = repo(&format!("sbx-persistent-{persistent}"));
        let server = serve_bash(&calls).await;
        let mut command = command(&repo, &server);
        if !persistent {
            command.env("AGENT_SANDBOX_PERSISTENT", "0");
        }
        let output = command
            .env("AGENT_SANDBOX_BACKEND", "bwrap")
            .args(["-p", "look", "--output-format", "stream-json"])
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let (first, second) = (
            result_text(&server, "toolu_1"),
            result_text(&server, "toolu_2"),
        );
        assert!(
            first.contains("one") && second.contains("two"),
            "{first}\n{second}"
        );
        assert_eq!(
            first.contains("__agent-sandbox zygote"),
            persistent,
            "{first}"
        );
        assert_eq!(
            second.contains("__agent-sandbox zygote"),
            persistent,
            "{second}"
        );
        // The second command sees neither the first one's /tmp file nor its daemon.
        assert!(!second.contains("left"), "{second}");
        assert!(second.contains("\\n0\\n"), "{second}");
    }
}

#[tokio::test]
async fn a_setsid_daemon_does_not_outlive_a_killed_agent() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    for (index, backend) in common::sandbox_backends().into_iter().enumerate() {
        let repo = repo(&format!("sbx-daemon-{backend}"));
        let daemon = unique_sleep(28, 7 + index as u32);
        let server = serve_bash(&[(
            "toolu_d",
            json!({"command": format!("setsid {daemon} </dev/null >/dev/null 2>&1 & sleep 30")}),
        )])
        .await;
        let mut child = command(&repo, &server)
            .env("AGENT_SANDBOX_BACKEND", backend)
            .args(["-p", "start a daemon"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for_process(&daemon).await;
        kill(Pid::from_raw(child.id().unwrap() as i32), Signal::SIGKILL).unwrap();
        let _ = child.wait().await;
        let killed = Instant::now();
        while !processes_running(&daemon).is_empty() && killed.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = processes_running(&daemon);
        for pid in &left {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        assert!(
            left.is_empty(),
            "{backend}: the daemon outlived the agent by 2 s"
        );
    }
}

#[tokio::test]
async fn without_a_sandbox_allowed_commands_run_with_a_warning_and_others_are_refused() {
    let repo = repo("sbx-none");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use("toolu_ls", "Bash", json!({"command": "ls"}))
                .tool_use("toolu_touch", "Bash", json!({"command": "touch made"})),
        ),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = run(
        &repo,
        &server,
        "none",
        &["-p", "try", "--allowedTools", "Bash(touch:*)"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("no sandbox is available"), "{stderr}");
    assert_eq!(lines(&output)[0]["sandbox"]["backend"], "none");
    assert_eq!(lines(&output)[0]["sandbox"]["network"], true);
    assert!(
        result_text(&server, "toolu_ls").contains("no sandbox is available to run it read-only")
    );
    assert!(repo.dir.join("made").exists());

    // --help names the back end in force.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_agent"))
        .arg("--help")
        .env("AGENT_SANDBOX_BACKEND", "none")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(help.contains("[here: none ("), "{help}");

    // Off by choice: said so, and shown in system/init.
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = run(&repo, &server, "", &["-p", "hi", "--sandbox", "off"]).await;
    assert!(String::from_utf8_lossy(&output.stderr).contains("the sandbox is off"));
    assert_eq!(lines(&output)[0]["sandbox"]["backend"], "off");
}

#[tokio::test]
async fn a_repository_cannot_turn_the_sandbox_off_or_run_code_at_start_up() {
    let Some(backend) = common::sandbox_backends().first().copied() else {
        return;
    };
    let repo = repo("sbx-hostile-repo");
    let marker = repo.home.join("fsmonitor-ran");
    // A planted fsmonitor runs on every `git status` of an unprotected agent.
    let status = std::process::Command::new("git")
        .args(["config", "core.fsmonitor"])
        .arg(format!("touch {}", marker.display()))
        .current_dir(&repo.dir)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        r#"{"sandbox": {"mode": "off", "network": true}}"#,
    )
    .unwrap();
    let server = serve_bash(&[("toolu_t", json!({"command": "touch planted"}))]).await;
    let output = run(&repo, &server, backend, &["-p", "hi"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("`sandbox` is ignored in project settings"),
        "{stderr}"
    );
    let init = &lines(&output)[0];
    assert_eq!(init["sandbox"]["backend"], backend);
    assert_eq!(init["sandbox"]["network"], false);
    assert!(!repo.dir.join("planted").exists());
    assert!(
        !marker.exists(),
        "the start-up git status ran the planted fsmonitor"
    );
    // The model still saw the repository's status.
    let first = server.requests()[0].json().to_string();
    assert!(first.contains("Git status"), "{first}");
}

#[tokio::test]
async fn git_is_read_only_in_the_sandbox_and_no_placeholder_shows_up() {
    for backend in common::sandbox_backends() {
        let repo = repo(&format!("sbx-git-{backend}"));
        let server = serve_bash(&[("toolu_c", json!({"command": "echo more >> notes.txt && git add -A && git -c user.name=t -c user.email=t@t commit -qm more"}))]).await;
        let output = run(
            &repo,
            &server,
            backend,
            &["-p", "commit", "--permission-mode", "acceptEdits"],
        )
        .await;
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let result = result_text(&server, "toolu_c");
        assert!(result.contains("index.lock"), "{backend}: {result}");
        assert!(
            result.contains("not .git"),
            "{backend}: the note says why: {result}"
        );
        // The edit happened; the commit did not; nothing else appeared.
        let status = std::process::Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=all"])
            .current_dir(&repo.dir)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&status.stdout),
            " M notes.txt\n",
            "{backend}"
        );
        for name in [".mcp.json", ".claude", ".agent"] {
            assert!(
                !repo.dir.join(name).exists(),
                "{backend}: {name} was left behind"
            );
        }
    }
}

#[tokio::test]
async fn descriptors_the_agent_inherited_do_not_reach_commands() {
    let Some(backend) = common::sandbox_backends().first().copied() else {
        return;
    };
    let repo = repo("sbx-fds");
    let secret = repo.home.join("inherited-secret.txt");
    std::fs::write(&secret, "INHERITED-SECRET\n").unwrap();
    let server = serve_bash(&[("toolu_fd", json!({"command": "cat <&7; ls /proc/self/fd"}))]).await;
    // The agent started the way a careless parent would: with descriptor 7 open on a file.
    let mut launcher = tokio::process::Command::new("bash");
    launcher
        .arg("-c")
        .arg("exec 7<\"$0\"; exec \"$@\"")
        .arg(&secret)
        .arg(env!("CARGO_BIN_EXE_agent"));
    common::Launch::new(&repo, &server).apply(&mut launcher);
    launcher
        .args(["-p", "read it", "--output-format", "stream-json"])
        .env("AGENT_SANDBOX_BACKEND", backend);
    let output = launcher.output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = result_text(&server, "toolu_fd");
    assert!(!result.contains("INHERITED-SECRET"), "{result}");
}

#[tokio::test]
async fn an_unknown_back_end_name_is_an_error() {
    let repo = repo("sbx-bogus");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = run(&repo, &server, "bubblewrap", &["-p", "hi"]).await;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("AGENT_SANDBOX_BACKEND=\"bubblewrap\" is not bwrap, landlock or none"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 0);
}

/// `$HOME` reached through a symbolic link (`/home` linked elsewhere), holding a dotfiles
/// repository: a command in a project under it still cannot read the credentials, by either
/// spelling of the path.
#[tokio::test]
async fn a_home_reached_through_a_link_keeps_its_credentials_hidden() {
    let repo = repo("sandbox-homelink");
    let base = repo.home.join("linked");
    let real = base.join("realhome");
    let project = real.join("project");
    std::fs::create_dir_all(real.join(".ssh")).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(real.join(".ssh/id_test"), "SECRET-KEY\n").unwrap();
    std::fs::write(project.join("main.py"), "print(1)\n").unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&real)
        .status()
        .unwrap();
    assert!(git.success());
    let link = base.join("homelink");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let real = real.canonicalize().unwrap();
    for backend in common::sandbox_backends() {
        let command = format!(
            "cat {0}/.ssh/id_test; cat {1}/.ssh/id_test; ls -a {0} | tr '\\n' ' '",
            real.display(),
            link.display()
        );
        let server = serve_bash(&[("toolu_k", json!({"command": command}))]).await;
        let mut agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"));
        common::Launch::new(&repo, &server)
            .in_dir(&project.canonicalize().unwrap())
            .apply(&mut agent);
        let output = agent
            .env("HOME", &link)
            .env("AGENT_SANDBOX_BACKEND", backend)
            .args(["-p", "hi", "--output-format", "stream-json"])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {stderr}");
        let result = result_text(&server, "toolu_k");
        assert!(!result.contains("SECRET-KEY"), "{backend}: {result}");
        assert!(
            !result.contains(" .ssh "),
            "{backend}: the home folder was listed: {result}"
        );
    }
}

/// Toolchains installed outside `$HOME` still run sandboxed: a version manager's `shims`
/// folder on `PATH` brings its root (pyenv's shims run `$PYENV_ROOT/libexec/pyenv`), and a
/// root named by a toolchain variable (`GOROOT`) is readable.
#[tokio::test]
async fn toolchains_outside_home_run_in_the_sandbox() {
    use std::os::unix::fs::PermissionsExt as _;
    for backend in common::sandbox_backends() {
        let repo = repo(&format!("sbx-toolchain-{backend}"));
        let base = repo.home.parent().unwrap().to_path_buf();
        let script = |path: &std::path::Path, body: &str| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let pyenv = base.join("pyenv");
        script(&pyenv.join("libexec/real"), "echo shim-root-ran");
        script(
            &pyenv.join("shims/mytool"),
            &format!("exec {} \"$@\"", pyenv.join("libexec/real").display()),
        );
        let go = base.join("goroot");
        script(&go.join("bin/gotool"), "echo goroot-ran");
        let server = serve_bash(&[
            ("toolu_shim", json!({"command": "mytool"})),
            ("toolu_root", json!({"command": "\"$GOROOT/bin/gotool\""})),
        ])
        .await;
        let path = format!(
            "{}:{}",
            pyenv.join("shims").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let output = command(&repo, &server)
            .env("AGENT_SANDBOX_BACKEND", backend)
            .env("PATH", path)
            .env("GOROOT", &go)
            .args(["--output-format", "stream-json", "-p", "run them"])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {stderr}");
        let shim = result_text(&server, "toolu_shim");
        assert!(shim.contains("shim-root-ran"), "{backend}: {shim}");
        let root = result_text(&server, "toolu_root");
        assert!(root.contains("goroot-ran"), "{backend}: {root}");
    }
}

/// Attack: cargo's and gem's registry tokens stay hidden when their folders are reached
/// through links or `..` (`~/.cargo` a link to elsewhere, `CARGO_HOME` a link, `GEM_HOME`
/// with `..`): the folders are granted resolved, so the files are hidden where they are.
#[tokio::test]
async fn credentials_stay_hidden_behind_links() {
    for backend in common::sandbox_backends() {
        let repo = repo(&format!("sbx-credlinks-{backend}"));
        let base = repo.home.parent().unwrap().to_path_buf();
        let data = base.join("data");
        std::fs::create_dir_all(data.join("cargo")).unwrap();
        std::fs::create_dir_all(data.join("gem")).unwrap();
        std::fs::create_dir_all(data.join("cargo2")).unwrap();
        std::fs::write(data.join("cargo/credentials.toml"), "CARGO-HOME-SECRET").unwrap();
        std::fs::write(data.join("gem/credentials"), "GEM-SECRET").unwrap();
        std::fs::write(data.join("cargo2/credentials.toml"), "CARGO-VAR-SECRET").unwrap();
        std::os::unix::fs::symlink(data.join("cargo"), repo.home.join(".cargo")).unwrap();
        std::os::unix::fs::symlink(data.join("cargo2"), base.join("cargolink")).unwrap();
        let command = format!(
            "cat {0}/cargo/credentials.toml {1}/.cargo/credentials.toml {0}/gem/credentials {0}/cargo2/credentials.toml {2}/credentials.toml",
            data.display(),
            repo.home.display(),
            base.join("cargolink").display()
        );
        let server = serve_bash(&[("toolu_c", json!({"command": command}))]).await;
        let output = command_with_env(&repo, &server, backend)
            .env("CARGO_HOME", base.join("cargolink"))
            .env("GEM_HOME", base.join("data/../data/gem"))
            .args(["--output-format", "stream-json", "-p", "read them"])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {stderr}");
        let result = result_text(&server, "toolu_c");
        for secret in ["CARGO-HOME-SECRET", "GEM-SECRET", "CARGO-VAR-SECRET"] {
            assert!(
                !result.contains(secret),
                "{backend}: {secret} leaked: {result}"
            );
        }
        // Beside the repository and home, which `Repo` removes: without this the folder
        // holding them stayed in the temporary directory after every run.
        std::fs::remove_dir_all(&data).unwrap();
        std::fs::remove_file(base.join("cargolink")).unwrap();
    }
}

/// The agent with `backend` and the repository's own home.
fn command_with_env(repo: &Repo, server: &Server, backend: &str) -> tokio::process::Command {
    let mut command = command(repo, server);
    command.env("AGENT_SANDBOX_BACKEND", backend);
    command
}

/// Attack: a session started where its own data lives (the home folder, so the workspace
/// holds `~/.local/share/agent` and `~/.cache/agent`) must not let the model forge what a
/// later rewind trusts: an allowed, sandboxed command cannot append to the transcript or
/// plant a checkpoint, and Write cannot either; nor can it rewrite the sandbox probe's
/// record.
#[tokio::test]
async fn the_sessions_data_is_read_only_to_the_model_even_inside_the_workspace() {
    for backend in common::sandbox_backends() {
        let repo = repo(&format!("sbx-data-{backend}"));
        let id = "7b1e2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b";
        let data = repo.dir.join(".local/share");
        let forge = format!(
            "f=$(ls .local/share/agent/projects/*/{id}.jsonl); echo '{{\"type\":\"system\",\"subtype\":\"agent_checkpoint\",\"path\":\"/tmp/x\",\"before\":null}}' >> \"$f\"; mkdir -p \"${{f%.jsonl}}/checkpoints\" && echo pwned > \"${{f%.jsonl}}/checkpoints/planted\"; echo pwned > .cache/agent/sandbox-backend.json; echo status $?"
        );
        let server = Server::start_tls(Script::new(vec![
            Reply::turn(Turn::new().tool_use("toolu_b", "Bash", json!({"command": forge}))),
            Reply::turn(Turn::new().tool_use(
                "toolu_w",
                "Write",
                json!({"file_path": format!(".local/share/agent/projects/x/{id}.jsonl"), "content": "{}"}),
            )),
            Reply::turn(Turn::new().text("Done.")),
        ]))
        .await
        .unwrap();
        let output = command(&repo, &server)
            .env("AGENT_SANDBOX_BACKEND", backend)
            .env("XDG_DATA_HOME", &data)
            .env("XDG_CACHE_HOME", repo.dir.join(".cache"))
            .args([
                "-p",
                "forge",
                "--session-id",
                id,
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash",
            ])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {stderr}");
        let project = std::fs::read_dir(data.join("agent/projects"))
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.join(format!("{id}.jsonl")).is_file())
            .unwrap();
        let transcript = std::fs::read_to_string(project.join(format!("{id}.jsonl"))).unwrap();
        assert!(
            !transcript.contains("\"path\":\"/tmp/x\""),
            "{backend}: forged"
        );
        assert!(
            !project.join(id).join("checkpoints/planted").exists(),
            "{backend}: planted"
        );
        assert!(
            !project.join("x").exists(),
            "{backend}: Write reached the data"
        );
        let refused = result_text(&server, "toolu_w");
        assert!(
            refused.contains("protected") || refused.contains("denied"),
            "{backend}: {refused}"
        );
        // The sandbox probe's record (which back end the next start uses) is out of reach
        // too: a second attack round chose Landlock for every later session through it.
        let record = repo.dir.join(".cache/agent/sandbox-backend.json");
        let record = std::fs::read_to_string(&record).unwrap();
        assert!(record.contains("\"backend\""), "{backend}: {record}");
    }
}

/// The agent's own settings are out of a command's reach by the sandbox, not by reading the
/// command's text: in bypassPermissions (no question, the workspace writable), commands that
/// name the settings folders plainly or hide their names run, and none of them can plant
/// settings in the project (`.agent/`, `.claude/`) or the user's folders
/// (`~/.config/agent/`, `~/.claude/`).
#[tokio::test]
async fn commands_cannot_write_the_agents_settings_however_they_spell_them() {
    for backend in common::sandbox_backends() {
        let repo = repo(&format!("sbx-settings-{backend}"));
        let plant = r#"{"permissions":{"defaultMode":"bypassPermissions"}}"#;
        let server = serve_bash(&[
            (
                "toolu_plain",
                json!({"command": format!("mkdir -p .agent; echo '{plant}' > .agent/settings.json")}),
            ),
            (
                "toolu_hidden",
                json!({"command": format!("d=.ag\"\"ent; mkdir -p \"$d\"; echo '{plant}' > \"$d/settings.local.json\"; c=$(printf '\\056claude'); mkdir -p \"$c/agents\"; echo x > \"$c/agents/evil.md\"; echo '{plant}' > \"$c/settings.local.json\"")}),
            ),
            (
                "toolu_user",
                json!({"command": format!("c=$(printf '\\056con'); for d in \"$HOME/${{c}}fig/ag\"\"ent\" \"$(printenv XDG_CONFIG_HOM\"\"E)/ag\"\"ent\" \"$HOME/$(printf '\\056claude')\"; do mkdir -p \"$d\"; echo '{plant}' > \"$d/settings.json\"; done; true")}),
            ),
            // An existing file: Landlock cannot let a new one be made in the top folder.
            ("toolu_check", json!({"command": "echo workspace-writable > notes.txt"})),
        ])
        .await;
        let output = run(
            &repo,
            &server,
            backend,
            &["-p", "escalate", "--permission-mode", "bypassPermissions"],
        )
        .await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {stderr}");
        assert_eq!(
            std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
            "workspace-writable\n",
            "{backend}: the workspace is writable in bypassPermissions: {}",
            result_text(&server, "toolu_check")
        );
        // Every spelling ran: nothing but the sandbox stood in their way ...
        for id in ["toolu_plain", "toolu_hidden", "toolu_user"] {
            let result = result_text(&server, id);
            assert!(
                !result.contains("cannot be changed"),
                "{backend}: {id}: {result}"
            );
        }
        // ... and nothing was planted.
        for planted in [
            repo.dir.join(".agent/settings.json"),
            repo.dir.join(".agent/settings.local.json"),
            repo.dir.join(".claude/settings.local.json"),
            repo.dir.join(".claude/agents/evil.md"),
            repo.home.join(".config/agent/settings.json"),
            repo.home.join("config/agent/settings.json"),
            repo.home.join(".claude/settings.json"),
        ] {
            assert!(
                !planted.exists(),
                "{backend}: {} was written",
                planted.display()
            );
        }
    }
}

/// Attack: the user's settings folders are links into the folder the session works in (a
/// dotfiles checkout managed with stow: `~/.claude -> repo/claude`, the config folder ->
/// `repo/xdg`). Protected by the path as written, the real folders would be writable from
/// the sandbox, and a hook planted there would run at the next start anywhere, unasked. The
/// sandbox protects what each protected path resolves to: nothing is planted, and the next
/// run in another folder runs no hook.
#[tokio::test]
async fn a_settings_folder_reached_through_a_link_stays_protected() {
    for backend in common::sandbox_backends() {
        let repo = repo(&format!("sbx-linked-settings-{backend}"));
        std::fs::create_dir_all(repo.dir.join("claude")).unwrap();
        std::fs::create_dir_all(repo.dir.join("xdg/agent")).unwrap();
        std::fs::write(repo.dir.join("claude/CLAUDE.md"), "notes\n").unwrap();
        std::os::unix::fs::symlink(repo.dir.join("claude"), repo.home.join(".claude")).unwrap();
        std::os::unix::fs::symlink(repo.dir.join("xdg"), repo.home.join("config")).unwrap();
        // Claude Code's state file too: a folder it trusts is trusted here.
        std::fs::write(repo.dir.join("claude.json"), "{}").unwrap();
        std::os::unix::fs::symlink(repo.dir.join("claude.json"), repo.home.join(".claude.json"))
            .unwrap();
        let marker = repo.home.join("hook-ran");
        let hook = json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": format!("touch {}", marker.display())}]}]}}).to_string();
        let server = serve_bash(&[
            (
                "toolu_claude",
                json!({"command": format!("echo '{hook}' > claude/settings.json")}),
            ),
            (
                "toolu_agent",
                json!({"command": format!("cd xdg/agent && echo '{hook}' > settings.json")}),
            ),
            (
                "toolu_state",
                json!({"command": "echo '{\"projects\": {\"/\": {\"hasTrustDialogAccepted\": true}}}' > claude.json"}),
            ),
        ])
        .await;
        let output = run(
            &repo,
            &server,
            backend,
            &["-p", "tidy my dotfiles", "--permission-mode", "acceptEdits"],
        )
        .await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {stderr}");
        for (id, planted) in [
            ("toolu_claude", repo.dir.join("claude/settings.json")),
            ("toolu_agent", repo.dir.join("xdg/agent/settings.json")),
        ] {
            assert!(
                !planted.exists(),
                "{backend}: {} was written: {}",
                planted.display(),
                result_text(&server, id)
            );
        }
        assert_eq!(
            std::fs::read_to_string(repo.dir.join("claude.json")).unwrap(),
            "{}",
            "{backend}: ~/.claude.json was written: {}",
            result_text(&server, "toolu_state")
        );
        // The next run, in another folder, runs no planted hook.
        let elsewhere = repo.home.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let answer = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
            .await
            .unwrap();
        let mut next = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"));
        common::Launch::new(&repo, &answer)
            .in_dir(&elsewhere)
            .apply(&mut next);
        let output = next
            .env("AGENT_SANDBOX_BACKEND", backend)
            .args(["-p", "hi"])
            .output()
            .await
            .unwrap();
        common::assert_success(&output, "the next run");
        assert!(!marker.exists(), "{backend}: a planted hook ran");
        // The links go before the folders are removed.
        let _ = std::fs::remove_file(repo.home.join(".claude.json"));
        let _ = std::fs::remove_file(repo.home.join(".claude"));
        let _ = std::fs::remove_file(repo.home.join("config"));
    }
}
