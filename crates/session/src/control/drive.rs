//! A session driven over the control channel: user messages answered in turn, the
//! program's requests answered as they come, also while a turn runs.

use std::collections::VecDeque;
use std::sync::Arc;

use loop_core::LoopOutcome;
use protocol::MessageParam;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::channel::Incoming;
use super::host::Host;
use crate::Session;

/// Where a driven session's turns are shown (the stream-json writer of a front end).
pub trait Front: Send {
    /// What sees each turn's events.
    fn observer(&mut self) -> &mut dyn crate::Observer;
    /// A turn ended: its `result` line.
    fn result(&mut self, outcome: &LoopOutcome);
    /// A hook refused a prompt ([`crate::PromptBlocked`]): nothing was sent.
    fn refused(&mut self, error: &anyhow::Error);
    /// A line of the program's input that was not understood, or something it should
    /// know (on stderr, say).
    fn note(&mut self, text: &str);
}

/// How a driven session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// The program's input ended (or it asked to end the session): the exit code of the
    /// last turn (0 when none ran), as `-p` gives it.
    Input(u8),
    /// A signal stopped a turn (Ctrl-C, SIGTERM): the front end says which.
    Signalled,
}

impl Ended {
    /// The process's exit code: the last turn's, or `signalled` (the front end's code for
    /// the signal that stopped it).
    pub fn code(self, signalled: u8) -> u8 {
        match self {
            Self::Input(code) => code,
            Self::Signalled => signalled,
        }
    }
}

/// Arms and disarms the front end's own interrupts (Ctrl-C) around each turn.
pub trait Arming: Send + Sync {
    /// A token the front end cancels on its interrupt, for the turn about to run.
    fn arm(&self) -> CancellationToken;
    /// The turn ended.
    fn disarm(&self);
}

/// Drives `session` for `host` until the program's input ends: each user message is a
/// turn (`/name` runs a custom command, as a prompt does); requests are answered as they
/// come (`interrupt` stops the running turn as Esc does, `set_permission_mode` switches the
/// mode at once as Shift+Tab does, `set_model` applies from the next request as `/model`
/// does); messages that come during a turn wait for it. `queued` are messages read before
/// the session opened.
///
/// # Errors
///
/// A turn that failed to run at all ([`Session::send`]'s errors other than a refused
/// prompt).
pub async fn drive(
    session: &mut Session,
    host: &Host,
    mut incoming: mpsc::UnboundedReceiver<Incoming>,
    queued: Vec<Incoming>,
    front: &mut dyn Front,
    arming: &dyn Arming,
) -> anyhow::Result<Ended> {
    let mut state = Driver {
        host: host.clone(),
        queued: queued.into(),
        open: true,
        code: 0,
        later_model: None,
        deferred: Vec::new(),
        initial_model: session.model().to_owned(),
        allow_bypass: host.allow_bypass(),
        ending: false,
    };
    while !state.ending {
        let next = match state.queued.pop_front() {
            Some(next) => next,
            None if state.open => match incoming.recv().await {
                Some(next) => next,
                None => break,
            },
            None => break,
        };
        match next {
            Incoming::User(message) => {
                if state
                    .turn(session, message, &mut incoming, front, arming)
                    .await?
                {
                    return Ok(Ended::Signalled);
                }
            }
            Incoming::Request { id, request } => {
                if state.idle_request(session, &id, &request) == Flow::End {
                    break;
                }
            }
            Incoming::Invalid(problem) => front.note(&format!("{problem}; the line is skipped")),
        }
    }
    Ok(Ended::Input(state.code))
}

/// Whether the session goes on after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    End,
}

/// The driver's state between messages.
struct Driver {
    host: Host,
    /// Messages and requests waiting for the session (read while a turn ran).
    queued: VecDeque<Incoming>,
    /// Whether the program's input is still open.
    open: bool,
    /// The last turn's exit code.
    code: u8,
    /// A model asked for while a turn ran, for the next turn.
    later_model: Option<String>,
    /// Requests that need the session whole, answered when the running turn ends.
    deferred: Vec<(String, Value)>,
    /// The model the session began with (`set_model` without a model goes back to it).
    initial_model: String,
    /// Whether bypassPermissions may be switched to.
    allow_bypass: bool,
    /// `end_session` came while a turn ran: the session ends after it.
    ending: bool,
}

impl Driver {
    /// Runs one turn for `message`, answering requests while it runs. Returns whether a
    /// signal stopped it.
    async fn turn(
        &mut self,
        session: &mut Session,
        message: MessageParam,
        incoming: &mut mpsc::UnboundedReceiver<Incoming>,
        front: &mut dyn Front,
        arming: &dyn Arming,
    ) -> anyhow::Result<bool> {
        if let Some(model) = self.later_model.take()
            && let Err(error) = session.set_model(&model)
        {
            front.note(&format!("set_model {model:?} was not applied: {error:#}"));
        }
        let armed = arming.arm();
        let cancel = armed.child_token();
        let shared = Shared::of(session);
        let (outcome, notes) = {
            let mut notes = Vec::new();
            let turn = session.send(message, front.observer(), cancel.clone());
            tokio::pin!(turn);
            let outcome = loop {
                tokio::select! {
                    outcome = &mut turn => break outcome,
                    next = incoming.recv(), if self.open => match next {
                        None => self.open = false,
                        Some(Incoming::Request { id, request }) => {
                            self.busy_request(&shared, &cancel, &id, request);
                        }
                        Some(Incoming::Invalid(problem)) => notes.push(problem),
                        Some(user @ Incoming::User(_)) => self.queued.push_back(user),
                    },
                }
            };
            (outcome, notes)
        };
        arming.disarm();
        for problem in notes {
            front.note(&format!("{problem}; the line is skipped"));
        }
        for (id, request) in std::mem::take(&mut self.deferred) {
            if self.idle_request(session, &id, &request) == Flow::End {
                self.ending = true;
            }
        }
        let outcome = match outcome {
            Err(error) if error.downcast_ref::<crate::PromptBlocked>().is_some() => {
                front.refused(&error);
                self.code = 1;
                return Ok(false);
            }
            other => other?,
        };
        front.result(&outcome);
        self.code = crate::sdk::exit_code(&outcome.terminal).0;
        Ok(armed.is_cancelled())
    }

    /// Answers request `id` while no turn runs.
    fn idle_request(&mut self, session: &mut Session, id: &str, request: &Value) -> Flow {
        let channel = Arc::clone(self.host.channel());
        let answer = match subtype(request) {
            "interrupt" => Ok(json!({})),
            "set_model" => {
                let name = request
                    .get("model")
                    .and_then(Value::as_str)
                    .filter(|name| *name != "default")
                    .unwrap_or(&self.initial_model)
                    .to_owned();
                session
                    .set_model(&name)
                    .map(|_| json!({}))
                    .map_err(|error| format!("{error:#}"))
            }
            "mcp_status" => Ok(json!({
                "mcpServers": session
                    .mcp_status()
                    .into_iter()
                    .map(|(name, status)| json!({"name": name, "status": status}))
                    .collect::<Vec<_>>(),
            })),
            "end_session" => {
                channel.respond(id, Ok(json!({})));
                return Flow::End;
            }
            _ => match self.shared_request(&Shared::of(session), id, request) {
                Some(answer) => answer,
                None => return Flow::Continue,
            },
        };
        channel.respond(id, answer);
        Flow::Continue
    }

    /// Answers request `id` while a turn runs (`cancel` stops it): what needs the session
    /// whole waits for the turn's end.
    fn busy_request(
        &mut self,
        shared: &Shared,
        cancel: &CancellationToken,
        id: &str,
        request: Value,
    ) {
        let answer = match subtype(&request) {
            "interrupt" => {
                cancel.cancel();
                Ok(json!({}))
            }
            "set_model" => {
                let name = request.get("model").and_then(Value::as_str);
                match name.filter(|name| *name != "default") {
                    Some(name) => (shared.resolve)(name).map(|_| {
                        self.later_model = Some(name.to_owned());
                        json!({})
                    }),
                    None => {
                        self.later_model = Some(self.initial_model.clone());
                        Ok(json!({}))
                    }
                }
            }
            "mcp_status" | "end_session" => {
                self.deferred.push((id.to_owned(), request));
                return;
            }
            _ => match self.shared_request(shared, id, &request) {
                Some(answer) => answer,
                None => return,
            },
        };
        self.host.channel().respond(id, answer);
    }

    /// `set_permission_mode`: the mode switched at once (bypassPermissions only when the
    /// program may).
    fn set_mode(&self, shared: &Shared, request: &Value) -> Result<Value, String> {
        let mode = request
            .get("mode")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let parsed = mode.parse::<tools::PermissionMode>().map_err(|_| {
            format!(
                "permission mode {mode:?} is not one of default, acceptEdits, plan, bypassPermissions"
            )
        })?;
        if parsed == tools::PermissionMode::BypassPermissions && !self.allow_bypass {
            return Err(
                "bypassPermissions needs --allow-dangerously-skip-permissions (or --dangerously-skip-permissions) at start".into(),
            );
        }
        shared.gate.set_mode(parsed);
        Ok(json!({}))
    }

    /// Answers what may be answered at any time; `None` when the answer comes later
    /// (`stop_task` answers once the task has stopped).
    fn shared_request(
        &self,
        shared: &Shared,
        id: &str,
        request: &Value,
    ) -> Option<Result<Value, String>> {
        Some(match subtype(request) {
            "initialize" => Err("the session is already initialized".into()),
            "set_permission_mode" => self.set_mode(shared, request),
            "set_max_thinking_tokens" => {
                let on = request
                    .get("max_thinking_tokens")
                    .and_then(Value::as_u64)
                    .is_some_and(|tokens| tokens > 0);
                shared
                    .thinking
                    .store(on, std::sync::atomic::Ordering::Relaxed);
                Ok(json!({}))
            }
            "stop_task" => {
                let task_id = request
                    .get("task_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let Some(task) = shared.tasks.get(task_id) else {
                    return Some(Err(format!("no background task {task_id:?}")));
                };
                let (channel, id) = (Arc::clone(self.host.channel()), id.to_owned());
                tokio::spawn(async move {
                    task.stop().await;
                    channel.respond(&id, Ok(json!({})));
                });
                return None;
            }
            other => Err(format!("unsupported control request subtype: {other}")),
        })
    }
}

/// The session's parts a request may change while a turn runs.
struct Shared {
    gate: Arc<tools::PermissionGate>,
    thinking: Arc<std::sync::atomic::AtomicBool>,
    resolve: crate::ModelResolver,
    tasks: tools::background::BackgroundTasks,
}

impl Shared {
    fn of(session: &Session) -> Self {
        Self {
            gate: session.permission_gate(),
            thinking: session.thinking_switch(),
            resolve: session.model_resolver(),
            tasks: session.background().clone(),
        }
    }
}

/// A request's `subtype` ([`super::channel::read_input`] passes on only requests with one).
fn subtype(request: &Value) -> &str {
    request
        .get("subtype")
        .and_then(Value::as_str)
        .unwrap_or_default()
}
