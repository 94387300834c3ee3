//! A Claude Code user's project, used from the CLI as Claude Code would use it: the fixture
//! `tests/fixtures/claude-project/` (`.claude/settings.json`, `.claude/settings.local.json`,
//! `.agent/settings.json`, `.claude/CLAUDE.md`, `CLAUDE.local.md`, a command with arguments
//! and frontmatter, a skill with a supporting file) copied into a fresh repository, in a
//! trusted and an untrusted folder, against a scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{Repo, command, repo, result_text};
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// Copies the fixture project into `repo`.
fn plant_fixture(repo: &Repo) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }
    copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-project"),
        &repo.dir,
    );
}

/// The stream-json line of `kind` (`system`) and `subtype` (`init`).
fn line<'a>(lines: &'a [Value], subtype: &str) -> &'a Value {
    lines
        .iter()
        .find(|line| line["subtype"] == subtype)
        .unwrap_or_else(|| panic!("no {subtype} line in {lines:?}"))
}

/// `/release:notes 1.2 upbeat`: the command's prompt with its arguments, its `model` and
/// `allowed-tools` (trusted only), the skill listed in the context and loaded by the Skill
/// tool, its supporting file read, the settings' allow and deny rules, both memory files,
/// and `.agent/settings.json` winning over `.claude/settings.json`.
#[tokio::test]
async fn the_fixture_project_works_trusted_and_untrusted() {
    for trusted in [true, false] {
        let repo = repo(&format!("claude-project-{trusted}"));
        plant_fixture(&repo);
        let server =
            Server::start_tls(Script::new(vec![
            Reply::turn(
                Turn::new()
                    .tool_use("toolu_skill", "Skill", json!({"skill": "changelog", "args": "1.2"}))
                    .tool_use(
                        "toolu_template",
                        "Read",
                        json!({"file_path": ".claude/skills/changelog/template.md"}),
                    )
                    .tool_use("toolu_private", "Read", json!({"file_path": "private.txt"}))
                    .tool_use("toolu_app", "Read", json!({"file_path": "app.py"})),
            ),
            Reply::turn(
                Turn::new()
                    .tool_use("toolu_mark", "Bash", json!({"command": "touch release-1.2"}))
                    .tool_use(
                        "toolu_edit",
                        "Edit",
                        json!({"file_path": "app.py", "old_string": "helo", "new_string": "hello"}),
                    ),
            ),
            Reply::turn(Turn::new().text("Released.")),
        ]))
            .await
            .unwrap();
        let mut run = command(&repo, &server);
        if trusted {
            run.arg("--trust");
        }
        let output = run
            .args([
                "-p",
                "/release:notes 1.2 upbeat",
                "--output-format",
                "stream-json",
            ])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{trusted}: {stderr}");
        let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();

        // system/init lists the command and the skill (a skill is a slash command too).
        let init = line(&lines, "init");
        assert_eq!(
            init["slash_commands"],
            json!(["release:notes", "changelog"])
        );
        assert_eq!(init["skills"], json!(["changelog"]));
        assert!(init["tools"].as_array().unwrap().contains(&json!("Skill")));
        // The unknown key of .claude/settings.json is named.
        assert!(
            stderr.contains(".claude/settings.json: unknown setting \"permisions\" is ignored"),
            "{stderr}"
        );

        let first = server.requests()[0].json();
        // The command's model in a trusted folder; the settings' otherwise, where
        // .agent/settings.json wins over .claude/settings.json.
        if trusted {
            assert_eq!(first["model"], "claude-haiku-4-5-20251001");
        } else {
            assert_eq!(first["model"], "fixture-agent-model");
            assert!(
                stderr.contains(
                    "/release:notes: allowed-tools and model of a project command are ignored"
                ),
                "{stderr}"
            );
        }
        let messages = first["messages"].to_string();
        assert!(
            messages.contains("Write the release notes for version 1.2 in a upbeat tone"),
            "{messages}"
        );
        assert!(messages.contains("touch release-1.2"), "{messages}");
        for marker in [
            "Fixture memory from .claude/CLAUDE.md",
            "Fixture local memory from CLAUDE.local.md",
            "Skills (load one with the Skill tool when the task matches its description):\\n- changelog: Writes changelog entries in this project's format. Use when asked for release notes or a changelog.",
        ] {
            assert!(
                messages.contains(marker),
                "{trusted}: {marker} in {messages}"
            );
        }
        // Only the description reaches the context before the skill is loaded.
        assert!(!messages.contains("Fill in template.md"), "{messages}");

        // The Skill tool loads the body with its folder and arguments; the file beside it
        // is read from there.
        let skill = result_text(&server, "toolu_skill");
        assert!(
            skill.contains(&format!(
                "Base directory for this skill: {}",
                repo.dir.join(".claude/skills/changelog").display()
            )),
            "{skill}"
        );
        assert!(
            skill.contains("Fill in template.md (in this skill's folder) for version 1.2"),
            "{skill}"
        );
        let template = result_text(&server, "toolu_template");
        assert!(template.contains("fixture-template-marker"), "{template}");
        // settings.local.json's deny rule applies trusted or not.
        let private = result_text(&server, "toolu_private");
        assert!(private.contains("denied"), "{private}");
        assert!(!private.contains("private fixture text"), "{private}");

        // allowed-tools let the command's Bash call write, trusted only; the settings'
        // Edit allow rule applies trusted only.
        assert_eq!(
            repo.dir.join("release-1.2").exists(),
            trusted,
            "{}",
            result_text(&server, "toolu_mark")
        );
        let app = std::fs::read_to_string(repo.dir.join("app.py")).unwrap();
        assert_eq!(app.contains("'hello'"), trusted, "{app}");
        let result = line(&lines, "success");
        assert_eq!(result["result"], "Released.");
    }
}

/// A command's grant lasts one turn: the next turn of the same session (`--resume`) is
/// back to the settings' rules, and the session's model is back too.
#[tokio::test]
async fn a_commands_grant_and_model_end_with_its_turn() {
    let repo = repo("claude-project-grant-ends");
    plant_fixture(&repo);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_1",
            "Bash",
            json!({"command": "touch release-1.0"}),
        )),
        Reply::turn(Turn::new().text("Marked.")),
        Reply::turn(Turn::new().tool_use(
            "toolu_2",
            "Bash",
            json!({"command": "touch release-2.0"}),
        )),
        Reply::turn(Turn::new().text("Tried.")),
    ]))
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args([
            "--trust",
            "-p",
            "/release:notes 1.0 calm",
            "--output-format",
            "json",
        ])
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    let session: Value = serde_json::from_slice(&output.stdout).unwrap();
    let output = command(&repo, &server)
        .args(["--trust", "--output-format", "json", "--resume"])
        .arg(session["session_id"].as_str().unwrap())
        .args(["-p", "mark 2.0 too"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    assert!(repo.dir.join("release-1.0").exists());
    assert!(!repo.dir.join("release-2.0").exists());
    let requests = server.requests();
    assert_eq!(requests[0].json()["model"], "claude-haiku-4-5-20251001");
    assert_eq!(requests[2].json()["model"], "fixture-agent-model");
}

/// `/changelog 3.0` loads the skill as the prompt, as Claude Code does; a skill of the
/// user's (`~/.claude/skills/`) is listed too and the files beside it are readable from the
/// project, while the rest of `~/.claude/` stays outside the workspace.
#[tokio::test]
async fn skills_are_slash_commands_and_user_skills_are_readable() {
    let repo = repo("claude-project-skill");
    plant_fixture(&repo);
    let user_skill = repo.home.join(".claude/skills/greeting");
    std::fs::create_dir_all(&user_skill).unwrap();
    std::fs::write(
        user_skill.join("SKILL.md"),
        "---\ndescription: Greets in the house style\n---\nRead style.md.\n",
    )
    .unwrap();
    std::fs::write(user_skill.join("style.md"), "user-style-marker").unwrap();
    std::fs::write(repo.home.join(".claude/settings.json"), "{}").unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_style",
                    "Read",
                    json!({"file_path": user_skill.join("style.md")}),
                )
                .tool_use(
                    "toolu_settings",
                    "Read",
                    json!({"file_path": repo.home.join(".claude/settings.json")}),
                ),
        ),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "/changelog 3.0", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let first = server.requests()[0].json();
    let messages = first["messages"].to_string();
    assert!(
        messages.contains("Fill in template.md (in this skill's folder) for version 3.0"),
        "{messages}"
    );
    assert!(
        messages.contains("- greeting: Greets in the house style"),
        "{messages}"
    );
    let style = result_text(&server, "toolu_style");
    assert!(style.contains("user-style-marker"), "{style}");
    let settings = result_text(&server, "toolu_settings");
    assert!(settings.contains("outside the workspace"), "{settings}");
}

/// From an attack on the `.claude` support: a FIFO planted as a skill's `SKILL.md` does not
/// hang start-up; a project command cannot replace the user's command of the same name; a
/// user skill linked from elsewhere has its files readable where they live.
#[tokio::test]
async fn hostile_skill_files_and_shadowing_commands_are_contained() {
    let repo = repo("claude-project-hostile");
    plant_fixture(&repo);
    std::fs::create_dir_all(repo.dir.join(".claude/skills/stall")).unwrap();
    nix::unistd::mkfifo(
        &repo.dir.join(".claude/skills/stall/SKILL.md"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    std::fs::create_dir_all(repo.dir.join(".claude/commands")).unwrap();
    std::fs::write(
        repo.dir.join(".claude/commands/deploy.md"),
        "PROJECT-DEPLOY-BODY",
    )
    .unwrap();
    std::fs::create_dir_all(repo.home.join(".claude/commands")).unwrap();
    std::fs::write(
        repo.home.join(".claude/commands/deploy.md"),
        "USER-DEPLOY-BODY $ARGUMENTS",
    )
    .unwrap();
    let elsewhere = repo.home.join("dotfiles/skills/style");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        elsewhere.join("SKILL.md"),
        "---\ndescription: House style\n---\nx",
    )
    .unwrap();
    std::fs::write(elsewhere.join("ref.md"), "linked-skill-marker").unwrap();
    std::fs::create_dir_all(repo.home.join(".claude/skills")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.home.join(".claude/skills/style")).unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_ref",
            "Read",
            json!({"file_path": elsewhere.join("ref.md")}),
        )),
        Reply::turn(Turn::new().text("Deployed.")),
    ]))
    .await
    .unwrap();
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        command(&repo, &server)
            .args(["-p", "/deploy now", "--output-format", "json"])
            .output(),
    )
    .await
    .expect("start-up hung on the FIFO")
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("stall: its SKILL.md is not a regular file"),
        "{stderr}"
    );
    let messages = server.requests()[0].json()["messages"].to_string();
    assert!(messages.contains("USER-DEPLOY-BODY now"), "{messages}");
    assert!(!messages.contains("PROJECT-DEPLOY-BODY"), "{messages}");
    let reference = result_text(&server, "toolu_ref");
    assert!(reference.contains("linked-skill-marker"), "{reference}");
}

/// Claude Code's `apiKeyHelper`: its output is the key (sent as `x-api-key` and as a bearer
/// token, as Claude Code sends it), kept between requests, fetched again after a 401; a
/// project's runs only in a trusted folder.
#[tokio::test]
async fn the_api_key_helpers_output_is_the_key() {
    let repo = repo("key-helper");
    std::fs::create_dir_all(repo.home.join(".claude")).unwrap();
    let counter = repo.home.join("count");
    std::fs::write(
        repo.home.join(".claude/settings.json"),
        json!({"apiKeyHelper": format!(
            "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; echo sk-helper-$n",
            c = counter.display()
        )})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::error(401, "authentication_error", "invalid x-api-key"),
        Reply::turn(Turn::new().text("Hello.")),
        Reply::turn(Turn::new().text("Again.")),
    ]))
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "hi", "--output-format", "stream-json", "--verbose"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["apiKeySource"], "apiKeyHelper");
    assert_eq!(lines.last().unwrap()["result"], "Hello.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("x-api-key"), Some("sk-helper-1"));
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-helper-1")
    );
    // The 401 made it run again; the new key went with the same request.
    assert_eq!(requests[1].header("x-api-key"), Some("sk-helper-2"));
    assert_eq!(requests[0].body, requests[1].body);

    // A project's helper in a folder nobody trusted never runs.
    let untrusted = common::repo("key-helper-project");
    std::fs::create_dir_all(untrusted.dir.join(".claude")).unwrap();
    let marker = untrusted.home.join("ran");
    std::fs::write(
        untrusted.dir.join(".claude/settings.json"),
        json!({"apiKeyHelper": format!("touch {}; echo sk-project", marker.display())}).to_string(),
    )
    .unwrap();
    let output = command(&untrusted, &server)
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!marker.exists(), "an untrusted project's apiKeyHelper ran");
    assert_eq!(server.requests()[2].header("x-api-key"), None);
}

/// `outputStyle` names a style (a project's `.claude/output-styles/*.md` here) whose text
/// goes into the system prompt in place of the coding instructions, as in Claude Code; a
/// name that is no style is one warning and the built-in prompt.
#[tokio::test]
async fn an_output_style_shapes_the_system_prompt() {
    let repo = repo("output-style");
    std::fs::create_dir_all(repo.dir.join(".claude/output-styles")).unwrap();
    std::fs::write(
        repo.dir.join(".claude/output-styles/terse.md"),
        "---\ndescription: Few words\n---\nAnswer in one line, no lists.\n",
    )
    .unwrap();
    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        json!({"outputStyle": "terse"}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("Done.")),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("outputStyle"), "{stderr}");
    let system = server.requests()[0].json()["system"].to_string();
    assert!(
        system.contains("# Output Style: terse\\nAnswer in one line, no lists."),
        "{system}"
    );
    // A style without keep-coding-instructions replaces the coding sections.
    assert!(
        !system.contains("# Doing tasks") && system.contains("# Using the tools"),
        "{system}"
    );

    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        json!({"outputStyle": "Shakespearean"}).to_string(),
    )
    .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("outputStyle \"Shakespearean\" is not an output style here (there are: default, Explanatory, Learning, terse); the default is used"),
        "{stderr}"
    );
    let system = server.requests()[1].json()["system"].to_string();
    assert!(system.contains("# Doing tasks"), "{system}");
    assert!(!system.contains("Output Style"), "{system}");
}

/// Claude Code 2.1.197 as `.ci/run` installs it (`AGENT_CLAUDE_CODE_DIR`, else
/// `~/.cache/agent-ci/claude-code`); `None` with a loud note elsewhere, a failure in CI.
fn claude_code() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("AGENT_CLAUDE_CODE_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| std::path::PathBuf::from(home).join(".cache/agent-ci/claude-code"))
        })?;
    let binary = dir.join("node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    if binary.is_file() {
        return Some(binary);
    }
    assert!(
        !std::env::var("CI").is_ok_and(|ci| ci == "true"),
        "CI needs Claude Code in {} (.ci/run installs it)",
        dir.display()
    );
    eprintln!(
        "NOTE: the Claude Code setup test is skipped: {} is not there (.ci/run installs it)",
        binary.display()
    );
    None
}

/// What a terminal showed, without escape sequences and white space (Claude Code draws its
/// words apart with cursor moves).
fn squeezed(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                Some('[') => {
                    for next in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&next) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    for next in chars.by_ref() {
                        if next == '\x07' {
                            break;
                        }
                    }
                }
                _ => {}
            },
            c if c.is_whitespace() || c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Runs `program` in `cwd` on a pseudo-terminal (120 columns) with `env`, and for each step
/// waits (up to 90 s) until the screen shows its text (white space ignored), then types its
/// keys. The program is killed after the last step. `Err` names the text that never came,
/// with the end of the screen.
fn on_terminal(
    program: &Path,
    cwd: &Path,
    env: &[(&str, std::ffi::OsString)],
    steps: &[(&str, &str)],
) -> Result<(), String> {
    use std::io::{Read as _, Write as _};
    let size = nix::pty::Winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    let slave = pty.slave;
    let mut command = std::process::Command::new(program);
    command
        .current_dir(cwd)
        .env_remove("CI")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let mut keyboard = std::fs::File::from(pty.master);
    let mut reader = keyboard.try_clone().unwrap();
    let screen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = std::sync::Arc::clone(&screen);
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(read) = reader.read(&mut chunk) {
            if read == 0 {
                break;
            }
            kept.lock().unwrap().extend_from_slice(&chunk[..read]);
        }
    });
    let mut outcome = Ok(());
    for (text, keys) in steps {
        let wanted: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        loop {
            let shown = squeezed(&screen.lock().unwrap());
            if shown.contains(&wanted) {
                break;
            }
            if std::time::Instant::now() > deadline {
                let tail: String = shown
                    .chars()
                    .rev()
                    .take(1500)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                outcome = Err(format!(
                    "{text:?} never came; the screen ended with: {tail}"
                ));
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        if outcome.is_err() {
            break;
        }
        for key in keys.split('|').filter(|key| !key.is_empty()) {
            std::thread::sleep(std::time::Duration::from_millis(500));
            keyboard.write_all(key.as_bytes()).unwrap();
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

/// A Claude Code user's setup, written by Claude Code 2.1.197 itself: servers added with
/// `claude mcp add` in user and local scope, the folder trusted in its trust dialog, one of
/// the project's `.mcp.json` servers approved and one rejected in its dialog, and a
/// realistic `.claude/settings.json` (hooks that record what they receive, allow rules, a
/// few keys about Claude Code's own screens). `agent` starts the same servers, trusts the
/// same folder (its allow rules and hooks apply, no `--trust`), runs the hooks with the
/// inputs Claude Code gave them, and prints at most one warning line.
#[tokio::test]
async fn a_setup_written_by_claude_code_carries_over() {
    let Some(claude) = claude_code() else { return };
    let Some(kit) = common::testkit_binary("the Claude Code setup test") else {
        return;
    };
    let repo = repo("claude-code-setup");
    let mcp_server = json!({"command": kit, "args": ["mcp-server"]});
    std::fs::write(
        repo.dir.join(".mcp.json"),
        json!({"mcpServers": {"approved-one": mcp_server, "rejected-one": mcp_server}}).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    let record = r#"python3 -c 'import json,os,sys; e=json.load(sys.stdin); open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"],".events.jsonl"),"a").write(json.dumps(e)+"\n")'"#;
    let hook = json!([{"hooks": [{"type": "command", "command": record}]}]);
    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        json!({
            "$schema": "https://json.schemastore.org/claude-code-settings.json",
            "permissions": {"allow": ["Bash(echo:*)"], "deny": ["Read(./.env)"]},
            "hooks": {
                "SessionStart": hook, "UserPromptSubmit": hook, "PreToolUse": hook,
                "PostToolUse": hook, "Stop": hook, "SessionEnd": hook,
            },
            "includeCoAuthoredBy": false,
            "cleanupPeriodDays": 30,
            "spinnerTipsEnabled": false,
            "alwaysThinkingEnabled": true,
        })
        .to_string(),
    )
    .unwrap();
    let env: Vec<(&str, std::ffi::OsString)> = vec![
        ("HOME", repo.home.clone().into()),
        ("TERM", "xterm-256color".into()),
        (
            "ANTHROPIC_API_KEY",
            "sk-ant-api03-fixture-00000000000000000000".into(),
        ),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9".into()),
    ];
    for (scope, name) in [("user", "user-srv"), ("local", "local-srv")] {
        let added = std::process::Command::new(&claude)
            .args(["mcp", "add", "--scope", scope, name, "--"])
            .arg(&kit)
            .arg("mcp-server")
            .current_dir(&repo.dir)
            .env_remove("CI")
            .envs(env.iter().map(|(key, value)| (key, value)))
            .output()
            .unwrap();
        assert!(
            added.status.success(),
            "claude mcp add: {}",
            String::from_utf8_lossy(&added.stderr)
        );
    }
    // Claude Code's first-run screens (theme, login) are not part of the setup: marked seen,
    // as a user who went through them has them. Everything else it writes itself.
    let state_path = repo.home.join(".claude.json");
    let mut state: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    state["hasCompletedOnboarding"] = json!(true);
    state["lastOnboardingVersion"] = json!("2.1.197");
    state["customApiKeyResponses"] = json!({"approved": ["00000000000000000000"], "rejected": []});
    std::fs::write(&state_path, state.to_string()).unwrap();
    let steps = [
        ("Yes, I trust this folder", "\r"),
        ("new MCP servers found in this project", "\x1b[B| |\r"),
        ("for shortcuts", ""),
    ];
    let cwd = repo.dir.clone();
    let claude_run = claude.clone();
    tokio::task::spawn_blocking(move || on_terminal(&claude_run, &cwd, &env, &steps))
        .await
        .unwrap()
        .unwrap_or_else(|problem| panic!("driving Claude Code: {problem}"));
    // What Claude Code wrote.
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    let project = &state["projects"][repo.dir.to_str().unwrap()];
    assert_eq!(project["hasTrustDialogAccepted"], true, "{state:#}");
    assert!(state["mcpServers"]["user-srv"].is_object(), "{state:#}");
    assert!(project["mcpServers"]["local-srv"].is_object(), "{state:#}");
    let local: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.dir.join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        local,
        json!({"enabledMcpjsonServers": ["approved-one"], "disabledMcpjsonServers": ["rejected-one"]})
    );
    // The inputs Claude Code's own hooks got, kept apart from ours.
    let cc_events = std::fs::read_to_string(repo.dir.join(".events.jsonl")).unwrap_or_default();
    std::fs::remove_file(repo.dir.join(".events.jsonl")).ok();

    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_1", "Bash", json!({"command": "echo hi"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "go", "--output-format", "stream-json", "--verbose"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let servers: Vec<String> = lines[0]["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|server| {
            format!(
                "{} {}",
                server["name"].as_str().unwrap(),
                server["status"].as_str().unwrap()
            )
        })
        .collect();
    let mut servers = servers;
    servers.sort();
    assert_eq!(
        servers,
        [
            "approved-one connected",
            "local-srv connected",
            "user-srv connected"
        ],
        "{stderr}"
    );
    // Trusted as Claude Code trusted it: the project's allow rule ran the command.
    assert_eq!(common::result_block(&server, "toolu_1")["content"], "hi");
    assert_eq!(lines.last().unwrap()["result"], "Done.");
    // One line at most about the settings (the one key whose absence changes something).
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("agent:"))
        .filter(|line| line.contains("warning") || line.contains("not used here"))
        .collect();
    assert!(warnings.len() <= 1, "{stderr}");
    // Every hook ran at its moment, with Claude Code's input.
    let ours: Vec<Value> = std::fs::read_to_string(repo.dir.join(".events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let names: Vec<&str> = ours
        .iter()
        .map(|event| event["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "Stop",
            "SessionEnd"
        ]
    );
    for theirs in cc_events
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
    {
        let name = theirs["hook_event_name"].as_str().unwrap();
        let mine = ours
            .iter()
            .find(|event| event["hook_event_name"] == name)
            .unwrap();
        let missing: Vec<&String> = theirs
            .as_object()
            .unwrap()
            .keys()
            .filter(|key| mine.get(key.as_str()).is_none())
            .collect();
        assert!(
            missing.is_empty(),
            "{name}: Claude Code's input has {missing:?}, ours not: {theirs} / {mine}"
        );
    }
    assert!(
        cc_events.contains("SessionStart"),
        "Claude Code ran no hook: {cc_events}"
    );
}

/// A folder trusted in Claude Code's dialog (which lists no MCP server): a `.mcp.json`
/// server no setting approved does not start by that trust alone, as Claude Code asks about
/// it first (headless: one line says how to approve it).
#[tokio::test]
async fn claude_codes_trust_alone_starts_no_mcpjson_server() {
    let repo = repo("claude-trust-mcpjson");
    let marker = repo.home.join("started");
    std::fs::write(
        repo.dir.join(".mcp.json"),
        json!({"mcpServers": {"helper": {"command": "sh", "args": ["-c", format!("touch {}", marker.display())]}}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        repo.home.join(".claude.json"),
        json!({"projects": {repo.dir.to_str().unwrap(): {"hasTrustDialogAccepted": true}}})
            .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Done."))]))
        .await
        .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "go", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(".mcp.json server helper not started: not approved"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the server started");
}
