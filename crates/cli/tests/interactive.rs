//! The interactive mode, driven through a pseudo-terminal: `agent` with no prompt on a
//! terminal reads prompts with its line editor, asks before running calls that need approval,
//! keeps one history across prompts, survives an aborted turn, and exits on Ctrl-D or on
//! Ctrl-C twice at the prompt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{command, repo};
use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// A running `agent` on a pseudo-terminal: what it wrote (stdout and stderr both), and the
/// terminal's keyboard.
struct Terminal {
    child: tokio::process::Child,
    keyboard: std::fs::File,
    screen: Arc<Mutex<Vec<u8>>>,
    /// Rows and columns.
    size: (u16, u16),
    /// Rows and columns before any resize.
    start: (u16, u16),
    /// Each resize: how many bytes of `screen` came before it, and the new size.
    resizes: Vec<(usize, (u16, u16))>,
    /// How the terminal model treats its rows on a resize.
    model: testkit::screen::Resize,
}

impl Terminal {
    fn spawn(command: tokio::process::Command) -> Self {
        Self::spawn_answering(command, false)
    }

    /// Spawns `command` on a terminal that, when `sync` is set, answers the DECRQM query for
    /// synchronized output (mode 2026) as a terminal that supports it does; otherwise the
    /// query goes unanswered, as on most terminals.
    fn spawn_answering(command: tokio::process::Command, sync: bool) -> Self {
        let answer = sync.then(|| b"\x1b[?2026;2$y\x1b[?0u\x1b[?62;22c".to_vec());
        Self::spawn_sized(command, answer, (40, 120))
    }

    /// Spawns `command` on a terminal of `size` (rows, columns) that sends `answer` (when
    /// there is one) to the agent's capability questions (they end with DA1, `CSI c`).
    fn spawn_sized(
        mut command: tokio::process::Command,
        answer: Option<Vec<u8>>,
        size: (u16, u16),
    ) -> Self {
        let (rows, columns) = size;
        let size = nix::pty::Winsize {
            ws_row: rows,
            ws_col: columns,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).unwrap();
        let slave: OwnedFd = pty.slave;
        let child = command
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let master = std::fs::File::from(pty.master);
        let mut reader = master.try_clone().unwrap();
        let mut answers = master.try_clone().unwrap();
        let screen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            let mut answered = answer.is_none();
            // Ends with EIO once every holder of the slave side has exited.
            while let Ok(read) = reader.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                let mut screen = sink.lock().unwrap();
                screen.extend_from_slice(&buffer[..read]);
                if !answered
                    && String::from_utf8_lossy(&screen).contains("\x1b[?2026$p\x1b[?u")
                    && String::from_utf8_lossy(&screen).contains("\x1b[c")
                {
                    answered = true;
                    // As a terminal answers the questions and the DA1 request behind them.
                    answers
                        .write_all(answer.as_deref().unwrap_or_default())
                        .unwrap();
                }
            }
        });
        Self {
            child,
            keyboard: master,
            screen,
            size: (rows, columns),
            start: (rows, columns),
            resizes: Vec::new(),
            model: testkit::screen::Resize::Rewrap,
        }
    }

    /// The terminal model after everything written so far (the pseudo-terminal's size,
    /// through every resize, and a scrollback).
    fn parser(&self) -> vt100::Parser {
        let screen = self.screen.lock().unwrap();
        let mut parser = vt100::Parser::new(self.start.0, self.start.1, 100_000);
        let mut done = 0;
        for (at, (rows, columns)) in &self.resizes {
            parser.process(&screen[done..*at]);
            parser = testkit::screen::resized(&parser, *rows, *columns, self.model);
            done = *at;
        }
        parser.process(&screen[done..]);
        parser
    }

    /// Resizes the terminal to `rows` by `columns`, as a window drag does: the
    /// pseudo-terminal's size is set where the output has come to (before an escape
    /// sequence or a character not yet whole, which the model's replay cannot split), and
    /// the agent gets `SIGWINCH` (it has no controlling terminal here for the kernel to
    /// send it).
    async fn resize(&mut self, rows: u16, columns: u16) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let size = rustix::termios::Winsize {
            ws_row: rows,
            ws_col: columns,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let written = {
            let screen = self.screen.lock().unwrap();
            self.resizes.push((whole_up_to(&screen), (rows, columns)));
            rustix::termios::tcsetwinsize(&self.keyboard, size).unwrap();
            screen.len()
        };
        self.size = (rows, columns);
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id().unwrap()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGWINCH).unwrap();
        // The agent redraws before anyone types: a key and the signal ready in the same
        // poll lose the key in crossterm 0.29's event source (it returns the resize and
        // drops the terminal's edge-triggered readiness) until the next key.
        while self.screen.lock().unwrap().len() == written && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// Every row the terminal shows or scrolled away, in order, one a line.
    /// What was written, escape sequences and all.
    fn raw(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Like [`Self::text`], with the rows the terminal wrapped joined into the line they
    /// continue.
    fn logical_text(&self) -> String {
        let mut text = String::new();
        for (row, wrapped) in testkit::screen::all_rows(&self.parser()) {
            text.push_str(&row);
            if !wrapped {
                text.push('\n');
            }
        }
        text
    }

    fn text(&self) -> String {
        let rows: Vec<String> = testkit::screen::all_rows(&self.parser())
            .into_iter()
            .map(|(row, _)| row)
            .collect();
        rows.join("\n")
    }

    /// Whether the prompt waits for input: no spinner on the screen, and the cursor shown on
    /// the input line.
    fn idle(&self) -> bool {
        let parser = self.parser();
        let screen = parser.screen();
        if screen.hide_cursor() {
            return false;
        }
        let rows: Vec<String> = screen.rows(0, self.size.1).collect();
        let spinning = rows.iter().any(|row| {
            row.chars()
                .next()
                .is_some_and(|c| ('\u{2800}'..='\u{28ff}').contains(&c))
        });
        let cursor = usize::from(screen.cursor_position().0);
        !spinning && rows[cursor].starts_with('›')
    }

    /// Waits until the prompt is ready for the `count`-th time: `count - 1` prompts entered
    /// (each kept as a `›` row) and the input line waiting.
    async fn wait_prompt(&self, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let prompts = self
                .text()
                .lines()
                .filter(|row| row.starts_with('›'))
                .count();
            if prompts >= count && self.idle() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "waited for prompt {count}; the screen says:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `needle` has appeared `count` times on the screen.
    async fn wait_for(&self, needle: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.text().matches(needle).count() < count {
            assert!(
                Instant::now() < deadline,
                "waited for {needle:?} x{count}; the screen says:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What the screen shows now (no scrollback).
    fn shown(&self) -> String {
        self.parser().screen().contents()
    }

    /// Waits (at most 10 s) until `ready` holds; returns what the screen showed then.
    async fn wait_until(&self, ready: impl Fn(&Self) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // The screen as it is once ready (a copy taken before the check could be older).
            if ready(self) {
                return self.shown();
            }
            assert!(
                Instant::now() < deadline,
                "waited 10 s; the screen says:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Types the answer to a question now on the screen, as a person does: after having
    /// seen it (keys that come within 300 ms of a question's appearance go to the input
    /// line instead, as typed ahead).
    async fn answer(&mut self, keys: &str) {
        tokio::time::sleep(Duration::from_millis(400)).await;
        self.type_keys(keys);
    }

    fn type_keys(&mut self, keys: &str) {
        self.keyboard.write_all(keys.as_bytes()).unwrap();
        self.keyboard.flush().unwrap();
    }

    async fn exit_code(&mut self) -> i32 {
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("agent did not exit; the screen says:\n{}", self.text()))
            .unwrap();
        status.code().unwrap_or(-1)
    }
}

/// How much of `bytes` ends with a whole escape sequence and a whole character: the length
/// less an escape sequence still open at the end (CSI without its final byte, OSC without
/// its terminator) or the first bytes of a UTF-8 character.
fn whole_up_to(bytes: &[u8]) -> usize {
    let tail = bytes.len().saturating_sub(256);
    if let Some(escape) = bytes[tail..].iter().rposition(|b| *b == 0x1b) {
        let at = tail + escape;
        let rest = &bytes[at + 1..];
        let whole = match rest.first() {
            None => false,
            Some(b'[') => rest[1..].iter().any(|b| (0x40..=0x7e).contains(b)),
            // Ended by BEL (ended by `ESC \`, its last escape is that one's).
            Some(b']') => rest.contains(&0x07),
            Some(_) => true,
        };
        if !whole {
            return at;
        }
    }
    let lead = bytes
        .iter()
        .rev()
        .take(4)
        .position(|b| b & 0xc0 != 0x80)
        .map(|back| bytes.len() - 1 - back);
    match lead {
        Some(at) => {
            let needed = match bytes[at] {
                b if b >= 0xf0 => 4,
                b if b >= 0xe0 => 3,
                b if b >= 0xc0 => 2,
                _ => 1,
            };
            if bytes.len() - at < needed {
                at
            } else {
                bytes.len()
            }
        }
        None => bytes.len(),
    }
}

/// Whether a process runs with exactly this command line (`sleep\037\0`).
fn process_running(cmdline: &[u8]) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .any(|found| found == cmdline)
}

/// Waits (at most 10 s) until a process with this command line runs, or (`running`
/// false) until none does.
async fn wait_process(cmdline: &[u8], running: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_running(cmdline) != running {
        assert!(
            Instant::now() < deadline,
            "{:?} running: {}",
            String::from_utf8_lossy(cmdline),
            !running
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The messages of the `index`-th request the server received.
fn messages(server: &Server, index: usize) -> Vec<Value> {
    server.requests()[index].json()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn prompts_share_one_history_and_approval_is_asked() {
    let repo = repo("interactive");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_copy",
            "Bash",
            json!({"command": "cp notes.txt copy.txt && cat copy.txt", "dangerouslyDisableSandbox": true}),
        )),
        Reply::turn(Turn::new().text("The notes say to remember the milk.")),
        Reply::turn(Turn::new().text("You asked about the notes before.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("copy the notes and show them\r");
    // A Bash command that asks to leave the sandbox (or any command no rule allows, where
    // there is no sandbox) needs approval: the user is asked, and says yes.
    terminal
        .wait_for(
            "Bash(cp notes.txt copy.txt && cat copy.txt) needs approval",
            1,
        )
        .await;
    terminal.answer("y\r").await;
    terminal.wait_for("remember the milk.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("what did I ask?\r");
    terminal
        .wait_for("You asked about the notes before.", 1)
        .await;
    terminal.wait_prompt(3).await;
    // Ctrl-D on an empty line exits.
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());

    // The tool ran for real, and the second prompt continued the first one's history.
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("copy.txt")).unwrap(),
        "remember the milk\n"
    );
    let results = &messages(&server, 1)[2]["content"][0];
    assert_eq!(results["type"], "tool_result");
    assert!(
        results["content"].to_string().contains("remember the milk"),
        "{results}"
    );
    let third = messages(&server, 2);
    assert_eq!(third.len(), 5, "{third:#?}");
    assert_eq!(third[4]["content"][0]["text"], "what did I ask?");
    assert!(
        terminal
            .text()
            .contains("⏺ Bash(cp notes.txt copy.txt && cat copy.txt)")
    );
    assert!(terminal.text().contains("Session "));

    // One transcript holds both prompts.
    let sessions = repo.home.join("data/agent/projects");
    let project = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let transcripts: Vec<_> = std::fs::read_dir(&project)
        .unwrap()
        .flatten()
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    assert_eq!(transcripts.len(), 1);
    let text = std::fs::read_to_string(transcripts[0].path()).unwrap();
    // The user context as sent, then each turn's entry and its messages (six in all), and
    // the file the command created, as the workspace snapshots found it (it did not exist;
    // what the turn left).
    assert_eq!(text.lines().count(), 11, "{text}");
    assert!(
        text.contains("copy.txt\",\"subtype\":\"agent_checkpoint\",\"turn\":1,\"before\":null"),
        "{text}"
    );
    assert_eq!(
        text.matches("\"subtype\":\"agent_turn\"").count(),
        2,
        "{text}"
    );
    assert!(text.lines().next().unwrap().contains("agent_user_context"));
}

#[tokio::test]
async fn ctrl_c_aborts_the_turn_and_the_session_goes_on() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let repo = repo("interactive-abort");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_sleep", "Bash", json!({"command": "sleep 30"}))),
        Reply::turn(Turn::new().text("Still here.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--allowedTools", "Bash(sleep:*)"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("wait a bit\r");
    terminal.wait_for("⏺ Bash(sleep 30)", 1).await;
    // The status line counts the turn's first response while the turn still runs.
    terminal
        .wait_until(|t| t.shown().contains(" · 1 req · 100 in / 20 out"))
        .await;
    // The terminal has no controlling process group here, so Ctrl-C is sent as the signal
    // the terminal would send.
    let pid = Pid::from_raw(terminal.child.id().unwrap() as i32);
    let interrupted = Instant::now();
    kill(pid, Signal::SIGINT).unwrap();
    terminal
        .wait_for("interrupted; the session goes on", 1)
        .await;
    assert!(interrupted.elapsed() < Duration::from_secs(2));
    terminal.wait_prompt(2).await;
    // No spinner is left on the screen after the abort.
    let mut parser = vt100::Parser::new(40, 120, 0);
    parser.process(&terminal.screen.lock().unwrap());
    let shown = parser.screen().contents();
    assert!(
        !shown.contains("Running") && !shown.contains("Thinking"),
        "{shown}"
    );
    terminal.type_keys("are you there?\r");
    terminal.wait_for("Still here.", 1).await;
    terminal.wait_prompt(3).await;
    // The aborted call was answered, so the history stayed valid.
    let second = messages(&server, 1);
    assert_eq!(second[2]["content"][0]["type"], "tool_result");
    assert_eq!(second[2]["content"][0]["tool_use_id"], "toolu_sleep");
    // Ctrl-C on a line with text clears it; on an empty line it asks for a second one, and
    // text typed in between starts over.
    terminal.type_keys("abc\u{3}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    terminal.type_keys("\u{3}");
    terminal
        .wait_for("Ctrl-C again within a second, or Ctrl-D, to exit", 1)
        .await;
    terminal.type_keys("def\u{3}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    terminal.type_keys("\u{3}");
    terminal
        .wait_for("Ctrl-C again within a second, or Ctrl-D, to exit", 2)
        .await;
    // A second Ctrl-C more than a second later is a first one again.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    terminal.type_keys("\u{3}");
    terminal
        .wait_for("Ctrl-C again within a second, or Ctrl-D, to exit", 3)
        .await;
    terminal.type_keys("\u{3}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    assert_eq!(server.request_count(), 2, "nothing typed reached the model");
}

#[tokio::test]
async fn keys_typed_ahead_never_answer_an_approval_question() {
    let repo = repo("interactive-typeahead");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use("toolu_sleep", "Bash", json!({"command": "sleep 1"}))
                .tool_use(
                    "toolu_copy",
                    "Bash",
                    json!({"command": "cp notes.txt copy.txt", "dangerouslyDisableSandbox": true}),
                ),
        ),
        Reply::turn(Turn::new().text("Understood, no copy.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--allowedTools", "Bash(sleep:*)"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("copy the notes\r");
    terminal.wait_for("⏺ Bash(sleep 1)", 1).await;
    // Typed while `sleep 1` runs, before the question about `cp` exists.
    terminal.type_keys("y\r");
    let question = "Allow? Your choice, then Enter: ";
    terminal.wait_for(question, 1).await;
    // Keys that come right as the question appears were typed before the user saw it
    // (read late by a busy terminal): they do not answer it either.
    terminal.type_keys("y\r");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!repo.dir.join("copy.txt").exists());
    assert_eq!(terminal.text().matches(question).count(), 1);
    // Nothing draws over the question while it waits.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let screen = terminal.text();
    let after = &screen[screen.rfind(question).unwrap() + question.len()..];
    assert!(
        !after.contains("Running") && !after.contains("Thinking"),
        "the spinner drew over the question: {after:?}"
    );
    // The typed-ahead line waits, shown as queued.
    assert!(
        terminal
            .text()
            .contains("› y (queued: sent with the next request)"),
        "{}",
        terminal.text()
    );
    // A refusal can say what to do instead; the model gets it.
    terminal.answer("use a hard link instead\r").await;
    terminal.wait_for("Understood, no copy.", 1).await;
    assert!(
        !repo.dir.join("copy.txt").exists(),
        "the typed-ahead y approved it"
    );
    let refused = messages(&server, 1)[2]["content"][1].to_string();
    assert!(
        refused.contains(
            "the user declined Bash(cp notes.txt copy.txt) and said: use a hard link instead"
        ),
        "{refused}"
    );
    // It went with the turn's next request, after the tool results: the model was steered
    // without waiting for the end of the task.
    let steered = messages(&server, 1)[2]["content"].to_string();
    assert!(
        steered.contains("The user sent the following message:\\ny\\n"),
        "{steered}"
    );
    assert_eq!(server.request_count(), 2);
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// A folder whose settings configure a Stop hook is asked about once: "n" skips the hook,
/// "y" runs it and remembers the folder, and the next session asks nothing.
#[tokio::test]
async fn an_untrusted_folder_is_asked_about_once_and_remembered() {
    let repo = repo("interactive-trust");
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "touch hook-ran"}]}]}})
            .to_string(),
    )
    .unwrap();
    let remembered = repo.home.join("config/agent/trusted-folders.json");
    let question = "Trust this folder? [y]es, remember it";
    for (answer, hook_runs) in [("n", false), ("y", true), ("", true)] {
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hello."))]))
            .await
            .unwrap();
        let mut terminal = Terminal::spawn(command(&repo, &server));
        if answer.is_empty() {
            // Remembered: no question.
            terminal.wait_prompt(1).await;
            assert!(!terminal.text().contains(question), "{}", terminal.text());
        } else {
            terminal.wait_for(question, 1).await;
            assert!(
                terminal.text().contains("hooks.Stop: touch hook-ran"),
                "{}",
                terminal.text()
            );
            terminal.type_keys(&format!("{answer}\r"));
            terminal.wait_prompt(1).await;
        }
        terminal.type_keys("hi\r");
        terminal.wait_for("Hello.", 1).await;
        terminal.wait_prompt(2).await;
        terminal.type_keys("\u{4}");
        assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
        assert_eq!(
            repo.dir.join("hook-ran").exists(),
            hook_runs,
            "answer {answer:?}: {}",
            terminal.text()
        );
        if answer == "n" {
            assert!(
                terminal
                    .text()
                    .contains("is not a trusted folder: these project settings are ignored")
            );
            assert!(!remembered.exists());
        } else {
            let saved: Value =
                serde_json::from_str(&std::fs::read_to_string(&remembered).unwrap()).unwrap();
            assert_eq!(saved["trustedFolders"], json!([repo.dir]));
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&remembered).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}

/// A folder with nothing of its own to trust, where the user's own hook runs a command: the
/// question is about that hook (Claude Code asks about every folder). "n" runs it in the
/// sandbox, where it cannot write outside the workspace; "y" runs it as configured and
/// remembers the folder; the next session asks nothing.
#[tokio::test]
async fn the_users_own_hooks_are_what_a_new_folder_is_asked_about() {
    let Some(backend) = common::sandbox_backends().first().copied() else {
        return;
    };
    let repo = repo("interactive-own-hooks");
    let outside = repo.home.join("hook-ran-outside");
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("settings.json"),
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": format!("touch '{}'", outside.display())}]}]}})
            .to_string(),
    )
    .unwrap();
    let question = "Trust this folder? [y]es, remember it";
    for (answer, runs_outside) in [("n", false), ("y", true), ("", true)] {
        let _ = std::fs::remove_file(&outside);
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hello."))]))
            .await
            .unwrap();
        let mut launch = command(&repo, &server);
        launch.env("AGENT_SANDBOX_BACKEND", backend);
        let mut terminal = Terminal::spawn(launch);
        if answer.is_empty() {
            terminal.wait_prompt(1).await;
            assert!(!terminal.text().contains(question), "{}", terminal.text());
        } else {
            terminal.wait_for(question, 1).await;
            let text = terminal.text();
            assert!(
                text.contains("Your own settings run commands in it"),
                "{text}"
            );
            assert!(text.contains("hooks.Stop: touch"), "{text}");
            terminal.type_keys(&format!("{answer}\r"));
            terminal.wait_prompt(1).await;
        }
        terminal.type_keys("hi\r");
        terminal.wait_for("Hello.", 1).await;
        terminal.wait_prompt(2).await;
        terminal.type_keys("\u{4}");
        assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
        assert_eq!(
            outside.exists(),
            runs_outside,
            "answer {answer:?}: {}",
            terminal.text()
        );
    }
}

/// A remembered folder whose hook changes (a `git pull`) is asked about again, the question
/// naming the new hook: "y" runs it and remembers the new configuration, and the next
/// session asks nothing; until then nothing of the change applied.
#[tokio::test]
async fn a_trusted_folder_whose_hook_changed_is_asked_about_again() {
    let repo = repo("interactive-retrust");
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    let hook = |marker: &str| {
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": format!("touch {marker}")}]}]}})
            .to_string()
    };
    std::fs::write(repo.dir.join(".agent/settings.json"), hook("old-hook-ran")).unwrap();
    let question = "Trust this folder? [y]es, remember it";
    let changed = "changed since it was trusted";
    // (settings before the session, the answer, or none when no question may come)
    for (step, answer) in [
        ("first", Some("y")),
        ("changed", Some("y")),
        ("again", None),
    ] {
        if step == "changed" {
            std::fs::write(repo.dir.join(".agent/settings.json"), hook("new-hook-ran")).unwrap();
        }
        let _ = std::fs::remove_file(repo.dir.join("new-hook-ran"));
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hello."))]))
            .await
            .unwrap();
        let mut terminal = Terminal::spawn(command(&repo, &server));
        match answer {
            Some(answer) => {
                terminal.wait_for(question, 1).await;
                let raw = terminal.raw();
                assert_eq!(raw.contains(changed), step == "changed", "{step}: {raw}");
                if step == "changed" {
                    assert!(
                        raw.contains(
                            "new or changed: .agent/settings.json: hooks.Stop: touch new-hook-ran"
                        ),
                        "{raw}"
                    );
                    // Nothing of the change ran before the answer.
                    assert!(!repo.dir.join("new-hook-ran").exists());
                }
                terminal.type_keys(&format!("{answer}\r"));
                terminal.wait_prompt(1).await;
            }
            None => {
                terminal.wait_prompt(1).await;
                assert!(!terminal.raw().contains(question), "{}", terminal.text());
            }
        }
        terminal.type_keys("hi\r");
        terminal.wait_for("Hello.", 1).await;
        terminal.wait_prompt(2).await;
        terminal.type_keys("\u{4}");
        assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
        assert_eq!(
            repo.dir.join("new-hook-ran").exists(),
            step != "first",
            "{step}: {}",
            terminal.text()
        );
    }
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.home.join("config/agent/trusted-folders.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved["trustedFolders"], json!([repo.dir]));
}

/// Hook feedback reaches the user too, in one dim line: a PostToolUse hook's (under the
/// call's result) and a Stop hook's (when it sends the model back to work).
#[tokio::test]
async fn hook_feedback_is_shown_in_one_dim_line() {
    let repo = repo("interactive-hook-feedback");
    std::fs::create_dir_all(repo.dir.join(".agent")).unwrap();
    let stop =
        "if [ -f .stopped ]; then exit 0; fi; touch .stopped; echo 'Run the linter.' >&2; exit 2";
    std::fs::write(
        repo.dir.join(".agent/settings.json"),
        json!({"hooks": {
            "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo 'lint: 2 warnings' >&2; exit 2"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": stop}]}],
        }})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_1", "Bash", json!({"command": "echo hi"}))),
        Reply::turn(Turn::new().text("Done.")),
        Reply::turn(Turn::new().text("Linted.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--trust", "--allowedTools", "Bash(echo:*)"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("go\r");
    terminal.wait_for("Linted.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let screen = terminal.raw();
    assert!(
        screen.contains("\u{1b}[2m     PostToolUse hook: lint: 2 warnings\u{1b}[0m"),
        "{screen}"
    );
    assert!(
        screen.contains("\u{1b}[2m  ⎿  Stop hook feedback: Run the linter.\u{1b}[0m"),
        "{screen}"
    );
}

/// `/mcp` lists the MCP servers with their status and tools.
#[tokio::test]
async fn slash_mcp_lists_servers_and_tools() {
    let kit = std::path::PathBuf::from(env!("CARGO_BIN_EXE_agent")).with_file_name("testkit");
    if !kit.is_file() {
        assert!(
            !std::env::var("CI").is_ok_and(|ci| ci == "true"),
            "CI builds {}",
            kit.display()
        );
        eprintln!("NOTE: /mcp test skipped: {} is not built", kit.display());
        return;
    }
    let repo = repo("interactive-mcp");
    let file = repo.home.join("mcp.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"kit": {"command": kit, "args": ["mcp-server"]}}}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let mut command = command(&repo, &server);
    command
        .env("MCP_STARTUP_WAIT_MS", "10000")
        .args(["--mcp-config", file.to_str().unwrap()]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("/mcp\r");
    terminal
        .wait_for(
            "kit: connected (echo, fail, slow, huge, image, write, crash, grow)",
            1,
        )
        .await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Custom commands and skills at the prompt: `/help` lists both, `/release:notes 2.0 calm`
/// sends the command's prompt on its model (trusted folder), and a plain prompt after it is
/// back on the session's model.
#[tokio::test]
async fn custom_commands_and_skills_at_the_prompt() {
    let repo = repo("interactive-commands");
    std::fs::create_dir_all(repo.dir.join(".claude/commands/release")).unwrap();
    std::fs::create_dir_all(repo.dir.join(".claude/skills/changelog")).unwrap();
    std::fs::write(
        repo.dir.join(".claude/commands/release/notes.md"),
        "---\ndescription: Write the release notes\nargument-hint: [version] [tone]\nmodel: haiku\n---\nNotes for $1, $2 tone.\n",
    )
    .unwrap();
    std::fs::write(
        repo.dir.join(".claude/skills/changelog/SKILL.md"),
        "---\ndescription: Writes changelog entries\n---\nUse the template.\n",
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("Notes written.")),
        Reply::turn(Turn::new().text("Plain answer.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.arg("--trust");
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("/help\r");
    terminal
        .wait_for(
            "/release:notes [version] [tone] Write the release notes (project)",
            1,
        )
        .await;
    terminal
        .wait_for("/changelog    Writes changelog entries (project skill)", 1)
        .await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("/release:notes 2.0 calm\r");
    terminal.wait_for("Notes written.", 1).await;
    terminal.wait_prompt(3).await;
    terminal.type_keys("and now?\r");
    terminal.wait_for("Plain answer.", 1).await;
    terminal.wait_prompt(4).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let requests = server.requests();
    assert_eq!(requests[0].json()["model"], "claude-haiku-4-5-20251001");
    let first = messages(&server, 0)[0]["content"].to_string();
    assert!(first.contains("Notes for 2.0, calm tone."), "{first}");
    assert_eq!(requests[1].json()["model"], "claude-opus-4-8");
}

/// A file read in one turn and changed by the user before the next prompt: the next prompt's
/// message carries a `<system-reminder>` with the diff (in the new message only).
#[tokio::test]
async fn a_file_the_user_changed_between_turns_is_attached_to_the_next_prompt() {
    let repo = repo("interactive-attachment");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().text("Read it.")),
        Reply::turn(Turn::new().text("Noted the change.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("read the notes\r");
    terminal.wait_for("Read it.", 1).await;
    terminal.wait_prompt(2).await;
    // The Read is summarised as a reader wants it.
    assert!(
        terminal
            .text()
            .contains("⏺ Read(notes.txt)\n  ⎿  Read 1 line"),
        "{}",
        terminal.text()
    );
    std::fs::write(repo.dir.join("notes.txt"), "remember the tea\n").unwrap();
    terminal.type_keys("anything new?\r");
    terminal.wait_for("Noted the change.", 1).await;
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let second = messages(&server, 2);
    let prompt = second.last().unwrap()["content"].to_string();
    assert!(prompt.contains("anything new?"), "{prompt}");
    assert!(
        prompt.contains("-remember the milk\\n+remember the tea"),
        "{prompt}"
    );
    // Earlier messages are as they were sent before (the cache marker aside, which moves
    // to the newest message).
    let without_markers = |messages: &[Value]| {
        messages
            .iter()
            .map(|message| {
                message
                    .to_string()
                    .replace(r#","cache_control":{"type":"ephemeral"}"#, "")
            })
            .collect::<Vec<_>>()
    };
    let first = messages(&server, 1);
    assert_eq!(
        without_markers(&second[..first.len()]),
        without_markers(&first)
    );
}

/// Interactive sessions have background summaries by default: the spinner shows the
/// progress summary while a command runs, and the tool batch's summary follows its result.
#[tokio::test]
async fn the_spinner_shows_the_progress_summary() {
    let repo = repo("interactive-progress");
    let slow = testkit::Faults {
        chunk_sizes: Some(vec![40]),
        chunk_delay: Some(Duration::from_millis(60)),
        ..testkit::Faults::default()
    };
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use("toolu_s", "Bash", json!({"command": "sleep 1.5"}))),
            Reply::turn(Turn::new().text("It finished.")).faults(slow),
        ])
        .route(
            "Describe what it is doing right now",
            (0..20)
                .map(|_| Reply::turn(Turn::new().text("Waiting on sleep")))
                .collect(),
        )
        .route(
            "A coding agent just ran these tools",
            vec![Reply::turn(Turn::new().text("Slept for a while"))],
        ),
    )
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command
        .env_remove("AGENT_DISABLE_BACKGROUND_REQUESTS")
        .env("AGENT_PROGRESS_INTERVAL_MS", "300");
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("sleep a bit\r");
    terminal.wait_for("Waiting on sleep · Running", 1).await;
    terminal.wait_for("It finished.", 1).await;
    terminal.wait_prompt(2).await;
    // The batch's summary comes once the answer's call ended: not drawn under the answer
    // (`a_tool_summary_never_comes_after_the_answer`).
    assert!(
        !terminal.text().contains("Slept for a while"),
        "{}",
        terminal.text()
    );
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// A running subagent shows in the status line with its current tool.
#[tokio::test]
async fn a_running_subagent_shows_with_its_tool() {
    let repo = repo("interactive-subagent");
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_t",
                "Task",
                json!({"description": "check things", "prompt": "SUB: check", "subagent_type": "Explore"}),
            )),
            Reply::turn(Turn::new().text("All checked.")),
        ])
        .route(
            "SUB:",
            vec![
                Reply::turn(Turn::new().tool_use("toolu_s", "Bash", json!({"command": "sleep 1.5"}))),
                Reply::turn(Turn::new().text("nothing wrong")),
            ],
        ),
    )
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("check everything\r");
    terminal
        .wait_for("Running 1 agent: check things (Bash)", 1)
        .await;
    terminal.wait_for("All checked.", 1).await;
    // The row names the agent's type and task, and ends with what it did.
    terminal.wait_for("⏺ Task(Explore: check things)", 1).await;
    terminal.wait_for("⎿  Done (1 tool use · ", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// `agent "task"` in a terminal starts an interactive session with that first prompt.
#[tokio::test]
async fn a_positional_prompt_starts_the_interactive_session() {
    let repo = repo("interactive-positional");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("First answer.")),
        Reply::turn(Turn::new().text("Second answer.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.arg("say something");
    let mut terminal = Terminal::spawn(command);
    terminal.wait_for("First answer.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("and again\r");
    terminal.wait_for("Second answer.", 1).await;
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let first = messages(&server, 0);
    assert!(first[0].to_string().contains("say something"));
    assert_eq!(messages(&server, 1).len(), 3);
}

/// `agent sessions` lists this folder's sessions, interactive and headless, newest first;
/// `--continue` in a terminal takes the newest interactive session (and says which), headless
/// the newest of all.
#[tokio::test]
async fn sessions_are_listed_and_continue_prefers_an_interactive_one() {
    let repo = repo("sessions-list");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("Headless one.")),
        Reply::turn(Turn::new().text("Interactive one.")),
        Reply::turn(Turn::new().text("Headless two.")),
        Reply::turn(Turn::new().text("Continued.")),
        Reply::turn(Turn::new().text("Continued headless.")),
    ]))
    .await
    .unwrap();
    let headless = |prompt: &'static str| {
        let mut run = command(&repo, &server);
        run.args(["-p", prompt, "--output-format", "json"]);
        run
    };
    assert!(
        headless("first headless task")
            .output()
            .await
            .unwrap()
            .status
            .success()
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("an interactive task\r");
    terminal.wait_for("Interactive one.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        headless("second headless task")
            .output()
            .await
            .unwrap()
            .status
            .success()
    );

    let output = command(&repo, &server)
        .args(["sessions", "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let list: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let rows: Vec<(String, String, u64)> = list
        .iter()
        .map(|row| {
            (
                row["first_prompt"].as_str().unwrap().to_owned(),
                row["mode"].as_str().unwrap().to_owned(),
                row["turns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("second headless task".to_owned(), "headless".to_owned(), 1),
            (
                "an interactive task".to_owned(),
                "interactive".to_owned(),
                1
            ),
            ("first headless task".to_owned(), "headless".to_owned(), 1),
        ]
    );
    let interactive_id = list[1]["session_id"].as_str().unwrap().to_owned();
    let table = command(&repo, &server)
        .arg("sessions")
        .output()
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains(&interactive_id) && table.contains("interactive"),
        "{table}"
    );

    let mut command_continue = command(&repo, &server);
    command_continue.arg("--continue");
    let mut terminal = Terminal::spawn(command_continue);
    terminal
        .wait_for(
            &format!("continuing session {interactive_id} (interactive"),
            1,
        )
        .await;
    terminal.wait_prompt(1).await;
    // The status line goes on from the session's figures (it restarted at zero once).
    terminal.wait_for(" · 1 req · ", 1).await;
    terminal.type_keys("go on\r");
    terminal.wait_for("Continued.", 1).await;
    terminal.wait_for(" · 2 req · ", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0);
    let continued = messages(&server, 3);
    assert!(
        continued[0].to_string().contains("an interactive task"),
        "{continued:?}"
    );

    let output = command(&repo, &server)
        .args(["--continue", "-p", "more", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("(interactive") || stderr.contains("(headless"),
        "{stderr}"
    );
    let sent = messages(&server, 4);
    // Headless takes the newest of all: the interactive session just continued.
    assert!(
        sent[0].to_string().contains("an interactive task"),
        "{sent:?}"
    );
}

/// Esc Esc at an empty prompt opens the rewind list (as `/rewind`): choosing the turn before
/// a command deleted a file, made one and renamed one puts all three back as they were (the
/// workspace snapshots kept them).
#[tokio::test]
async fn esc_esc_rewinds_what_a_command_did() {
    let repo = repo("interactive-esc-esc");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_rm",
            "Bash",
            json!({"command": "rm notes.txt && printf 'gen\\n' > generated.txt && mv greet.py hello.py"}),
        )),
        Reply::turn(Turn::new().text("Removed the notes.")),
    ]))
    .await
    .unwrap();
    let mut agent = command(&repo, &server);
    agent.args(["--allowedTools", "Bash"]);
    let mut terminal = Terminal::spawn(agent);
    terminal.wait_prompt(1).await;
    terminal.type_keys("remove the notes\r");
    terminal.wait_for("Removed the notes.", 1).await;
    terminal.wait_prompt(2).await;
    assert!(!repo.dir.join("notes.txt").exists());
    terminal.type_keys("\x1b");
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    terminal.type_keys("\x1b");
    terminal
        .wait_for("Rewind to the end of which turn?", 1)
        .await;
    // The picker starts on the last turn, its changed files under the list.
    let screen = terminal.text();
    assert!(
        screen.contains("❯ remove the notes") && screen.contains("    notes.txt"),
        "{screen}"
    );
    // Up to the start of the session, then the code only.
    terminal.type_keys("\x1b[A\r");
    terminal.wait_for("Restore what?", 1).await;
    terminal.type_keys("\x1b[B\x1b[B");
    terminal.wait_for("❯ Code only", 1).await;
    terminal.type_keys("\r");
    terminal.wait_for("restored notes.txt", 1).await;
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "remember the milk\n"
    );
    assert!(repo.dir.join("greet.py").is_file());
    assert!(!repo.dir.join("hello.py").exists());
    assert!(!repo.dir.join("generated.txt").exists());
}

/// `agent --resume` without an id at a terminal: a picker of the folder's sessions before
/// the session starts, the ones used at a terminal before headless runs, each with its
/// first prompts; Enter continues the chosen one; Esc starts nothing.
#[tokio::test]
async fn resume_without_an_id_picks_at_the_terminal() {
    let repo = repo("interactive-resume-pick");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("Headless one.")),
        Reply::turn(Turn::new().text("Headless two.")),
        Reply::turn(Turn::new().text("Continued.")),
    ]))
    .await
    .unwrap();
    for prompt in ["the first run", "the second run"] {
        let output = command(&repo, &server)
            .args(["-p", prompt])
            .output()
            .await
            .unwrap();
        assert!(output.status.success());
    }
    let mut cancelled = command(&repo, &server);
    cancelled.arg("--resume");
    let mut terminal = Terminal::spawn(cancelled);
    terminal.wait_for("Resume a session", 1).await;
    terminal.type_keys("\x1b");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    assert_eq!(server.requests().len(), 2);

    let mut agent = command(&repo, &server);
    agent.arg("--resume");
    let mut terminal = Terminal::spawn(agent);
    terminal.wait_for("Resume a session", 1).await;
    // Newest first: the second run is chosen first; its prompt is the preview.
    let screen = terminal.text();
    assert!(
        screen.contains("❯ the second run") && screen.contains("    › the second run"),
        "{screen}"
    );
    terminal.type_keys("first");
    terminal.wait_for("❯ the first run", 1).await;
    terminal.type_keys("\r");
    terminal.wait_prompt(2).await;
    terminal.type_keys("go on\r");
    terminal.wait_for("Continued.", 1).await;
    let sent = server.requests()[2].json()["messages"].to_string();
    assert!(
        sent.contains("the first run") && sent.contains("Headless one."),
        "{sent}"
    );
    assert!(!sent.contains("the second run"), "{sent}");
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// `/rewind` lists the turns, asks which and what, asks before overwriting a file the user
/// changed (naming it), and the next prompt goes with the rewound conversation; `/rewind
/// undo` brings back the user's file and the conversation; `/resume` picks an earlier
/// session and continues it.
#[tokio::test]
async fn rewind_and_resume_at_the_prompt() {
    let repo = repo("interactive-rewind");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("Old.")),
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_w1",
            "Write",
            json!({"file_path": "notes.txt", "content": "v1\n"}),
        )),
        Reply::turn(Turn::new().text("Done one.")),
        Reply::turn(Turn::new().tool_use(
            "toolu_w2",
            "Write",
            json!({"file_path": "notes.txt", "content": "v2\n"}),
        )),
        Reply::turn(Turn::new().text("Done two.")),
        Reply::turn(Turn::new().text("After the rewind.")),
        Reply::turn(Turn::new().text("In the old session.")),
    ]))
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "the old session"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    let mut agent = command(&repo, &server);
    agent.args(["--permission-mode", "acceptEdits"]);
    let mut terminal = Terminal::spawn(agent);
    terminal.wait_prompt(1).await;
    terminal.type_keys("edit the notes\r");
    terminal.wait_for("Done one.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("again\r");
    terminal.wait_for("Done two.", 1).await;
    terminal.wait_prompt(3).await;
    std::fs::write(repo.dir.join("notes.txt"), "mine\n").unwrap();
    terminal.type_keys("/rewind\r");
    terminal
        .wait_for("Rewind to the end of which turn?", 1)
        .await;
    assert!(terminal.text().contains("❯ again"), "{}", terminal.text());
    // Typing filters: the first turn alone, then code and conversation (the first entry).
    terminal.type_keys("edit");
    terminal.wait_for("filter: edit", 1).await;
    assert!(
        terminal.text().contains("❯ edit the notes") && !terminal.text().contains("turn 2 ·"),
        "{}",
        terminal.text()
    );
    terminal.type_keys("\r");
    terminal.wait_for("Restore what?", 1).await;
    terminal.type_keys("\r");
    terminal.wait_for("Overwrite them", 1).await;
    assert!(
        terminal.text().contains("    notes.txt"),
        "{}",
        terminal.text()
    );
    terminal.answer("y\r").await;
    terminal.wait_for("conversation rewound", 1).await;
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "v1\n"
    );
    terminal.wait_prompt(4).await;
    // Undo: the user's file and the conversation are back.
    terminal.type_keys("/rewind undo\r");
    terminal.wait_for("conversation rewound", 2).await;
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "mine\n"
    );
    terminal.wait_prompt(5).await;
    // The conversation alone back to turn 1 (no file is touched, no question), then a
    // prompt: it goes with the rewound conversation.
    terminal.type_keys("/rewind 1 conversation\r");
    terminal.wait_for("conversation rewound", 3).await;
    terminal.wait_prompt(6).await;
    terminal.type_keys("where are we\r");
    terminal.wait_for("After the rewind.", 1).await;
    let sent = server.requests()[6].json()["messages"].to_string();
    assert!(
        sent.contains("edit the notes") && sent.contains("where are we"),
        "{sent}"
    );
    assert!(
        !sent.contains("again") && !sent.contains("Done two."),
        "{sent}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "mine\n"
    );
    terminal.wait_prompt(7).await;
    // Undoing that rewind now would drop the turn since: refused, saying so.
    terminal.type_keys("/rewind undo\r");
    terminal.wait_for("began after the last rewind", 1).await;
    terminal.wait_prompt(8).await;
    terminal.type_keys("/resume\r");
    terminal.wait_for("Resume a session", 1).await;
    // The session chosen first is the only other one, its prompts as the preview.
    let screen = terminal.text();
    assert!(
        screen.contains("❯ the old session") && screen.contains("headless"),
        "{screen}"
    );
    assert!(screen.contains("    › the old session"), "{screen}");
    terminal.type_keys("\r");
    terminal.wait_for("Resumed session", 1).await;
    // The earlier conversation, condensed: its prompt and its answer.
    terminal.wait_for("› the old session", 1).await;
    terminal.wait_for("  Old.", 1).await;
    // The condensed prompt is one `› `, the new prompt the next.
    terminal.wait_prompt(10).await;
    terminal.type_keys("and this one?\r");
    terminal.wait_for("In the old session.", 1).await;
    terminal.wait_prompt(11).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let sent = server.requests()[7].json()["messages"].to_string();
    assert!(
        sent.contains("the old session") && sent.contains("Old."),
        "{sent}"
    );
    assert!(!sent.contains("edit the notes"), "{sent}");
}

/// What the screen shows (a terminal model fed every byte written): the Markdown answer
/// rendered (a heading without `##`, a bordered table, a coloured fence), the diff in an
/// Edit's approval and under its result, and a failed command's exit status with its last
/// lines.
#[tokio::test]
async fn the_screen_shows_rendered_markdown_and_diffs() {
    let repo = repo("interactive-screen");
    let answer = "## Summary\n\nThe **fix** is in.\n\n| File | Lines |\n|---|--:|\n| notes.txt | 1 |\n\n```python\ndef check():\n    return True\n```\n";
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "notes.txt", "old_string": "milk", "new_string": "tea"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_b",
            "Bash",
            json!({"command": "echo one; echo two; exit 3"}),
        )),
        Reply::turn(Turn::new().text(answer)),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("fix the notes\r");
    terminal.wait_for("Allow?", 1).await;
    let shown = terminal.text();
    assert!(shown.contains("1 - remember the milk"), "{shown}");
    assert!(shown.contains("1 + remember the tea"), "{shown}");
    terminal.answer("y\r").await;
    terminal.wait_prompt(2).await;
    // The status line is under the input line while the session runs.
    let status = terminal.text();
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let shown = terminal.text();
    // `AGENT_SCREEN_CAPTURE=FILE` keeps the screen at the prompt after the turn (the user guide's
    // tour is one).
    if let Ok(path) = std::env::var("AGENT_SCREEN_CAPTURE") {
        std::fs::write(path, &status).unwrap();
    }
    assert!(
        shown.contains("⎿  Updated notes.txt with 1 addition and 1 removal"),
        "{shown}"
    );
    assert!(shown.contains("⎿  Exit code 3"), "{shown}");
    assert!(shown.contains("     two"), "{shown}");
    assert!(
        !shown.contains("Error: Error") && !shown.contains("error: Error"),
        "{shown}"
    );
    assert!(shown.contains("\nSummary\n"), "{shown}");
    assert!(
        !shown.contains("## Summary") && !shown.contains("**fix**"),
        "{shown}"
    );
    assert!(shown.contains("The fix is in."), "{shown}");
    assert!(shown.contains("┌───────────┬───────┐"), "{shown}");
    assert!(shown.contains("│ notes.txt │     1 │"), "{shown}");
    assert!(shown.contains("  def check():"), "{shown}");
    assert!(!shown.contains("```"), "{shown}");
    // The status line after the turn: model, mode, how full the context is against the
    // autocompact level, requests, the session's tokens and cost (testkit's usage: 100 in
    // and 20 out a request).
    assert!(
        status.contains(
            "─ claude-opus-4-8 · default · context 0% (100/167.0k) · 4 req · 400 in / 80 out · $"
        ),
        "{status}"
    );
    // The fence is coloured (24-bit), the heading bold.
    let bytes = terminal.screen.lock().unwrap().clone();
    let raw = String::from_utf8_lossy(&bytes);
    assert!(raw.contains("\x1b[38;2;"), "no colour in the fence");
    assert!(raw.contains("\x1b[1mSummary"), "the heading is not bold");
}

/// A stream that goes on while an approval is asked: the question and the text never share
/// a line, and every line of text arrives whole.
#[tokio::test]
async fn an_approval_in_the_middle_of_a_stream_does_not_interleave() {
    let repo = repo("interactive-interleave");
    let long =
        "A paragraph that streams in many small pieces, long enough to take a while. ".repeat(6);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                // No blank line after the text: its last block is drawn before the call's
                // question all the same.
                .text(&format!("Running a slow command.\n\n{long}"))
                .tool_use(
                    "toolu_b",
                    "Bash",
                    json!({"command": "echo approved", "dangerouslyDisableSandbox": true}),
                )
                .text(&format!("{long}\n\nAfter the call.")),
        ),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("go\r");
    terminal.wait_for("Allow?", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    terminal.answer("y\r").await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let mut parser = vt100::Parser::new(300, 120, 0);
    parser.process(&terminal.screen.lock().unwrap());
    let shown = parser.screen().contents();
    let lines: Vec<&str> = shown.lines().map(str::trim_end).collect();
    assert!(lines.contains(&"Running a slow command."), "{shown}");
    assert!(lines.contains(&"After the call."), "{shown}");
    assert!(lines.contains(&"Done."), "{shown}");
    let question = lines
        .iter()
        .find(|line| line.contains("needs approval"))
        .unwrap();
    assert!(
        question.starts_with("⏺ Bash(echo approved) needs approval"),
        "{shown}"
    );
    // The text before the call is on screen before the call's question.
    let last_text = lines
        .iter()
        .rposition(|line| line.contains("take a while."))
        .unwrap();
    let asked = lines
        .iter()
        .position(|line| line.contains("needs approval"))
        .unwrap();
    assert!(last_text < asked, "{shown}");
    // Every line of the paragraph is whole: it starts with the paragraph's words.
    for line in lines.iter().filter(|line| line.contains("streams in")) {
        assert!(!line.contains("Allow") && !line.contains('⏺'), "{line}");
    }
}

/// Ctrl-C typed during a turn (raw mode: a key, not a signal) aborts it: the command's process
/// is gone, the screen keeps no spinner, and the session goes on.
#[tokio::test]
async fn ctrl_c_as_a_key_aborts_a_running_command() {
    interrupt_a_running_command("\u{3}", "37").await;
}

/// Esc does the same.
#[tokio::test]
async fn esc_aborts_a_running_command() {
    interrupt_a_running_command("\u{1b}", "36").await;
}

/// Types `key` while `sleep SECONDS` runs: the turn stops, the process is gone, the session
/// goes on.
async fn interrupt_a_running_command(key: &str, seconds: &str) {
    let repo = repo(&format!("interactive-interrupt-{seconds}"));
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_sleep",
            "Bash",
            json!({"command": format!("sleep {seconds}")}),
        )),
        Reply::turn(Turn::new().text("Still here.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--allowedTools", "Bash(sleep:*)"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("wait a bit\r");
    terminal
        .wait_for(&format!("⏺ Bash(sleep {seconds})"), 1)
        .await;
    let sleep = format!("sleep\0{seconds}\0").into_bytes();
    wait_process(&sleep, true).await;
    terminal.type_keys(key);
    terminal
        .wait_for("interrupted while tools were running", 1)
        .await;
    terminal.wait_prompt(2).await;
    assert!(!process_running(&sleep), "the command outlived the abort");
    terminal.type_keys("are you there?\r");
    terminal.wait_for("Still here.", 1).await;
    terminal.wait_prompt(3).await;
    let second = messages(&server, 1);
    assert_eq!(second[2]["content"][0]["tool_use_id"], "toolu_sleep");
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Two calls run at once: each one's row shows its own state in place (the second's result
/// while the first still runs), and the scrollback keeps them in the order they started.
#[tokio::test]
async fn parallel_calls_are_updated_in_place() {
    let repo = repo("interactive-parallel");
    nix::unistd::mkfifo(&repo.dir.join("slow"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use("toolu_slow", "Bash", json!({"command": "cat slow"}))
                .tool_use("toolu_fast", "Bash", json!({"command": "echo second"})),
        ),
        Reply::turn(Turn::new().text("Both done.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("run both\r");
    // The fast call's result is on screen under its own line while the slow one runs.
    terminal
        .wait_until(|t| {
            t.shown()
                .contains("⏺ Bash(cat slow)\n  ⎿  running…\n⏺ Bash(echo second)\n  ⎿  second")
        })
        .await;
    std::fs::write(repo.dir.join("slow"), "first\n").unwrap();
    terminal.wait_for("Both done.", 1).await;
    terminal.wait_prompt(2).await;
    let text = terminal.text();
    assert!(
        text.contains("⏺ Bash(cat slow)\n  ⎿  first\n⏺ Bash(echo second)\n  ⎿  second"),
        "{text}"
    );
    assert!(!text.contains("running…"), "{text}");
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Ctrl-O shows the turn in full: every tool input and whole result (the summary shows one
/// line of a result).
#[tokio::test]
async fn ctrl_o_shows_the_turn_in_full() {
    let repo = repo("interactive-ctrl-o");
    std::fs::write(repo.dir.join("list.txt"), "alpha\nbeta\ngamma\ndelta\n").unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_cat", "Bash", json!({"command": "cat list.txt"}))),
        Reply::turn(Turn::new().text("Four words.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("list\r");
    terminal.wait_for("Four words.", 1).await;
    terminal.wait_prompt(2).await;
    let summary = terminal.text();
    // The summary is the output's last line, where a verdict would be.
    assert!(summary.contains("⎿  delta (4 lines)"), "{summary}");
    assert!(!summary.contains("gamma"), "{summary}");
    terminal.type_keys("\u{f}");
    terminal.wait_for("the turn in full", 1).await;
    let text = terminal.text();
    assert!(
        text.contains("  input:\n    {\n      \"command\": \"cat list.txt\"\n    }\n  result:\n    alpha\n    beta\n    gamma\n    delta"),
        "{text}"
    );
    terminal.type_keys("\u{f}");
    terminal.wait_for("summary view", 1).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Frames are synchronized updates (DEC mode 2026) only on a terminal that says it supports
/// them; the question is asked once at start and not waited on past 100 ms.
#[tokio::test]
async fn synchronized_output_only_where_the_terminal_supports_it() {
    const BEGIN: &str = "\x1b[?2026h";
    for sync in [false, true] {
        let repo = repo(&format!("interactive-sync-{sync}"));
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hello."))]))
            .await
            .unwrap();
        let mut terminal = Terminal::spawn_answering(command(&repo, &server), sync);
        terminal.wait_prompt(1).await;
        // Shift+Enter as the kitty keyboard protocol sends it: a newline, not Enter.
        // And `\` then Enter: a newline too.
        terminal.type_keys("hi\u{1b}[13;2uthere\\\ragain\r");
        terminal.wait_for("Hello.", 1).await;
        let first = messages(&server, 0);
        let content = first.last().unwrap()["content"].as_array().unwrap().clone();
        assert_eq!(content.last().unwrap()["text"], "hi\nthere\nagain");
        terminal.wait_prompt(2).await;
        terminal.type_keys("\u{4}");
        assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
        let raw = terminal.raw();
        assert_eq!(
            raw.matches("\x1b[?2026$p\x1b[?u\x1b]11;?\x1b\\\x1b[c")
                .count(),
            1,
            "asked once"
        );
        assert_eq!(raw.contains(BEGIN), sync, "sync {sync}: {raw:?}");
        // The keyboard protocol is pushed where the terminal answered for it, and popped.
        assert_eq!(raw.contains("\x1b[>1u"), sync);
        assert_eq!(raw.contains("\x1b[<u"), sync);
        if sync {
            assert_eq!(
                raw.matches(BEGIN).count(),
                raw.matches("\x1b[?2026l").count()
            );
        }
    }
}

/// A block still streaming shows its tail in the live region (raw, dim) before it is
/// complete and drawn rendered.
#[tokio::test]
async fn an_open_block_shows_while_it_streams() {
    let repo = repo("interactive-preview");
    let paragraph = format!(
        "{}the **end** OMEGA.",
        "Alpha words streaming slowly. ".repeat(40)
    );
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text(&paragraph)).faults(testkit::Faults {
            spread_over: Some(Duration::from_secs(3)),
            ..testkit::Faults::default()
        }),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("stream\r");
    let shown = terminal
        .wait_until(|t| t.shown().contains("Alpha words streaming slowly."))
        .await;
    assert!(
        !shown.contains("OMEGA"),
        "the whole text had arrived: {shown}"
    );
    terminal.wait_for("the end OMEGA.", 1).await;
    terminal.wait_prompt(2).await;
    let text = terminal.text();
    assert!(!text.contains("**end**"), "{text}");
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// The built-in commands: `/status`, `/context`, `/cost`, `/model`, `/permissions`, a
/// misspelt command's suggestion, `/compact` with a focus, `/init`.
#[tokio::test]
async fn slash_commands_report_and_act() {
    let repo = repo("interactive-slash");
    let mut replies: Vec<Reply> = ["One.", "Two.", "Three.", "Four."]
        .iter()
        .map(|text| Reply::turn(Turn::new().text(text)))
        .collect();
    replies.push(Reply::turn(
        Turn::new().text("SUMMARY: four numbers were said."),
    ));
    replies.push(Reply::turn(Turn::new().text("Five.")));
    replies.push(Reply::turn(Turn::new().text("Wrote AGENTS.md.")));
    let server = Server::start_tls(Script::new(replies)).await.unwrap();
    let mut command = command(&repo, &server);
    command.args(["--allowedTools", "Bash(ls:*)"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("/status\r");
    terminal.wait_for("Permission mode: default", 1).await;
    terminal.wait_for("Sandbox: ", 1).await;
    terminal.type_keys("/context\r");
    terminal.wait_for("used: nothing sent yet", 1).await;
    terminal.type_keys("one\r");
    terminal.wait_for("One.", 1).await;
    terminal.wait_prompt(4).await;
    terminal.type_keys("/cost\r");
    terminal.wait_for("Requests: 1", 1).await;
    terminal.type_keys("/context\r");
    terminal
        .wait_for("used 100 (0% of the autocompact level", 1)
        .await;
    terminal.type_keys("/permissions\r");
    terminal
        .wait_for("allow Bash(ls:*)  (--allowedTools)", 1)
        .await;
    terminal.type_keys("/agents\r");
    terminal.wait_for("  Explore (built-in", 1).await;
    terminal.type_keys("/modle\r");
    terminal.wait_for("did you mean /model?", 1).await;
    // `/model` alone: the picker, on the model in use; Esc leaves it.
    terminal.type_keys("/model\r");
    terminal.wait_for("Choose a model", 1).await;
    let screen = terminal.text();
    assert!(
        screen.contains("❯ opus ") && screen.contains("haiku") && screen.contains("in use now"),
        "{screen}"
    );
    terminal.type_keys("\x1b");
    terminal.wait_for("(unchanged)", 1).await;
    // Down to sonnet; a filter that still shows it keeps it chosen.
    terminal.type_keys("/model\r");
    terminal.wait_for("Choose a model", 1).await;
    terminal.type_keys("\x1b[B");
    terminal.wait_for("❯ sonnet", 1).await;
    terminal.type_keys("sonnet");
    terminal.wait_for("filter: sonnet", 1).await;
    terminal.type_keys("\r");
    terminal.wait_for("from the next request on.", 1).await;
    for (prompt, answer) in [("two", "Two."), ("three", "Three."), ("four", "Four.")] {
        terminal.type_keys(&format!("{prompt}\r"));
        terminal.wait_for(answer, 1).await;
    }
    terminal.wait_prompt(13).await;
    assert!(
        server.requests()[1].json()["model"]
            .as_str()
            .unwrap()
            .starts_with("claude-sonnet"),
        "{}",
        server.requests()[1].json()["model"]
    );
    terminal.type_keys("/compact keep the numbers\r");
    terminal.wait_for("compacted: ", 1).await;
    terminal.wait_prompt(14).await;
    let summary = messages(&server, 4);
    // The summary is a fork of the last main request: its bytes are that request's up to
    // the end of its messages (the prompt cache reads them), the same system and tools.
    common::assert_forks(
        &server.requests()[3].body,
        &server.requests()[4].body,
        "/compact's request forks the last main request",
    );
    assert_eq!(
        server.requests()[3].json()["tools"],
        server.requests()[4].json()["tools"]
    );
    let asked = summary.last().unwrap()["content"].to_string();
    assert!(
        asked.contains("Additional instructions from the user for this summary: keep the numbers"),
        "{asked}"
    );
    terminal.type_keys("five\r");
    terminal.wait_for("Five.", 1).await;
    let after = messages(&server, 5);
    // The first message: the user context, then the summary.
    let first = after[0]["content"][1]["text"].as_str().unwrap();
    assert!(
        first.starts_with("<compact-boundary>") && first.contains("SUMMARY: four numbers"),
        "{after:#?}"
    );
    assert!(
        after.len() < 10,
        "the history was not compacted: {after:#?}"
    );
    terminal.wait_prompt(15).await;
    terminal.type_keys("/init\r");
    terminal.wait_for("Wrote AGENTS.md.", 1).await;
    let init = messages(&server, 6);
    assert!(
        init.last().unwrap()["content"]
            .to_string()
            .contains("Please analyze this codebase and create an AGENTS.md"),
        "{init:#?}"
    );
    terminal.wait_prompt(16).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    // The compaction is in the transcript, as Claude Code writes a manual one.
    let sessions = repo.home.join("data/agent/projects");
    let project = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let transcript = std::fs::read_dir(&project)
        .unwrap()
        .flatten()
        .find(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        .unwrap()
        .path();
    let text = std::fs::read_to_string(transcript).unwrap();
    assert!(text.contains("\"trigger\":\"manual\""), "{text}");
}

/// Shift+Tab cycles default → acceptEdits → plan → default, shown in the status line; the
/// mode applies at once (an edit runs without a question in acceptEdits).
#[tokio::test]
async fn shift_tab_cycles_the_permission_mode() {
    let repo = repo("interactive-modes");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "new.txt", "content": "written\n"}),
        )),
        Reply::turn(Turn::new().text("Wrote it.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    let status = |terminal: &Terminal| {
        let shown = terminal.parser().screen().contents();
        shown
            .lines()
            .find(|line| line.starts_with("  ─ "))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        status(&terminal).contains(" · default"),
        "{}",
        status(&terminal)
    );
    terminal.type_keys("\u{1b}[Z");
    terminal
        .wait_until(|t| status(t).contains(" · acceptEdits"))
        .await;
    terminal.type_keys("write the file\r");
    terminal.wait_for("Wrote it.", 1).await;
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("new.txt")).unwrap(),
        "written\n"
    );
    assert!(
        !terminal.text().contains("needs approval"),
        "{}",
        terminal.text()
    );
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{1b}[Z");
    terminal.wait_until(|t| status(t).contains(" · plan")).await;
    terminal.type_keys("\u{1b}[Z");
    terminal
        .wait_until(|t| status(t).contains(" · default"))
        .await;
    terminal.type_keys("/status\r");
    terminal.wait_for("Permission mode: default", 1).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// In plan mode the model presents its plan with ExitPlanMode: a refusal with feedback goes
/// back to the model; an approval with "accept edits" leaves plan mode, and the edit that
/// follows runs without a question.
#[tokio::test]
async fn an_approved_plan_leaves_plan_mode() {
    let repo = repo("interactive-plan");
    let plan = json!({"plan": "## Plan\n\n1. Change **milk** to tea in notes.txt"});
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_p1", "ExitPlanMode", plan.clone())),
        Reply::turn(Turn::new().tool_use("toolu_p2", "ExitPlanMode", plan)),
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "notes.txt", "old_string": "milk", "new_string": "tea"}),
        )),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--permission-mode", "plan"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("change the notes\r");
    terminal.wait_for("Here is the plan:", 1).await;
    terminal
        .wait_for("1. Change milk to tea in notes.txt", 1)
        .await;
    terminal.answer("mention the date too\r").await;
    terminal.wait_for("Here is the plan:", 2).await;
    let refused = messages(&server, 1)[2]["content"][0].to_string();
    assert!(
        refused.contains("did not approve the plan and said: mention the date too"),
        "{refused}"
    );
    terminal.answer("a\r").await;
    terminal.wait_for("Done.", 1).await;
    terminal.wait_prompt(2).await;
    let approved = messages(&server, 2)[4]["content"][0].to_string();
    assert!(
        approved.contains("User has approved your plan") && approved.contains("acceptEdits"),
        "{approved}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "remember the tea\n"
    );
    // Only the two plan questions were asked; the edit ran in acceptEdits.
    assert_eq!(terminal.text().matches("needs approval").count(), 0);
    let shown = terminal.parser().screen().contents();
    assert!(shown.contains(" · acceptEdits"), "{shown}");
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// On a narrow terminal a question's long prompt gets rows of its own and the answer is
/// typed on a short one, visible; a long paste shows as a placeholder and is sent whole.
#[tokio::test]
async fn narrow_questions_and_long_pastes() {
    let repo = repo("interactive-narrow");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_t",
            "Bash",
            json!({"command": "touch x", "dangerouslyDisableSandbox": true}),
        )),
        Reply::turn(Turn::new().text("Touched.")),
        Reply::turn(Turn::new().text("Got the paste.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn_sized(command(&repo, &server), None, (24, 50));
    terminal.wait_prompt(1).await;
    terminal.type_keys("touch it\r");
    terminal.wait_for("then Enter:", 1).await;
    terminal.answer("yes").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let parser = terminal.parser();
        let screen = parser.screen();
        let row = usize::from(screen.cursor_position().0);
        let rows: Vec<String> = screen.rows(0, 50).collect();
        if rows[row].trim_end() == "  › yes" {
            break;
        }
        assert!(Instant::now() < deadline, "{}", screen.contents());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    terminal.type_keys("\r");
    terminal.wait_for("Touched.", 1).await;
    assert!(repo.dir.join("x").exists());
    terminal.wait_prompt(2).await;
    let pasted: String = (1..=12).map(|n| format!("row {n}\n")).collect();
    terminal.type_keys(&format!("\u{1b}[200~{pasted}\u{1b}[201~"));
    terminal.wait_for("[Pasted text #1 +12 lines]", 1).await;
    terminal.type_keys("\r");
    terminal.wait_for("Got the paste.", 1).await;
    let sent = messages(&server, 2).last().unwrap()["content"][0]["text"].clone();
    assert_eq!(sent, pasted.trim_end(), "{sent}");
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// A second Ctrl-C during a turn exits at once (130): an unsandboxed command's process is
/// killed, not left running, and the terminal gets its cursor back with the live region
/// erased.
#[tokio::test]
async fn a_second_ctrl_c_exits_and_leaves_nothing_running() {
    let repo = repo("interactive-hard-exit");
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().tool_use(
        "toolu_s",
        "Bash",
        json!({"command": "sleep 38; echo done"}),
    ))]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--sandbox", "off", "--allowedTools", "Bash"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("wait\r");
    let sleep = b"sleep\x0038\0";
    wait_process(sleep, true).await;
    terminal.type_keys("\u{3}\u{3}");
    assert_eq!(terminal.exit_code().await, 130, "{}", terminal.text());
    // Gone, not merely orphaned.
    wait_process(sleep, false).await;
    // The last bytes the process wrote may still be on their way from the terminal.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let raw = terminal.raw();
        if raw.rfind("\u{1b}[?25h") > raw.rfind("\u{1b}[?25l") {
            break;
        }
        assert!(Instant::now() < deadline, "the cursor was left hidden");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let shown = terminal.parser().screen().contents();
    assert!(!shown.contains("Running"), "{shown}");
}

/// `!command` runs the command (sandboxed) and its output goes to the model with the next
/// prompt; `@path` (completed with Tab) attaches the file as a Read, so an Edit may follow
/// without the model reading it first.
#[tokio::test]
async fn bang_commands_and_file_mentions() {
    let repo = repo("interactive-bang-at");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("It printed hi.")),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "notes.txt", "old_string": "milk", "new_string": "tea"}),
        )),
        Reply::turn(Turn::new().text("Edited.")),
        Reply::turn(Turn::new().text("That was text.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--permission-mode", "acceptEdits"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("!echo hi\r");
    terminal.wait_for("⎿  hi", 1).await;
    terminal.wait_prompt(2).await;
    assert_eq!(server.request_count(), 0, "a command is not a prompt");
    terminal.type_keys("what did it print?\r");
    terminal.wait_for("It printed hi.", 1).await;
    let first = messages(&server, 0);
    let sent = first.last().unwrap()["content"].to_string();
    assert!(sent.contains("<bash-input>echo hi</bash-input>"), "{sent}");
    assert!(sent.contains("<bash-stdout>hi"), "{sent}");
    assert!(sent.contains("what did it print?"), "{sent}");
    terminal.wait_prompt(3).await;
    terminal.type_keys("change @no\t");
    terminal.wait_for("› change @notes.txt ", 1).await;
    terminal.type_keys("to tea\r");
    terminal.wait_for("Edited.", 1).await;
    let second = messages(&server, 1);
    let sent = second.last().unwrap()["content"].to_string();
    assert!(
        sent.contains("Called the Read tool with the following input")
            && sent.contains("remember the milk"),
        "{sent}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "remember the tea\n",
        "the mention did not count as a read"
    );
    terminal.wait_prompt(4).await;
    // A pasted `!command` is text for the model, not a command: nothing runs.
    terminal.type_keys("\u{1b}[200~!touch pastejack\u{1b}[201~\r");
    terminal.wait_for("That was text.", 1).await;
    assert!(!repo.dir.join("pastejack").exists());
    let third = messages(&server, 3);
    assert!(
        third.last().unwrap()["content"]
            .to_string()
            .contains("!touch pastejack"),
        "{third:#?}"
    );
    terminal.wait_prompt(5).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// `!command` is the user's own shell: it runs outside the sandbox (`git stash` writes
/// `.git`, which no sandbox profile may), with the user's environment less the API keys.
/// The user's setting `sandbox.userCommands: "sandboxed"` puts it back in the sandbox.
#[tokio::test]
async fn bang_commands_run_in_the_users_shell() {
    let repo = repo("interactive-bang-shell");
    std::fs::write(repo.dir.join("notes.txt"), "changed\n").unwrap();
    let user = repo.home.join("config/agent");
    std::fs::create_dir_all(&user).unwrap();
    let provider =
        json!({"type": "openai", "baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "OTHER_KEY"});
    std::fs::write(
        user.join("settings.json"),
        json!({"providers": {"other": provider}}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![])).await.unwrap();
    let mut launch = command(&repo, &server);
    for (name, value) in [
        ("GIT_AUTHOR_NAME", "t"),
        ("GIT_AUTHOR_EMAIL", "t@t"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@t"),
        ("USER_MARK", "seen"),
        ("OTHER_KEY", "sk-other"),
    ] {
        launch.env(name, value);
    }
    let mut terminal = Terminal::spawn(launch);
    terminal.wait_prompt(1).await;
    terminal.type_keys("!echo \"[$USER_MARK][$ANTHROPIC_API_KEY][$OTHER_KEY]\"\r");
    terminal.wait_for("⎿  [seen][][]", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("!git stash\r");
    terminal.wait_for("Saved working directory", 1).await;
    terminal.wait_prompt(3).await;
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("notes.txt")).unwrap(),
        "remember the milk\n",
        "{}",
        terminal.text()
    );
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());

    // Back in the sandbox by the user's choice: `.git` cannot be written.
    if common::sandbox_backends().is_empty() {
        return;
    }
    std::fs::write(
        user.join("settings.json"),
        json!({"sandbox": {"userCommands": "sandboxed"}}).to_string(),
    )
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("!touch .git/planted; echo \"exit=$?\"\r");
    terminal.wait_for("exit=", 1).await;
    terminal.wait_prompt(2).await;
    assert!(
        !repo.dir.join(".git/planted").exists(),
        "{}",
        terminal.text()
    );
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Attack (review of issue 35): the model plants `sub/.git/config` with an fsmonitor program
/// and `cd`s there; the user's `!git status` runs unsandboxed, but in the folder the session
/// started in, so the planted program does not run.
#[tokio::test]
async fn a_bang_command_does_not_start_where_the_model_went() {
    if common::sandbox_backends().is_empty() {
        return;
    }
    let repo = repo("interactive-bang-planted");
    let marker = repo.home.join("PWNED-by-model");
    let plant = format!(
        "mkdir -p sub/.git/objects sub/.git/refs && echo 'ref: refs/heads/main' > sub/.git/HEAD && printf '[core]\\n\\tfsmonitor = \"id > {} ; false\"\\n' > sub/.git/config && cd sub",
        marker.display()
    );
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_b", "Bash", json!({ "command": plant }))),
        Reply::turn(Turn::new().text("Set up.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--permission-mode", "acceptEdits"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("set things up\r");
    terminal.wait_for("Set up.", 1).await;
    terminal.wait_prompt(2).await;
    assert!(
        repo.dir.join("sub/.git/config").exists(),
        "{}",
        terminal.text()
    );
    terminal.type_keys("!git status; pwd\r");
    terminal.wait_prompt(3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !marker.exists(),
        "the model's program ran: {}",
        terminal.text()
    );
    assert!(
        !terminal
            .text()
            .contains(&format!("{}/sub", repo.dir.display())),
        "{}",
        terminal.text()
    );
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Ctrl-R searches the prompts typed before: the match goes into the line, Enter sends it.
#[tokio::test]
async fn ctrl_r_finds_an_earlier_prompt() {
    let repo = repo("interactive-search");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("One.")),
        Reply::turn(Turn::new().text("Two.")),
        Reply::turn(Turn::new().text("Again.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("first thing to do\r");
    terminal.wait_for("One.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("second thing\r");
    terminal.wait_for("Two.", 1).await;
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{12}fir");
    terminal
        .wait_for("(reverse-i-search)`fir': first thing to do", 1)
        .await;
    terminal.type_keys("\r");
    terminal.wait_prompt(3).await;
    terminal.type_keys("\r");
    terminal.wait_for("Again.", 1).await;
    assert_eq!(
        messages(&server, 2).last().unwrap()["content"][0]["text"],
        "first thing to do"
    );
    terminal.wait_prompt(4).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// "Always" for an edit is Claude Code's "allow all edits this session": the mode becomes
/// acceptEdits, so the next Write runs unasked. `p` also keeps the rule `Edit` in the
/// project's local settings (`.agent/settings.local.json` here: the project has no
/// `.claude/`), named in the question; `/permissions` shows the mode.
#[tokio::test]
async fn always_for_an_edit_allows_every_edit_and_p_keeps_it_for_the_project() {
    let repo = repo("interactive-always");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "new.txt", "content": "hello\n"}),
        )),
        Reply::turn(Turn::new().text("Written.")),
        Reply::turn(Turn::new().tool_use(
            "toolu_w2",
            "Write",
            json!({"file_path": "other.txt", "content": "again\n"}),
        )),
        Reply::turn(Turn::new().text("Also written.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.arg("--trust");
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("write it\r");
    terminal.wait_for("Allow?", 1).await;
    let local = repo
        .dir
        .canonicalize()
        .unwrap()
        .join(".agent/settings.local.json");
    terminal
        .wait_for(
            "[a]lways: acceptEdits mode: file edits, and commands writing the workspace in the sandbox, this session",
            1,
        )
        .await;
    terminal
        .wait_for("[p]: always, and keep `Edit` for this project", 1)
        .await;
    let shown = terminal.text().replace('\n', "");
    assert!(shown.contains(&local.display().to_string()), "{shown}");
    terminal.answer("p\r").await;
    terminal.wait_for("Written.", 1).await;
    terminal.wait_prompt(2).await;
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&local).unwrap()).unwrap();
    assert_eq!(saved["permissions"]["allow"], json!(["Edit"]));
    terminal.type_keys("and the other\r");
    terminal.wait_for("Also written.", 1).await;
    assert_eq!(terminal.text().matches("Allow?").count(), 1, "asked again");
    assert!(repo.dir.join("other.txt").exists());
    terminal.wait_prompt(3).await;
    terminal.type_keys("/permissions\r");
    terminal.wait_for("Permission mode: acceptEdits", 1).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Escalation without the model: a command the read-only sandbox refused a workspace write
/// is put to the user (no failed call reaches the model) and runs again with the workspace
/// writable; `u` allows its prefix for the session and keeps `Bash(cp:*)` in the user's
/// settings (an untrusted folder offers no project file). The next `cp` runs unasked.
#[tokio::test]
async fn a_refused_workspace_write_is_asked_about_and_always_allows_the_prefix() {
    if common::sandbox_backends().is_empty() {
        return;
    }
    let repo = repo("interactive-escalate");
    std::fs::create_dir_all(repo.dir.join("out")).unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_cp",
            "Bash",
            json!({"command": "cp notes.txt out/copy.txt"}),
        )),
        Reply::turn(Turn::new().text("Copied.")),
        Reply::turn(Turn::new().tool_use(
            "toolu_cp2",
            "Bash",
            json!({"command": "cp notes.txt out/copy2.txt"}),
        )),
        Reply::turn(Turn::new().text("Copied again.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("copy the notes\r");
    terminal
        .wait_for("needs approval: it needs to write the workspace", 1)
        .await;
    let user = repo.home.join("config/agent/settings.json");
    terminal
        .wait_for(
            "[a]lways: `Bash(cp:*)` commands, in the sandbox, this session",
            1,
        )
        .await;
    terminal
        .wait_for("[u]: always, and keep `Bash(cp:*)` for you", 1)
        .await;
    let shown = terminal.text().replace('\n', "");
    assert!(shown.contains(&user.display().to_string()), "{shown}");
    assert!(!terminal.text().contains("[p]:"), "{}", terminal.text());
    terminal.answer("u\r").await;
    terminal.wait_for("Copied.", 1).await;
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("out/copy.txt")).unwrap(),
        "remember the milk\n"
    );
    let result = messages(&server, 1).last().unwrap()["content"][0].to_string();
    assert!(
        result.contains("ran again with the workspace writable"),
        "{result}"
    );
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&user).unwrap()).unwrap();
    assert_eq!(saved["permissions"]["allow"], json!(["Bash(cp:*)"]));
    terminal.wait_prompt(2).await;
    terminal.type_keys("once more\r");
    terminal.wait_for("Copied again.", 1).await;
    assert!(repo.dir.join("out/copy2.txt").exists());
    assert_eq!(terminal.text().matches("Allow?").count(), 1, "asked again");
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// "Always" for an MCP tool allows the tool, whatever its input, for the session.
#[tokio::test]
async fn always_for_an_mcp_tool_allows_the_tool() {
    let kit = std::path::PathBuf::from(env!("CARGO_BIN_EXE_agent")).with_file_name("testkit");
    if !kit.is_file() {
        assert!(
            !std::env::var("CI").is_ok_and(|ci| ci == "true"),
            "CI builds {}",
            kit.display()
        );
        eprintln!(
            "NOTE: MCP always test skipped: {} is not built",
            kit.display()
        );
        return;
    }
    let repo = repo("interactive-always-mcp");
    let file = repo.home.join("mcp.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"kit": {"command": kit, "args": ["mcp-server"]}}}).to_string(),
    )
    .unwrap();
    let first = repo.home.join("first.txt");
    let second = repo.home.join("second.txt");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_m1",
            "mcp__kit__write",
            json!({"path": first, "text": "one"}),
        )),
        Reply::turn(Turn::new().text("One.")),
        Reply::turn(Turn::new().tool_use(
            "toolu_m2",
            "mcp__kit__write",
            json!({"path": second, "text": "two"}),
        )),
        Reply::turn(Turn::new().text("Two.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command
        .env("MCP_STARTUP_WAIT_MS", "10000")
        .args(["--mcp-config", file.to_str().unwrap()]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("write one\r");
    terminal
        .wait_for("[a]lways: the tool mcp__kit__write, this session", 1)
        .await;
    terminal.answer("a\r").await;
    terminal.wait_for("One.", 1).await;
    terminal.wait_for("⏺ kit - write(path: \"", 1).await;
    assert!(terminal.text().contains("(MCP)"), "{}", terminal.text());
    terminal.wait_prompt(2).await;
    terminal.type_keys("write two\r");
    terminal.wait_for("Two.", 1).await;
    assert_eq!(terminal.text().matches("Allow?").count(), 1, "asked again");
    assert!(first.exists() && second.exists());
    terminal.wait_prompt(3).await;
    terminal.type_keys("/permissions\r");
    terminal
        .wait_for(
            "allow mcp__kit__write  (answered \"always\" in this session)",
            1,
        )
        .await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Esc at an approval stops the turn: the call gets the rejection as its result, the model
/// is not called again, and the prompt is back; the next prompt carries the rejection.
#[tokio::test]
async fn esc_at_an_approval_stops_the_turn() {
    let repo = repo("interactive-esc-approval");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("I will write it.").tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "new.txt", "content": "hello\n"}),
        )),
        Reply::turn(Turn::new().text("Waiting for you.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("write it\r");
    terminal.wait_for("Allow?", 1).await;
    terminal.answer("\u{1b}").await;
    terminal.wait_prompt(2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.request_count(), 1, "the model was called again");
    assert!(!repo.dir.join("new.txt").exists());
    terminal.type_keys("what now?\r");
    terminal.wait_for("Waiting for you.", 1).await;
    let sent = messages(&server, 1);
    let result = sent[sent.len() - 1]["content"].to_string();
    assert!(
        result.contains("rejected this tool use and stopped the turn"),
        "{sent:#?}"
    );
    assert!(
        result.contains("[Request interrupted by user for tool use]"),
        "{sent:#?}"
    );
    assert!(result.contains("what now?"), "{sent:#?}");
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Esc mid-answer keeps what the model had said, followed by Claude Code's interruption
/// marker: the next request carries both before the next prompt, so "go on" is not
/// ambiguous to the model.
#[tokio::test]
async fn esc_mid_answer_keeps_the_partial_answer_and_marks_the_interruption() {
    let repo = repo("interactive-esc-answer");
    let turn = Turn::new().text("The first half is here. Then the rest.");
    let bytes = turn.sse();
    let text = String::from_utf8_lossy(&bytes);
    let first = text.find("text_delta").unwrap();
    let stall = text[first..].find("\n\n").unwrap() + first + 2;
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(turn).faults(testkit::Faults {
            stall_after: Some(stall),
            ..testkit::Faults::default()
        }),
        Reply::turn(Turn::new().text("Going on.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("explain\r");
    while server.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    terminal.type_keys("\u{1b}");
    terminal.wait_prompt(2).await;
    terminal.type_keys("go on\r");
    terminal.wait_for("Going on.", 1).await;
    let sent = messages(&server, 1);
    assert_eq!(sent[1]["role"], "assistant", "{sent:#?}");
    assert_eq!(sent[1]["content"][0]["text"], "The first hal", "{sent:#?}");
    let next = sent[2]["content"].to_string();
    assert!(next.contains("[Request interrupted by user]"), "{next}");
    assert!(next.contains("go on"), "{next}");
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// A stream that breaks after part of the answer was drawn is asked again: the drawn part is
/// marked discarded on the screen, and the new answer follows it.
#[tokio::test]
async fn text_of_a_broken_stream_is_marked_discarded() {
    let repo = repo("interactive-discarded");
    let turn = Turn::new().text("Lost words that never finish.\n\nMore of it.");
    let bytes = turn.sse();
    let text = String::from_utf8_lossy(&bytes);
    let second = text.match_indices("text_delta").nth(1).unwrap().0;
    let cut = text[second..].find("\n\n").unwrap() + second + 2;
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(turn).faults(testkit::Faults {
            reset_after: Some(cut),
            ..testkit::Faults::default()
        }),
        Reply::turn(Turn::new().text("Kept answer.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("answer\r");
    terminal.wait_for("Kept answer.", 1).await;
    let screen = terminal.text();
    let marked = screen
        .find("is discarded; retrying")
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(screen[..marked].contains("Lost words"), "{screen}");
    assert!(screen[marked..].contains("Kept answer."), "{screen}");
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// A command's colours show on the terminal; the model reads its output without them.
#[tokio::test]
async fn command_colours_show_on_the_terminal_not_for_the_model() {
    let repo = repo("interactive-colour");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_c",
            "Bash",
            json!({"command": "printf '\\033[31mFAILED\\033[0m one test\\n'; exit 1"}),
        )),
        Reply::turn(Turn::new().text("One test failed.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--allowedTools", "Bash(printf:*)"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("run it\r");
    terminal.wait_for("One test failed.", 1).await;
    assert!(
        terminal.raw().contains("\x1b[31mFAILED\x1b[0m one test"),
        "{:?}",
        terminal.raw()
    );
    let result = messages(&server, 1).last().unwrap()["content"][0].clone();
    let text = result["content"].to_string();
    assert!(text.contains("FAILED one test"), "{text}");
    assert!(!text.contains("\\u001b"), "{text}");
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// The model's task list (Claude Code 2.1's TaskCreate and TaskUpdate): it shows under the
/// status line (Ctrl-T hides and shows it); `/todos` prints it; a resumed session has it
/// back.
#[tokio::test]
async fn the_todo_list_shows_under_the_status_line_and_survives_a_resume() {
    let repo = repo("interactive-todos");
    let create = |id: &str, subject: &str, active: &str| {
        (
            id.to_owned(),
            json!({"subject": subject, "description": subject, "activeForm": active}),
        )
    };
    let mut turn = Turn::new();
    for (id, input) in [
        create("toolu_c1", "Read the code", "Reading the code"),
        create("toolu_c2", "Run the build", "Running the build"),
        create("toolu_c3", "Write the tests", "Writing the tests"),
    ] {
        turn = turn.tool_use(&id, "TaskCreate", input);
    }
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(turn),
        Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_u1",
                    "TaskUpdate",
                    json!({"taskId": "1", "status": "completed"}),
                )
                .tool_use(
                    "toolu_u2",
                    "TaskUpdate",
                    json!({"taskId": "2", "status": "in_progress"}),
                ),
        ),
        Reply::turn(Turn::new().text("Planned.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("plan the work\r");
    terminal.wait_for("Planned.", 1).await;
    terminal.wait_prompt(2).await;
    // The rows, then the live list under the status line.
    terminal.wait_for("⏺ TaskCreate", 1).await;
    terminal.wait_for("◐ Running the build", 1).await;
    terminal.wait_for("☐ Write the tests", 1).await;
    let screen = terminal.text();
    let status = screen.rfind("─ claude-opus-4-8").unwrap();
    assert!(screen[status..].contains("☐ Write the tests"), "{screen}");
    assert!(screen[status..].contains("☒ Read the code"), "{screen}");
    let created = messages(&server, 1).last().unwrap()["content"][0].to_string();
    assert!(
        created.contains("Task #1 created: Read the code"),
        "{created}"
    );
    // Ctrl-T hides it.
    terminal.type_keys("\u{14}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let screen = terminal.text();
    let status = screen.rfind("─ claude-opus-4-8").unwrap();
    assert!(!screen[status..].contains("Write the tests"), "{screen}");
    terminal.type_keys("/todos\r");
    terminal.wait_for("The model's task list:", 1).await;
    terminal.wait_prompt(3).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());

    // Resumed: the list is back, rebuilt from the history.
    let server = Server::start_tls(Script::new(vec![])).await.unwrap();
    let mut command = command(&repo, &server);
    command.arg("--continue");
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.wait_for("◐ Running the build", 1).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// AskUserQuestion: the questions with numbered options and "Other"; the picked label (or
/// the user's own words) is the answer the model receives.
#[tokio::test]
async fn ask_user_question_shows_the_options_and_returns_the_answers() {
    let repo = repo("interactive-ask");
    let questions = json!([
        {"question": "Which date library should we use?", "header": "Library", "multiSelect": false,
         "options": [
            {"label": "chrono (Recommended)", "description": "the usual choice"},
            {"label": "time", "description": "smaller"}]},
        {"question": "Which targets matter?", "header": "Targets", "multiSelect": true,
         "options": [
            {"label": "Linux", "description": ""},
            {"label": "macOS", "description": ""},
            {"label": "Windows", "description": ""}]},
    ]);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_q",
            "AskUserQuestion",
            json!({"questions": questions}),
        )),
        Reply::turn(Turn::new().text("Noted.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("set it up\r");
    terminal
        .wait_for("⏺ [Library] Which date library should we use?", 1)
        .await;
    terminal.wait_for("1. chrono (Recommended)", 1).await;
    terminal.wait_for("3. Other: type your own answer", 1).await;
    terminal.answer("2\r").await;
    terminal
        .wait_for("⏺ [Targets] Which targets matter?", 1)
        .await;
    terminal.answer("1, 3\r").await;
    terminal.wait_for("Noted.", 1).await;
    let result = messages(&server, 1).last().unwrap()["content"][0].to_string();
    assert!(
        result.contains("\\\"Which date library should we use?\\\": time"),
        "{result}"
    );
    assert!(
        result.contains("\\\"Which targets matter?\\\": Linux, Windows"),
        "{result}"
    );
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// EnterPlanMode: the model asks to plan first; approved, the session is in plan mode (a
/// Write is then refused).
#[tokio::test]
async fn enter_plan_mode_asks_and_switches_the_mode() {
    let repo = repo("interactive-enter-plan");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_p", "EnterPlanMode", json!({}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "x.txt", "content": "x"}),
        )),
        Reply::turn(Turn::new().text("I will plan.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("refactor everything\r");
    terminal.wait_for("Switch to plan mode?", 1).await;
    terminal.answer("y\r").await;
    terminal.wait_for("I will plan.", 1).await;
    assert!(!repo.dir.join("x.txt").exists());
    let refused = messages(&server, 2).last().unwrap()["content"][0].to_string();
    assert!(refused.contains("plan mode"), "{refused}");
    terminal.wait_prompt(2).await;
    terminal.type_keys("/permissions\r");
    terminal.wait_for("Permission mode: plan", 1).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// An edit that cannot apply (its text is not in the file) fails at once with the tool's
/// error: no question is put.
#[tokio::test]
async fn an_edit_that_cannot_apply_fails_without_a_question() {
    let repo = repo("interactive-validate");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "notes.txt", "old_string": "eggs", "new_string": "tea"}),
        )),
        Reply::turn(Turn::new().text("It is not there.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("swap eggs for tea\r");
    terminal.wait_for("It is not there.", 1).await;
    assert!(!terminal.text().contains("Allow?"), "{}", terminal.text());
    let result = messages(&server, 2).last().unwrap()["content"][0].to_string();
    assert!(result.contains("old_string was not found"), "{result}");
    // The error in full on the row, wrapped, not cut at 100 characters.
    let shown = terminal.text().replace('\n', "");
    assert!(
        shown.contains("Read the file again to see its current text"),
        "{shown}"
    );
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// A rule the user saves for later sessions in a trusted folder's
/// `.agent/settings.local.json` is the user's own change: the next session neither asks
/// about the folder again nor ignores its settings.
#[tokio::test]
async fn a_saved_rule_is_no_change_for_folder_trust() {
    let repo = repo("interactive-always-recorded");
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("settings.json"),
        json!({"trustedFolders": [repo.dir]}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "new.txt", "content": "hello\n"}),
        )),
        Reply::turn(Turn::new().text("Written.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    assert!(
        terminal.raw().contains("is now recorded"),
        "{}",
        terminal.text()
    );
    terminal.type_keys("write it\r");
    terminal.wait_for("Allow?", 1).await;
    terminal.answer("p\r").await;
    terminal.wait_for("Written.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    assert!(
        !terminal.raw().contains("not recorded as trusted"),
        "{}",
        terminal.text()
    );
    assert!(repo.dir.join(".agent/settings.local.json").exists());

    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hi."))]))
        .await
        .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "hi"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("changed since"), "{stderr}");
    assert!(!stderr.contains("not a trusted folder"), "{stderr}");
}

/// A 1x1 PNG.
const ONE_PIXEL_PNG: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A file dropped on the terminal (its path pasted, quoted as file managers paste it, from
/// outside the workspace) becomes `[Image #1]` in the line, and the image itself goes with
/// the prompt.
#[tokio::test]
async fn a_pasted_image_path_attaches_the_image() {
    let repo = repo("interactive-pasted-image");
    let desktop = repo.home.join("My Shots");
    std::fs::create_dir_all(&desktop).unwrap();
    std::fs::write(desktop.join("screen shot.png"), ONE_PIXEL_PNG).unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(
        Turn::new().text("One red pixel."),
    )]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("what is in ");
    let pasted = format!("'{}'", desktop.join("screen shot.png").display());
    terminal.type_keys(&format!("\u{1b}[200~{pasted}\u{1b}[201~"));
    terminal.wait_for("what is in [Image #1]", 1).await;
    terminal.type_keys("?\r");
    terminal.wait_for("One red pixel.", 1).await;
    terminal.wait_for("[Image #1]: attached", 1).await;
    let content = messages(&server, 0).last().unwrap()["content"].clone();
    let blocks = content.as_array().unwrap();
    let image = blocks
        .iter()
        .find(|block| block["type"] == "image")
        .unwrap_or_else(|| panic!("{content:#}"));
    assert_eq!(image["source"]["media_type"], "image/png");
    assert!(
        blocks
            .iter()
            .any(|block| block["text"] == "what is in [Image #1] ?"),
        "{content:#}"
    );
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// A Claude Code user's interactive setup: the `statusLine` command's output replaces the
/// status line (it gets Claude Code's status JSON), a Notification hook hears of each
/// question, `/clear` ends the session and starts another for the hooks, and leaving ends it.
#[tokio::test]
async fn status_line_and_session_hooks_at_the_terminal() {
    let repo = repo("interactive-status-line");
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    let record = "python3 -c 'import json,sys; e=json.load(sys.stdin); open(\".events\",\"a\").write(e[\"hook_event_name\"]+\" \"+str(e.get(\"source\") or e.get(\"reason\") or e.get(\"notification_type\"))+\"\\n\")'";
    let status = "python3 -c 'import json,sys; e=json.load(sys.stdin); print(\"\\033[32mSL \"+e[\"model\"][\"id\"]+\" \"+e[\"permission_mode\"]+\" \"+str(e[\"context_window\"][\"context_window_size\"])+\"\\033[0m\")'";
    let hook = json!([{"hooks": [{"type": "command", "command": record}]}]);
    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        json!({
            "statusLine": {"type": "command", "command": status},
            "hooks": {"SessionStart": hook, "SessionEnd": hook, "Notification": hook},
            "preferredNotifChannel": "ghostty",
        })
        .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_w",
            "Write",
            json!({"file_path": "made.txt", "content": "made\n"}),
        )),
        Reply::turn(Turn::new().text("Written.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--trust", "--model", "claude-sonnet-4-5"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal
        .wait_for("SL claude-sonnet-4-5 default 200000", 1)
        .await;
    terminal.type_keys("write it\r");
    terminal.wait_for("needs approval", 1).await;
    terminal.answer("y\r").await;
    terminal.wait_for("Written.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("/clear\r");
    terminal.wait_for("Started session", 1).await;
    // The screen and its scrollback were cleared, as Claude Code's /clear does: the input
    // line is the only prompt row left.
    terminal.wait_prompt(1).await;
    let after = terminal.text();
    assert!(
        !after.contains("write it") && !after.contains("Written."),
        "{after}"
    );
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    // The status line keeps its colour; the built-in one is not drawn.
    let screen = terminal.raw();
    // The question sent the terminal a notification on the channel the settings name.
    assert!(
        screen.contains("\u{1b}]777;notify;agent;agent needs your answer\u{7}"),
        "{screen}"
    );
    assert!(
        screen.contains("\u{1b}[32mSL claude-sonnet-4-5 default 200000\u{1b}[0m"),
        "{screen}"
    );
    assert!(!terminal.text().contains("─ claude-sonnet-4-5 · default"));
    assert_eq!(
        std::fs::read_to_string(repo.dir.join(".events")).unwrap(),
        "SessionStart startup\nNotification permission_prompt\nSessionEnd clear\nSessionStart clear\nSessionEnd prompt_input_exit\n"
    );
}

/// A `.mcp.json` server that no setting approved yet (the project's local settings name
/// another) is asked about once at start-up, as Claude Code asks; the answer is kept in
/// `.claude/settings.local.json`, so the next session does not ask.
#[tokio::test]
async fn a_new_mcpjson_server_is_asked_about_once() {
    let repo = repo("interactive-mcpjson");
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    std::fs::write(
        repo.dir.join(".mcp.json"),
        json!({"mcpServers": {
            "known": {"command": "true"},
            "fresh": {"command": "true", "args": ["--fresh"]},
        }})
        .to_string(),
    )
    .unwrap();
    let local = repo.dir.join(".claude/settings.local.json");
    std::fs::write(
        &local,
        json!({"enabledMcpjsonServers": ["known"]}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(Vec::new())).await.unwrap();
    let mut first = command(&repo, &server);
    first.arg("--trust");
    let mut terminal = Terminal::spawn(first);
    terminal
        .wait_for("This project's .mcp.json has a new MCP server: fresh", 1)
        .await;
    assert!(
        terminal.text().contains("true --fresh"),
        "{}",
        terminal.text()
    );
    terminal.answer("n\r").await;
    terminal.wait_prompt(1).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&local).unwrap()).unwrap();
    assert_eq!(
        kept,
        json!({"enabledMcpjsonServers": ["known"], "disabledMcpjsonServers": ["fresh"]})
    );

    let mut second = command(&repo, &server);
    second.arg("--trust");
    let mut terminal = Terminal::spawn(second);
    terminal.wait_prompt(1).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    assert!(
        !terminal.text().contains("new MCP server"),
        "{}",
        terminal.text()
    );
}

/// A while at the prompt (Claude Code's `messageIdleNotifThresholdMs`, here half a second)
/// and the Notification hooks hear that the agent waits for the user (`idle_prompt`).
#[tokio::test]
async fn an_idle_prompt_is_a_notification() {
    let repo = repo("interactive-idle");
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    let record = "python3 -c 'import json,sys; e=json.load(sys.stdin); open(\".events\",\"a\").write(e[\"notification_type\"]+\" \"+e[\"message\"]+\"\\n\")'";
    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        json!({"hooks": {"Notification": [{"matcher": "idle_prompt", "hooks": [{"type": "command", "command": record}]}]}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        repo.home.join(".claude.json"),
        json!({"messageIdleNotifThresholdMs": 500}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(Vec::new())).await.unwrap();
    let mut command = command(&repo, &server);
    command.arg("--trust");
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    assert_eq!(
        std::fs::read_to_string(repo.dir.join(".events")).unwrap_or_default(),
        "idle_prompt agent is waiting for your input\n"
    );
}

/// A hook's `terminalSequence` reaches the terminal, only what Claude Code permits of it:
/// a title or notification sequence passes, a clipboard write (OSC 52) does not.
#[tokio::test]
async fn a_hooks_terminal_sequence_reaches_the_terminal_filtered() {
    let repo = repo("interactive-terminal-sequence");
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    let answer = r#"python3 -c 'import json; print(json.dumps({"terminalSequence": "\u001b]0;HOOK-TITLE\u0007\u001b]52;c;UFdORUQ=\u0007"}))'"#;
    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": answer}]}]}})
            .to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Hello."))]))
        .await
        .unwrap();
    let mut command = command(&repo, &server);
    command.arg("--trust");
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("hi\r");
    terminal.wait_for("Hello.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    let raw = terminal.raw();
    assert!(raw.contains("\u{1b}]0;HOOK-TITLE\u{7}"), "{raw:?}");
    assert!(!raw.contains("UFdORUQ="), "{raw:?}");
}

/// The `statusLine` follows the turn, as Claude Code's does: once the first response is
/// counted, its command runs again while the turn is still going (a tool still running).
#[tokio::test]
async fn the_status_line_is_refreshed_during_a_turn() {
    let repo = repo("interactive-status-follow");
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    let status = "python3 -c 'import json,sys; e=json.load(sys.stdin); print(\"SL-\" + (\"BUSY\" if e[\"context_window\"][\"total_output_tokens\"] else \"IDLE\"))'";
    std::fs::write(
        repo.dir.join(".claude/settings.json"),
        json!({"statusLine": {"type": "command", "command": status}}).to_string(),
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use("toolu_s", "Bash", json!({"command": "sleep 4"}))),
        Reply::turn(Turn::new().text("Slept.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--trust", "--allowedTools", "Bash(sleep:*)"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.wait_for("SL-IDLE", 1).await;
    terminal.type_keys("nap\r");
    terminal.wait_for("SL-BUSY", 1).await;
    // Still within the turn: the command is still sleeping.
    assert!(!terminal.text().contains("Slept."), "{}", terminal.text());
    terminal.wait_for("Slept.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// A background command at an idle prompt: the status line counts it while it runs; when it
/// ends, the session wakes and a turn tells the model (no prompt typed); `/tasks` lists it
/// and `/tasks stop` of a finished one says so.
#[tokio::test]
async fn an_idle_session_wakes_when_a_background_task_ends() {
    let repo = repo("interactive-wake");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_bg",
            "Bash",
            json!({"command": "sleep 2; echo BUILD-OK", "run_in_background": true, "description": "slow build"}),
        )),
        Reply::turn(Turn::new().text("Started the build.")),
        Reply::turn(Turn::new().text("The build finished fine.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--allowedTools", "Bash"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("build it\r");
    terminal.wait_for("Started the build.", 1).await;
    terminal.wait_for("· 1 background task", 1).await;
    // Nothing typed: the task's end starts the next turn.
    terminal.wait_for("The build finished fine.", 1).await;
    let told = messages(&server, 2);
    let last = told.last().unwrap().to_string();
    assert!(
        last.contains("<task-notification>") && last.contains("BUILD-OK"),
        "{last}"
    );
    // The woken turn had no prompt typed: one `›` row so far, and the input line.
    terminal.wait_prompt(2).await;
    terminal.type_keys("/tasks\r");
    terminal
        .wait_for("Background tasks: 0 running, 1 ended", 1)
        .await;
    terminal.wait_for("slow build", 2).await;
    terminal.type_keys("/tasks stop bash_1\r");
    terminal
        .wait_for("bash_1 had already ended (completed).", 1)
        .await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    assert_eq!(server.requests().len(), 3);
}

/// A monitor's event at an idle prompt wakes the session too: a turn tells the model.
#[tokio::test]
async fn a_monitor_event_wakes_an_idle_session() {
    let repo = repo("interactive-monitor-wake");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_m",
            "Monitor",
            json!({"description": "build log", "command": "sleep 1.5; echo EVENT-ONE; sleep 30", "timeout_ms": 60000}),
        )),
        Reply::turn(Turn::new().text("Watching the log.")),
        Reply::turn(Turn::new().text("The log said EVENT-ONE.")),
    ]))
    .await
    .unwrap();
    let mut command = command(&repo, &server);
    command.args(["--allowedTools", "Monitor"]);
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("watch the build\r");
    terminal.wait_for("Watching the log.", 1).await;
    terminal.wait_for("The log said EVENT-ONE.", 1).await;
    let last = messages(&server, 2).last().unwrap().to_string();
    assert!(
        last.contains("EVENT-ONE") && last.contains("<status>running</status>"),
        "{last}"
    );
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Alt+T turns thinking off for the next prompts, and on again (Claude Code's key);
/// `/effort LEVEL` sets the effort of the next requests.
#[tokio::test]
async fn alt_t_switches_thinking_and_effort_sets_the_level() {
    let repo = repo("interactive-thinking");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().text("One.")),
        Reply::turn(Turn::new().text("Two.")),
    ]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("\u{1b}t");
    terminal
        .wait_for("thinking off for the next prompts", 1)
        .await;
    terminal.type_keys("first\r");
    terminal.wait_for("One.", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{1b}t");
    terminal
        .wait_for("thinking on for the next prompts", 1)
        .await;
    terminal.type_keys("/effort low\r");
    terminal
        .wait_for("Effort: low. Thinking: adaptive.", 1)
        .await;
    terminal.type_keys("second\r");
    terminal.wait_for("Two.", 1).await;
    let first = server.requests()[0].json();
    assert_eq!(first.get("thinking"), None, "{first}");
    let second = server.requests()[1].json();
    assert_eq!(second["thinking"], json!({"type": "adaptive"}));
    assert_eq!(second["output_config"], json!({"effort": "low"}));
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Thinking shows as one dim row, collapsed; Ctrl-O shows all of it.
#[tokio::test]
async fn thinking_is_one_row_and_ctrl_o_shows_it_whole() {
    let repo = repo("interactive-thinking-rows");
    let server = Server::start_tls(Script::new(vec![Reply::turn(
        Turn::new()
            .thinking(
                "First I check the notes.\nThen the greeting.\nLAST-THOUGHT",
                "c2ln",
            )
            .text("All fine."),
    )]))
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(command(&repo, &server));
    terminal.wait_prompt(1).await;
    terminal.type_keys("think\r");
    terminal.wait_for("All fine.", 1).await;
    terminal
        .wait_for("✻ Thinking: First I check the notes. Then the greeting. LAST-THOUGHT (3 lines · Ctrl-O)", 1)
        .await;
    assert!(!terminal.text().contains("  LAST-THOUGHT"));
    terminal.type_keys("\u{f}");
    terminal.wait_for("  LAST-THOUGHT", 1).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// At 60 columns our own lines (the `/agents` list, a notice, an approval's choices) break
/// between words, never inside one, and keep their indentation on the rows they continue
/// on; every word is still there.
#[tokio::test]
async fn our_text_wraps_between_words_at_60_columns() {
    let repo = repo("interactive-wrap");
    let server = Server::start_tls(Script::new(vec![])).await.unwrap();
    let mut terminal = Terminal::spawn_sized(command(&repo, &server), None, (40, 60));
    terminal.wait_prompt(1).await;
    terminal.type_keys("/agents\r");
    terminal.wait_for("general-purpose", 1).await;
    terminal.wait_prompt(2).await;
    let parser = terminal.parser();
    let rows: Vec<String> = parser.screen().rows(0, 60).collect();
    let start = rows
        .iter()
        .position(|row| row.starts_with("Subagents"))
        .unwrap_or_else(|| panic!("{rows:#?}"));
    let listed: Vec<&String> = rows[start + 1..]
        .iter()
        .take_while(|row| !row.starts_with('›'))
        .collect();
    assert!(listed.len() > 2, "{rows:#?}");
    // Indented continuation rows, and no row ending inside a word the next row finishes.
    assert!(
        listed.iter().all(|row| row.starts_with("  ")),
        "{listed:#?}"
    );
    let text: String = listed
        .iter()
        .map(|row| format!("{} ", row.trim()))
        .collect();
    for word in ["finding files by pattern,", "searching code for keywords"] {
        assert!(text.contains(word), "{word:?} in {text:?}");
    }
    // Joined with a space per row, the words come out whole (a break inside a word would
    // show as `patt ern,`).
    assert!(listed.iter().all(|row| row.chars().count() <= 60));
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// The code in an answer is coloured for the terminal's background: a terminal that says
/// its background is light (`OSC 11`) gets dark text in fences, a dark one light text; the
/// `theme` setting decides over the terminal.
#[tokio::test]
async fn code_colours_follow_the_terminals_background() {
    let luminance_of_code = |name: &'static str, background: &str, settings: Option<&str>| {
        let background = background.to_owned();
        let settings = settings.map(str::to_owned);
        async move {
            let repo = repo(name);
            if let Some(settings) = &settings {
                let dir = repo.home.join("config/agent");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("settings.json"), settings).unwrap();
            }
            let server = Server::start_tls(Script::new(vec![Reply::turn(
                Turn::new().text("Here:\n\n```rust\nfn main() {}\n```\n"),
            )]))
            .await
            .unwrap();
            let answer = format!("\x1b[?2026;2$y\x1b[?0u{background}\x1b[?62;22c").into_bytes();
            let mut terminal =
                Terminal::spawn_sized(command(&repo, &server), Some(answer), (40, 120));
            terminal.wait_prompt(1).await;
            terminal.type_keys("show me\r");
            terminal.wait_for("fn main", 1).await;
            terminal.wait_prompt(2).await;
            let parser = terminal.parser();
            let screen = parser.screen();
            let rows: Vec<String> = screen.rows(0, 120).collect();
            let row = rows.iter().position(|row| row.contains("fn main")).unwrap();
            let column = rows[row].find("fn main").unwrap();
            let color = screen
                .cell(u16::try_from(row).unwrap(), u16::try_from(column).unwrap())
                .unwrap()
                .fgcolor();
            terminal.type_keys("\u{4}");
            assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
            match color {
                vt100::Color::Rgb(red, green, blue) => {
                    0.2126 * f64::from(red) / 255.0
                        + 0.7152 * f64::from(green) / 255.0
                        + 0.0722 * f64::from(blue) / 255.0
                }
                other => panic!("the code is not in a 24-bit colour: {other:?}"),
            }
        }
    };
    let light = luminance_of_code("theme-light", "\x1b]11;rgb:ffff/ffff/f0f0\x1b\\", None).await;
    let dark = luminance_of_code("theme-dark", "\x1b]11;rgb:1e1e/1e1e/1e1e\x07", None).await;
    assert!(light < 0.5 && dark > 0.5, "light {light}, dark {dark}");
    // The setting decides over what the terminal says.
    let chosen = luminance_of_code(
        "theme-setting",
        "\x1b]11;rgb:1e1e/1e1e/1e1e\x07",
        Some(r#"{"theme": "light"}"#),
    )
    .await;
    assert!(chosen < 0.5, "{chosen}");
}

/// A tool-use summary (the small fast model's line about the tools just run, which the loop
/// reports once the next model call has ended) is not drawn under the answer that came
/// after those tools: the screen keeps the order of events.
#[tokio::test]
async fn a_tool_summary_never_comes_after_the_answer() {
    let batch_marker = "A coding agent just ran these tools";
    let repo = repo("interactive-late-summary");
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use("toolu_l", "Bash", json!({"command": "ls"}))),
            // Slow enough for the summary to be written while it streams.
            Reply::turn(Turn::new().text("All done here.")).faults(testkit::Faults {
                chunk_sizes: Some(vec![64]),
                chunk_delay: Some(Duration::from_millis(100)),
                ..testkit::Faults::default()
            }),
        ])
        .route(
            batch_marker,
            vec![Reply::turn(Turn::new().text("Listed the folder"))],
        ),
    )
    .await
    .unwrap();
    let mut agent = command(&repo, &server);
    agent
        .env_remove("AGENT_DISABLE_BACKGROUND_REQUESTS")
        .args(["--allowedTools", "Bash(ls)"]);
    let mut terminal = Terminal::spawn(agent);
    terminal.wait_prompt(1).await;
    terminal.type_keys("list it\r");
    terminal.wait_for("All done here.", 1).await;
    terminal.wait_prompt(2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let asked = server
        .requests()
        .iter()
        .any(|r| r.json()["messages"].to_string().contains(batch_marker));
    assert!(asked, "no summary was asked");
    let text = terminal.text();
    assert!(!text.contains("Listed the folder"), "{text}");
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
}

/// Tab completes a slash command: `/co` lists what it may become, each with what it does (a
/// project's own command among them), and completes as far as they agree; one match is
/// completed whole and runs.
#[tokio::test]
async fn tab_completes_slash_commands_with_a_menu() {
    let repo = repo("interactive-slash-tab");
    std::fs::create_dir_all(repo.dir.join(".claude/commands")).unwrap();
    std::fs::write(
        repo.dir.join(".claude/commands/coverage.md"),
        "---\ndescription: Measure the test coverage\n---\nMeasure the coverage.\n",
    )
    .unwrap();
    let server = Server::start_tls(Script::new(vec![])).await.unwrap();
    let mut command = command(&repo, &server);
    command.arg("--trust");
    let mut terminal = Terminal::spawn(command);
    terminal.wait_prompt(1).await;
    terminal.type_keys("/co\t");
    let menu = terminal
        .wait_until(|t| t.shown().contains("/coverage"))
        .await;
    for (name, about) in [
        ("/compact", "summarize the conversation now"),
        ("/context", "how full the context is"),
        ("/cost", "this session's requests"),
        ("/coverage", "Measure the test coverage (project)"),
    ] {
        assert!(
            menu.lines()
                .any(|line| line.contains(name) && line.contains(about)),
            "{name}: {menu}"
        );
    }
    assert!(!menu.contains("/clear"), "{menu}");
    terminal.type_keys("nt\t");
    terminal.wait_for("› /context ", 1).await;
    terminal.type_keys("\r");
    terminal.wait_for("Context window", 1).await;
    terminal.wait_prompt(2).await;
    terminal.type_keys("\u{4}");
    assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    assert_eq!(server.request_count(), 0);
}

/// The terminal narrowed from 120 to 60 columns while an approval waits with a long answer
/// typed (rows as wide as the terminal), then widened to 90: on a terminal that re-wraps its
/// rows (tmux, VTE, kitty...) and on one that cuts them (xterm, told by `XTERM_VERSION`),
/// the question and the answer are in the scrollback once, the answer goes through, and
/// what was written before the resize is kept.
#[tokio::test]
async fn a_resize_during_an_approval_leaves_one_question() {
    use testkit::screen::Resize;
    for model in [Resize::Rewrap, Resize::Cut] {
        let repo = repo("interactive-resize-approval");
        let command_text = format!("echo {}", "resized ".repeat(14).trim_end());
        let server = Server::start_tls(Script::new(vec![
            Reply::turn(Turn::new().text("Running it.").tool_use(
                "toolu_r",
                "Bash",
                json!({"command": command_text, "dangerouslyDisableSandbox": true}),
            )),
            Reply::turn(Turn::new().text("Done after the resize.")),
        ]))
        .await
        .unwrap();
        let mut agent = command(&repo, &server);
        if model == Resize::Cut {
            agent.env("XTERM_VERSION", "XTerm(390)");
        }
        let mut terminal = Terminal::spawn(agent);
        terminal.model = model;
        terminal.wait_prompt(1).await;
        terminal.type_keys("first prompt\r");
        terminal.wait_for("Allow?", 1).await;
        let words: Vec<String> = (1..=40).map(|n| format!("w{n:02}")).collect();
        terminal.answer(&format!("n, {}", words.join(" "))).await;
        terminal.wait_for("w40", 1).await;
        terminal.resize(40, 60).await;
        terminal.resize(40, 90).await;
        terminal.type_keys("\r");
        terminal.wait_for("Done after the resize.", 1).await;
        terminal.wait_prompt(2).await;
        let text = terminal.text();
        let logical = terminal.logical_text();
        // The question's first row and the refusal's summary.
        assert_eq!(
            logical.matches("⏺ Bash(echo resized").count(),
            2,
            "{model:?}:\n{text}"
        );
        // Up to the refusal's summary (which quotes the answer again).
        let asked = &logical[..logical.find('⎿').unwrap_or(logical.len())];
        assert_eq!(text.matches("Allow?").count(), 1, "{model:?}:\n{text}");
        for word in &words {
            assert_eq!(
                asked.matches(word.as_str()).count(),
                1,
                "{word} {model:?}:\n{text}"
            );
        }
        let refusal = messages(&server, 1).last().unwrap().to_string();
        assert!(
            refusal.contains("w01 w02") && refusal.contains("w39 w40"),
            "{refusal}"
        );
        assert_eq!(
            text.matches("› first prompt").count(),
            1,
            "{model:?}:\n{text}"
        );
        assert_eq!(text.matches("Running it.").count(), 1, "{model:?}:\n{text}");
        terminal.type_keys("\u{4}");
        assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    }
}

/// The terminal narrowed from 120 to 60 columns while an answer streams, then widened to
/// 90 while its table streams: no row of it twice in the scrollback, every sentence whole
/// (our rows break between words; only a re-wrapping terminal breaks inside one, which
/// the model's line joining undoes), and every cell of the table there, drawn at the
/// width the terminal had when the table was finished.
#[tokio::test]
async fn a_resize_while_streaming_keeps_every_line_once() {
    use testkit::screen::Resize;
    let sentences: Vec<String> = (1..=14)
        .map(|n| format!("Sentence {n:02} of the answer has words enough to fill most of a row at a hundred and twenty columns."))
        .collect();
    let cells: Vec<Vec<String>> = (1..=4)
        .map(|row| {
            (1..=4)
                .map(|column| {
                    format!(
                        "cell{row}{column} alpha{row}{column} beta{row}{column} gamma{row}{column}"
                    )
                })
                .collect()
        })
        .collect();
    let mut answer = sentences.join("\n\n");
    answer.push_str("\n\n| First | Second | Third | Fourth |\n|---|---|---|---|\n");
    for row in &cells {
        answer.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    answer.push_str("\nThe end of the answer.");
    for model in [Resize::Rewrap, Resize::Cut] {
        let repo = repo("interactive-resize-stream");
        let server = Server::start_tls(Script::new(vec![
            Reply::turn(Turn::new().text(&answer)).faults(testkit::Faults {
                spread_over: Some(Duration::from_secs(3)),
                ..testkit::Faults::default()
            }),
        ]))
        .await
        .unwrap();
        let mut agent = command(&repo, &server);
        if model == Resize::Cut {
            agent.env("XTERM_VERSION", "XTerm(390)");
        }
        let mut terminal = Terminal::spawn(agent);
        terminal.model = model;
        terminal.wait_prompt(1).await;
        terminal.type_keys("stream\r");
        terminal.wait_for("Sentence 05", 1).await;
        terminal.resize(40, 60).await;
        terminal.wait_for("Sentence 12", 1).await;
        terminal.resize(40, 90).await;
        terminal.wait_for("The end of the answer.", 1).await;
        terminal.wait_prompt(2).await;
        let text = terminal.text();
        // Lines as written: a row the terminal wrapped joined to the next, our own breaks
        // a space.
        let written: String = terminal
            .logical_text()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for sentence in &sentences {
            let count = written.matches(sentence.as_str()).count();
            // A terminal that cuts rows loses what was wider than it became.
            let expected = if model == Resize::Cut {
                count.min(1)
            } else {
                1
            };
            assert_eq!(count, expected, "{sentence:?} {model:?}:\n{text}");
        }
        assert_eq!(
            written.matches("Sentence 13 of").count(),
            1,
            "{model:?}:\n{text}"
        );
        for cell in cells.iter().flatten() {
            for word in cell.split(' ') {
                assert_eq!(
                    written.matches(word).count(),
                    1,
                    "{word} {model:?}:\n{text}"
                );
            }
        }
        assert_eq!(written.matches("First").count(), 1, "{model:?}:\n{text}");
        // The table was drawn for the width the terminal had when it was finished.
        let logical = terminal.logical_text();
        let table: Vec<&str> = logical.lines().filter(|line| line.contains('│')).collect();
        assert!(table.len() >= 5, "{model:?}:\n{text}");
        assert_eq!(logical.matches('┌').count(), 1, "{model:?}:\n{text}");
        for line in table {
            let line = line.trim_end();
            assert!(line.chars().count() <= 90, "{line:?} {model:?}:\n{text}");
            // Whole rows: not a wider table's row broken in two.
            assert!(
                line.starts_with('│') && line.ends_with('│'),
                "{line:?} {model:?}:\n{text}"
            );
        }
        // Nothing of the live region left behind: one status line, one prompt mark.
        assert_eq!(
            written.matches("─ claude-opus").count(),
            1,
            "{model:?}:\n{text}"
        );
        assert_eq!(written.matches("› ").count(), 2, "{model:?}:\n{text}");
        terminal.type_keys("\u{4}");
        assert_eq!(terminal.exit_code().await, 0, "{}", terminal.text());
    }
}
