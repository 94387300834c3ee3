//! The Agent Client Protocol (ACP): editors (Zed, JetBrains IDEs, Neovim and Emacs
//! plugins) drive sessions over JSON-RPC on stdio (`agent acp`), on the protocol
//! maintainers' SDK (`agent-client-protocol`, protocol version 1).
//!
//! One connection holds any number of sessions (`session/new`, `session/load` of an earlier
//! transcript by its id), each a [`crate::Session`] opened from the front end's
//! [`Options`] in the folder the editor names. What an editor sees of a turn
//! (`observer.rs`): the model's text and thinking as `agent_message_chunk` and
//! `agent_thought_chunk`, each tool call as a `tool_call` with Claude Code's titles, kinds
//! and locations (`calls.rs`; a diff for Write and Edit), its end as a `tool_call_update`,
//! the todo list as a `plan`, mode changes as `current_mode_update`. Questions go to the
//! editor (`session/request_permission`, `prompter.rs`) with allow-once, allow-always
//! (what [`tools::Always`] would grant) and reject. When the editor offers its file system
//! (`fs.readTextFile` and `fs.writeTextFile`), Read, Write and Edit go through its buffers
//! (`files.rs`): unsaved changes are read, edits land in the editor.
//!
//! Modes are the permission modes (`default`, `acceptEdits`, `plan`, and
//! `bypassPermissions` when the command line allowed it); the model is a session
//! configuration option (`model`); custom commands and skills are advertised
//! (`available_commands_update`) and run when a prompt names them (`/name arguments`).
//!
//! Not offered (said in the capabilities): audio prompts, the editor's terminals
//! (commands run in our sandbox), authentication (the API key comes from the environment
//! or the settings, as for every front end).

mod calls;
mod files;
mod observer;
mod prompt;
mod prompter;
mod replay;
pub mod transport;

use std::collections::HashMap;
use std::sync::Arc;

use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo};
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{Options, Session};

pub use files::ClientFiles;

/// Why an ACP connection ended badly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcpError {
    /// The connection failed (the transport broke, a message could not be sent).
    #[error("ACP connection: {0}")]
    Connection(String),
}

impl From<agent_client_protocol::Error> for AcpError {
    fn from(error: agent_client_protocol::Error) -> Self {
        Self::Connection(error.to_string())
    }
}

/// Serves editors on stdin and stdout until stdin ends ([`serve`]), one JSON-RPC message
/// a line ([`transport::lines`]: a line that is not UTF-8 or longer than
/// [`transport::MAX_LINE_BYTES`] is answered with a parse error, never the end).
///
/// # Errors
///
/// As [`serve`].
pub async fn serve_stdio(base: Options) -> Result<(), AcpError> {
    serve(
        base,
        transport::lines(tokio::io::stdin(), tokio::io::stdout()),
    )
    .await
}

/// Serves one editor on `transport` until it goes: every session the editor opens is opened
/// from `base` in the folder it names (with the MCP servers it gives), and ended when the
/// connection ends.
///
/// # Errors
///
/// [`AcpError::Connection`] when the transport fails; a session that cannot open or a
/// turn that cannot run is an error answer to that request, not an end.
pub async fn serve(
    base: Options,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), AcpError> {
    let (sender, inbound) = mpsc::unbounded_channel::<Inbound>();
    let forward = move |message: Inbound| {
        // The receiver lives as long as the connection: a send can fail only once it ends.
        let _ = sender.send(message);
    };
    let (f1, f2, f3, f4, f5, f6, f7, f8) = (
        forward.clone(),
        forward.clone(),
        forward.clone(),
        forward.clone(),
        forward.clone(),
        forward.clone(),
        forward.clone(),
        forward,
    );
    Agent
        .v1()
        .name("agent")
        .on_receive_request(
            async move |request: acp::InitializeRequest, responder, _cx| {
                f1(Inbound::Initialize(
                    Box::new(request.client_capabilities),
                    responder,
                ));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: acp::AuthenticateRequest, responder, _cx| {
                f2(Inbound::Authenticate(responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::NewSessionRequest, responder, _cx| {
                f3(Inbound::New(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::LoadSessionRequest, responder, _cx| {
                f4(Inbound::Load(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::PromptRequest, responder, _cx| {
                f5(Inbound::Prompt(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::SetSessionModeRequest, responder, _cx| {
                f6(Inbound::SetMode(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::SetSessionConfigOptionRequest, responder, _cx| {
                f7(Inbound::SetConfig(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: acp::CancelNotification, _cx| {
                f8(Inbound::Cancel(notification));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Client>| {
            Server::new(base, cx).run(inbound).await;
            Ok(())
        })
        .await?;
    Ok(())
}

/// What the editor sent, passed from the connection's handlers to the [`Server`] (which
/// may take its time: the handlers must not).
enum Inbound {
    /// The editor's capabilities (boxed: they are large).
    Initialize(
        Box<acp::ClientCapabilities>,
        Responder<acp::InitializeResponse>,
    ),
    Authenticate(Responder<acp::AuthenticateResponse>),
    New(acp::NewSessionRequest, Responder<acp::NewSessionResponse>),
    Load(acp::LoadSessionRequest, Responder<acp::LoadSessionResponse>),
    Prompt(acp::PromptRequest, Responder<acp::PromptResponse>),
    SetMode(
        acp::SetSessionModeRequest,
        Responder<acp::SetSessionModeResponse>,
    ),
    SetConfig(
        acp::SetSessionConfigOptionRequest,
        Responder<acp::SetSessionConfigOptionResponse>,
    ),
    Cancel(acp::CancelNotification),
}

/// One session of the connection: idle (the session is here) or running a turn (the
/// session is with the turn's task).
enum Slot {
    Idle(Box<Session>),
    Busy(Running),
}

/// A session's turn in progress.
struct Running {
    /// Stops the turn (`session/cancel`).
    cancel: CancellationToken,
    /// The session's permission gate: modes switch at once, also during a turn.
    gate: Arc<tools::PermissionGate>,
    /// Checks a model name while the session is away.
    resolve: crate::ModelResolver,
    /// A model chosen during the turn, for the next one.
    later_model: Option<String>,
    /// The model options as the editor was last told them.
    model_options: Vec<acp::SessionConfigOption>,
}

/// The request a session being opened answers.
enum Opening {
    New(Responder<acp::NewSessionResponse>),
    /// The id asked for, and the request.
    Load(String, Responder<acp::LoadSessionResponse>),
}

/// A session's opening, done.
struct Opened {
    opening: Opening,
    result: anyhow::Result<(Session, observer::CatchUpCell)>,
}

/// A turn that ended: its session back, with what to answer.
struct Finished {
    id: String,
    session: Box<Session>,
    /// The turn's outcome (`None`: a built-in command that ran no turn).
    outcome: anyhow::Result<Option<loop_core::LoopOutcome>>,
    cancelled: bool,
    responder: Responder<acp::PromptResponse>,
}

/// The connection's state: the editor's capabilities and its sessions.
struct Server {
    base: Options,
    cx: ConnectionTo<Client>,
    client: acp::ClientCapabilities,
    sessions: HashMap<String, Slot>,
    /// Each session's catch-up cell, shared by its prompter and its turns' observers.
    catch_ups: HashMap<String, observer::CatchUpCell>,
    /// Sessions being opened, each on its own task.
    opening: FuturesUnordered<tokio::task::JoinHandle<Opened>>,
    /// The ids being loaded (a second load of one is refused).
    loading: std::collections::HashSet<String>,
    turns: FuturesUnordered<tokio::task::JoinHandle<Finished>>,
}

impl Server {
    fn new(base: Options, cx: ConnectionTo<Client>) -> Self {
        Self {
            base,
            cx,
            client: acp::ClientCapabilities::default(),
            sessions: HashMap::new(),
            catch_ups: HashMap::new(),
            opening: FuturesUnordered::new(),
            loading: std::collections::HashSet::new(),
            turns: FuturesUnordered::new(),
        }
    }

    /// Answers the editor until the connection ends, then ends every session (a running
    /// turn is stopped first).
    async fn run(mut self, mut inbound: mpsc::UnboundedReceiver<Inbound>) {
        let cx = self.cx.clone();
        loop {
            tokio::select! {
                message = inbound.recv() => match message {
                    Some(message) => self.handle(message).await,
                    None => break,
                },
                Some(joined) = self.turns.next(), if !self.turns.is_empty() => {
                    self.finished(joined);
                }
                Some(joined) = self.opening.next(), if !self.opening.is_empty() => {
                    self.opened(joined).await;
                }
                () = cx.incoming_closed() => break,
            }
        }
        for slot in self.sessions.values() {
            if let Slot::Busy(running) = slot {
                running.cancel.cancel();
            }
        }
        while let Some(joined) = self.turns.next().await {
            self.finished(joined);
        }
        // Sessions that opened as the connection ended: their requests cannot be answered.
        while let Some(joined) = self.opening.next().await {
            if let Ok(Opened {
                result: Ok((mut session, _)),
                ..
            }) = joined
            {
                session.end(crate::EndReason::Other).await;
            }
        }
        for (_, slot) in self.sessions.drain() {
            if let Slot::Idle(mut session) = slot {
                session.end(crate::EndReason::Other).await;
            }
        }
    }

    async fn handle(&mut self, message: Inbound) {
        match message {
            Inbound::Initialize(capabilities, responder) => {
                self.client = *capabilities;
                let _ = responder.respond(initialize_response());
            }
            Inbound::Authenticate(responder) => {
                // No methods are offered: the key comes from the environment or settings.
                let _ = responder.respond(acp::AuthenticateResponse::new());
            }
            Inbound::New(request, responder) => {
                let setup = Setup {
                    cwd: request.cwd,
                    mcp_servers: request.mcp_servers,
                    resume: None,
                };
                self.spawn_open(setup, Opening::New(responder));
            }
            Inbound::Load(request, responder) => self.load(request, responder),
            Inbound::Prompt(request, responder) => self.prompt(request, responder),
            Inbound::SetMode(request, responder) => {
                let answer = self.set_mode(&request);
                let _ = match answer {
                    Ok(()) => responder.respond(acp::SetSessionModeResponse::new()),
                    Err(error) => responder.respond_with_error(error),
                };
            }
            Inbound::SetConfig(request, responder) => {
                let _ = match self.set_config(&request) {
                    Ok(options) => {
                        responder.respond(acp::SetSessionConfigOptionResponse::new(options))
                    }
                    Err(error) => responder.respond_with_error(error),
                };
            }
            Inbound::Cancel(notification) => {
                if let Some(Slot::Busy(running)) =
                    self.sessions.get(notification.session_id.0.as_ref())
                {
                    running.cancel.cancel();
                }
            }
        }
    }

    /// `session/load`: the session reopened from its transcript, its history sent to the
    /// editor as updates, then the answer.
    fn load(
        &mut self,
        request: acp::LoadSessionRequest,
        responder: Responder<acp::LoadSessionResponse>,
    ) {
        let id = request.session_id.0.to_string();
        // An id, never a path (resume would take a transcript's path too).
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            let _ =
                responder.respond_with_error(agent_client_protocol::Error::invalid_params().data(
                    format!("{id:?} is not a session id (letters, digits and dashes)"),
                ));
            return;
        }
        if self.sessions.contains_key(&id) || self.loading.contains(&id) {
            let _ = responder.respond_with_error(
                agent_client_protocol::Error::invalid_params()
                    .data(format!("session {id} is already open on this connection")),
            );
            return;
        }
        self.loading.insert(id.clone());
        let setup = Setup {
            cwd: request.cwd,
            mcp_servers: request.mcp_servers,
            resume: Some(id.clone()),
        };
        self.spawn_open(setup, Opening::Load(id, responder));
    }

    /// Opens a session on its own task (its settings, MCP servers and context take their
    /// time; the other sessions' requests are answered meanwhile).
    fn spawn_open(&mut self, setup: Setup, opening: Opening) {
        let (base, cx, client) = (self.base.clone(), self.cx.clone(), self.client.clone());
        self.opening.push(tokio::spawn(async move {
            let result = open(&base, &cx, &client, setup).await;
            Opened { opening, result }
        }));
    }

    /// A session opened (or failed to): the editor's request answered, a loaded session's
    /// history sent first.
    async fn opened(&mut self, joined: Result<Opened, tokio::task::JoinError>) {
        let Ok(Opened { opening, result }) = joined else {
            // The task panicked: its responder is gone, which answers with an error.
            tracing::error!(
                "an ACP session failed to open: {joined:?}",
                joined = joined.err()
            );
            return;
        };
        match (opening, result) {
            (Opening::New(responder), Ok((session, catch_up))) => {
                let id = session.session_id().to_owned();
                self.catch_ups.insert(id.clone(), catch_up);
                let response = acp::NewSessionResponse::new(id.clone())
                    .modes(modes(&session, &self.base))
                    .config_options(model_options(&session));
                let _ = responder.respond(response);
                self.announce(&session);
                self.sessions.insert(id, Slot::Idle(Box::new(session)));
            }
            (Opening::New(responder), Err(error)) => {
                let _ = responder.respond_with_error(failure(&error));
            }
            (Opening::Load(id, responder), result) => {
                self.loading.remove(&id);
                self.loaded(id, responder, result).await;
            }
        }
    }

    /// Answers a `session/load` whose session opened (or not).
    async fn loaded(
        &mut self,
        id: String,
        responder: Responder<acp::LoadSessionResponse>,
        result: anyhow::Result<(Session, observer::CatchUpCell)>,
    ) {
        match result {
            Ok((mut session, _)) if session.session_id() != id => {
                // Resumed under another id (a fork): the editor would not know its updates.
                session.end(crate::EndReason::Other).await;
                let _ = responder.respond_with_error(
                    agent_client_protocol::Error::invalid_params().data(format!(
                        "session {id} reopened as {}; load it by that id",
                        session.session_id()
                    )),
                );
            }
            Ok((session, catch_up)) => {
                self.catch_ups.insert(id.clone(), catch_up);
                replay::send(&self.cx, &id, session.history(), session.cwd());
                let response = acp::LoadSessionResponse::new()
                    .modes(modes(&session, &self.base))
                    .config_options(model_options(&session));
                let _ = responder.respond(response);
                self.announce(&session);
                self.sessions.insert(id, Slot::Idle(Box::new(session)));
            }
            Err(error) => {
                let _ = responder.respond_with_error(failure(&error));
            }
        }
    }

    /// Tells the editor the session's commands.
    fn announce(&self, session: &Session) {
        let mut commands: Vec<acp::AvailableCommand> = session
            .commands()
            .iter()
            .map(|command| {
                let entry =
                    acp::AvailableCommand::new(command.name.clone(), command.description.clone());
                match &command.argument_hint {
                    Some(hint) => entry.input(acp::AvailableCommandInput::Unstructured(
                        acp::UnstructuredCommandInput::new(hint.clone()),
                    )),
                    None => entry,
                }
            })
            .collect();
        // `/compact`, described as the terminal's `/help` describes it.
        if let Some((_, what)) = crate::slash::BUILT_IN
            .iter()
            .find(|(name, _)| *name == "compact")
        {
            let (hint, what) = what
                .split_once("] ")
                .map_or(("", *what), |(hint, rest)| (hint, rest));
            commands.push(
                acp::AvailableCommand::new("compact", what.to_owned()).input(
                    acp::AvailableCommandInput::Unstructured(acp::UnstructuredCommandInput::new(
                        hint.trim_start_matches('[').to_owned(),
                    )),
                ),
            );
        }
        commands.extend(session.skills().iter().map(|skill| {
            acp::AvailableCommand::new(skill.name.clone(), skill.description.clone())
        }));
        let update = acp::SessionUpdate::AvailableCommandsUpdate(
            acp::AvailableCommandsUpdate::new(commands),
        );
        let _ = self.cx.send_notification(acp::SessionNotification::new(
            session.session_id().to_owned(),
            update,
        ));
    }

    /// `session/prompt`: the turn runs on its own task; the answer comes when it ends.
    fn prompt(&mut self, request: acp::PromptRequest, responder: Responder<acp::PromptResponse>) {
        let id = request.session_id.0.to_string();
        let message = match prompt::message(request.prompt) {
            Ok(message) => message,
            Err(problem) => {
                let _ = responder.respond_with_error(
                    agent_client_protocol::Error::invalid_params().data(problem),
                );
                return;
            }
        };
        let mut session = match self.sessions.remove(&id) {
            Some(Slot::Idle(session)) => session,
            Some(busy @ Slot::Busy(_)) => {
                self.sessions.insert(id.clone(), busy);
                let _ = responder.respond_with_error(
                    agent_client_protocol::Error::invalid_request()
                        .data(format!("session {id} is already running a prompt")),
                );
                return;
            }
            None => {
                let _ = responder.respond_with_error(unknown_session(&id));
                return;
            }
        };
        let cancel = CancellationToken::new();
        let running = Running {
            cancel: cancel.clone(),
            gate: session.permission_gate(),
            resolve: session.model_resolver(),
            later_model: None,
            model_options: model_options(&session),
        };
        self.sessions.insert(id.clone(), Slot::Busy(running));
        let catch_up = self.catch_ups.get(&id).cloned().unwrap_or_default();
        let mut observer = observer::Updates::new(self.cx.clone(), id.clone(), &session, catch_up);
        self.turns.push(tokio::spawn(async move {
            let outcome = match compact_focus(&message) {
                Some(focus) => match session.compact(focus, &cancel).await {
                    Ok((before, after)) => {
                        observer.say(&format!(
                            "Compacted the conversation: about {before} tokens before, {after} after."
                        ));
                        Ok(None)
                    }
                    Err(error) => Err(error),
                },
                None => session
                    .send(message, &mut observer, cancel.clone())
                    .await
                    .map(Some),
            };
            Finished {
                id,
                session,
                outcome,
                cancelled: cancel.is_cancelled(),
                responder,
            }
        }));
    }

    /// A turn's task ended: its session is idle again, the prompt answered.
    fn finished(&mut self, joined: Result<Finished, tokio::task::JoinError>) {
        let Ok(done) = joined else {
            // The task panicked: its session is lost; the editor learns it from the
            // dropped responder (an error answer).
            tracing::error!(
                "an ACP turn's task failed: {joined:?}",
                joined = joined.err()
            );
            return;
        };
        let Finished {
            id,
            mut session,
            outcome,
            cancelled,
            responder,
        } = done;
        if let Some(Slot::Busy(running)) = self.sessions.remove(&id)
            && let Some(model) = running.later_model
            && let Err(error) = session.set_model(&model)
        {
            tracing::warn!("the model {model:?} chosen during a turn was not applied: {error:#}");
        }
        let answer = match outcome {
            Ok(Some(outcome)) => stop_reason(&outcome.terminal, cancelled),
            Ok(None) => Ok(acp::StopReason::EndTurn),
            Err(error) => Err(failure(&error)),
        };
        let _ = match answer {
            Ok(reason) => responder.respond(acp::PromptResponse::new(reason)),
            Err(error) => responder.respond_with_error(error),
        };
        self.sessions.insert(id, Slot::Idle(session));
    }

    /// `session/set_mode`: the permission mode switched at once, as Shift+Tab does.
    fn set_mode(
        &self,
        request: &acp::SetSessionModeRequest,
    ) -> Result<(), agent_client_protocol::Error> {
        let id = request.session_id.0.as_ref();
        let gate = match self.sessions.get(id) {
            Some(Slot::Idle(session)) => session.permission_gate(),
            Some(Slot::Busy(running)) => Arc::clone(&running.gate),
            None => return Err(unknown_session(id)),
        };
        let wanted = request.mode_id.0.as_ref();
        let mode = wanted
            .parse::<tools::PermissionMode>()
            .ok()
            .filter(|mode| offered_modes(&self.base).contains(mode))
            .ok_or_else(|| {
                agent_client_protocol::Error::invalid_params()
                    .data(format!("mode {wanted:?} is not one this session offers"))
            })?;
        gate.set_mode(mode);
        Ok(())
    }

    /// `session/set_config_option`: the model (`model`), from the next request; during a
    /// turn, from the next turn.
    fn set_config(
        &mut self,
        request: &acp::SetSessionConfigOptionRequest,
    ) -> Result<Vec<acp::SessionConfigOption>, agent_client_protocol::Error> {
        let id = request.session_id.0.as_ref();
        if request.config_id.0.as_ref() != MODEL_OPTION {
            return Err(agent_client_protocol::Error::invalid_params().data(format!(
                "no configuration option {:?} (this agent offers \"{MODEL_OPTION}\")",
                request.config_id.0
            )));
        }
        let Some(value) = request.value.as_value_id() else {
            return Err(agent_client_protocol::Error::invalid_params()
                .data("the model option takes a value id"));
        };
        let name = value.0.to_string();
        match self.sessions.get_mut(id) {
            Some(Slot::Idle(session)) => {
                session.set_model(&name).map_err(|error| {
                    agent_client_protocol::Error::invalid_params().data(format!("{error:#}"))
                })?;
                Ok(model_options(session))
            }
            Some(Slot::Busy(running)) => {
                (running.resolve)(&name).map_err(|error| {
                    agent_client_protocol::Error::invalid_params().data(format!("{error:#}"))
                })?;
                running.later_model = Some(name.clone());
                Ok(with_current(&running.model_options, &name))
            }
            None => Err(unknown_session(id)),
        }
    }
}

/// Opens a session for `setup` from the front end's options: in its folder, with the
/// editor's MCP servers, asking the editor, through its files when it offers them.
async fn open(
    base: &Options,
    cx: &ConnectionTo<Client>,
    client: &acp::ClientCapabilities,
    setup: Setup,
) -> anyhow::Result<(Session, observer::CatchUpCell)> {
    let mut options = base.clone();
    if !setup.cwd.is_absolute() {
        anyhow::bail!(
            "cwd {} is not an absolute path (the protocol asks for one)",
            setup.cwd.display()
        );
    }
    options.cwd = Some(setup.cwd.clone());
    if let Some(servers) = mcp_config(&setup.mcp_servers) {
        options.mcp.config_files.push(servers.into());
    }
    if let Some(id) = setup.resume {
        options.resume.resume = Some(id);
    }
    let files = client.fs.read_text_file && client.fs.write_text_file;
    let ask = prompter::ClientPrompter::new(cx.clone(), setup.cwd.clone(), files);
    if files {
        options.editor_files = Some(Arc::new(ClientFiles::new(cx.clone(), ask.session_cell())));
    }
    let mut session = Session::open(&options, Some(Arc::new(ask.clone())), None)?;
    ask.attach(session.session_id());
    session.gather_context().await;
    Ok((session, ask.catch_up()))
}

/// What a session opens with.
struct Setup {
    cwd: std::path::PathBuf,
    mcp_servers: Vec<acp::McpServer>,
    /// The session to reopen (`session/load`).
    resume: Option<String>,
}

/// The id of the model's configuration option.
const MODEL_OPTION: &str = "model";

/// The answer to `initialize`: protocol version 1, sessions that load, prompts with
/// images and embedded context, MCP servers over stdio and HTTP.
fn initialize_response() -> acp::InitializeResponse {
    acp::InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
        .agent_capabilities(
            acp::AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(
                    acp::PromptCapabilities::new()
                        .image(true)
                        .embedded_context(true),
                )
                .mcp_capabilities(acp::McpCapabilities::new().http(true)),
        )
        .agent_info(acp::Implementation::new("agent", env!("CARGO_PKG_VERSION")).title("agent"))
}

/// The permission modes a session of `base` offers: bypassPermissions only when the
/// command line allowed it.
fn offered_modes(base: &Options) -> Vec<tools::PermissionMode> {
    use tools::PermissionMode as Mode;
    let mut modes = vec![Mode::Default, Mode::AcceptEdits, Mode::Plan];
    if base.permissions.bypass_allowed() {
        modes.push(Mode::BypassPermissions);
    }
    modes
}

/// The session's modes, as `SessionModeState`.
fn modes(session: &Session, base: &Options) -> acp::SessionModeState {
    use tools::PermissionMode as Mode;
    let available = offered_modes(base)
        .into_iter()
        .map(|mode| {
            let (name, description) = match mode {
                Mode::Default => (
                    "Default",
                    "Asks before edits and commands the rules do not allow",
                ),
                Mode::AcceptEdits => ("Accept Edits", "Edits in the workspace without asking"),
                Mode::Plan => ("Plan", "Reads and plans; changes nothing"),
                _ => ("Bypass Permissions", "Runs everything without asking"),
            };
            acp::SessionMode::new(mode.as_str(), name).description(description)
        })
        .collect();
    acp::SessionModeState::new(session.permission_gate().mode().as_str(), available)
}

/// The model option: the session's model, then the aliases it resolves
/// ([`crate::control`]'s list, as the Agent SDK gets it).
fn model_options(session: &Session) -> Vec<acp::SessionConfigOption> {
    let choices: Vec<acp::SessionConfigSelectOption> = crate::control::models_of(session)
        .into_iter()
        .map(|(value, description)| {
            acp::SessionConfigSelectOption::new(value.clone(), value).description(description)
        })
        .collect();
    vec![
        acp::SessionConfigOption::select(
            MODEL_OPTION,
            "Model",
            session.model().to_owned(),
            choices,
        )
        .category(acp::SessionConfigOptionCategory::Model),
    ]
}

/// `options` with the model option's current value set to `model` (a choice made during a
/// turn; an alias not in the list is added).
fn with_current(
    options: &[acp::SessionConfigOption],
    model: &str,
) -> Vec<acp::SessionConfigOption> {
    options
        .iter()
        .cloned()
        .map(|mut option| {
            if let acp::SessionConfigKind::Select(select) = &mut option.kind {
                select.current_value = model.to_owned().into();
                if let acp::SessionConfigSelectOptions::Ungrouped(list) = &mut select.options
                    && !list.iter().any(|choice| choice.value.0.as_ref() == model)
                {
                    list.push(acp::SessionConfigSelectOption::new(
                        model.to_owned(),
                        model.to_owned(),
                    ));
                }
            }
            option
        })
        .collect()
}

/// The editor's MCP servers as a `--mcp-config` JSON text (`None`: none given).
fn mcp_config(servers: &[acp::McpServer]) -> Option<String> {
    if servers.is_empty() {
        return None;
    }
    let mut map = serde_json::Map::new();
    for server in servers {
        let (name, config) = match server {
            acp::McpServer::Stdio(stdio) => (
                &stdio.name,
                serde_json::json!({
                    "command": stdio.command,
                    "args": stdio.args,
                    "env": stdio.env.iter().map(|var| (var.name.clone(), serde_json::Value::from(var.value.clone()))).collect::<serde_json::Map<_, _>>(),
                }),
            ),
            acp::McpServer::Http(http) => (
                &http.name,
                serde_json::json!({
                    "type": "http",
                    "url": http.url,
                    "headers": http.headers.iter().map(|header| (header.name.clone(), serde_json::Value::from(header.value.clone()))).collect::<serde_json::Map<_, _>>(),
                }),
            ),
            acp::McpServer::Sse(sse) => (
                &sse.name,
                serde_json::json!({
                    "type": "sse",
                    "url": sse.url,
                    "headers": sse.headers.iter().map(|header| (header.name.clone(), serde_json::Value::from(header.value.clone()))).collect::<serde_json::Map<_, _>>(),
                }),
            ),
            _ => continue,
        };
        map.insert(name.clone(), config);
    }
    Some(serde_json::json!({ "mcpServers": map }).to_string())
}

/// The focus of a `/compact` prompt (`Some(None)`: none given), read as the terminal
/// reads a typed line ([`crate::slash::parse`]); `None` for any other prompt.
fn compact_focus(message: &protocol::MessageParam) -> Option<Option<String>> {
    let [protocol::ContentBlock::Text(text)] = message.content.as_slice() else {
        return None;
    };
    match crate::slash::parse(&text.text) {
        crate::slash::Input::Compact(focus) => Some(focus),
        _ => None,
    }
}

/// How a turn's end is told: its stop reason, or an error answer for a turn that failed.
fn stop_reason(
    terminal: &loop_core::Terminal,
    cancelled: bool,
) -> Result<acp::StopReason, agent_client_protocol::Error> {
    use loop_core::Terminal;
    if cancelled {
        return Ok(acp::StopReason::Cancelled);
    }
    Ok(match terminal {
        Terminal::AbortedStreaming | Terminal::AbortedTools => acp::StopReason::Cancelled,
        Terminal::MaxTurns | Terminal::MaxBudget(_) | Terminal::TokenBudgetReached => {
            acp::StopReason::MaxTurnRequests
        }
        Terminal::ModelError(error) => {
            return Err(agent_client_protocol::Error::internal_error().data(error.to_string()));
        }
        Terminal::PromptTooLong => {
            return Err(agent_client_protocol::Error::internal_error().data(
                "the prompt is too long for the model's context window, even after compaction",
            ));
        }
        Terminal::BlockingLimit(message) | Terminal::ImageError(message) => {
            return Err(agent_client_protocol::Error::internal_error().data(message.clone()));
        }
        _ => acp::StopReason::EndTurn,
    })
}

/// An error answer for a failure of ours (a session that did not open, a turn that did not
/// run), with its whole chain.
fn failure(error: &anyhow::Error) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(format!("{error:#}"))
}

fn unknown_session(id: &str) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(format!(
        "no session {id} on this connection (session/new or session/load first)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_is_a_command_only_as_a_whole_word() {
        let focus = |text: &str| compact_focus(&protocol::MessageParam::user_text(text));
        assert_eq!(focus("/compact"), Some(None));
        assert_eq!(
            focus("  /compact keep the plan "),
            Some(Some("keep the plan".into()))
        );
        assert_eq!(focus("/compaction"), None);
        assert_eq!(focus("please /compact"), None);
    }

    #[test]
    fn the_editors_mcp_servers_become_a_config_text() {
        let servers = vec![
            acp::McpServer::Stdio(
                acp::McpServerStdio::new("files", "/usr/bin/files-mcp")
                    .args(vec!["--root".into(), "/w".into()])
                    .env(vec![acp::EnvVariable::new("TOKEN", "t")]),
            ),
            acp::McpServer::Http(
                acp::McpServerHttp::new("docs", "https://docs.example/mcp")
                    .headers(vec![acp::HttpHeader::new("Authorization", "Bearer x")]),
            ),
        ];
        let text = mcp_config(&servers).expect("servers given");
        let config: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            config,
            serde_json::json!({"mcpServers": {
                "files": {"command": "/usr/bin/files-mcp", "args": ["--root", "/w"], "env": {"TOKEN": "t"}},
                "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer x"}},
            }})
        );
        assert_eq!(mcp_config(&[]), None);
    }
}
