//! The Claude Agent SDK's control protocol: a program drives a session over stdin and
//! stdout in stream-json lines (`--input-format stream-json --output-format stream-json`),
//! as the TypeScript (`@anthropic-ai/claude-agent-sdk`) and Python (`claude-agent-sdk`)
//! SDKs drive Claude Code.
//!
//! Besides user messages (`{"type": "user", ...}`) the program sends `control_request`s
//! (`{"type": "control_request", "request_id", "request": {"subtype", ...}}`) and answers
//! ours with `control_response`s (`{"type": "control_response", "response": {"subtype":
//! "success" | "error", "request_id", "response" | "error"}}`); the shapes are those of
//! `sdk.d.ts` (`SDKControlRequest`, `SDKControlResponse`).
//!
//! What the program may ask ([`drive`]): `initialize` (first: hook callbacks, in-process
//! MCP servers, system prompt, JSON schema, subagents; [`Initialize`]), `interrupt`,
//! `set_permission_mode`, `set_model`, `set_max_thinking_tokens`, `mcp_status`,
//! `end_session`; anything else gets an error response naming the subtype. What we ask it
//! ([`Host`]): `can_use_tool` (with `--permission-prompt-tool stdio`), `hook_callback`,
//! `mcp_message`.
//!
//! The order of a run ([`Connection`] does it in three calls): [`read_input`] sorts stdin's
//! lines; [`opening`] waits for the `initialize` (or the first message, from a program that
//! sends none); the session opens with the [`Host`] in its [`crate::Options`];
//! [`answer_initialize`] replies; [`drive`] runs the turns until stdin ends.

mod channel;
mod drive;
mod flags;
mod host;

pub use channel::{Answer, Channel, ControlError, Incoming, Writer, read_input, user_message};
pub use drive::{Arming, Ended, Front, drive};
pub use flags::{take_accepted_flags, thinking_flag};
pub use host::{Host, Initialize};

/// A program driving a session over the control protocol, from its first line to the end
/// of its input: [`Connection::open`] before the session, [`Connection::host`] into its
/// options, [`Connection::drive`] once it is open.
#[derive(Debug)]
pub struct Connection {
    host: Host,
    incoming: mpsc::UnboundedReceiver<Incoming>,
    queued: Vec<Incoming>,
    init_id: Option<String>,
}

impl Connection {
    /// Reads the program's lines from `input`, writing ours with `write` (one whole line a
    /// call), and waits for its `initialize` ([`opening`]). `asks`: it answers permission
    /// questions (`--permission-prompt-tool stdio`); `bypass`: it may switch to
    /// bypassPermissions ([`Host::with_bypass`]).
    pub async fn open<R>(
        input: R,
        write: impl Fn(&Value) + Send + Sync + 'static,
        asks: bool,
        bypass: bool,
    ) -> Self
    where
        R: tokio::io::AsyncBufRead + Unpin + Send + 'static,
    {
        let channel = Channel::new(write);
        let mut incoming = read_input(input, std::sync::Arc::clone(&channel));
        let opening = opening(&mut incoming, &channel).await;
        Self {
            host: Host::new(channel, opening.init, asks).with_bypass(bypass),
            incoming,
            queued: opening.queued,
            init_id: opening.init_id,
        }
    }

    /// The program, for [`crate::Options::host`].
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// What the program asked for that is not acted on: `flags` (the command line's, from
    /// [`take_accepted_flags`]) and the `initialize` fields (`initialize.NAME`), for the
    /// `init` message.
    pub fn unsupported(&self, flags: &[String]) -> Vec<String> {
        let fields = self.host.init().unsupported.iter();
        flags
            .iter()
            .cloned()
            .chain(fields.map(|field| format!("initialize.{field}")))
            .collect()
    }

    /// Answers the `initialize` with what the opened `session` offers
    /// ([`answer_initialize`]), then drives it until the program's input ends ([`drive`]).
    ///
    /// # Errors
    ///
    /// As [`drive`].
    pub async fn drive(
        self,
        session: &mut crate::Session,
        front: &mut dyn Front,
        arming: &dyn Arming,
    ) -> anyhow::Result<Ended> {
        drive(
            session,
            &self.host,
            self.incoming,
            self.queued,
            front,
            arming,
        )
        .await
    }

    /// Answers the program's `initialize` (when it sent one) with what `session` offers.
    pub fn answer_initialize(&mut self, session: &crate::Session) {
        if let Some(id) = self.init_id.take() {
            answer_initialize(session, self.host.channel(), &id);
        }
    }
}

use serde_json::{Value, json};
use tokio::sync::mpsc;

/// `options` as the session opens with them: with what the `initialize` of a program
/// driving it asked for ([`Host`]), or as they are.
pub(crate) fn hosted(options: &crate::Options) -> std::borrow::Cow<'_, crate::Options> {
    match &options.host {
        Some(host) => std::borrow::Cow::Owned(host.apply(options)),
        None => std::borrow::Cow::Borrowed(options),
    }
}

/// What came before the session could open.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Opening {
    /// What the `initialize` asked for (nothing, without one).
    pub init: Initialize,
    /// The `initialize` request's id, answered once the session is open
    /// ([`answer_initialize`]).
    pub init_id: Option<String>,
    /// What came before or with it, for [`drive`] to handle first.
    pub queued: Vec<Incoming>,
}

/// Waits for the program's `initialize` request, or for its first user message (a program
/// that sends no `initialize`), or for its input to end. Other requests and bad lines that
/// come first are kept, in order, for [`drive`]. An `initialize` that cannot be read is
/// answered with an error naming the field, and the wait goes on.
pub async fn opening(
    incoming: &mut mpsc::UnboundedReceiver<Incoming>,
    channel: &Channel,
) -> Opening {
    let mut opening = Opening::default();
    while let Some(next) = incoming.recv().await {
        match next {
            Incoming::Request { id, request } if request["subtype"] == "initialize" => {
                match Initialize::read(&request) {
                    Ok(init) => {
                        opening.init = init;
                        opening.init_id = Some(id);
                        break;
                    }
                    Err(problem) => channel.respond(&id, Err(format!("initialize: {problem}"))),
                }
            }
            user @ Incoming::User(_) => {
                opening.queued.push(user);
                break;
            }
            other => opening.queued.push(other),
        }
    }
    opening
}

/// The models a program may switch to (`SDKControlInitializeResponse.models`): the
/// session's, then Claude Code's aliases as this session resolves them (an OpenAI-compatible
/// provider's session offers its own model alone).
fn models(session: &crate::Session) -> Vec<Value> {
    models_of(session)
        .into_iter()
        .map(|(value, description)| {
            if value == session.model() {
                json!({"value": value, "displayName": value, "description": description})
            } else {
                json!({"value": value, "resolvedModel": description, "displayName": value, "description": description})
            }
        })
        .collect()
}

/// The models a session may switch to, each with a description: the session's own
/// ("the session's model"), then each of Claude Code's aliases (`opus`, `sonnet`,
/// `haiku`) that resolves to another model (described by the model it resolves to).
pub(crate) fn models_of(session: &crate::Session) -> Vec<(String, String)> {
    let resolve = session.model_resolver();
    let mut models = vec![(session.model().to_owned(), "the session's model".to_owned())];
    for alias in ["opus", "sonnet", "haiku"] {
        if let Ok(id) = resolve(alias)
            && id != alias
            && id != session.model()
        {
            models.push((alias.to_owned(), id));
        }
    }
    models
}

/// Answers the `initialize` request `id` with what `session` offers
/// (`SDKControlInitializeResponse`): its commands (custom commands and skills, each with
/// its description and argument hint), its subagents, the output style, its model, and the
/// account's key source.
pub fn answer_initialize(session: &crate::Session, channel: &Channel, id: &str) {
    let mut commands: Vec<Value> = session
        .commands()
        .iter()
        .map(|command| {
            json!({
                "name": command.name,
                "description": command.description,
                "argumentHint": command.argument_hint.clone().unwrap_or_default(),
            })
        })
        .collect();
    commands.extend(session.skills().iter().map(
        |skill| json!({"name": skill.name, "description": skill.description, "argumentHint": ""}),
    ));
    let agents: Vec<Value> = session
        .agents()
        .iter()
        .map(|agent| {
            let mut info = json!({"name": agent.name, "description": agent.description});
            if let Some(model) = &agent.model {
                info["model"] = json!(model);
            }
            info
        })
        .collect();
    channel.respond(
        id,
        Ok(json!({
            "commands": commands,
            "agents": agents,
            "output_style": "default",
            "available_output_styles": ["default"],
            "models": models(session),
            "account": {"apiKeySource": session.api_key_source()},
        })),
    );
}
