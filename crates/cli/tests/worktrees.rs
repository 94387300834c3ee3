//! Worktree isolation end to end (Claude Code's `isolation: "worktree"`): the real `agent`
//! binary against testkit's scripted model, in a real git repository.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{repo, result_text};
use serde_json::json;
use testkit::{Reply, Script, Server, Turn};

/// `git args` in `dir`; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A subagent's turns: read `greet.py` where it works, change the greeting to `word`, report.
fn editing_subagent(word: &str) -> Vec<Reply> {
    vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "greet.py"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "greet.py", "old_string": "'helo'", "new_string": format!("'{word}'")}),
        )),
        // git in the worktree, in the sandbox: it reads the repository's git folder.
        Reply::turn(Turn::new().tool_use(
            &format!("toolu_git_{word}"),
            "Bash",
            json!({"command": "git status --short"}),
        )),
        Reply::turn(Turn::new().text(&format!("Changed the greeting to {word}."))),
    ]
}

/// Two subagents in worktrees edit the same file at the same time: two branches, each with
/// its own edit, the main checkout untouched and clean; a third that changes nothing leaves
/// no worktree and no branch behind.
#[tokio::test]
async fn parallel_worktree_subagents_edit_one_file_on_two_branches() {
    let repo = repo("wt-parallel");
    let task = |id: &str, prompt: &str| {
        (
            id.to_owned(),
            json!({"description": prompt, "prompt": prompt, "isolation": "worktree"}),
        )
    };
    let calls = [
        task("toolu_one", "ONE: say hello"),
        task("toolu_two", "TWO: say howdy"),
        task("toolu_idle", "IDLE: only look"),
    ];
    let main_file = repo.dir.join("notes.txt").to_string_lossy().into_owned();
    let mut turn = Turn::new();
    for (id, input) in &calls {
        turn = turn.tool_use(id, "Task", input.clone());
    }
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(turn),
            Reply::turn(Turn::new().text("Both done.")),
        ])
        .route("ONE:", editing_subagent("hello"))
        .route("TWO:", editing_subagent("howdy"))
        .route(
            "IDLE:",
            vec![
                Reply::turn(Turn::new().tool_use("toolu_l", "Bash", json!({"command": "ls"}))),
                // Out of its worktree: the main checkout is not its workspace; and the
                // worktree's own `.git` file stays protected.
                Reply::turn(
                    Turn::new()
                        .tool_use(
                            "toolu_main",
                            "Write",
                            json!({"file_path": main_file, "content": "x"}),
                        )
                        .tool_use(
                            "toolu_gitfile",
                            "Write",
                            json!({"file_path": ".git", "content": "gitdir: /tmp"}),
                        ),
                ),
                Reply::turn(Turn::new().text("Nothing to change.")),
            ],
        ),
    )
    .await
    .unwrap();
    let output = common::command(&repo, &server)
        .args([
            "-p",
            "split the work",
            "--trust",
            "--allowedTools",
            "Edit,Write,Bash(ls),Bash(git status:*)",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The main checkout: unchanged, and clean (the worktrees are excluded).
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("greet.py")).unwrap(),
        "def greet():\n    return 'helo'\n"
    );
    assert_eq!(git(&repo.dir, &["status", "--porcelain"]), "", "{stderr}");
    let exclude = std::fs::read_to_string(repo.dir.join(".git/info/exclude")).unwrap();
    assert!(
        exclude.lines().any(|line| line == "/.claude/worktrees/"),
        "{exclude}"
    );
    // Each editing agent's report names its worktree and branch; its file has its edit.
    let mut greetings = Vec::new();
    for id in ["toolu_one", "toolu_two"] {
        let report = result_text(&server, id);
        assert!(report.contains("The worktree is kept at "), "{report}");
        assert!(report.contains("with 1 uncommitted file(s)"), "{report}");
        let path = report
            .split("kept at ")
            .nth(1)
            .and_then(|rest| rest.split(" on branch ").next())
            .unwrap();
        let branch = report
            .split(" on branch ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap();
        let path = Path::new(path);
        assert!(
            path.starts_with(repo.dir.join(".claude/worktrees")),
            "{report}"
        );
        assert!(branch.starts_with("worktree-agent-a"), "{report}");
        assert_eq!(git(path, &["branch", "--show-current"]).trim(), branch);
        greetings.push(std::fs::read_to_string(path.join("greet.py")).unwrap());
    }
    for word in ["hello", "howdy"] {
        let status = result_text(&server, &format!("toolu_git_{word}"));
        assert!(status.contains(" M greet.py"), "{status}");
    }
    greetings.sort();
    assert_eq!(
        greetings,
        [
            "def greet():\n    return 'hello'\n",
            "def greet():\n    return 'howdy'\n"
        ]
    );
    let outside = result_text(&server, "toolu_main");
    assert!(outside.contains("outside"), "{outside}");
    let git_file = result_text(&server, "toolu_gitfile");
    assert!(git_file.contains("protected"), "{git_file}");
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "remember the milk\n"
    );
    // The idle agent's worktree and branch are gone.
    let idle = result_text(&server, "toolu_idle");
    assert!(idle.contains("had no changes and was removed"), "{idle}");
    let worktrees = git(&repo.dir, &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 3, "{worktrees}");
    let branches = git(&repo.dir, &["branch", "--list", "worktree-*"]);
    assert_eq!(branches.lines().count(), 2, "{branches}");
}

/// Bad input: a folder that is not a git repository, and a main checkout with uncommitted
/// changes, are each a clear tool error, and nothing is lost or made.
#[tokio::test]
async fn a_worktree_needs_a_repository_and_a_clean_checkout() {
    let task = json!({"description": "fix", "prompt": "SUB: fix it", "isolation": "worktree"});
    let script = || {
        Script::new(vec![
            Reply::turn(Turn::new().tool_use("toolu_t", "Task", task.clone())),
            Reply::turn(Turn::new().text("Could not.")),
        ])
        .route("SUB:", vec![Reply::turn(Turn::new().text("never"))])
    };
    // Uncommitted changes in the main checkout.
    let dirty = repo("wt-dirty");
    std::fs::write(
        dirty.dir.join("greet.py"),
        "def greet():\n    return 'mine'\n",
    )
    .unwrap();
    let server = Server::start_tls(script()).await.unwrap();
    let output = common::run(&dirty, &server, &["-p", "go", "--trust"]).await;
    assert!(output.status.success());
    let error = result_text(&server, "toolu_t");
    assert!(
        error.contains("the main checkout has uncommitted changes") && error.contains("greet.py"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(dirty.dir.join("greet.py")).unwrap(),
        "def greet():\n    return 'mine'\n"
    );
    assert!(!dirty.dir.join(".claude/worktrees").exists());
    // Not a repository.
    let plain = repo("wt-plain");
    std::fs::remove_dir_all(plain.dir.join(".git")).unwrap();
    let server = Server::start_tls(script()).await.unwrap();
    let output = common::run(&plain, &server, &["-p", "go", "--trust"]).await;
    assert!(output.status.success());
    let error = result_text(&server, "toolu_t");
    assert!(error.contains("is not in a git repository"), "{error}");
    assert!(!plain.dir.join(".claude").exists());
    // Not trusted: git would run what the repository's configuration names.
    let untrusted = repo("wt-untrusted");
    let server = Server::start_tls(script()).await.unwrap();
    let output = common::run(&untrusted, &server, &["-p", "go"]).await;
    assert!(output.status.success());
    let error = result_text(&server, "toolu_t");
    assert!(error.contains("only in a trusted folder"), "{error}");
}

/// Settings' WorktreeCreate and WorktreeRemove hooks make and remove the worktree instead of
/// git (a repository of another version control system): the agent works where the create
/// hook says, and a clean one is handed to the remove hook.
#[tokio::test]
async fn worktree_hooks_replace_git() {
    let repo = repo("wt-hooks");
    let made = repo.home.join("made-by-hook");
    let removed = repo.home.join("removed.json");
    let settings = json!({"hooks": {
        "WorktreeCreate": [{"hooks": [{"type": "command", "command": format!(
            "cat > /dev/null; git clone -q '{}' '{}' && echo '{}'",
            repo.dir.display(), made.display(), made.display()
        )}]}],
        "WorktreeRemove": [{"hooks": [{"type": "command", "command": format!(
            "cat > '{}'", removed.display()
        )}]}],
    }});
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    std::fs::write(repo.dir.join(".claude/settings.json"), settings.to_string()).unwrap();
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_t",
                "Task",
                json!({"description": "look", "prompt": "SUB: look", "isolation": "worktree"}),
            )),
            Reply::turn(Turn::new().text("Done.")),
        ])
        .route(
            "SUB:",
            vec![
                Reply::turn(Turn::new().tool_use("toolu_pwd", "Bash", json!({"command": "pwd"}))),
                Reply::turn(Turn::new().text("Looked.")),
            ],
        ),
    )
    .await
    .unwrap();
    let output = common::run(
        &repo,
        &server,
        &["-p", "go", "--trust", "--allowedTools", "Bash(pwd)"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let pwd = result_text(&server, "toolu_pwd");
    assert!(pwd.contains(&made.display().to_string()), "{pwd} {stderr}");
    let report = result_text(&server, "toolu_t");
    assert!(
        report.contains("had no changes and was removed"),
        "{report}"
    );
    let told: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&removed).unwrap()).unwrap();
    assert_eq!(told["hook_event_name"], "WorktreeRemove");
    assert_eq!(
        told["worktree_path"],
        made.canonicalize().unwrap().display().to_string()
    );
}

/// `--worktree NAME`: the whole session works in `.claude/worktrees/NAME` on branch
/// `worktree-NAME`; it is kept at the end because it has changes, the main checkout as it
/// was.
#[tokio::test]
async fn a_session_started_with_worktree_works_there_and_keeps_it() {
    let repo = repo("wt-flag");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use("toolu_pwd", "Bash", json!({"command": "pwd"}))
                .tool_use(
                    "toolu_w",
                    "Write",
                    json!({"file_path": "added.txt", "content": "new\n"}),
                ),
        ),
        Reply::turn(Turn::new().text("Added.")),
    ]))
    .await
    .unwrap();
    let output = common::run(
        &repo,
        &server,
        &[
            "-p",
            "add a file",
            "--trust",
            "--worktree",
            "feature",
            "--allowedTools",
            "Bash(pwd),Write",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let tree = repo.dir.join(".claude/worktrees/feature");
    assert!(result_text(&server, "toolu_pwd").contains(&tree.display().to_string()));
    assert_eq!(
        std::fs::read_to_string(tree.join("added.txt")).unwrap(),
        "new\n"
    );
    assert!(!repo.dir.join("added.txt").exists());
    assert_eq!(
        git(&tree, &["branch", "--show-current"]).trim(),
        "worktree-feature"
    );
    assert!(stderr.contains("working in the worktree"), "{stderr}");
    assert!(
        stderr.contains("The worktree is kept at") && stderr.contains("with 1 uncommitted file(s)"),
        "{stderr}"
    );
    // The model was told where it works.
    let first = server.requests()[0].json().to_string();
    assert!(
        first.contains("(a git worktree of the repository at"),
        "{first}"
    );
    // The same name again: a clear error, nothing changed.
    let again = common::run(
        &repo,
        &server,
        &["-p", "again", "--trust", "--worktree", "feature"],
    )
    .await;
    assert_eq!(
        again.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already"));
    assert_eq!(
        std::fs::read_to_string(tree.join("added.txt")).unwrap(),
        "new\n"
    );
}

/// EnterWorktree and ExitWorktree: the main agent moves into a worktree, edits there, is
/// refused a removal that would lose its edit, keeps it; a second worktree with nothing in
/// it is removed at the session's end; exiting when not in one is a clear error.
#[tokio::test]
async fn the_main_agent_enters_and_exits_worktrees() {
    let repo = repo("wt-enter");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_x0", "ExitWorktree", json!({"action": "keep"}))),
        Reply::turn(Turn::new().tool_use("toolu_in", "EnterWorktree", json!({"name": "fix"}))),
        Reply::turn(Turn::new().tool_use("toolu_twice", "EnterWorktree", json!({}))),
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "greet.py"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "greet.py", "old_string": "'helo'", "new_string": "'hello'"}),
        )),
        Reply::turn(Turn::new().tool_use("toolu_rm", "ExitWorktree", json!({"action": "remove"}))),
        Reply::turn(Turn::new().tool_use("toolu_keep", "ExitWorktree", json!({"action": "keep"}))),
        Reply::turn(Turn::new().tool_use("toolu_in2", "EnterWorktree", json!({"name": "idle"}))),
        Reply::turn(Turn::new().text("Fixed in a worktree.")),
    ]))
    .await
    .unwrap();
    let output = common::run(
        &repo,
        &server,
        &[
            "-p",
            "fix it",
            "--trust",
            "--allowedTools",
            "Edit,ExitWorktree",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(result_text(&server, "toolu_x0").contains("not working in a worktree"));
    let entered = result_text(&server, "toolu_in");
    let fix = repo.dir.join(".claude/worktrees/fix");
    assert!(
        entered.contains(&format!("Switched to the worktree at {}", fix.display())),
        "{entered}"
    );
    assert!(result_text(&server, "toolu_twice").contains("already working in the worktree"));
    let refused = result_text(&server, "toolu_rm");
    assert!(
        refused.contains("has work that removing it would lose") && refused.contains("greet.py"),
        "{refused}"
    );
    assert!(result_text(&server, "toolu_keep").contains("The worktree is kept at"));
    assert_eq!(
        std::fs::read_to_string(fix.join("greet.py")).unwrap(),
        "def greet():\n    return 'hello'\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("greet.py")).unwrap(),
        "def greet():\n    return 'helo'\n"
    );
    // The idle one went at the end; its branch too.
    assert!(
        stderr.contains("had no changes and was removed"),
        "{stderr}"
    );
    assert!(!repo.dir.join(".claude/worktrees/idle").exists());
    assert_eq!(git(&repo.dir, &["branch", "--list", "worktree-idle"]), "");
    // `+`: checked out in a worktree.
    assert_eq!(
        git(&repo.dir, &["branch", "--list", "worktree-fix"]).trim(),
        "+ worktree-fix"
    );
}

/// From an attack: a repository that commits `.claude/worktrees` as a link (to its own
/// `.git`, or to a folder of the user's) gets no worktree through it, for EnterWorktree as
/// for a subagent; nothing is made where the link points.
#[tokio::test]
async fn a_committed_link_in_the_worktrees_path_is_refused() {
    let repo = repo("wt-link");
    let target = repo.home.join("elsewhere");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    std::os::unix::fs::symlink(&target, repo.dir.join(".claude/worktrees")).unwrap();
    git(&repo.dir, &["add", "-A"]);
    git(&repo.dir, &["commit", "-qm", "link"]);
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(
                Turn::new()
                    .tool_use("toolu_in", "EnterWorktree", json!({"name": "x"}))
                    .tool_use(
                        "toolu_t",
                        "Task",
                        json!({"description": "d", "prompt": "SUB: go", "isolation": "worktree"}),
                    ),
            ),
            Reply::turn(Turn::new().text("Refused.")),
        ])
        .route("SUB:", vec![Reply::turn(Turn::new().text("never"))]),
    )
    .await
    .unwrap();
    let output = common::run(&repo, &server, &["-p", "go", "--trust"]).await;
    assert!(output.status.success());
    for id in ["toolu_in", "toolu_t"] {
        let refused = result_text(&server, id);
        assert!(
            refused.contains("is a symbolic link or a file, not a folder"),
            "{refused}"
        );
    }
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    assert_eq!(git(&repo.dir, &["worktree", "list"]).lines().count(), 1);
}

/// From an attack: EnterWorktree by path reaches only this checkout's `.claude/worktrees/`
/// (never a worktree of the user's elsewhere); one entered by path is the user's, so it is
/// neither removed at the end (even clean, even with only ignored files in it) nor by
/// ExitWorktree; a worktree the session made that holds only an ignored file is kept.
#[tokio::test]
async fn worktrees_the_session_did_not_make_are_never_removed() {
    let repo = repo("wt-theirs");
    std::fs::write(repo.dir.join(".gitignore"), ".env\n").unwrap();
    git(&repo.dir, &["add", "-A"]);
    git(&repo.dir, &["commit", "-qm", "ignore"]);
    let elsewhere = repo.home.join("userwt");
    git(
        &repo.dir,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "userbr",
            &elsewhere.display().to_string(),
        ],
    );
    let theirs = repo.dir.join(".claude/worktrees/theirs");
    git(
        &repo.dir,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "worktree-theirs",
            &theirs.display().to_string(),
        ],
    );
    std::fs::write(theirs.join(".env"), "SECRET=1\n").unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_far", "EnterWorktree", json!({"path": elsewhere}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_in",
            "EnterWorktree",
            json!({"path": ".claude/worktrees/theirs"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_rm",
            "ExitWorktree",
            json!({"action": "remove", "discard_changes": true}),
        )),
        Reply::turn(Turn::new().tool_use("toolu_keep", "ExitWorktree", json!({"action": "keep"}))),
        Reply::turn(Turn::new().tool_use("toolu_mine", "EnterWorktree", json!({"name": "mine"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_env",
            "Write",
            json!({"file_path": ".env", "content": "TOKEN=2\n"}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = common::run(
        &repo,
        &server,
        &[
            "-p",
            "go",
            "--trust",
            "--allowedTools",
            "ExitWorktree,Write",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let far = result_text(&server, "toolu_far");
    assert!(
        far.contains("only a worktree there can be entered"),
        "{far}"
    );
    assert!(result_text(&server, "toolu_in").contains("Switched to the worktree"));
    let refused = result_text(&server, "toolu_rm");
    assert!(
        refused.contains("was there before this session"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join(".env")).unwrap(),
        "SECRET=1\n"
    );
    assert!(elsewhere.join("greet.py").exists());
    assert_eq!(
        git(&repo.dir, &["branch", "--list", "worktree-theirs"]).trim(),
        "+ worktree-theirs"
    );
    // Its only new file is ignored by git: still work, so the worktree is kept.
    let mine = repo.dir.join(".claude/worktrees/mine");
    assert_eq!(
        std::fs::read_to_string(mine.join(".env")).unwrap(),
        "TOKEN=2\n"
    );
    assert!(stderr.contains("The worktree is kept at"), "{stderr}");
}

/// From an attack: the agent's own git runs never enter a submodule, whose configuration a
/// sandboxed command can write (a `filter` naming a program git would run outside the
/// sandbox).
#[tokio::test]
async fn the_agents_git_never_runs_a_submodules_filter() {
    let repo = repo("wt-submodule");
    git(
        &repo.dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            "160000,1111111111111111111111111111111111111111,sub",
        ],
    );
    git(&repo.dir, &["commit", "-qm", "gitlink"]);
    // What a sandboxed command could leave: a repository in `sub` whose filter runs a
    // program, and a changed file for git to clean.
    let sub = repo.dir.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let marker = repo.home.join("FILTER-RAN");
    git(&sub, &["init", "-q"]);
    std::fs::write(sub.join(".gitattributes"), "* filter=evil\n").unwrap();
    std::fs::write(sub.join("f"), "one\n").unwrap();
    git(&sub, &["add", "-A"]);
    git(&sub, &["commit", "-qm", "sub"]);
    git(
        &sub,
        &[
            "config",
            "filter.evil.clean",
            &format!("touch {}; cat", marker.display()),
        ],
    );
    std::fs::write(sub.join("f"), "two\n").unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_in", "EnterWorktree", json!({"name": "w"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = common::run(&repo, &server, &["-p", "go", "--trust"]).await;
    assert!(output.status.success());
    // Created (the submodule's change is not the main checkout's), and nothing ran.
    let entered = result_text(&server, "toolu_in");
    assert!(entered.contains("Switched to the worktree"), "{entered}");
    assert!(!marker.exists(), "the submodule's filter ran");
}

/// From a second attack: work git's status does not show is still work. A file in a
/// submodule's folder keeps the worktree, and commits on the worktree's branch count after
/// HEAD moved to another branch; a worktree is never made inside another one, whose folders
/// its agent could swap for links while git works.
#[tokio::test]
async fn hidden_work_keeps_a_worktree_and_worktrees_do_not_nest() {
    let repo = repo("wt-hidden");
    git(
        &repo.dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            "160000,1111111111111111111111111111111111111111,sub",
        ],
    );
    git(&repo.dir, &["commit", "-qm", "gitlink"]);
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_t",
                "Task",
                json!({"description": "d", "prompt": "SUB: write", "isolation": "worktree"}),
            )),
            Reply::turn(Turn::new().tool_use("toolu_in", "EnterWorktree", json!({"name": "moved"}))),
            Reply::turn(Turn::new().tool_use(
                "toolu_c",
                "Bash",
                json!({"command": "echo x > c.txt && git add c.txt && git -c user.name=t -c user.email=t@t commit -qm precious && git checkout -q -b scratch HEAD~1"}),
            )),
            Reply::turn(Turn::new().tool_use("toolu_rm", "ExitWorktree", json!({"action": "remove"}))),
            Reply::turn(Turn::new().tool_use("toolu_keep", "ExitWorktree", json!({"action": "keep"}))),
            Reply::turn(Turn::new().tool_use("toolu_nest", "EnterWorktree", json!({"name": "moved/inner"}))),
            Reply::turn(Turn::new().text("Done.")),
        ])
        .route(
            "SUB:",
            vec![
                Reply::turn(Turn::new().tool_use(
                    "toolu_w",
                    "Write",
                    json!({"file_path": "sub/REPORT.md", "content": "findings\n"}),
                )),
                Reply::turn(Turn::new().text("Wrote the report.")),
            ],
        ),
    )
    .await
    .unwrap();
    let output = common::run(
        &repo,
        &server,
        &[
            "-p",
            "go",
            "--trust",
            "--sandbox",
            "off",
            "--permission-mode",
            "bypassPermissions",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report = result_text(&server, "toolu_t");
    assert!(report.contains("The worktree is kept at"), "{report}");
    let refused = result_text(&server, "toolu_rm");
    assert!(refused.contains("1 commit(s) of its own"), "{refused}");
    assert!(git(&repo.dir, &["log", "--all", "--format=%s"]).contains("precious"));
    let nested = result_text(&server, "toolu_nest");
    assert!(
        nested.contains("a worktree is not made inside another"),
        "{nested}"
    );
}

/// A background worktree subagent that is stopped says where its worktree was left: TaskStop's
/// result carries its last words.
#[tokio::test]
async fn a_stopped_worktree_subagent_says_where_its_work_is() {
    let repo = repo("wt-stop");
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_t",
                "Task",
                json!({"description": "slow", "prompt": "SUB: slow work", "isolation": "worktree", "run_in_background": true}),
            )),
            Reply::turn(Turn::new().tool_use("toolu_wait", "Bash", json!({"command": "sleep 1"}))),
            Reply::turn(Turn::new().tool_use("toolu_stop", "TaskStop", json!({"task_id": "agent_1"}))),
            Reply::turn(Turn::new().text("Stopped it.")),
        ])
        .route(
            "SUB:",
            vec![
                Reply::turn(Turn::new().tool_use("toolu_w", "Write", json!({"file_path": "half.txt", "content": "half done\n"}))),
                Reply::turn(Turn::new().tool_use("toolu_s", "Bash", json!({"command": "sleep 30"}))),
                Reply::turn(Turn::new().text("never")),
            ],
        ),
    )
    .await
    .unwrap();
    let output = common::run(
        &repo,
        &server,
        &[
            "-p",
            "go",
            "--trust",
            "--allowedTools",
            "Write,Bash,TaskStop",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stopped = result_text(&server, "toolu_stop");
    assert!(
        stopped.contains("Stopped background task agent_1")
            && stopped.contains("The worktree is kept at"),
        "{stopped}"
    );
}
