//! Checkpoints and rewind from the command line: three turns change three files, then
//! `agent rewind` takes the code back, the conversation back, undoes a rewind, refuses to
//! overwrite a file the user changed without `--force`, and a resumed session sends the
//! rewound history.
// Tests may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Output;

use common::{Repo, repo, run as agent};
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

const ID: &str = "5a1e2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b";

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn read(repo: &Repo, name: &str) -> Option<String> {
    std::fs::read_to_string(repo.dir.join(name)).ok()
}

/// The user texts of a request's messages, in order (tool results and reminders left out).
fn prompts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str().map(str::to_owned))
        .filter(|text| text.starts_with("turn "))
        .collect()
}

/// A headless code rewind of session [`ID`] to `turn` is refused, naming `file` (changed
/// since) and `--force`.
async fn refused_without_force(repo: &Repo, server: &Server, turn: &str, file: &str) {
    let output = agent(
        repo,
        server,
        &["rewind", "--session", ID, "--turn", turn, "--code"],
    )
    .await;
    assert_ne!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(file) && stderr.contains("--force"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_rewind_round_trip_over_three_turns() {
    let repo = repo("rewind");
    let write = |id: &str, path: &str, content: &str| {
        Turn::new().tool_use(id, "Write", json!({"file_path": path, "content": content}))
    };
    let server = Server::start_tls(Script::new(vec![
        // Turn 1: a.txt is created.
        Reply::turn(write("toolu_1", "a.txt", "a1\n")),
        Reply::turn(Turn::new().text("Made a.")),
        // Turn 2: b.txt is created.
        Reply::turn(write("toolu_2", "b.txt", "b1\n")),
        Reply::turn(Turn::new().text("Made b.")),
        // Turn 3: a.txt is read and rewritten, c.txt created.
        Reply::turn(Turn::new().tool_use("toolu_3r", "Read", json!({"file_path": "a.txt"}))),
        Reply::turn(write("toolu_3a", "a.txt", "a3\n").tool_use(
            "toolu_3c",
            "Write",
            json!({"file_path": "c.txt", "content": "c3\n"}),
        )),
        Reply::turn(Turn::new().text("Changed a, made c.")),
        // After the conversation rewind: the next request.
        Reply::turn(Turn::new().text("Back at turn one.")),
        // After the undo of that rewind.
        Reply::turn(Turn::new().text("Back at turn three.")),
    ]))
    .await
    .unwrap();
    let run = |prompt: &'static str, first: bool| {
        let mut args = vec!["-p", prompt, "--permission-mode", "acceptEdits"];
        if first {
            args.extend(["--session-id", ID]);
        } else {
            args.extend(["--resume", ID]);
        }
        args
    };
    ok(&agent(&repo, &server, &run("turn 1: make a", true)).await);
    ok(&agent(&repo, &server, &run("turn 2: make b", false)).await);
    ok(&agent(&repo, &server, &run("turn 3: change a, make c", false)).await);
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("a3\n"));
    assert_eq!(read(&repo, "c.txt").as_deref(), Some("c3\n"));

    // The list names each turn, its prompt and its files.
    let list = ok(&agent(&repo, &server, &["rewind", "--session", ID]).await);
    assert!(
        list.contains("turn 1: make a") && list.contains("a.txt (new)"),
        "{list}"
    );
    assert!(
        list.contains("turn 3: change a, make c") && list.contains("c.txt (new)"),
        "{list}"
    );
    assert!(
        list.contains(
            "Files .gitignore ignores, symbolic links and files over 10 MiB are not saved"
        ),
        "{list}"
    );

    // Code only, to the end of turn 1: b and c gone, a as turn 1 left it.
    let report = ok(&agent(
        &repo,
        &server,
        &["rewind", "--session", ID, "--turn", "1", "--code"],
    )
    .await);
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("a1\n"), "{report}");
    assert_eq!(read(&repo, "b.txt"), None, "{report}");
    assert_eq!(read(&repo, "c.txt"), None, "{report}");
    assert!(
        report.contains("restored a.txt") && report.contains("removed b.txt"),
        "{report}"
    );

    // Conversation only, to the end of turn 1: files untouched.
    let report = ok(&agent(
        &repo,
        &server,
        &["rewind", "--session", ID, "--turn", "1", "--conversation"],
    )
    .await);
    assert!(
        report.contains("conversation rewound (4 messages)"),
        "{report}"
    );
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("a1\n"));
    // Redo: undoing that rewind brings the conversation back to turn 3's end (and only the
    // conversation: what the undone rewind restored).
    let report = ok(&agent(&repo, &server, &["rewind", "--session", ID, "--undo"]).await);
    assert!(
        report.contains("conversation rewound (14 messages)"),
        "{report}"
    );
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("a1\n"));
    let requests_before = server.requests().len();
    ok(&agent(&repo, &server, &run("turn 4: where are we", false)).await);
    let sent = server.requests()[requests_before].json();
    assert_eq!(
        prompts(&sent),
        [
            "turn 1: make a",
            "turn 2: make b",
            "turn 3: change a, make c",
            "turn 4: where are we"
        ],
        "{sent}"
    );

    // The conversation back at turn 1 again; the resumed session sends the rewound history.
    ok(&agent(
        &repo,
        &server,
        &["rewind", "--session", ID, "--turn", "1", "--conversation"],
    )
    .await);
    ok(&agent(&repo, &server, &run("turn 5: and now", false)).await);
    let sent = server.requests().last().unwrap().json();
    assert_eq!(
        prompts(&sent),
        ["turn 1: make a", "turn 5: and now"],
        "{sent}"
    );
    assert!(sent["messages"].to_string().contains("Made a."), "{sent}");
    assert!(!sent["messages"].to_string().contains("Made b."), "{sent}");
    // Undoing that rewind now would drop turn 5: refused.
    let output = agent(&repo, &server, &["rewind", "--session", ID, "--undo"]).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("turn 5 began after the last rewind"),
        "{stderr}"
    );

    // Redo the code: back to the end of turn 3 (the point where the code rewind began).
    let report = ok(&agent(
        &repo,
        &server,
        &["rewind", "--session", ID, "--turn", "3", "--code"],
    )
    .await);
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("a3\n"), "{report}");
    assert_eq!(read(&repo, "b.txt").as_deref(), Some("b1\n"), "{report}");
    assert_eq!(read(&repo, "c.txt").as_deref(), Some("c3\n"), "{report}");

    // The user changes a file: a headless rewind refuses without --force, changing nothing.
    std::fs::write(repo.dir.join("c.txt"), "mine\n").unwrap();
    refused_without_force(&repo, &server, "2", "c.txt").await;
    assert_eq!(read(&repo, "c.txt").as_deref(), Some("mine\n"));
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("a3\n"));
    let report = ok(&agent(
        &repo,
        &server,
        &[
            "rewind",
            "--session",
            ID,
            "--turn",
            "2",
            "--code",
            "--force",
        ],
    )
    .await);
    assert_eq!(read(&repo, "c.txt"), None, "{report}");
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("a1\n"), "{report}");
    assert_eq!(read(&repo, "b.txt").as_deref(), Some("b1\n"), "{report}");
    // Even the user's version is kept: undoing this rewind brings it back.
    ok(&agent(&repo, &server, &["rewind", "--session", ID, "--undo"]).await);
    assert_eq!(read(&repo, "c.txt").as_deref(), Some("mine\n"));
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("a3\n"));

    // Contents are stored once each, by digest, readable by the user only.
    let sessions = repo.home.join("data/agent/projects");
    let project = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let objects = project.join(ID).join("checkpoints");
    let names: Vec<String> = std::fs::read_dir(&objects)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|name| name.len() == 64), "{names:?}");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&objects).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }
    // `agent sessions` counts the turns begun, not the prompts written again by rewinds.
    let list: Vec<Value> =
        serde_json::from_str(&ok(&agent(&repo, &server, &["sessions", "--json"]).await)).unwrap();
    assert_eq!(list[0]["turns"], 5, "{list:?}");
}

/// An unknown session, an id that is a path, and a turn that does not exist are refused
/// with the reason.
#[tokio::test]
async fn bad_rewinds_are_refused_with_the_reason() {
    let repo = repo("rewind-bad");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    ok(&agent(&repo, &server, &["-p", "turn 1", "--session-id", ID]).await);
    for (args, expected) in [
        (vec!["rewind", "--session", "../x"], "not a session id"),
        (
            vec![
                "rewind",
                "--session",
                "6a1e2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b",
            ],
            "no such session",
        ),
        (vec!["rewind", "--session", ID, "--turn", "7"], "no turn 7"),
        (
            vec!["rewind", "--session", ID, "--undo"],
            "no rewind to undo",
        ),
    ] {
        let output = agent(&repo, &server, &args).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    // `--resume` without an id and without a terminal lists the sessions.
    let output = agent(&repo, &server, &["--resume"]).await;
    let stdout = ok(&output);
    assert!(stdout.contains(ID) && stdout.contains("turn 1"), "{stdout}");
}

/// A headless run takes workspace snapshots only when Claude Code's variable asks for it
/// (as its `-p` and Agent SDK do): without it a turn that runs a command makes no shadow
/// store; with it the same turn does. Write's own changes stay rewindable either way.
#[tokio::test]
async fn headless_runs_snapshot_the_workspace_only_when_asked() {
    let stores = |repo: &Repo| -> usize {
        std::fs::read_dir(repo.home.join("data/agent/projects"))
            .map(|projects| {
                projects
                    .flatten()
                    .filter(|project| project.path().join("shadow/HEAD").exists())
                    .count()
            })
            .unwrap_or_default()
    };
    for (asked, expected) in [(None, 0), (Some("true"), 1), (Some("0"), 0)] {
        let repo = repo("rewind-headless");
        let server = Server::start_tls(Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_w",
                "Write",
                json!({"file_path": repo.dir.join("new.txt"), "content": "new\n"}),
            )),
            Reply::turn(Turn::new().text("Done.")),
        ]))
        .await
        .unwrap();
        let mut command = common::command(&repo, &server);
        command.args(["-p", "write it", "--permission-mode", "acceptEdits"]);
        command.args(["--session-id", ID]);
        match asked {
            Some(value) => command.env(session::snapshots::CHECKPOINTING_VARIABLE, value),
            None => command.env_remove(session::snapshots::CHECKPOINTING_VARIABLE),
        };
        ok(&command.output().await.unwrap());
        assert_eq!(read(&repo, "new.txt").as_deref(), Some("new\n"));
        assert_eq!(stores(&repo), expected, "{asked:?}");
        // Write's change is rewindable with or without snapshots.
        let rewind = ["rewind", "--session", ID, "--turn", "0", "--code"];
        ok(&agent(&repo, &server, &rewind).await);
        assert_eq!(read(&repo, "new.txt"), None, "{asked:?}");
    }
}

/// Every file of `dir` (recursively) but `skip`, with its bytes.
fn tree(dir: &std::path::Path, skip: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            let name = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if name == skip {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// What a command deleted, created and renamed (`git mv`), and what an MCP server changed,
/// is rewound as Write's changes are: the workspace is snapshotted around the turn. An
/// ignored folder is not kept (and not touched), the user's `.git` is never written by the
/// snapshots, a file the user changed since is asked about, and undo brings it all back.
#[tokio::test]
async fn what_commands_and_mcp_servers_changed_is_rewound_too() {
    let Some(kit) = common::testkit_binary("the commands' rewind test") else {
        return;
    };
    let repo = repo("rewind-commands");
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&repo.dir)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
    };
    std::fs::write(repo.dir.join("old.txt"), "old\n").unwrap();
    std::fs::write(repo.dir.join("data.txt"), "data\n").unwrap();
    std::fs::write(repo.dir.join(".gitignore"), "node_modules/\n").unwrap();
    std::fs::create_dir_all(repo.dir.join("node_modules")).unwrap();
    std::fs::write(repo.dir.join("node_modules/dep.js"), "dep\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-qm", "more"]);
    let config = repo.home.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"kit": {"command": kit, "args": ["mcp-server"]}}}).to_string(),
    )
    .unwrap();
    let command = "rm notes.txt && printf 'gen\\n' > generated.txt && git mv old.txt new.txt && printf 'x\\n' > node_modules/dep.js && head -c 11000000 /dev/zero > big.bin";
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use("toolu_b", "Bash", json!({"command": command}))
                .tool_use(
                    "toolu_m",
                    "mcp__kit__write",
                    json!({"path": repo.dir.join("data.txt"), "text": "by mcp\n"}),
                ),
        ),
        Reply::turn(Turn::new().text("Tidied.")),
        Reply::turn(Turn::new().text("Nothing to do.")),
    ]))
    .await
    .unwrap();
    let git_before = tree(&repo.dir.join(".git"), "index");
    let run = |prompt: &'static str, first: bool| {
        let mut args = vec![
            "-p",
            prompt,
            "--allowedTools",
            "Bash",
            "mcp__kit__write",
            "--mcp-config",
            config.to_str().unwrap(),
            // `git mv` writes `.git/index`, which the sandbox keeps read-only.
            "--sandbox",
            "off",
        ];
        args.extend(if first {
            ["--session-id", ID]
        } else {
            ["--resume", ID]
        });
        args
    };
    let launch = |args: Vec<&str>| {
        let mut command = common::command(&repo, &server);
        // Headless runs snapshot the workspace only when asked (Claude Code's variable).
        command
            .env("MCP_STARTUP_WAIT_MS", "10000")
            .env(session::snapshots::CHECKPOINTING_VARIABLE, "true")
            .args(args);
        command
    };
    ok(&launch(run("turn 1: tidy up", true)).output().await.unwrap());
    ok(&launch(run("turn 2: anything else", false))
        .output()
        .await
        .unwrap());
    assert_eq!(read(&repo, "notes.txt"), None);
    assert_eq!(read(&repo, "old.txt"), None);
    assert_eq!(read(&repo, "new.txt").as_deref(), Some("old\n"));
    assert_eq!(read(&repo, "generated.txt").as_deref(), Some("gen\n"));
    assert_eq!(read(&repo, "data.txt").as_deref(), Some("by mcp\n"));
    // The snapshots never wrote the user's repository (git mv changed only its index).
    assert_eq!(tree(&repo.dir.join(".git"), "index"), git_before);

    // The list names what the command and the server changed in turn 1, nothing ignored.
    let list = ok(&agent(&repo, &server, &["rewind", "--session", ID]).await);
    let turn_1 = list
        .lines()
        .find(|line| line.contains("turn 1: tidy up"))
        .unwrap();
    for name in [
        "notes.txt",
        "generated.txt (new)",
        "new.txt (new)",
        "old.txt",
        "data.txt",
    ] {
        assert!(turn_1.contains(name), "{name}: {list}");
    }
    assert!(!list.contains("node_modules"), "{list}");
    assert!(
        turn_1.contains("big.bin (over 10 MiB: not saved)"),
        "{list}"
    );
    let turn_2 = list.lines().find(|line| line.contains("turn 2:")).unwrap();
    assert!(turn_2.contains("no file changes"), "{list}");

    // Back to before turn 1: everything as it was, the ignored folder left alone.
    let report = ok(&agent(
        &repo,
        &server,
        &["rewind", "--session", ID, "--turn", "0", "--code"],
    )
    .await);
    assert_eq!(
        read(&repo, "notes.txt").as_deref(),
        Some("remember the milk\n"),
        "{report}"
    );
    assert_eq!(read(&repo, "old.txt").as_deref(), Some("old\n"), "{report}");
    assert_eq!(read(&repo, "new.txt"), None, "{report}");
    assert_eq!(read(&repo, "generated.txt"), None, "{report}");
    assert_eq!(
        read(&repo, "data.txt").as_deref(),
        Some("data\n"),
        "{report}"
    );
    assert_eq!(read(&repo, "node_modules/dep.js").as_deref(), Some("x\n"));
    // A file not kept is left as it is, never removed.
    assert_eq!(
        std::fs::metadata(repo.dir.join("big.bin")).unwrap().len(),
        11_000_000
    );

    // Undo: the rewound state comes back.
    ok(&agent(&repo, &server, &["rewind", "--session", ID, "--undo"]).await);
    assert_eq!(read(&repo, "notes.txt"), None);
    assert_eq!(read(&repo, "new.txt").as_deref(), Some("old\n"));
    assert_eq!(read(&repo, "data.txt").as_deref(), Some("by mcp\n"));

    // A file the user changed since is asked about: refused headless, --force overwrites.
    std::fs::write(repo.dir.join("generated.txt"), "mine\n").unwrap();
    refused_without_force(&repo, &server, "0", "generated.txt").await;
    assert_eq!(read(&repo, "notes.txt"), None, "nothing was rewound");
    ok(&agent(
        &repo,
        &server,
        &[
            "rewind",
            "--session",
            ID,
            "--turn",
            "0",
            "--code",
            "--force",
        ],
    )
    .await);
    assert_eq!(read(&repo, "generated.txt"), None);
    assert_eq!(
        read(&repo, "notes.txt").as_deref(),
        Some("remember the milk\n")
    );
}

/// Attack: the agent is killed (SIGKILL) at points spread over a turn whose Write replaces a
/// file that has a second name: whenever it dies, the file holds the old content or the
/// new, whole, and both names are still one file (Write copies in place, by a process that
/// outlives the agent, when a rename would split the link).
#[tokio::test]
async fn a_killed_write_leaves_the_old_or_the_new_file_and_keeps_its_links() {
    use std::os::unix::fs::MetadataExt as _;
    let repo = repo("rewind-kill-write");
    let old: String = (0..1000)
        .map(|n| format!("{n:05} {}\n", "o".repeat(93)))
        .collect();
    let new: String = (0..1000)
        .map(|n| format!("{n:05} {}\n", "n".repeat(93)))
        .collect();
    let turns = || {
        vec![
            Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "big.txt"}))),
            Reply::turn(Turn::new().tool_use(
                "toolu_w",
                "Write",
                json!({"file_path": "big.txt", "content": new}),
            )),
            Reply::turn(Turn::new().text("Rewrote it.")),
        ]
    };
    let reset = || {
        let _ = std::fs::remove_file(repo.dir.join("alias.txt"));
        std::fs::write(repo.dir.join("big.txt"), &old).unwrap();
        std::fs::hard_link(repo.dir.join("big.txt"), repo.dir.join("alias.txt")).unwrap();
    };
    // One whole run, for its length.
    reset();
    let server = Server::start_tls(Script::new(turns())).await.unwrap();
    let started = std::time::Instant::now();
    let args = ["-p", "rewrite big.txt", "--permission-mode", "acceptEdits"];
    ok(&agent(&repo, &server, &args).await);
    let whole = started.elapsed();
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("alias.txt")).unwrap(),
        new
    );
    let mut outcomes = (0, 0);
    for step in 0..24_u32 {
        reset();
        let server = Server::start_tls(Script::new(turns())).await.unwrap();
        let mut child = common::command(&repo, &server)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(whole * step / 20).await;
        let _ = child.start_kill();
        let _ = child.wait().await;
        // A copy the agent started finishes without it.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let content = std::fs::read_to_string(repo.dir.join("big.txt")).unwrap();
        let (big, alias) = (
            std::fs::metadata(repo.dir.join("big.txt")).unwrap(),
            std::fs::metadata(repo.dir.join("alias.txt")).unwrap(),
        );
        assert_eq!(big.ino(), alias.ino(), "step {step}: the link was split");
        if content == old {
            outcomes.0 += 1;
        } else {
            assert_eq!(content, new, "step {step}: a torn file");
            outcomes.1 += 1;
        }
    }
    // Killed both before and after the write.
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
}

/// As a normal user (run as `nobody` when the tests run as root; skipped otherwise): Write
/// keeps the owner of a file the user may write but does not own (root's, group-writable),
/// and the second name of the user's own file.
#[tokio::test]
async fn as_a_normal_user_write_keeps_owners_and_links() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let repo = repo("rewind-normal-user");
    if std::fs::metadata(&repo.dir).unwrap().uid() != 0 {
        eprintln!("NOTE: the normal-user test runs when the tests run as root (to become nobody)");
        return;
    }
    let Ok(setpriv) = which("setpriv") else {
        assert!(
            !std::env::var("CI").is_ok_and(|ci| ci == "true"),
            "CI needs setpriv (util-linux)"
        );
        eprintln!("NOTE: the normal-user test needs setpriv");
        return;
    };
    let (nobody, nogroup) = (65534, 65534);
    std::fs::write(repo.dir.join("shared.txt"), "root's\n").unwrap();
    std::fs::write(repo.dir.join("mine.txt"), "mine\n").unwrap();
    std::fs::hard_link(repo.dir.join("mine.txt"), repo.dir.join("mine-alias.txt")).unwrap();
    let base = repo.dir.parent().unwrap();
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(base)
        .status()
        .unwrap();
    assert!(chown.success());
    std::os::unix::fs::chown(repo.dir.join("shared.txt"), Some(0), Some(nogroup)).unwrap();
    std::fs::set_permissions(
        repo.dir.join("shared.txt"),
        std::fs::Permissions::from_mode(0o664),
    )
    .unwrap();
    // The binary where nobody may run it.
    let binary = base.join("agent");
    std::fs::copy(env!("CARGO_BIN_EXE_agent"), &binary).unwrap();
    let write = |id: &str, path: &str, content: &str| {
        Turn::new().tool_use(id, "Write", json!({"file_path": path, "content": content}))
    };
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use("toolu_r1", "Read", json!({"file_path": "shared.txt"}))
                .tool_use("toolu_r2", "Read", json!({"file_path": "mine.txt"})),
        ),
        Reply::turn(
            write("toolu_w1", "shared.txt", "changed by nobody\n").tool_use(
                "toolu_w2",
                "Write",
                json!({"file_path": "mine.txt", "content": "mine, changed\n"}),
            ),
        ),
        Reply::turn(Turn::new().text("Both written.")),
    ]))
    .await
    .unwrap();
    let mut command = tokio::process::Command::new(setpriv);
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&binary);
    common::Launch::new(&repo, &server).apply(&mut command);
    std::os::unix::fs::chown(repo.home.join("ca.pem"), Some(nobody), Some(nogroup)).unwrap();
    let output = command
        .args(["-p", "write both", "--permission-mode", "acceptEdits"])
        .output()
        .await
        .unwrap();
    ok(&output);
    let shared = std::fs::metadata(repo.dir.join("shared.txt")).unwrap();
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("shared.txt")).unwrap(),
        "changed by nobody\n"
    );
    assert_eq!(
        (shared.uid(), shared.gid()),
        (0, nogroup),
        "root's file stays root's"
    );
    assert_eq!(shared.permissions().mode() & 0o7777, 0o664);
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("mine-alias.txt")).unwrap(),
        "mine, changed\n",
        "still one file with two names"
    );
    let mine = std::fs::metadata(repo.dir.join("mine.txt")).unwrap();
    assert_eq!((mine.uid(), mine.nlink()), (nobody, 2));
}

/// The absolute path of `program` on `PATH`.
fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .ok_or(())
}
