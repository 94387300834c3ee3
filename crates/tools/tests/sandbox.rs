//! Issue 12's attacks, through the gate and the real Bash tool in the OS sandbox: each one
//! worked against the lexical checks and must now fail, and the test proves it by what is
//! (not) on disk and (not) in the tool_result.
//!
//! Every test runs under each back end that works here: bubblewrap, and Landlock with this
//! test binary as its own helper (hence `harness = false` and the `main` below, which
//! dispatches the helper first). Without a sandbox, the attacks must be asked (refused
//! headless) instead. A back end that does not work is skipped with a note; in CI
//! (`CI=true`) that is a failure. Arguments: an optional name filter.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::process::{Command, ExitCode};
use std::sync::Mutex;

use common::{Env, result_text};
use executor::Outcome;
use serde_json::json;
use tools::PermissionMode;

/// A session over a git repository `ws` (with a commit), a folder `outside` beside it
/// holding `secret.txt`, and `secrets/key` inside the workspace.
fn session(name: &str, configure: impl FnOnce(&mut tools::ToolSetConfig)) -> Option<Env> {
    let sandbox = CURRENT.lock().unwrap().clone()?;
    let env = Env::build(name, |config| {
        config.sandbox = sandbox;
        configure(config);
    });
    let ws = env.ws();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    git(&["init", "-q"]);
    env.file("README.md", "hello\n");
    env.file("secrets/key", "sk-live-SECRET\n");
    // (Under Landlock nothing new can be made at the top of the workspace: tests write here.)
    env.file("src/lib.txt", "lib\n");
    git(&["add", "README.md"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "init",
    ]);
    let outside = env.root.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "OUTSIDE-SECRET\n").unwrap();
    Some(env)
}

fn git_config(env: &Env) -> String {
    std::fs::read_to_string(env.ws().join(".git/config")).unwrap()
}

/// Runs each command through the gate and the tool; returns the results' texts.
async fn bash(env: &Env, commands: &[&str]) -> Vec<(Outcome, String)> {
    let calls = commands
        .iter()
        .map(|command| ("Bash", json!({ "command": command })))
        .collect();
    let (completed, _) = env.run(calls).await;
    completed
        .iter()
        .map(|done| (done.outcome.clone(), result_text(done).to_owned()))
        .collect()
}

fn nothing_planted(env: &Env, names: &[&str]) {
    for name in names {
        assert!(
            !env.ws().join(name).exists() && !env.root.path().join(name).exists(),
            "{name} was created"
        );
    }
}

/// A command that times out leaves hundreds of processes ignoring SIGTERM, each trying to
/// create `.claude/settings.json`, `.agent/settings.json` and `.mcp.json`: the sandbox's
/// processes die one by one after bubblewrap's own, and the placeholders reserving those
/// paths must stay until the last is gone (found by an attack: removed as soon as
/// bubblewrap exited, they let the survivors create the files).
async fn processes_outliving_a_command_cannot_create_protected_paths() {
    let Some(env) = session("sbx-outlive", |config| {
        config.permissions.default_mode = PermissionMode::AcceptEdits;
    }) else {
        return;
    };
    let racer = r#"python3 -c "
import os, signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for i in range(200):
    if os.fork() == 0:
        os.close(1); os.close(2)
        while True:
            for folder, name in (('.claude', 'settings.json'), ('.agent', 'settings.json')):
                try: os.mkdir(folder)
                except OSError: pass
                try: open(folder + '/' + name, 'w').write('{}')
                except OSError: pass
            try: open('.mcp.json', 'w').write('{}')
            except OSError: pass
signal.pause()
""#;
    let (completed, _) = env
        .run(vec![("Bash", json!({"command": racer, "timeout": 1500}))])
        .await;
    assert_eq!(completed.len(), 1);
    // Whatever survived has had time to try.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    for path in [".claude/settings.json", ".agent/settings.json", ".mcp.json"] {
        let planted = env.ws().join(path);
        assert!(
            !planted.is_file(),
            "{path} was created: {}",
            result_text(&completed[0])
        );
    }
}

/// A command stopped in its first milliseconds (Ctrl-C right after the model asked for it)
/// leaves nothing running in its sandbox, and the call ends at once: stopping the command's
/// process group reaches bubblewrap, not the sandbox's own session, whose processes died
/// with bubblewrap only when its `--die-with-parent` was set up in time (found when the
/// terminal froze for 10 s on such a Ctrl-C and a `sleep 30` outlived the session).
async fn a_command_stopped_at_once_leaves_nothing_running() {
    let Some(env) = session("sbx-stop-at-once", |_| {}) else {
        return;
    };
    for (round, delay_ms) in [0u64, 1, 2, 5, 10, 20].into_iter().enumerate() {
        // Distinct for each round and back end (both run in this process).
        static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let marker = format!("sleep 3{round}.{run:03}");
        let context = env.context();
        let cancel = context.cancel.clone();
        let tool = env.set.tool("Bash").unwrap();
        let call = tokio::spawn({
            let command = marker.clone();
            async move { tool.call(json!({ "command": command }), context).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
        let stopped = std::time::Instant::now();
        cancel.cancel();
        let _ = call.await.unwrap();
        assert!(
            stopped.elapsed() < std::time::Duration::from_secs(3),
            "round {round}: the call took {:?} to end",
            stopped.elapsed()
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let running = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
                .any(|cmdline| cmdline == format!("{}\0", marker.replace(' ', "\0")).as_bytes())
        };
        while running() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(!running(), "round {round}: `{marker}` outlived its call");
    }
}

async fn default_mode_commands_run_read_only_without_a_question() {
    let Some(env) = session("sbx-default", |_| {}) else {
        return;
    };
    let config_before = git_config(&env);
    let results = bash(
        &env,
        &[
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch pwned1' git status",
            "GIT_EXTERNAL_DIFF='touch pwned2' git diff HEAD~0",
            "x='a[$(touch pwned3)]'; echo $((x))",
            "x='$(touch pwned4)'; echo ${x@P}",
            "touch pwned5",
            "echo pwned > README.md",
            "git config core.fsmonitor 'touch pwned6'",
            "mkdir .claude && echo {} > .claude/settings.json",
            "cat README.md",
        ],
    )
    .await;
    // Everything ran (no question: the kernel decides), and nothing was written.
    for (outcome, text) in &results {
        assert_ne!(*outcome, Outcome::PermissionDenied, "{text}");
    }
    nothing_planted(
        &env,
        &[
            "pwned1", "pwned2", "pwned3", "pwned4", "pwned5", "pwned6", ".claude",
        ],
    );
    assert_eq!(env.read("README.md"), "hello\n");
    assert_eq!(git_config(&env), config_before);
    assert_eq!(results[8].1, "hello");
    // The refusal is explained, with the way out.
    let (_, touch) = &results[4];
    assert!(touch.contains("read-only sandbox"), "{touch}");
    assert!(touch.contains("dangerouslyDisableSandbox"), "{touch}");
}

async fn read_deny_rules_and_the_outside_world_are_hidden_from_commands() {
    let Some(env) = session("sbx-hidden", |config| {
        config.permissions.deny = vec!["Read(./secrets/**)".into()];
    }) else {
        return;
    };
    let outside = env.root.path().join("outside");
    std::os::unix::fs::symlink(&outside, env.ws().join("link")).unwrap();
    let outside_text = outside.display().to_string();
    let commands = [
        "cat secrets/key".to_owned(),
        "grep -r sk-live .".to_owned(),
        "head secrets/*".to_owned(),
        format!("cat {outside_text}/secret.txt"),
        format!("cat {{{outside_text}/secret.txt,}}"),
        "cd ~+/.. && cat outside/secret.txt".to_owned(),
        "CDPATH=.. cd outside && cat secret.txt".to_owned(),
        "grep -R OUTSIDE link/".to_owned(),
        "cat link/secret.txt".to_owned(),
        "echo secrets/key > list && file -f list".to_owned(),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    for (outcome, text) in bash(&env, &commands).await {
        assert_ne!(outcome, Outcome::PermissionDenied, "{text}");
        assert!(
            !text.contains("sk-live-SECRET"),
            "a denied file leaked: {text}"
        );
        assert!(
            !text.contains("OUTSIDE-SECRET"),
            "an outside file leaked: {text}"
        );
    }
}

async fn accept_edits_writes_stay_in_the_workspace_and_off_protected_paths() {
    let Some(env) = session("sbx-accept", |config| {
        config.permissions.default_mode = PermissionMode::AcceptEdits;
        config.permissions.allow = vec!["Bash(echo:*)".into()];
    }) else {
        return;
    };
    let outside = env.root.path().join("outside");
    let outside_text = outside.display().to_string();
    let config_before = git_config(&env);
    let commands = [
        format!("cd {{{outside_text},}} && echo x > planted"),
        format!("echo x > {outside_text}/planted"),
        "mkdir -p .agent && cd .age''nt && echo '{\"hooks\":{}}' > settings.json".to_owned(),
        "echo '{}' > .mcp.json".to_owned(),
        "printf '[core]\\n\\tfsmonitor = touch pwned\\n' >> .git/config".to_owned(),
        "echo 'touch pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit".to_owned(),
        "git config core.hooksPath /tmp".to_owned(),
        "echo built > src/build.txt".to_owned(),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let results = bash(&env, &commands).await;
    for (outcome, text) in &results {
        assert_ne!(*outcome, Outcome::PermissionDenied, "{text}");
    }
    assert!(!outside.join("planted").exists());
    assert!(!env.ws().join("planted").exists() || env.read("planted") == "x\n");
    assert!(!env.ws().join(".agent").exists(), "{results:?}");
    assert!(!env.ws().join(".mcp.json").exists());
    assert!(!env.ws().join(".git/hooks/pre-commit").exists());
    assert_eq!(git_config(&env), config_before);
    // The workspace itself is writable.
    assert_eq!(env.read("src/build.txt"), "built\n");
    // Write and Edit refuse the same protected paths.
    for path in [
        ".git/config",
        ".git/hooks/post-checkout",
        ".claude/settings.json",
        ".mcp.json",
    ] {
        let (completed, _) = env
            .run(vec![("Write", json!({"file_path": path, "content": "x"}))])
            .await;
        assert_eq!(completed[0].outcome, Outcome::PermissionDenied, "{path}");
        assert!(
            result_text(&completed[0]).contains("is protected"),
            "{path}"
        );
    }
    assert_eq!(git_config(&env), config_before);
}

async fn deny_rules_in_bypass_mode_see_computed_names_and_leaving_the_sandbox_is_refused_headless()
{
    let Some(env) = session("sbx-bypass", |config| {
        config.permissions.default_mode = PermissionMode::BypassPermissions;
        config.permissions.deny = vec!["Bash(rm:*)".into()];
    }) else {
        return;
    };
    let results = bash(
        &env,
        &[
            "$'\\x72m' README.md",
            "{rm,README.md}",
            "$(echo rm) README.md",
            "x=rm; $x README.md",
            "echo 'rm README.md' | sh",
        ],
    )
    .await;
    for (outcome, text) in &results {
        assert_eq!(*outcome, Outcome::PermissionDenied, "{text}");
    }
    assert_eq!(env.read("README.md"), "hello\n");
    let (completed, _) = env
        .run(vec![(
            "Bash",
            json!({"command": "touch outside-sandbox", "dangerouslyDisableSandbox": true}),
        )])
        .await;
    assert_eq!(completed[0].outcome, Outcome::PermissionDenied);
    assert!(result_text(&completed[0]).contains("outside the sandbox"));
    assert!(!env.ws().join("outside-sandbox").exists());
}

async fn the_cwd_file_cannot_be_steered() {
    for sandboxed in [true, false] {
        let Some(env) = session("sbx-cwd", |config| {
            config.permissions.default_mode = PermissionMode::BypassPermissions;
            if !sandboxed {
                config.sandbox = tools::SandboxConfig {
                    backend: None,
                    network: false,
                    user_commands: false,
                    helper: None,
                };
            }
        }) else {
            return;
        };
        let victim = env.root.path().join("victim.txt");
        std::fs::write(&victim, "precious\n").unwrap();
        let command = format!(
            "export __AGENT_CWD_FILE={0}; __agent_cwd_file={0}; cd sub 2>/dev/null; true",
            victim.display()
        );
        let results = bash(&env, &[&command]).await;
        assert_eq!(results[0].0, Outcome::Success, "{results:?}");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious\n",
            "sandboxed: {sandboxed}"
        );
        // Tracking still works.
        std::fs::create_dir_all(env.ws().join("sub")).unwrap();
        let results = bash(&env, &["cd sub", "pwd"]).await;
        assert!(
            Path::new(results[1].1.trim()).ends_with("ws/sub"),
            "{results:?}"
        );
    }
}

async fn credentials_do_not_reach_commands() {
    let Some(env) = session("sbx-env", |config| {
        config.env = vec![("ANTHROPIC_API_KEY".into(), "sk-ant-leak".into())];
    }) else {
        return;
    };
    let results = bash(&env, &["echo key=$ANTHROPIC_API_KEY"]).await;
    assert_eq!(results[0].1, "key=");
}

/// Approves every question, as a user saying yes would.
struct Yes;

impl tools::Prompter for Yes {
    fn ask<'a>(&'a self, _: tools::PermissionRequest<'a>) -> executor::PermissionFuture<'a> {
        Box::pin(async { executor::PermissionDecision::allow() })
    }
}

/// Answers questions from a script (`y`, `n`, `a` for always), recording each question's
/// reason and what "always" offered.
struct Scripted {
    answers: Mutex<Vec<char>>,
    asked: Mutex<Vec<(String, Option<String>)>>,
}

impl Scripted {
    fn new(answers: &str) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            answers: Mutex::new(answers.chars().rev().collect()),
            asked: Mutex::new(Vec::new()),
        })
    }
}

impl tools::Prompter for Scripted {
    fn ask<'a>(&'a self, request: tools::PermissionRequest<'a>) -> executor::PermissionFuture<'a> {
        self.asked.lock().unwrap().push((
            request.reason.to_owned(),
            request
                .always
                .as_ref()
                .map(|always| always.rule().to_owned()),
        ));
        let answer = self
            .answers
            .lock()
            .unwrap()
            .pop()
            .expect("a question too many");
        let decision = match answer {
            'y' => executor::PermissionDecision::allow(),
            'a' => {
                request.always.as_ref().expect("always offered").grant();
                executor::PermissionDecision::allow()
            }
            _ => executor::PermissionDecision::deny("not now"),
        };
        Box::pin(std::future::ready(decision))
    }
}

/// Escalation without the model: a command the read-only sandbox refused a workspace write is
/// put to the user, and run again with the workspace writable on yes; "always" allows its
/// prefix for the session (the next one runs writable unasked). A refused write that
/// workspace-write would refuse too (`.git`, outside the workspace) is not asked about, and
/// what a yes grants is workspace-write only: the protected paths stay closed.
async fn a_refused_workspace_write_is_asked_about_and_run_again_writable() {
    let prompter = Scripted::new("yna");
    let answers: std::sync::Arc<dyn tools::Prompter> = prompter.clone();
    let Some(env) = session("sbx-escalate", |config| config.prompter = Some(answers)) else {
        return;
    };
    let results = bash(
        &env,
        &[
            "echo one > src/one.txt",
            "echo two > src/two.txt",
            "echo x > .git/evil; echo y > ../outside/evil",
            "cp README.md src/t1",
            "cp README.md src/t2; cp README.md .git/evil2",
        ],
    )
    .await;
    assert_eq!(env.read("src/one.txt"), "one\n");
    assert!(
        results[0]
            .1
            .contains("ran again with the workspace writable"),
        "{results:?}"
    );
    assert!(!env.ws().join("src/two.txt").exists());
    assert!(results[1].1.contains("declined: not now"), "{results:?}");
    // Nothing workspace-write allows: not asked, nothing written.
    assert!(!env.ws().join(".git/evil").exists());
    assert!(!env.root.path().join("outside/evil").exists());
    assert!(env.ws().join("src/t1").exists());
    // Allowed for the session by "always": run writable at once, and still not `.git`.
    assert!(env.ws().join("src/t2").exists(), "{results:?}");
    assert!(!env.ws().join(".git/evil2").exists());
    let asked = prompter.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert!(
        asked[0].0.contains("needs to write the workspace"),
        "{asked:?}"
    );
    assert_eq!(asked[2].1.as_deref(), Some("Bash(cp:*)"), "{asked:?}");
    assert_eq!(env.set.gate().session_rules(), ["Bash(cp:*)"]);

    // Headless: the refusal, with the reason; nothing asked, nothing written.
    let Some(headless) = session("sbx-escalate-headless", |_| {}) else {
        return;
    };
    let results = bash(&headless, &["echo h > src/h.txt"]).await;
    assert!(!headless.ws().join("src/h.txt").exists());
    assert!(results[0].1.contains("read-only sandbox"), "{results:?}");
}

async fn earlier_sandboxed_commands_cannot_steer_a_later_approved_unsandboxed_one() {
    let Some(env) = session("sbx-steer", |config| {
        config.permissions.default_mode = PermissionMode::BypassPermissions;
        config.prompter = Some(std::sync::Arc::new(Yes));
    }) else {
        return;
    };
    let victim = env.root.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let outside = env.root.path().join("outside");
    // Sandboxed: plant links and FIFOs where cwd files could be, and swap the remembered
    // directory for a link out of the workspace.
    let plant = format!(
        "for i in $(seq 0 64); do ln -s {victim} \"$TMPDIR/.cwd-$i\"; mkfifo \"$TMPDIR/.cwd-$i-fifo\"; done; ls \"$TMPDIR\" | wc -l",
        victim = victim.display()
    );
    let results = bash(&env, &[&plant, "mkdir src/sub && cd src/sub"]).await;
    assert_eq!(results[1].0, Outcome::Success, "{results:?}");
    let swap = format!(
        "cd .. && mv sub s2 && ln -s {} sub && exec true",
        outside.display()
    );
    let results = bash(&env, &[&swap]).await;
    assert_eq!(results[0].0, Outcome::Success, "{results:?}");
    // Approved to run outside the sandbox: it must neither write through a planted link,
    // nor hang on a FIFO, nor start in the folder the link leads to.
    let started = std::time::Instant::now();
    let (completed, _) = env
        .run(vec![(
            "Bash",
            json!({"command": "pwd -P", "dangerouslyDisableSandbox": true}),
        )])
        .await;
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(completed[0].outcome, Outcome::Success);
    let pwd = result_text(&completed[0]).to_owned();
    assert!(!pwd.contains("outside"), "ran in the linked folder: {pwd}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
}

/// Without a sandbox, the same attacks are asked, so refused headless: nothing runs.
async fn without_a_sandbox_the_attacks_are_asked() {
    let Some(env) = session("sbx-none", |_| {}) else {
        return;
    };
    let config_before = git_config(&env);
    let results = bash(
        &env,
        &[
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch pwned1' git status",
            "x='a[$(touch pwned3)]'; echo $((x))",
            "touch pwned5",
            "cat secrets/key",
        ],
    )
    .await;
    for (outcome, text) in &results {
        assert_eq!(*outcome, Outcome::PermissionDenied, "{text}");
        assert!(text.contains("no sandbox is available"), "{text}");
        assert!(!text.contains("sk-live-SECRET"), "{text}");
    }
    nothing_planted(&env, &["pwned1", "pwned3", "pwned5"]);
    assert_eq!(git_config(&env), config_before);
}

/// The sandbox the tests of this run use; `None` skips them.
static CURRENT: Mutex<Option<tools::SandboxConfig>> = Mutex::new(None);

type Test = fn() -> Pin<Box<dyn Future<Output = ()>>>;

const SANDBOXED: [(&str, Test); 10] = [
    (
        "processes_outliving_a_command_cannot_create_protected_paths",
        || Box::pin(processes_outliving_a_command_cannot_create_protected_paths()),
    ),
    ("a_command_stopped_at_once_leaves_nothing_running", || {
        Box::pin(a_command_stopped_at_once_leaves_nothing_running())
    }),
    (
        "a_refused_workspace_write_is_asked_about_and_run_again_writable",
        || Box::pin(a_refused_workspace_write_is_asked_about_and_run_again_writable()),
    ),
    (
        "default_mode_commands_run_read_only_without_a_question",
        || Box::pin(default_mode_commands_run_read_only_without_a_question()),
    ),
    (
        "read_deny_rules_and_the_outside_world_are_hidden_from_commands",
        || Box::pin(read_deny_rules_and_the_outside_world_are_hidden_from_commands()),
    ),
    (
        "accept_edits_writes_stay_in_the_workspace_and_off_protected_paths",
        || Box::pin(accept_edits_writes_stay_in_the_workspace_and_off_protected_paths()),
    ),
    (
        "deny_rules_in_bypass_mode_see_computed_names_and_leaving_the_sandbox_is_refused_headless",
        || {
            Box::pin(deny_rules_in_bypass_mode_see_computed_names_and_leaving_the_sandbox_is_refused_headless())
        },
    ),
    ("the_cwd_file_cannot_be_steered", || {
        Box::pin(the_cwd_file_cannot_be_steered())
    }),
    ("credentials_do_not_reach_commands", || {
        Box::pin(credentials_do_not_reach_commands())
    }),
    (
        "earlier_sandboxed_commands_cannot_steer_a_later_approved_unsandboxed_one",
        || Box::pin(earlier_sandboxed_commands_cannot_steer_a_later_approved_unsandboxed_one()),
    ),
];

/// The back ends that work here, by name; a missing one fails in CI.
fn backends() -> Vec<(&'static str, tools::SandboxConfig)> {
    use tools::sandbox::Backend;
    let in_ci = std::env::var("CI").is_ok_and(|ci| ci == "true");
    let mut found = Vec::new();
    let config = |backend| tools::SandboxConfig {
        backend: Some(backend),
        network: false,
        user_commands: false,
        helper: None,
    };
    match Backend::detect(None) {
        backend @ Backend::Bubblewrap(_) => found.push(("bwrap", config(backend))),
        other if in_ci => panic!("CI needs bubblewrap: {other}"),
        other => eprintln!("NOTE: bubblewrap runs skipped: {other}"),
    }
    let me = std::env::current_exe().unwrap();
    let probe = Command::new(&me)
        .args([tools::sandbox::HELPER_ARG, "probe"])
        .output()
        .unwrap();
    if probe.status.success() {
        found.push(("landlock", config(Backend::Landlock(me))));
    } else if in_ci {
        panic!(
            "CI needs Landlock: {}",
            String::from_utf8_lossy(&probe.stderr)
        );
    } else {
        eprintln!(
            "NOTE: Landlock runs skipped: {}",
            String::from_utf8_lossy(&probe.stderr)
        );
    }
    found
}

fn main() -> ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == tools::sandbox::HELPER_ARG)
    {
        tools::sandbox::helper_main();
    }
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut runs: Vec<(&str, tools::SandboxConfig, &str, Test)> = Vec::new();
    for (backend, config) in backends() {
        for (name, test) in SANDBOXED {
            runs.push((backend, config.clone(), name, test));
        }
    }
    let none = tools::SandboxConfig {
        backend: Some(tools::sandbox::Backend::Unavailable("test".into())),
        network: false,
        user_commands: false,
        helper: None,
    };
    runs.push((
        "none",
        none,
        "without_a_sandbox_the_attacks_are_asked",
        || Box::pin(without_a_sandbox_the_attacks_are_asked()),
    ));
    let mut failed = Vec::new();
    let mut passed = 0;
    for (backend, config, name, test) in runs {
        if filter
            .as_deref()
            .is_some_and(|filter| !name.contains(filter))
        {
            continue;
        }
        *CURRENT.lock().unwrap() = Some(config);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(test());
        }));
        match outcome {
            Ok(()) => {
                passed += 1;
                println!("test {name} [{backend}] ... ok");
            }
            Err(_) => {
                println!("test {name} [{backend}] ... FAILED");
                failed.push(format!("{name} [{backend}]"));
            }
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("failures: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}
