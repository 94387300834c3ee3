//! What a session is built from besides the settings files: the caller's choices, in the
//! vocabulary of Claude Code's flags and of the Agent SDK's `Options`.
//!
//! Every field is optional or empty by default, and then the settings (or the built-in
//! default) decide: `Options::default()` opens a session in the current folder with the
//! settings' model and mode, as `agent` with no flags does.

use std::path::PathBuf;

/// The options of [`Session::open`](crate::Session::open).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Options {
    /// The working directory [default: the process's current directory].
    pub cwd: Option<PathBuf>,
    /// More settings above every settings file: a file's path or a JSON text
    /// (`--settings`).
    pub settings: Option<String>,
    /// Trust the folder for this session (`--trust`): its project settings apply in full.
    pub trust: bool,
    /// The model and the server it is asked on.
    pub model: ModelOptions,
    /// The permission mode, rules, extra folders and sandbox.
    pub permissions: PermissionOptions,
    /// Which history the session starts from.
    pub resume: ResumeOptions,
    /// When a run stops early.
    pub limits: Limits,
    /// Where model exchanges are recorded or replayed from.
    pub cassette: Cassette,
    /// MCP servers besides the settings' and the project's.
    pub mcp: McpOptions,
    /// A JSON Schema (a JSON text or a file) the final answer must satisfy, given through
    /// the `StructuredOutput` tool (`--json-schema`).
    pub json_schema: Option<String>,
    /// Replaces the built-in system prompt.
    pub system_prompt: Option<String>,
    /// Appended to the system prompt, after a blank line.
    pub append_system_prompt: Option<String>,
    /// Where the session's warnings and notes go [default: stderr, `agent: TEXT`].
    pub notices: crate::Notices,
    /// The program driving the session over the Agent SDK's control protocol, when one
    /// does ([`crate::control`]): its `initialize` adds hooks, MCP servers, subagents and
    /// prompts, and it answers permission questions when it said it would.
    pub host: Option<crate::control::Host>,
    /// Which settings files apply (`--setting-sources`, as the Agent SDK passes it):
    /// `user`, `project` (the project's shared files) and `local` (its `.local.json`
    /// files); the `--settings` layer always does [default: all].
    pub setting_sources: Option<Vec<String>>,
    /// The session only serves its tools to another program (`agent mcp serve`) and never
    /// asks a model: no API key is needed.
    pub tools_only: bool,
    /// The built-in tools offered, by name (`--tools Read,Grep`, as the Agent SDK passes
    /// its `tools` option; empty: none); MCP tools are not affected [default: all].
    pub tools: Option<Vec<String>>,
    /// An editor's buffers that Read, Write and Edit go through for text files (`agent
    /// acp` with a client that offers its file system: [`crate::acp::ClientFiles`]).
    pub editor_files: Option<std::sync::Arc<dyn tools::EditorFiles>>,
    /// No workspace snapshots ([`crate::snapshots`]): a rewind restores only what Write and
    /// Edit changed. `agent batch` sets it: each task's checkout is its own, its diff the
    /// record, and a snapshot store per checkout would copy the repository per task. A
    /// session opened without a prompter (headless) takes none either unless
    /// [`crate::snapshots::CHECKPOINTING_VARIABLE`] asks ([`crate::snapshots::headless_enabled`]).
    pub no_snapshots: bool,
}

/// The model and its server.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ModelOptions {
    /// A model id or one of Claude Code's aliases (`opus`, `sonnet`, `haiku`, `opusplan`)
    /// [default: the settings' `model`, else [`DEFAULT_MODEL`](crate::DEFAULT_MODEL)].
    pub model: Option<String>,
    /// `anthropic`, `openai`, `openai-responses`, or a name from the settings' `providers`
    /// [default: anthropic, or the provider a `NAME/model` names].
    pub provider: Option<String>,
    /// The model switched to when the first one stays overloaded.
    pub fallback_model: Option<String>,
    /// How much effort the model puts in (`--effort`) [default: the settings'
    /// `effortLevel`, else the model's]: see [`crate::effort`].
    pub effort: Option<protocol::Effort>,
    /// The API's base URL [default: `ANTHROPIC_BASE_URL` or `OPENAI_BASE_URL`, else the
    /// provider's public one].
    pub base_url: Option<String>,
    /// Extra trusted root certificates, PEM.
    pub ca_cert: Option<PathBuf>,
    /// Extended thinking on or off from the start (the Agent SDK's `--thinking` and
    /// `--max-thinking-tokens`: [`crate::control::thinking_flag`]) [default: the model's
    /// and the settings' choice].
    pub thinking: Option<bool>,
    /// Shared with other sessions (a batch's): a rate limit one meets, all wait for
    /// ([`provider::RateGate`]).
    pub rate_gate: Option<provider::RateGate>,
    /// Shared with other sessions (a batch's): one connection pool for the model's server
    /// ([`provider::TransportPool`]) [default: the session's own].
    pub transports: Option<provider::TransportPool>,
}

/// The permission mode, rules, folders and sandbox.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct PermissionOptions {
    /// The mode [default: the settings' `permissions.defaultMode`, else default].
    pub mode: Option<tools::PermissionMode>,
    /// Rules that allow without asking (`Read`, `Bash(git diff:*)`), one rule each.
    pub allowed_tools: Vec<String>,
    /// Rules that refuse, one rule each.
    pub disallowed_tools: Vec<String>,
    /// More folders the tools may read and write.
    pub add_dirs: Vec<PathBuf>,
    /// `Some(true)` turns the OS sandbox off for commands (`--sandbox off`), `Some(false)`
    /// keeps it on [default: the user settings' `sandbox.mode`, else on].
    pub sandbox_off: Option<bool>,
    /// Nobody is asked, even at a terminal or by a driving program: a call that would be
    /// asked is refused (Claude Code's `dontAsk` mode, `--permission-mode dontAsk`).
    pub never_ask: bool,
    /// The mode may be switched to bypassPermissions later (by a program or an editor
    /// driving the session: `--allow-dangerously-skip-permissions`).
    pub allow_bypass: bool,
}

impl PermissionOptions {
    /// Whether the session may be switched to bypassPermissions later (by a program or an
    /// editor driving it): it starts there, or the command line allowed it
    /// ([`PermissionOptions::allow_bypass`]).
    pub fn bypass_allowed(&self) -> bool {
        self.allow_bypass || self.mode == Some(tools::PermissionMode::BypassPermissions)
    }
}

/// Which history a session starts from.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ResumeOptions {
    /// Resume the most recent session of the folder (`--continue`).
    pub continue_latest: bool,
    /// Resume this session id, or load this transcript file (ours or Claude Code's).
    pub resume: Option<String>,
    /// The new session's id (a UUID); with a resumed history only together with `fork`.
    pub session_id: Option<String>,
    /// Start a new session from the resumed history, leaving the old file as it was.
    pub fork: bool,
}

/// When a run stops early.
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct Limits {
    /// Model turns per run (`error_max_turns`).
    pub max_turns: Option<u32>,
    /// An output-token budget: a model that stops early is sent on while it lasts.
    pub max_tokens_budget: Option<u64>,
    /// US dollars per session, subagents included (`error_max_budget_usd`).
    pub max_budget_usd: Option<f64>,
}

/// Model exchanges recorded to, or answered from, a cassette (JSON lines).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Cassette {
    /// Record every exchange to this file.
    pub record: Option<PathBuf>,
    /// Answer model requests from this file instead of the network.
    pub replay: Option<PathBuf>,
    /// With `replay`: match requests by position only.
    pub lenient: bool,
}

/// MCP servers from files (`{"mcpServers": {...}}`, Claude Code's format).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct McpOptions {
    /// Files of servers, on top of the settings' and a trusted project's.
    pub config_files: Vec<PathBuf>,
    /// Use only the servers of `config_files`.
    pub strict: bool,
}

/// Splits rule lists as `--allowedTools` takes them: commas and spaces separate rules,
/// except inside parentheses (`Bash(git diff:*)` stays whole).
pub fn split_rules(values: &[String]) -> Vec<String> {
    let mut rules = Vec::new();
    for value in values {
        let mut depth = 0usize;
        let mut current = String::new();
        for c in value.chars() {
            match c {
                '(' => {
                    depth += 1;
                    current.push(c);
                }
                ')' => {
                    depth = depth.saturating_sub(1);
                    current.push(c);
                }
                ',' | ' ' if depth == 0 => {
                    if !current.trim().is_empty() {
                        rules.push(current.trim().to_owned());
                    }
                    current.clear();
                }
                _ => current.push(c),
            }
        }
        if !current.trim().is_empty() {
            rules.push(current.trim().to_owned());
        }
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_split_outside_parentheses() {
        let values = vec![
            "Read,Bash(git diff:*) Edit".to_owned(),
            "Bash(npm run test:*)".to_owned(),
        ];
        assert_eq!(
            split_rules(&values),
            ["Read", "Bash(git diff:*)", "Edit", "Bash(npm run test:*)"]
        );
    }
}
