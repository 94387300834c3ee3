//! The program on the other end of the control channel (the Agent SDK), as the session
//! sees it: what its `initialize` asked for, the questions it answers in the user's place
//! (`can_use_tool`), its hook callbacks (`hook_callback`) and its in-process MCP servers
//! (`mcp_message`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use super::channel::{Channel, ControlError};
use crate::hooks::{CallbackFuture, HookCallbacks, HookEnv};
use crate::settings::{HookCommand, HookMatcher};

/// What the program's `initialize` request asked for (`SDKControlInitializeRequest` of the
/// Agent SDK's `sdk.d.ts`); fields the session cannot honour are listed in
/// [`Initialize::unsupported`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Initialize {
    /// Hook callbacks by event name, as settings' hooks (each of kind `callback`).
    pub hooks: BTreeMap<String, Vec<HookMatcher>>,
    /// The in-process MCP servers' names (`sdkMcpServers`).
    pub sdk_mcp_servers: Vec<String>,
    /// `systemPrompt` (its parts joined by blank lines): replaces the built-in one.
    pub system_prompt: Option<String>,
    /// `appendSystemPrompt`.
    pub append_system_prompt: Option<String>,
    /// `jsonSchema`: the final answer's schema, as `--json-schema` gives it.
    pub json_schema: Option<Value>,
    /// `agents`: subagents by name.
    pub agents: Vec<loop_core::subagent::AgentDefinition>,
    /// The fields given that this session does not act on, by name.
    pub unsupported: Vec<String>,
}

impl Initialize {
    /// Reads an `initialize` request.
    ///
    /// # Errors
    ///
    /// A field of the wrong shape, named (`hooks.PreToolUse[0].hookCallbackIds`).
    pub fn read(request: &Value) -> Result<Self, String> {
        let mut init = Self::default();
        let Some(fields) = request.as_object() else {
            return Err("the request is not an object".into());
        };
        for (key, value) in fields {
            if value.is_null() {
                continue;
            }
            match key.as_str() {
                "subtype" => {}
                "hooks" => init.hooks = hooks(value)?,
                "sdkMcpServers" => init.sdk_mcp_servers = strings(value, key)?,
                "systemPrompt" => {
                    init.system_prompt = Some(match value {
                        Value::String(text) => text.clone(),
                        _ => strings(value, key)?.join("\n\n"),
                    });
                }
                "appendSystemPrompt" => {
                    init.append_system_prompt = Some(
                        value
                            .as_str()
                            .ok_or("appendSystemPrompt must be a string")?
                            .to_owned(),
                    );
                }
                "jsonSchema" => init.json_schema = Some(value.clone()),
                "agents" => init.agents = agents(value)?,
                // Said to be about what Claude Code shows or its own features; nothing to do.
                "promptSuggestions" | "agentProgressSummaries" | "title" => {}
                _ => init.unsupported.push(key.clone()),
            }
        }
        Ok(init)
    }
}

/// `hooks`: `{EVENT: [{"matcher"?, "hookCallbackIds": [ID], "timeout"?}]}`.
fn hooks(value: &Value) -> Result<BTreeMap<String, Vec<HookMatcher>>, String> {
    let Some(events) = value.as_object() else {
        return Err("hooks must be an object of events".into());
    };
    let mut hooks = BTreeMap::new();
    for (event, matchers) in events {
        let Some(matchers) = matchers.as_array() else {
            return Err(format!("hooks.{event} must be a list of matchers"));
        };
        let mut read = Vec::new();
        for (index, matcher) in matchers.iter().enumerate() {
            let at = format!("hooks.{event}[{index}]");
            let ids = strings(
                &matcher["hookCallbackIds"],
                &format!("{at}.hookCallbackIds"),
            )?;
            let timeout = matcher.get("timeout").filter(|timeout| !timeout.is_null());
            let commands = ids
                .into_iter()
                .map(|id| {
                    let mut hook: HookCommand =
                        serde_json::from_value(json!({"type": "callback", "timeout": timeout}))
                            .map_err(|error| format!("{at}.timeout: {error}"))?;
                    hook.callback = Some(id);
                    Ok(hook)
                })
                .collect::<Result<Vec<_>, String>>()?;
            read.push(HookMatcher {
                matcher: matcher
                    .get("matcher")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                hooks: commands,
            });
        }
        hooks.insert(event.clone(), read);
    }
    Ok(hooks)
}

/// `agents`: `{NAME: {"description", "prompt", "tools"?, "model"?}}` (`AgentDefinition`).
fn agents(value: &Value) -> Result<Vec<loop_core::subagent::AgentDefinition>, String> {
    let Some(agents) = value.as_object() else {
        return Err("agents must be an object of agents by name".into());
    };
    agents
        .iter()
        .map(|(name, agent)| {
            let text = |key: &str| {
                agent
                    .get(key)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("agents.{name}.{key} must be a string"))
            };
            Ok(loop_core::subagent::AgentDefinition {
                name: name.clone(),
                description: text("description")?,
                system_prompt: text("prompt")?,
                tools: match agent.get("tools") {
                    None | Some(Value::Null) => None,
                    Some(tools) => Some(strings(tools, &format!("agents.{name}.tools"))?),
                },
                model: agent
                    .get("model")
                    .and_then(Value::as_str)
                    .filter(|model| *model != "inherit")
                    .map(str::to_owned),
                max_turns: None,
                source: loop_core::subagent::AgentSource::User,
            })
        })
        .collect()
}

/// A list of strings at `at`.
fn strings(value: &Value, at: &str) -> Result<Vec<String>, String> {
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .ok_or_else(|| format!("{at} must be a list of strings"))
}

/// The program driving the session over the control channel, as [`crate::Options::host`]
/// gives it to the session. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Host {
    channel: Arc<Channel>,
    init: Arc<Initialize>,
    asks: bool,
    allow_bypass: bool,
    prompter: Arc<HostPrompter>,
}

impl Host {
    /// The program on `channel`, which asked for `init`; `asks`: it answers permission
    /// questions (`--permission-prompt-tool stdio`), else they are refused as in any
    /// headless run.
    pub fn new(channel: Arc<Channel>, init: Initialize, asks: bool) -> Self {
        Self {
            prompter: Arc::new(HostPrompter {
                channel: Arc::clone(&channel),
                env: OnceLock::new(),
            }),
            channel,
            init: Arc::new(init),
            asks,
            allow_bypass: false,
        }
    }

    /// Lets the program switch to bypassPermissions (`--allow-dangerously-skip-permissions`
    /// or a start in that mode); without it `set_permission_mode` refuses that mode.
    pub fn with_bypass(mut self, allowed: bool) -> Self {
        self.allow_bypass = allowed;
        self
    }

    /// Whether the program may switch to bypassPermissions.
    pub fn allow_bypass(&self) -> bool {
        self.allow_bypass
    }

    /// Adds its hook callbacks to `hooks` (the settings' hooks by event).
    pub(crate) fn add_hooks(&self, hooks: &mut BTreeMap<String, Vec<HookMatcher>>) {
        for (event, matchers) in &self.init.hooks {
            hooks
                .entry(event.clone())
                .or_default()
                .extend(matchers.iter().cloned());
        }
    }

    /// Adds its subagents to `agents`, in place of any of the same name.
    pub(crate) fn add_agents(&self, agents: &mut Vec<loop_core::subagent::AgentDefinition>) {
        agents.retain(|agent| !self.init.agents.iter().any(|own| own.name == agent.name));
        agents.extend(self.init.agents.iter().cloned());
    }

    /// `options` with what the `initialize` asked for: its system prompt, appended prompt
    /// and JSON schema in place of the flags'.
    pub(crate) fn apply(&self, options: &crate::Options) -> crate::Options {
        let mut options = options.clone();
        if let Some(prompt) = &self.init.system_prompt {
            options.system_prompt = Some(prompt.clone());
        }
        if let Some(append) = &self.init.append_system_prompt {
            options.append_system_prompt = Some(append.clone());
        }
        if let Some(schema) = &self.init.json_schema {
            options.json_schema = Some(schema.to_string());
        }
        options
    }

    /// What its `initialize` asked for.
    pub fn init(&self) -> &Initialize {
        &self.init
    }

    /// The channel to it.
    pub fn channel(&self) -> &Arc<Channel> {
        &self.channel
    }

    /// Who answers the session's permission questions: the program, when it said it would.
    pub(crate) fn prompter(&self) -> Option<Arc<dyn tools::Prompter>> {
        self.asks
            .then(|| Arc::clone(&self.prompter) as Arc<dyn tools::Prompter>)
    }

    /// Connects the session's hooks to the program: its callbacks run as hooks, and its
    /// answers to questions act through the session (its gate, its running turn).
    pub(crate) fn attach(&self, env: &HookEnv) {
        let _ = env.host.set(Arc::new(self.clone()));
        let _ = self.prompter.env.set(env.clone());
    }
}

impl HookCallbacks for Host {
    fn call<'a>(
        &'a self,
        callback_id: &'a str,
        input: &'a Value,
        tool_use_id: Option<&'a str>,
    ) -> CallbackFuture<'a> {
        Box::pin(async move {
            let mut request = json!({
                "subtype": "hook_callback",
                "callback_id": callback_id,
                "input": input,
            });
            if let Some(id) = tool_use_id {
                request["tool_use_id"] = json!(id);
            }
            self.channel
                .request(request)
                .await
                .map_err(|error| error.to_string())
        })
    }
}

impl mcp::HostServers for Host {
    fn open(&self, name: &str) -> Result<tokio::io::DuplexStream, String> {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        tokio::spawn(bridge(Arc::clone(&self.channel), name.to_owned(), theirs));
        Ok(ours)
    }
}

/// Carries the MCP client's JSON-RPC lines on `stream` to the program's server `name` as
/// `mcp_message` requests, and the answers to its requests back (an error answer for one
/// the program could not deliver). Each request is sent in order and answered when the
/// program answers, so a slow tool call holds up no other.
async fn bridge(channel: Arc<Channel>, name: String, stream: tokio::io::DuplexStream) {
    let (read, write) = tokio::io::split(stream);
    let write = Arc::new(tokio::sync::Mutex::new(write));
    let mut lines = tokio::io::BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = message.get("id").filter(|id| !id.is_null()).cloned();
        let is_request = id.is_some() && message.get("method").is_some();
        let request = json!({"subtype": "mcp_message", "server_name": name, "message": message});
        let begun = channel.begin(&request);
        if !is_request {
            continue;
        }
        let write = Arc::clone(&write);
        tokio::spawn(async move {
            let answer = match begun {
                Ok((_, answer)) => answer.await.unwrap_or(Err(ControlError::Closed)),
                Err(error) => Err(error),
            };
            let response = match answer {
                Ok(response) => match response.get("mcp_response") {
                    Some(response) => checked(response.clone(), id),
                    None => rpc_error(id, "the program's answer has no mcp_response"),
                },
                Err(error) => rpc_error(id, &error.to_string()),
            };
            let mut line = response.to_string();
            line.push('\n');
            let _ = write.lock().await.write_all(line.as_bytes()).await;
        });
    }
}

/// The most of one answer the MCP client takes (its line limit): 16 MiB.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// `response` when it answers request `id` (an object with that `id` and a `result` or an
/// `error`, at most [`MAX_RESPONSE_BYTES`]); otherwise an error answer saying why, so the
/// call ends now instead of waiting for an answer the client would drop.
fn checked(mut response: Value, id: Option<Value>) -> Value {
    let answers = response.get("id") == id.as_ref()
        && (response.get("result").is_some() || response.get("error").is_some());
    if !answers {
        return rpc_error(
            id,
            "the program's mcp_response is not a JSON-RPC response to this request",
        );
    }
    if response.to_string().len() > MAX_RESPONSE_BYTES {
        return rpc_error(id, "the program's mcp_response is larger than 16 MiB");
    }
    response["jsonrpc"] = json!("2.0");
    response
}

/// A JSON-RPC error answer to request `id`.
fn rpc_error(id: Option<Value>, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})
}

/// Asks the program in the user's place (`can_use_tool`), and acts on its answer as on a
/// PermissionRequest hook's decision.
struct HostPrompter {
    channel: Arc<Channel>,
    env: OnceLock<HookEnv>,
}

impl std::fmt::Debug for HostPrompter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostPrompter").finish_non_exhaustive()
    }
}

/// Who answers, in what the model and the user are told.
const WHO: &str = "the SDK host";

impl tools::Prompter for HostPrompter {
    fn ask<'a>(&'a self, request: tools::PermissionRequest<'a>) -> executor::PermissionFuture<'a> {
        Box::pin(async move {
            let mut question = json!({
                "subtype": "can_use_tool",
                "tool_name": request.tool,
                "input": request.input,
                "tool_use_id": request.tool_use_id,
                "decision_reason": request.reason,
            });
            if let Some(always) = &request.always {
                question["permission_suggestions"] = json!([suggestion(always)]);
            }
            let answer = match self.channel.request(question).await {
                Ok(answer) => answer,
                Err(error) => {
                    return executor::PermissionDecision::deny(format!(
                        "{WHO} was not asked: {error}"
                    ));
                }
            };
            let Some(decision) = crate::hooks::reply::request_decision(&answer) else {
                return executor::PermissionDecision::deny(format!(
                    "{WHO} answered without a behavior of allow or deny: {answer}"
                ));
            };
            match self.env.get() {
                Some(env) => crate::hooks::settle(env, WHO, decision),
                // Not attached (no session yet): the decision alone, nothing to update.
                None => match decision {
                    crate::hooks::RequestDecision::Allow { updated_input, .. } => {
                        executor::PermissionDecision::Allow { updated_input }
                    }
                    crate::hooks::RequestDecision::Deny { message, .. } => {
                        executor::PermissionDecision::deny(
                            message.unwrap_or_else(|| "denied".into()),
                        )
                    }
                },
            }
        })
    }
}

/// What an "always" answer would grant, as the Agent SDK's `PermissionUpdate` for the
/// session: `setMode` acceptEdits, or `addRules` of the allow rule (`Bash(npm test:*)` as
/// `{"toolName": "Bash", "ruleContent": "npm test:*"}`).
fn suggestion(always: &tools::Always) -> Value {
    if always.mode().is_some() {
        return json!({"type": "setMode", "mode": "acceptEdits", "destination": "session"});
    }
    let rule = always.rule();
    let value = match rule.split_once('(') {
        Some((tool, content)) if content.ends_with(')') => {
            json!({"toolName": tool, "ruleContent": &content[..content.len() - 1]})
        }
        _ => json!({"toolName": rule}),
    };
    json!({"type": "addRules", "rules": [value], "behavior": "allow", "destination": "session"})
}
