//! `agent`: a coding agent for the terminal.
//!
//! Thin by design: arguments, configuration, session files and rendering live here; the loop
//! (loop-core), the model client (provider), the tools (tools, executor) and context
//! management (context) are libraries this binary wires together.

mod args;
mod demo;
mod interactive;
mod interrupts;
mod mcp_cmd;
mod output;
mod sessions_cmd;
mod slash;

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

use crate::args::{Args, Command, InputFormat, OutputFormat};
use crate::interrupts::Interrupts;
use crate::output::{Renderer, Status};
use session::{Session, UsageError};

fn main() -> ExitCode {
    // The Landlock back end re-executes this binary as its sandbox helper.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == tools::sandbox::HELPER_ARG)
    {
        tools::sandbox::helper_main();
    }
    // Stdio MCP servers start through this binary, which kills them if the agent dies.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == mcp::guard::GUARD_ARG)
    {
        mcp::guard::guard_main();
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(error) => {
            let code = if error.use_stderr() { 2 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    // Under the control protocol `--verbose` is the SDK's (every message on stdout), not a
    // request for log lines on stderr, which a Python SDK program would show.
    init_logging(args.verbose && args.input_format != InputFormat::StreamJson);
    // A session's first sandbox (the start-up `git status`) needs the walk of `/etc` for
    // the files it hides (about 2.5 ms): begun now, on a thread, it is done by then.
    if args.command.is_none() && args.permissions.sandbox != Some(args::SandboxArg::Off) {
        let _ = std::thread::Builder::new()
            .name("etc-walk".into())
            .spawn(|| tools::sandbox::private_system_files().len());
    }
    // Scripts reading --output-format json get a result object even when the run fails
    // before it starts (bad settings, no API key, an unreadable transcript).
    let json_result = args.command.is_none() && args.output_format != OutputFormat::Text;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("agent: starting the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    // The whole run on a runtime worker, like the loop it starts: the loop's events and the
    // tool tasks' wake-ups then stay among the workers instead of waking this thread for each.
    let result = runtime
        .block_on(runtime.spawn(run(args)))
        .unwrap_or_else(|error| Err(anyhow::anyhow!("the agent stopped unexpectedly: {error}")));
    tracing::debug!(target: "timeline", "run done");
    // A tool stuck in a blocking call (a read from a FIFO) must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    tracing::debug!(target: "timeline", "runtime stopped");
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            // Errors quote settings, paths and server messages: neutralised for the terminal.
            eprintln!("agent: {}", render::printable(&format!("{error:#}"), true));
            if error.downcast_ref::<UsageError>().is_some() {
                return ExitCode::from(2);
            }
            if json_result {
                output::print_failure(&format!("{error:#}"));
            }
            ExitCode::from(1)
        }
    }
}

/// Logs go to stderr, never stdout: `--verbose` turns them on (`AGENT_LOG` is the filter).
/// The arguments. `--help` also names the sandbox back end in force here (detecting it
/// starts a sandbox once, so only when help is asked for).
fn parse_args() -> Result<Args, clap::Error> {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let wants_help = std::env::args_os().any(|arg| arg == "--help" || arg == "-h");
    let mut command = Args::command();
    if wants_help {
        let helper = std::env::current_exe().ok();
        let backend = tools::sandbox::Backend::detect(helper.as_deref());
        command = command.mut_arg("sandbox", |arg| {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(format!("{help} [here: {backend}]"))
        });
    }
    let (argv, accepted) = session::control::take_accepted_flags(std::env::args_os().collect());
    let matches = command.try_get_matches_from(argv)?;
    let mut args = Args::from_arg_matches(&matches)?;
    args.sdk.accepted = accepted;
    Ok(args)
}

fn init_logging(verbose: bool) {
    let filter = std::env::var("AGENT_LOG")
        .ok()
        .or_else(|| verbose.then(|| "info".to_owned()));
    if let Some(filter) = filter {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init();
    }
}

/// `--cwd` resolved, else the current directory: where a subcommand works.
fn working_dir(args: &Args) -> anyhow::Result<std::path::PathBuf> {
    match &args.cwd {
        Some(dir) => dir
            .canonicalize()
            .with_context(|| format!("working directory {}", dir.display())),
        None => std::env::current_dir().context("reading the current directory"),
    }
}

async fn run(args: Args) -> anyhow::Result<u8> {
    match &args.command {
        Some(Command::Demo { live, keep }) => demo::run(*live, *keep).await,
        Some(Command::Sessions { json }) => {
            let cwd = working_dir(&args)?;
            sessions_cmd::run(&cwd, *json)
        }
        Some(Command::Rewind {
            session,
            turn,
            undo,
            code,
            conversation,
            both,
            force,
        }) => {
            let cwd = working_dir(&args)?;
            let target = match (turn, undo) {
                (Some(turn), _) => Some(session::checkpoints::Target::Turn(*turn)),
                (None, true) => Some(session::checkpoints::Target::UndoLast),
                (None, false) => None,
            };
            let scope = (*code || *conversation || *both).then_some(session::checkpoints::Scope {
                code: !*conversation,
                conversation: !*code,
            });
            let text = session::checkpoints::run_command(&cwd, session, target, scope, *force)?;
            // A closed stdout (`| head`) is no failure of the rewind.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
            Ok(0)
        }
        Some(Command::Mcp { action }) => mcp_cmd::run(action, &args).await,
        Some(Command::Batch {
            tasks,
            jobs,
            out,
            shard,
            shard_count,
            report,
        }) => {
            if args.output_format == OutputFormat::Json {
                return Err(UsageError("agent batch: --output-format json is not one of its formats: text (progress on stderr, results in OUT/results.jsonl) or stream-json (every session's events on stdout, each line with its task_id)".into()).into());
            }
            let mut invocation = session::batch::Invocation::new(tasks.clone());
            invocation.out.clone_from(out);
            (invocation.jobs, invocation.shard) = (*jobs, shard.clone());
            (invocation.shard_count, invocation.report_only) = (*shard_count, *report);
            invocation.stream_json = args.output_format == OutputFormat::StreamJson;
            let run = session::batch::command(&args.session_options(), &invocation).await;
            // Bad input is a usage error (exit 2), as a bad flag is.
            run.map_err(|error| match error.is_usage() {
                true => UsageError(error.to_string()).into(),
                false => error.into(),
            })
        }
        Some(Command::Acp) => {
            session::acp::serve_stdio(args.session_options()).await?;
            Ok(0)
        }
        None => start(args).await,
    }
}

/// Whether stdin is piped input (a pipe or a file), not a terminal, `/dev/null` or nothing.
fn stdin_is_piped() -> bool {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::FileTypeExt as _;
    let Ok(stdin) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(stdin)
        .metadata()
        .is_ok_and(|metadata| metadata.file_type().is_fifo() || metadata.is_file())
}

/// All of stdin, as text.
async fn read_stdin() -> anyhow::Result<String> {
    use tokio::io::AsyncReadExt as _;
    let mut bytes = Vec::new();
    tokio::io::stdin()
        .read_to_end(&mut bytes)
        .await
        .context("reading stdin")?;
    String::from_utf8(bytes).map_err(|_| {
        UsageError(
            "stdin is not UTF-8 text (pipe text, or pass a file's path in the prompt)".into(),
        )
        .into()
    })
}

/// The headless prompt: with `-p`, the prompt (after piped input, which goes first in a
/// fenced block, as Claude Code sends it) or else stdin; without it, a positional prompt is
/// headless when stdin is not a terminal or the output format is not text, and stdin alone
/// (not a terminal) is a prompt too. `None` means interactive.
async fn prompt(args: &Args) -> anyhow::Result<Option<String>> {
    let terminal = std::io::stdin().is_terminal();
    let headless = args.print || !terminal || args.output_format != OutputFormat::Text;
    if let Some(prompt) = args.prompt.as_ref().filter(|_| headless) {
        if prompt.trim().is_empty() {
            return Err(UsageError("the prompt is empty".into()).into());
        }
        if stdin_is_piped() {
            let input = read_stdin().await?;
            if !input.trim().is_empty() {
                return Ok(Some(format!(
                    "{}\n\n{prompt}",
                    render::fenced(input.trim_end())
                )));
            }
        }
        return Ok(Some(prompt.clone()));
    }
    if args.prompt.is_some() || (terminal && !args.print) {
        return Ok(None);
    }
    if terminal {
        return Err(UsageError(
            "-p needs a prompt: give it as an argument (agent -p \"task\") or on stdin".into(),
        )
        .into());
    }
    let text = read_stdin().await?;
    if text.trim().is_empty() {
        return Err(UsageError(
            "no prompt: stdin was empty (pass a prompt with -p \"task\", or run agent in a terminal for an interactive session)".into(),
        )
        .into());
    }
    Ok(Some(text))
}

/// `--resume` without an id: a picker on a terminal, else the list. `Some(code)` when the
/// run ends here (listed, or nothing picked); else `args` resume what was picked.
///
/// # Errors
///
/// A run with a task (the id is needed), or the picker failing.
fn pick_resumed(args: &mut Args) -> anyhow::Result<Option<u8>> {
    // `--resume` without an id: a picker on a terminal, else the list.
    if args.session.resume.as_deref() == Some("") {
        let cwd = working_dir(args)?;
        // A run that has a task cannot stop to pick: the id is needed.
        if args.print
            || args.prompt.is_some()
            || args.output_format != OutputFormat::Text
            || args.input_format == InputFormat::StreamJson
        {
            return Err(UsageError(
                "--resume without an id only lists or picks sessions; give the id to continue one with a prompt (`agent sessions` lists them)".into(),
            )
            .into());
        }
        let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        if !terminal {
            return sessions_cmd::run(&cwd, false).map(Some);
        }
        let dir = session::transcript::project_dir(&cwd)?;
        let Some((picker, paths)) = sessions_cmd::picker(&dir, None) else {
            eprintln!("No earlier sessions in this folder.");
            return Ok(Some(0));
        };
        let chosen = tokio::task::block_in_place(|| render::picker::pick_standalone(picker))
            .map_err(|error| UsageError(format!("--resume: the terminal: {error}")))?;
        match chosen.and_then(|index| paths.get(index)) {
            Some(path) => args.session.resume = Some(path.to_string_lossy().into_owned()),
            None => return Ok(Some(0)),
        }
    }
    Ok(None)
}

async fn start(mut args: Args) -> anyhow::Result<u8> {
    if let Some(code) = pick_resumed(&mut args)? {
        return Ok(code);
    }
    let streaming = args.input_format == InputFormat::StreamJson;
    if streaming && args.output_format != OutputFormat::StreamJson {
        return Err(UsageError(
            "--input-format stream-json needs --output-format stream-json".into(),
        )
        .into());
    }
    if streaming && args.prompt.is_some() {
        return Err(UsageError(
            "--input-format stream-json reads the user messages from stdin: give no prompt".into(),
        )
        .into());
    }
    // With stream-json input the messages are read later, one by one.
    let task = if streaming {
        Some(String::new())
    } else {
        prompt(&args).await?
    };
    if task.is_none() && args.output_format != OutputFormat::Text {
        return Err(UsageError(format!(
            "--output-format {} needs a prompt (agent -p \"task\", or on stdin): the interactive session writes text",
            match args.output_format {
                OutputFormat::Json => "json",
                _ => "stream-json",
            }
        ))
        .into());
    }
    if args.include_partial_messages && args.output_format != OutputFormat::StreamJson {
        eprintln!(
            "agent: warning: --include-partial-messages needs --output-format stream-json; it is ignored"
        );
    }
    // Listen for Ctrl-C before anything runs: a signal that arrives before the listener is
    // registered would kill the process with no result and no cleanup.
    let interrupts = Interrupts::listen(task.is_none())?;
    let mut options = args.session_options();
    let mut control = connect(&args, &mut options).await;
    let status = Status::default();
    let terminal_prompter = match task {
        Some(_) => None,
        None => Some(Arc::new(interactive::TerminalPrompter::new(status.clone()))),
    };
    let prompter = terminal_prompter
        .clone()
        .map(|prompter| prompter as Arc<dyn tools::Prompter>);
    // Only a person at the terminal can be asked whether to trust the folder.
    let trust_asker = terminal_prompter
        .as_ref()
        .map(|_| &interactive::TerminalTrust as &dyn session::trust::TrustAsker);
    // The session's warnings go where the terminal's lines go (above the live region).
    let notice_status = status.clone();
    let terminal = task.is_none() && std::io::stdout().is_terminal();
    options.notices =
        session::Notices::new(move |text| notice_status.println(&format!("agent: {text}")))
            // A hook's title or notification sequence, at the terminal only.
            .with_terminal(move |sequence| {
                if terminal {
                    let mut out = std::io::stdout().lock();
                    let _ = out
                        .write_all(sequence.as_bytes())
                        .and_then(|()| out.flush());
                }
            });
    let mut session = Session::open(&options, prompter, trust_asker)?;
    session.gather_context().await;
    // After the context: the skills are known then.
    if let Some(control) = &mut control {
        control.answer_initialize(&session);
    }
    if let Some(name) = &args.permissions.worktree {
        let entered = session.enter_worktree(name).await;
        entered.map_err(|error| UsageError(format!("--worktree: {error}")))?;
    }
    match (task, terminal_prompter) {
        (Some(task), _) => {
            let code = headless(&args, &mut session, &interrupts, (task, control), status).await;
            tracing::debug!(target: "timeline", "result written");
            session.end(session::EndReason::Other).await;
            tracing::debug!(target: "timeline", "session ended");
            code
        }
        (None, prompter) => {
            interactive::run(session, &interrupts, status, prompter, args.prompt.clone()).await
        }
    }
}

async fn headless(
    args: &Args,
    session: &mut Session,
    interrupts: &Interrupts,
    (task, control): (String, Option<session::control::Connection>),
    status: Status,
) -> anyhow::Result<u8> {
    let live = args.output_format == OutputFormat::Text && std::io::stdout().is_terminal();
    let mut renderer = Renderer::new(
        args.output_format,
        session.session_id(),
        session.model(),
        live,
    )
    .with_status(status)
    .with_prices(session.price_overrides())
    .with_partial_messages(args.include_partial_messages)
    .with_verbose(args.verbose && control.is_none())
    .with_structured(session.structured().cloned());
    if args.output_format == OutputFormat::StreamJson {
        let accepted = &args.sdk.accepted;
        let unsupported = control
            .as_ref()
            .map(|control| control.unsupported(accepted));
        session::stream_json::stdout_line(&session::sdk::init_message(
            session,
            &unsupported.unwrap_or_default(),
        ));
    }
    if args.output_format == OutputFormat::StreamJson {
        let id = session.session_id().to_owned();
        let tasks = session.background();
        tasks.listen(move |event| {
            if let Some(line) = session::sdk::task_message(event, &id) {
                session::stream_json::stdout_line(&line);
            }
        });
    }
    if let Some(control) = control {
        return drive(session, &mut renderer, interrupts, control).await;
    }
    // `@path` in the prompt attaches the file (an image as the model sees it), as at the
    // interactive prompt; one that cannot be attached is said on stderr. Only the prompt
    // written on the command line is read for mentions, never piped input, beside it or in
    // its place (`cat untrusted.md | agent -p` must not attach what the file names).
    let typed = args.prompt.as_deref().unwrap_or_default();
    for note in session.attach_mentions(typed).await {
        if note.contains("not attached") {
            eprintln!("agent: {}", render::printable(&note, false));
        }
    }
    // `-p "/name arguments"` runs a custom command or a skill, as in Claude Code.
    let cancel = interrupts.arm();
    let outcome = session
        .send(
            protocol::MessageParam::user_text(task),
            &mut renderer,
            cancel,
        )
        .await;
    interrupts.disarm();
    let outcome = match outcome {
        Err(error) if error.downcast_ref::<session::PromptBlocked>().is_some() => {
            return Ok(report_blocked(
                args.output_format,
                session.session_id(),
                &error,
            ));
        }
        other => other?,
    };
    // What the background tasks report comes before the result, which is the last line.
    if args.output_format != OutputFormat::Text {
        session.end_background().await;
    }
    renderer.finish(&outcome);
    if renderer.structured_failed() {
        return Ok(3);
    }
    Ok(match output::exit_code(&outcome.terminal).0 {
        // Aborted: by Ctrl-C (130), SIGTERM (143) or SIGHUP (129).
        130 => interrupts.aborted_exit_code(),
        code => code,
    })
}

/// A prompt a UserPromptSubmit or UserPromptExpansion hook refused (`error` holds the
/// [`session::PromptBlocked`]): its result line (json, stream-json) and a line on stderr;
/// exit code 1.
fn report_blocked(format: OutputFormat, session_id: &str, error: &anyhow::Error) -> u8 {
    let message = error.to_string();
    eprintln!("agent: {}", render::printable(&message, false));
    if format != OutputFormat::Text {
        output::print_blocked(&message, session_id);
    }
    1
}

/// The front end of a session driven over the control protocol: its turns in stream-json.
struct StreamFront<'a> {
    renderer: &'a mut Renderer,
    session_id: String,
}

impl session::control::Front for StreamFront<'_> {
    fn observer(&mut self) -> &mut dyn session::Observer {
        self.renderer
    }

    fn result(&mut self, outcome: &session::LoopOutcome) {
        self.renderer.finish(outcome);
    }

    fn refused(&mut self, error: &anyhow::Error) {
        report_blocked(OutputFormat::StreamJson, &self.session_id, error);
    }

    fn note(&mut self, text: &str) {
        eprintln!("agent: {}", render::printable(text, false));
    }
}

/// `--input-format stream-json`: the program on stdin drives the session (the Agent SDK's
/// control protocol, [`session::control`]); waits for its `initialize` (or first message)
/// and puts it in `options`. `None` for any other run.
async fn connect(
    args: &Args,
    options: &mut session::Options,
) -> Option<session::control::Connection> {
    if args.input_format != InputFormat::StreamJson {
        return None;
    }
    let asks = args.sdk.permission_prompt_tool.as_deref() == Some("stdio");
    let bypass = options.permissions.bypass_allowed();
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let connection =
        session::control::Connection::open(stdin, session::stream_json::stdout_line, asks, bypass)
            .await;
    options.host = Some(connection.host().clone());
    Some(connection)
}

/// Drives `session` for the program of `connection` until its input ends.
async fn drive(
    session: &mut Session,
    renderer: &mut Renderer,
    interrupts: &Interrupts,
    connection: session::control::Connection,
) -> anyhow::Result<u8> {
    let mut front = StreamFront {
        renderer,
        session_id: session.session_id().to_owned(),
    };
    let ended = connection.drive(session, &mut front, interrupts).await?;
    Ok(ended.code(interrupts.aborted_exit_code()))
}
