//! `agent`: a coding agent for the terminal.
//!
//! Thin by design: arguments, configuration, session files and rendering live here; the loop
//! (loop-core), the model client (provider), the tools (tools, executor) and context
//! management (context) are libraries this binary wires together.

mod adapter;
mod args;
mod context_info;
mod demo;
mod hooks;
mod output;
mod settings;
mod tooling;
mod transcript;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::Parser as _;
use loop_core::{Deps, LoopConfig, LoopEvent, NoStopHook, spawn_loop};
use protocol::MessageParam;
use provider::{
    AnthropicClient, ClientConfig, EnvSource, HyperTransport, RecordingTransport, ReplayTransport,
    TokioSleeper, Transport,
};
use tokio_util::sync::CancellationToken;

use crate::args::{Args, Command, OutputFormat, split_rules};
use crate::output::Renderer;
use crate::transcript::Transcript;

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(error) => {
            let code = if error.use_stderr() { 2 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    init_logging(args.verbose);
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
    let result = runtime.block_on(run(args));
    // A tool stuck in a blocking call (a read from a FIFO) must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("agent: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// Logs go to stderr, never stdout: `--verbose` turns them on (`AGENT_LOG` is the filter).
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

async fn run(args: Args) -> anyhow::Result<u8> {
    match &args.command {
        Some(Command::Demo { live, keep }) => demo::run(*live, *keep).await,
        None => headless(args).await,
    }
}

/// The working directory, made absolute and resolved.
fn working_dir(args: &Args) -> anyhow::Result<PathBuf> {
    let dir = match &args.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    dir.canonicalize()
        .with_context(|| format!("working directory {}", dir.display()))
}

/// The model client: network, recording or replay.
fn model_client(args: &Args, cwd: &Path) -> anyhow::Result<AnthropicClient> {
    let mut config = ClientConfig::from_source(&EnvSource)?;
    if let Some(base_url) = &args.base_url {
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            bail!("--base-url must start with http:// or https://, got {base_url:?}");
        }
        config.base_url = base_url.trim_end_matches('/').to_owned();
    }
    if let Some(path) = &args.ca_cert {
        config.extra_roots_pem =
            std::fs::read(path).with_context(|| format!("--ca-cert {}", path.display()))?;
    }
    config.fallback_model = args.fallback_model.is_some();
    if args.replay.is_none()
        && config.auth == provider::Auth::None
        && config.base_url == provider::DEFAULT_BASE_URL
    {
        bail!(
            "no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN for a gateway), or point --base-url at a local gateway or `testkit serve`"
        );
    }
    let workspace = Some(cwd.to_string_lossy().into_owned());
    config.workspace_root = workspace.clone();
    let transport: Arc<dyn Transport> = if let Some(path) = &args.replay {
        Arc::new(ReplayTransport::open(path, workspace, args.replay_lenient)?)
    } else {
        let network = HyperTransport::with_proxy(&config.extra_roots_pem, &config.proxy)?;
        match &args.record {
            Some(path) => Arc::new(RecordingTransport::new(network, path, workspace)?),
            None => Arc::new(network),
        }
    };
    Ok(AnthropicClient::with_transport(
        config,
        transport,
        Arc::new(TokioSleeper),
    )?)
}

/// The prompt: `-p`, or stdin when it is not a terminal.
async fn prompt(args: &Args) -> anyhow::Result<String> {
    if let Some(prompt) = &args.prompt {
        if prompt.trim().is_empty() {
            bail!("the prompt given with -p is empty");
        }
        return Ok(prompt.clone());
    }
    if !std::io::stdin().is_terminal() {
        use tokio::io::AsyncReadExt as _;
        let mut text = String::new();
        tokio::io::stdin()
            .read_to_string(&mut text)
            .await
            .context("reading the prompt from stdin")?;
        if !text.trim().is_empty() {
            return Ok(text);
        }
    }
    bail!(
        "no prompt: pass one with -p \"task\" or on stdin (the interactive mode is not built yet)"
    )
}

async fn headless(args: Args) -> anyhow::Result<u8> {
    let cwd = working_dir(&args)?;
    let task = prompt(&args).await?;
    let client = model_client(&args, &cwd)?;

    // Session: a new one, or the resumed history.
    let sessions = transcript::project_dir(&cwd)?;
    let (mut history, session_id, session_path) = resume(&args, &sessions)?;
    let transcript_path = session_path.clone();
    let mut transcript = Transcript::open(session_path, session_id.clone(), &cwd)?;
    let user = MessageParam::user_text(task);
    transcript.append_param(&user)?;
    history.push(user);
    // A resumed history may end with a user message: merge, keep alternation.
    let mut repairs = Vec::new();
    let history = context::normalize_messages(history, &mut repairs);

    let settings = settings::load(&cwd)?;
    let model = args
        .model
        .clone()
        .or_else(|| settings.model.clone())
        .unwrap_or_else(|| "claude-opus-4-8".to_owned());
    let mode = match (args.permission_mode, settings.permissions.default_mode.as_deref()) {
        (Some(mode), _) => mode,
        (None, Some(name)) => args::PermissionModeArg::parse(name)
            .with_context(|| format!("settings: permissions.defaultMode {name:?} is not default, acceptEdits, bypassPermissions or plan"))?,
        (None, None) => args::PermissionModeArg::Default,
    };
    let mut additional_dirs = settings.permissions.additional_directories.clone();
    additional_dirs.extend(args.add_dir.iter().cloned());
    let workspace = Arc::new(executor::Workspace {
        cwd: cwd.clone(),
        additional_dirs,
    });
    let results_dir = sessions.join(&session_id).join("tool-results");
    let mut rules = tooling::Rules {
        allow: settings.permissions.allow.clone(),
        ask: settings.permissions.ask.clone(),
        deny: settings.permissions.deny.clone(),
    };
    rules.allow.extend(split_rules(&args.allowed_tools));
    rules.deny.extend(split_rules(&args.disallowed_tools));
    let tooling = tooling::build(&workspace, mode, rules, &results_dir)?;
    let hook_env = hooks::HookEnv {
        session_id: session_id.clone(),
        transcript_path: transcript_path.clone(),
        cwd: cwd.clone(),
        permission_mode: tooling.mode_name.to_owned(),
    };
    let permissions: Arc<dyn executor::CanUseTool> = match settings.hooks.get("PreToolUse") {
        Some(matchers) if !matchers.is_empty() => Arc::new(hooks::HookedGate::new(
            hook_env.clone(),
            matchers.clone(),
            tooling.permissions.clone(),
        )),
        _ => tooling.permissions.clone(),
    };
    let permissions: Arc<dyn executor::CanUseTool> =
        Arc::new(hooks::SettingsGuard::new(cwd.clone(), permissions));
    let stop_hook: Arc<dyn loop_core::StopHook> = match settings.hooks.get("Stop") {
        Some(matchers) if !matchers.is_empty() => {
            Arc::new(hooks::CommandStopHook::new(hook_env, matchers.clone()))
        }
        _ => Arc::new(NoStopHook),
    };

    let mut config = LoopConfig::for_model(&model);
    config.fallback_model = args.fallback_model.clone();
    config.max_turns = args.max_turns;
    let mut system = args
        .system_prompt
        .clone()
        .unwrap_or_else(|| context_info::SYSTEM_PROMPT.to_owned());
    if let Some(extra) = &args.append_system_prompt {
        system.push_str("\n\n");
        system.push_str(extra);
    }
    config.system = vec![system];
    let date = transcript::timestamp(std::time::SystemTime::now())[..10].to_owned();
    config.user_context = Some(context_info::user_context(&cwd, &date).await);

    let deps = Deps {
        model: Arc::new(adapter::ProviderModel::new(client.clone())),
        tools: tooling.tools.clone(),
        permissions,
        summarizer: Arc::new(adapter::ProviderSummarizer::new(client, model.clone())),
        result_store: Box::new(tooling::DirStore::new(results_dir)),
        files: Arc::new(tooling::WorkspaceFiles::new(Arc::clone(&workspace))),
        stop_hook,
        workspace,
    };

    let live = args.output_format == OutputFormat::Text && std::io::stdout().is_terminal();
    let mut renderer = Renderer::new(args.output_format, &session_id, &model, live);
    let tool_names: Vec<String> = tooling
        .tools
        .iter()
        .map(|tool| tool.name().to_owned())
        .collect();
    renderer.init(&cwd.to_string_lossy(), &tool_names, tooling.mode_name);

    let cancel = CancellationToken::new();
    // Listen for Ctrl-C before anything runs: a signal that arrives before the listener is
    // registered would kill the process with no result and no cleanup.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("listening for Ctrl-C")?;
    let (handle, mut events) = spawn_loop(config, deps, history, cancel.clone());
    let interrupt = cancel.clone();
    tokio::spawn(async move {
        if sigint.recv().await.is_some() {
            interrupt.cancel();
            // A second Ctrl-C exits at once.
            if sigint.recv().await.is_some() {
                std::process::exit(130);
            }
        }
    });
    while let Some(event) = events.recv().await {
        let written = match &event {
            LoopEvent::Assistant(message) => {
                transcript.append(protocol::Role::Assistant, &serde_json::to_value(message)?)
            }
            LoopEvent::PartialAssistant(message)
            | LoopEvent::ToolResults(message)
            | LoopEvent::UserMessage(message) => transcript.append_param(message),
            _ => Ok(()),
        };
        if let Err(error) = written {
            eprintln!("agent: transcript: {error:#}");
        }
        renderer.event(&event);
    }
    let outcome = handle.await.context("the agent loop panicked")?;
    renderer.finish(&outcome);
    Ok(output::exit_code(&outcome.terminal).0)
}

/// The history to continue from, the session id and its file.
fn resume(args: &Args, sessions: &Path) -> anyhow::Result<(Vec<MessageParam>, String, PathBuf)> {
    let found = if args.continue_session {
        Some(
            transcript::latest(sessions)
                .context("--continue: no earlier session in this directory")?,
        )
    } else if let Some(target) = &args.resume {
        let as_file = PathBuf::from(target);
        if as_file.is_file() {
            Some(as_file)
        } else {
            let path = sessions.join(format!("{target}.jsonl"));
            if !path.is_file() {
                bail!("--resume {target}: no such session file or transcript");
            }
            Some(path)
        }
    } else {
        None
    };
    match found {
        None => {
            let id = uuid::Uuid::new_v4().to_string();
            let path = sessions.join(format!("{id}.jsonl"));
            Ok((Vec::new(), id, path))
        }
        Some(path) => {
            let loaded = transcript::load(&path)?;
            for repair in &loaded.repairs {
                tracing::info!(?repair, "resumed history repaired");
            }
            // Our own session files are continued in place; other transcripts start a new
            // session that begins with their history.
            let own = path.starts_with(sessions);
            if own {
                let id = loaded
                    .session_id
                    .clone()
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                Ok((loaded.messages, id, path))
            } else {
                let id = uuid::Uuid::new_v4().to_string();
                let new_path = sessions.join(format!("{id}.jsonl"));
                let mut copy = Transcript::open(new_path.clone(), id.clone(), Path::new(""))?;
                for message in &loaded.messages {
                    copy.append_param(message)?;
                }
                Ok((loaded.messages, id, new_path))
            }
        }
    }
}
