//! Drives a session in-process, with an approver of its own, against a scripted model
//! server (`testkit`): the model asks to write a file, the approver allows it, the model
//! answers. Run it with `cargo run -p agentloop-session --example drive`.
//!
//! The session is a real one: it reads the user's settings and writes its transcript where
//! `agent`'s sessions go (`~/.local/share/agent/projects/`), as a session of a temporary
//! folder. CI runs it with `HOME` pointing at a scratch folder.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context as _, ensure};
use session::{
    CancellationToken, ExecutorEvent, LoopEvent, MessageParam, Notices, Observer, Options,
    PermissionDecision, PermissionFuture, PermissionRequest, Prompter, Session, SubagentEvent,
    Terminal,
};
use testkit::{Reply, Script, Server, Turn};

/// Allows every call and counts the questions.
#[derive(Default)]
struct Approver {
    asked: AtomicUsize,
}

impl Prompter for Approver {
    fn ask<'a>(&'a self, request: PermissionRequest<'a>) -> PermissionFuture<'a> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        println!(
            "approver: {} asks ({}): allowed",
            request.tool, request.reason
        );
        Box::pin(async {
            PermissionDecision::Allow {
                updated_input: None,
            }
        })
    }
}

/// Prints the model's text and each finished tool call.
#[derive(Default)]
struct Printer {
    text: String,
}

impl Observer for Printer {
    fn event(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::Assistant(message) => {
                for text in message.content.iter().filter_map(|block| block.as_text()) {
                    println!("model: {text}");
                    self.text.push_str(text);
                }
            }
            LoopEvent::Tool(ExecutorEvent::Completed(done)) => {
                println!("tool: {} -> {:?}", done.name, done.result.content);
            }
            _ => {}
        }
    }

    fn subagent(&mut self, _event: &SubagentEvent) {}
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let folder = std::env::temp_dir().join(format!("session-example-{}", std::process::id()));
    std::fs::create_dir_all(&folder)?;
    let target = folder.canonicalize()?.join("hello.txt");
    let server = Server::start(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_1",
            "Write",
            serde_json::json!({"file_path": target, "content": "hello from a session\n"}),
        )),
        Reply::turn(Turn::new().text("I wrote hello.txt.")),
        Reply::turn(Turn::new().text("It says hello.")),
    ]))
    .await?;

    let mut options = Options::default();
    options.cwd = Some(folder.clone());
    options.model.base_url = Some(server.base_url());
    // The scripted server answers requests in the order they come: no background summaries
    // (their requests to the small model would take the turn's replies).
    options.settings = Some(r#"{"progressSummaries": false}"#.to_owned());
    // Warnings and notes (a setting ignored, no sandbox on this machine) come here.
    options.notices = Notices::new(|text| println!("notice: {text}"));
    let approver = Arc::new(Approver::default());
    let mut session = Session::open(&options, Some(approver.clone() as Arc<dyn Prompter>), None)?;
    let mut printer = Printer::default();
    let outcome = session
        .send(
            MessageParam::user_text("Write hello.txt".to_owned()),
            &mut printer,
            CancellationToken::new(),
        )
        .await?;

    let written = std::fs::read_to_string(&target).context("the file the model wrote")?;
    ensure!(written == "hello from a session\n", "wrote {written:?}");
    ensure!(approver.asked.load(Ordering::SeqCst) == 1, "one question");
    ensure!(
        matches!(outcome.terminal, Terminal::Completed),
        "{:?}",
        outcome.terminal
    );
    ensure!(printer.text == "I wrote hello.txt.", "{:?}", printer.text);
    // The turn's own requests.
    let turn_requests = server
        .requests()
        .iter()
        .filter_map(|request| serde_json::from_slice::<serde_json::Value>(&request.body).ok())
        .filter(|body| body["model"] == session::DEFAULT_MODEL)
        .count();
    ensure!(turn_requests == 2, "{turn_requests} turn requests, not 2");
    let requests = outcome.requests;
    // Fork: a new session that begins with this history; the next turn writes it to its file.
    let first = session.session_id().to_owned();
    session.fork();
    ensure!(session.session_id() != first, "a fork is a new session");
    session
        .send(
            MessageParam::user_text("What does it say?".to_owned()),
            &mut printer,
            CancellationToken::new(),
        )
        .await?;
    let forked = session::transcript::load(session.transcript_path())?;
    ensure!(
        forked.messages.len() == 6,
        "{} messages in the fork",
        forked.messages.len()
    );
    ensure!(
        forked.messages == session.history(),
        "the fork's file holds its history"
    );
    println!(
        "done: {} requests, session {}, {} messages",
        requests,
        session.session_id(),
        session.history().len()
    );
    std::fs::remove_dir_all(&folder)?;
    Ok(())
}
