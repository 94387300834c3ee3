//! Bash with real processes: output, exit codes, truncation, timeouts, cancellation of the
//! whole process group, the persistent working directory, concurrency classification.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Env, text};
use executor::{ExecutorEvent, ToolError};
use serde_json::json;

/// The processes whose process group is `group`, with their state letter (`Z` = zombie).
fn group_members(group: u32) -> Vec<(u32, char)> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|at| &stat[at + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        if pgrp.parse::<u32>().ok() == Some(group) {
            members.push((pid, state.chars().next().unwrap_or('?')));
        }
    }
    members
}

/// Members still alive (zombies are dead, just not reaped yet).
fn alive(group: u32) -> Vec<(u32, char)> {
    group_members(group)
        .into_iter()
        .filter(|(_, state)| *state != 'Z' && *state != 'X')
        .collect()
}

/// The pid of our child `bash` running a command line that contains `marker`.
fn find_bash(marker: &str) -> Option<u32> {
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let parent = stat
            .rfind(')')
            .and_then(|at| stat[at + 2..].split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if parent == Some(me) && cmdline.starts_with("bash\0-c\0") && cmdline.contains(marker) {
            return Some(pid);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_kills_the_whole_process_group() {
    let env = Env::new("bash-cancel");
    let command = "sleep 30 & sleep 30; echo done";
    let context = env.context();
    let cancel = context.cancel.clone();
    let call = tokio::spawn({
        let tool = env.set.tool("Bash").unwrap();
        async move { tool.call(json!({ "command": command }), context).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let group = find_bash(command).expect("the command's bash is running");
    // bash and both sleeps share the group.
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(group).len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(alive(group).len(), 3, "{:?}", group_members(group));

    let cancelled_at = Instant::now();
    cancel.cancel();
    let result = call.await.unwrap();
    let Err(ToolError::Killed(message)) = result else {
        panic!("expected an interruption, got {result:?}");
    };
    assert!(message.contains("interrupted"), "{message}");
    assert!(!message.contains("done"));
    // Give the kernel (and init, which reaps the orphans) up to 500 ms.
    while !alive(group).is_empty() && cancelled_at.elapsed() < Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(alive(group).is_empty(), "left behind: {:?}", alive(group));
}

#[tokio::test]
async fn output_is_stdout_and_stderr_together() {
    let env = Env::new("bash-output");
    let out = env
        .ok(
            "Bash",
            json!({"command": "echo out; echo err >&2; echo out2"}),
        )
        .await;
    assert_eq!(out, "out\nerr\nout2");
    assert_eq!(
        env.ok("Bash", json!({"command": "true"})).await,
        "(no output)"
    );
}

#[tokio::test]
async fn configured_environment_reaches_commands() {
    let env = Env::build("bash-env", |config| {
        config.env = vec![
            ("AGENT_TEST_GREETING".into(), "first".into()),
            ("AGENT_TEST_GREETING".into(), "hello from settings".into()),
        ];
    });
    let output = env
        .call(
            "Bash",
            json!({ "command": "printf '%s' \"$AGENT_TEST_GREETING\"" }),
        )
        .await
        .unwrap();
    assert_eq!(text(&output), "hello from settings");
}

/// Attack (issue 44): the agent's own environment reached every command. Cargo runs this
/// test with `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` set, variables no allow-list names:
/// a command sees neither, while `PATH` and `HOME` (allow-listed) and settings' `env` reach
/// it, and `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` are withheld even from settings' `env`.
#[tokio::test]
async fn the_agents_own_environment_does_not_reach_commands() {
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let env = Env::build("bash-env-allowlist", |config| {
        config.env = vec![
            ("AGENT_TEST_SETTING".into(), "from-settings".into()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-settings".into()),
            ("OPENAI_API_KEY".into(), "sk-openai-settings".into()),
        ];
    });
    let output = env
        .call(
            "Bash",
            json!({ "command": "printf 'manifest=%s pkg=%s setting=%s ant=%s oai=%s path=%s home=%s' \"$CARGO_MANIFEST_DIR\" \"$CARGO_PKG_NAME\" \"$AGENT_TEST_SETTING\" \"$ANTHROPIC_API_KEY\" \"$OPENAI_API_KEY\" \"${PATH:+set}\" \"${HOME:+set}\"" }),
        )
        .await
        .unwrap();
    assert_eq!(
        text(&output),
        "manifest= pkg= setting=from-settings ant= oai= path=set home=set"
    );
}

#[tokio::test]
async fn non_zero_exit_is_a_result_not_a_failure() {
    let env = Env::new("bash-exit");
    let output = env
        .call("Bash", json!({"command": "echo failing; exit 3"}))
        .await
        .unwrap();
    assert!(output.is_error);
    assert_eq!(text(&output), "failing\n\nExit code 3");
    let output = env
        .call("Bash", json!({"command": "kill -9 $$"}))
        .await
        .unwrap();
    assert!(output.is_error);
    assert!(
        text(&output).contains("Killed by signal 9 (SIGKILL)"),
        "{}",
        text(&output)
    );
    let output = env
        .call("Bash", json!({"command": "if then"}))
        .await
        .unwrap();
    assert!(output.is_error);
    assert!(text(&output).contains("syntax error"), "{}", text(&output));
}

#[tokio::test]
async fn long_output_is_cut_in_the_middle() {
    let env = Env::new("bash-truncate");
    let out = env
        .ok(
            "Bash",
            json!({"command": "printf 'start\\n'; head -c 200000 /dev/zero | tr '\\0' a; printf '\\nend\\n'"}),
        )
        .await;
    assert!(out.starts_with("start\naaa"), "{}", &out[..20]);
    assert!(out.ends_with("aaa\nend"));
    // 6 + 200000 + 4 = 200010 characters (the final newline is trimmed); 30000 are kept.
    assert!(
        out.contains("\n\n[... 170010 characters truncated ...]\n\n"),
        "{}",
        &out[14_990..15_060]
    );
    assert!(out.chars().count() < 30_100);
}

#[tokio::test]
async fn timeouts_kill_the_command() {
    let env = Env::new("bash-timeout");
    let started = Instant::now();
    let result = env
        .call(
            "Bash",
            json!({"command": "echo before; sleep 20", "timeout": 300}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let Err(ToolError::Killed(message)) = result else {
        panic!("expected a timeout, got {result:?}");
    };
    assert!(message.contains("timed out after 300 ms"), "{message}");
    assert!(message.contains("before"), "{message}");
}

#[tokio::test]
async fn background_jobs_do_not_hold_the_result() {
    let env = Env::new("bash-background");
    let started = Instant::now();
    let out = env
        .ok("Bash", json!({"command": "sleep 30 & echo started"}))
        .await;
    assert_eq!(out, "started");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_working_directory_persists_inside_the_workspace() {
    let env = Env::new("bash-cwd");
    let ws = env.ws().display().to_string();
    env.file("sub/inner.txt", "inner\n");
    assert_eq!(
        env.ok("Bash", json!({"command": "cd sub"})).await,
        "(no output)"
    );
    assert_eq!(
        env.ok("Bash", json!({"command": "pwd"})).await,
        format!("{ws}/sub")
    );
    // Relative paths of the file tools follow.
    assert_eq!(
        env.ok("Read", json!({"file_path": "inner.txt"})).await,
        "1\tinner"
    );
    // A failing command that changed directory still moves the session.
    let output = env
        .call("Bash", json!({"command": "cd .. && false"}))
        .await
        .unwrap();
    assert!(output.is_error);
    assert_eq!(env.ok("Bash", json!({"command": "pwd"})).await, ws);
    // Leaving the workspace is undone, and said.
    let out = env.ok("Bash", json!({"command": "cd /"})).await;
    assert_eq!(
        out,
        format!("Shell cwd was reset to {ws} (/ is outside the workspace).")
    );
    assert_eq!(env.ok("Bash", json!({"command": "pwd"})).await, ws);
    // A directory removed under the session falls back to the workspace.
    env.ok("Bash", json!({"command": "mkdir gone && cd gone"}))
        .await;
    std::fs::remove_dir(env.ws().join("gone")).unwrap();
    assert_eq!(env.ok("Bash", json!({"command": "pwd"})).await, ws);
}

#[tokio::test]
async fn progress_is_reported_while_running() {
    let env = Env::with_mode("bash-progress", tools::PermissionMode::BypassPermissions);
    let (completed, events) = env
        .run(vec![(
            "Bash",
            json!({"command": "for i in 1 2 3 4; do echo line$i; sleep 0.15; done"}),
        )])
        .await;
    assert_eq!(completed[0].outcome, executor::Outcome::Success);
    let progress: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            ExecutorEvent::Progress { progress, .. } => Some(progress.message.as_str()),
            _ => None,
        })
        .collect();
    assert!(!progress.is_empty(), "no progress in {events:?}");
    assert!(
        progress.iter().all(|line| line.starts_with("line")),
        "{progress:?}"
    );
}

#[test]
fn only_plain_read_only_commands_run_concurrently() {
    let env = Env::new("bash-concurrency");
    let bash = env.set.tool("Bash").unwrap();
    for (command, safe, read_only) in [
        ("ls -la", true, true),
        ("git status", true, true),
        ("git diff HEAD", true, true),
        ("grep -rn foo src", true, true),
        ("cat a.txt", true, true),
        ("ls > listing", false, false),
        ("ls 2>/dev/null", false, true),
        ("ls && pwd", false, true),
        ("cd sub", false, true),
        ("cat $(ls)", false, true),
        ("rm x", false, false),
        ("npm test", false, false),
        ("echo 'unterminated", false, false),
    ] {
        let input = json!({ "command": command });
        assert_eq!(bash.is_concurrency_safe(&input), safe, "{command} safe");
        assert_eq!(bash.is_read_only(&input), read_only, "{command} read-only");
    }
    assert_eq!(
        bash.timeout(&json!({"command": "x"})),
        Some(Duration::from_secs(125))
    );
    assert_eq!(
        bash.timeout(&json!({"command": "x", "timeout": 10_000_000})),
        Some(Duration::from_secs(605))
    );
    for tool in ["Read", "Glob", "Grep"] {
        assert!(env.set.tool(tool).unwrap().is_concurrency_safe(&json!({})));
    }
    for tool in ["Write", "Edit"] {
        assert!(!env.set.tool(tool).unwrap().is_concurrency_safe(&json!({})));
    }
}

#[test]
fn schemas_list_exactly_claude_codes_fields() {
    let env = Env::new("schemas");
    let fields = |name: &str| {
        let tool = env.set.tool(name).unwrap();
        let schema = tool.input_schema();
        assert_eq!(schema["additionalProperties"], json!(false), "{name}");
        assert!(!tool.description().is_empty());
        let mut keys: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    let sorted = |names: &[&str]| {
        let mut names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(
        fields("Read"),
        sorted(&["file_path", "offset", "limit", "pages"])
    );
    assert_eq!(fields("Write"), sorted(&["file_path", "content"]));
    assert_eq!(
        fields("Edit"),
        sorted(&["file_path", "old_string", "new_string", "replace_all"])
    );
    assert_eq!(fields("Glob"), sorted(&["pattern", "path"]));
    assert_eq!(
        fields("Grep"),
        sorted(&[
            "pattern",
            "path",
            "glob",
            "type",
            "output_mode",
            "-A",
            "-B",
            "-C",
            "context",
            "-n",
            "-i",
            "head_limit",
            "offset",
            "multiline"
        ])
    );
    assert_eq!(
        fields("Bash"),
        sorted(&[
            "command",
            "timeout",
            "description",
            "dangerouslyDisableSandbox",
            "run_in_background"
        ])
    );
    let names: Vec<String> = env
        .set
        .tools()
        .iter()
        .map(|tool| tool.name().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "Read",
            "Write",
            "Edit",
            "Glob",
            "Grep",
            "Bash",
            "NotebookEdit",
            "TaskCreate",
            "TaskGet",
            "TaskUpdate",
            "TaskList",
            "TodoWrite",
            "TaskOutput",
            "TaskStop",
            "Monitor"
        ]
    );
    assert_eq!(
        fields("TaskUpdate"),
        sorted(&[
            "taskId",
            "subject",
            "description",
            "activeForm",
            "status",
            "addBlocks",
            "addBlockedBy",
            "owner",
            "metadata"
        ])
    );
    assert_eq!(
        fields("TaskCreate"),
        sorted(&["subject", "description", "activeForm", "metadata"])
    );
    assert_eq!(fields("TodoWrite"), sorted(&["todos"]));
    assert_eq!(
        fields("NotebookEdit"),
        sorted(&[
            "notebook_path",
            "cell_id",
            "new_source",
            "cell_type",
            "edit_mode"
        ])
    );
}

/// Carriage-return progress frames come back as the terminal would show them: the reported
/// `printf 'first\rsecond\n'`, and a 3,000-frame progress bar (30,040 characters before).
#[tokio::test]
async fn progress_frames_collapse_to_what_a_terminal_shows() {
    let env = Env::new("bash-frames");
    let out = env
        .ok("Bash", json!({"command": r"printf 'first\rsecond\n'"}))
        .await;
    assert_eq!(out, "second");
    let out = env
        .ok(
            "Bash",
            json!({"command": r#"for i in $(seq 1 3000); do printf '\r%4d/3000 %s' "$i" "${bar:=}"; [ $((i % 375)) = 0 ] && bar="$bar#"; done; echo; echo done"#}),
        )
        .await;
    assert_eq!(out, "3000/3000 #######\ndone");
}
