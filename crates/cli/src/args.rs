//! Command-line arguments, in Claude Code's vocabulary.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use session::options::split_rules;

/// A coding agent for the terminal: give it a task, it reads, searches, edits and runs
/// commands in your repository until the task is done.
#[derive(Debug, Parser)]
#[command(
    name = "agent",
    version,
    disable_version_flag = true,
    about = "A coding agent for the terminal: give it a task, it reads, searches, edits and runs commands in your repository until the task is done.",
    long_about = None,
    after_help = "Run `agent` in a terminal for an interactive session (Ctrl-C aborts a turn, Ctrl-D exits, /help for more), or `agent -p \"task\"` (or a prompt on stdin) for a headless run.\nSettings, later files winning: ~/.claude/settings.json, ~/.config/agent/settings.json, .claude/settings.json, .agent/settings.json, .claude/settings.local.json, .agent/settings.local.json (Claude Code's schema; a project's hooks, env, allow rules, modes, providers, model prices and a model of another provider only in a trusted folder, see --trust). Sessions: ~/.local/share/agent/projects/."
)]
pub struct Args {
    /// Run headless: answer PROMPT (or stdin when no prompt is given), print the result and
    /// exit, as Claude Code's `-p` (`agent -p "task"`, `agent -p --output-format json "task"`,
    /// `cat f | agent -p "explain"`: piped input and a prompt together send both, the input
    /// first in a fenced block).
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// Print the version (`-v`, as Claude Code's, which the Agent SDKs ask for; `-V` too).
    #[arg(short = 'v', short_alias = 'V', long = "version", action = clap::ArgAction::Version)]
    pub version: (),

    /// The prompt. Without `-p`: the first prompt of an interactive session (`agent "fix the
    /// bug"`), headless when stdin is not a terminal or the output format is not text. A
    /// first word naming a subcommand (`demo`, `mcp`) is the subcommand: `agent -- demo`
    /// sends the word "demo".
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// Output format (also `agent batch`'s: stream-json there tags each line with its task).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text, global = true)]
    pub output_format: OutputFormat,

    /// Input format: `text` (the prompt), or `stream-json`: user messages as JSON lines on
    /// stdin (Claude Code's `{"type":"user","message":{"role":"user","content":...}}`), each
    /// answered in turn in one session (needs `--output-format stream-json`).
    #[arg(long, value_enum, default_value_t = InputFormat::Text)]
    pub input_format: InputFormat,

    /// With `--output-format stream-json`: also a `stream_event` line for every event of the
    /// model's stream (Claude Code's partial messages).
    #[arg(long)]
    pub include_partial_messages: bool,

    /// Name each model request and each turn of the loop on stderr, and log there
    /// (`AGENT_LOG` sets the log filter, default `info` with this flag).
    #[arg(long)]
    pub verbose: bool,

    /// Working directory (default: the current one).
    #[arg(short = 'C', long = "cwd", value_name = "DIR", global = true)]
    pub cwd: Option<PathBuf>,

    /// Trust this folder for this run: its project settings' hooks, env, allow rules,
    /// defaultMode and additionalDirectories apply (`AGENT_TRUST=1` too; the user setting
    /// `trustedFolders` lists folders trusted for good). Untrusted, they are skipped with a
    /// warning (headless) or asked about once (interactive). `agent mcp list --trust` starts
    /// the project's `.mcp.json` servers to report them.
    #[arg(long, global = true)]
    pub trust: bool,

    /// The model and its server.
    #[command(flatten)]
    pub model: ModelFlags,

    /// Permissions, folders, sandbox and settings.
    #[command(flatten)]
    pub permissions: PermissionFlags,

    /// The session: its history, prompt, limits and MCP servers.
    #[command(flatten)]
    pub session: SessionFlags,

    /// What the Agent SDK passes when it drives the agent.
    #[command(flatten)]
    pub sdk: SdkFlags,

    /// Subcommand.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The model and its server.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Model")]
pub struct ModelFlags {
    /// Model to use: an id, or one of Claude Code's aliases `opus`, `sonnet`, `haiku`, `opusplan`
    /// [default: settings' `model`, else claude-opus-4-8].
    #[arg(long, env = "ANTHROPIC_MODEL")]
    pub model: Option<String>,

    /// Model to switch to when the first one stays overloaded.
    #[arg(long, value_name = "MODEL")]
    pub fallback_model: Option<String>,

    /// How much effort the model puts in: low, medium, high, xhigh or max [default: the
    /// settings' `effortLevel`, else the model's own]. Claude models that think adaptively
    /// get it as the effort level (lowered to the nearest one a model takes), earlier ones
    /// as a thinking budget, OpenAI-style models as `reasoning_effort`.
    #[arg(long, value_name = "LEVEL", value_parser = parse_effort)]
    pub effort: Option<protocol::Effort>,

    /// The model server: `anthropic` (the Messages API, the default), `openai` (an
    /// OpenAI-compatible Chat Completions API: OpenAI, vLLM, Ollama, llama.cpp, LM Studio,
    /// OpenRouter, Groq, DeepSeek; key from `OPENAI_API_KEY`), `openai-responses` (OpenAI's
    /// Responses API, same key and base URL), or a name from settings' `providers`. A model
    /// written `NAME/model` chooses the provider NAME too.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,

    /// API base URL (default `ANTHROPIC_BASE_URL`, else `https://api.anthropic.com`; with
    /// `--provider openai`, `OPENAI_BASE_URL`, else `https://api.openai.com/v1`).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Extra trusted root certificates, PEM (`SSL_CERT_FILE` too).
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,

    /// Record every model exchange to this cassette (JSONL).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,

    /// Answer model requests from this cassette instead of the network.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// With --replay: match recorded requests by position only.
    #[arg(long, requires = "replay")]
    pub replay_lenient: bool,
}

/// Permissions, folders, sandbox and settings.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Permissions")]
pub struct PermissionFlags {
    /// Tools or rules to allow without asking, comma- or space-separated (`Read,Bash(git
    /// diff:*)`).
    #[arg(long = "allowedTools", alias = "allowed-tools", value_name = "RULES", num_args = 1..)]
    pub allowed_tools: Vec<String>,

    /// Tools or rules to refuse, comma- or space-separated.
    #[arg(long = "disallowedTools", alias = "disallowed-tools", value_name = "RULES", num_args = 1..)]
    pub disallowed_tools: Vec<String>,

    /// Permission mode [default: settings' `permissions.defaultMode`, else default].
    #[arg(long, value_enum)]
    pub permission_mode: Option<PermissionModeArg>,

    /// The same as `--permission-mode bypassPermissions`, as Claude Code spells it: no
    /// questions; the workspace confinement, protected folders and the sandbox still apply.
    #[arg(long, conflicts_with = "permission_mode")]
    pub dangerously_skip_permissions: bool,

    /// Work in a git worktree of this repository: `.claude/worktrees/NAME` on a new branch
    /// `worktree-NAME` from HEAD (a random name when NAME is left out); the main checkout's
    /// uncommitted changes are not in it. At the end it is kept if it has changes, else
    /// removed. In a trusted folder only (git runs outside the sandbox).
    #[arg(short = 'w', long, value_name = "NAME", num_args = 0..=1, default_missing_value = "")]
    pub worktree: Option<String>,

    /// Another directory tools may read and write (repeatable).
    #[arg(long = "add-dir", value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,

    /// The OS sandbox for Bash commands: `auto` uses bubblewrap, else Landlock and seccomp;
    /// `off` runs commands allowed by a rule (or bypassPermissions) unsandboxed and asks for
    /// every other one [default: the user settings' `sandbox.mode`, else auto]. In the
    /// sandbox, commands no rule allows run read-only; allowed ones, and every command in
    /// acceptEdits or bypassPermissions, may write the workspace (not .git, .agent, .claude,
    /// .mcp.json) and reach the network only when the user
    /// setting `sandbox.network` is true. `AGENT_SANDBOX_BACKEND=bwrap|landlock|none` forces
    /// a back end.
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<SandboxArg>,

    /// More settings, as a file or a JSON text (`--settings '{"model": "sonnet"}'`), above
    /// every settings file (they are yours: they apply in full, as your own file does).
    #[arg(long, value_name = "FILE|JSON")]
    pub settings: Option<String>,
}

/// The session: its history, prompt, limits and MCP servers.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Session")]
pub struct SessionFlags {
    /// Resume a session by id, or load a transcript file (ours or Claude Code's). Without
    /// a value: pick one of this folder's sessions (on a terminal), or list them.
    #[arg(long, value_name = "ID|FILE", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,

    /// Resume the most recent session of this directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_session: bool,

    /// With `--resume` or `--continue`: start a new session from the old one's history (the
    /// old session file is left as it was).
    #[arg(long)]
    pub fork_session: bool,

    /// The id (a UUID) of the new session (with `--resume`/`--continue`, only together with
    /// `--fork-session`).
    #[arg(long, value_name = "UUID")]
    pub session_id: Option<String>,

    /// Replace the system prompt.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,

    /// Append to the system prompt.
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,

    /// Stop after this many model turns (exit code 3, `error_max_turns`); at least 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// Stop before a request once the run's cost reaches this many US dollars (subagents
    /// included; result subtype `error_max_budget_usd`, exit code 3).
    #[arg(long, value_name = "USD")]
    pub max_budget_usd: Option<f64>,

    /// An output-token budget: while it is not used up, a model that stops is sent on with a
    /// nudge; the run ends when it is used up or when three nudges in a row each bring fewer
    /// than 500 output tokens (terminal reasons `token_budget_reached`, `diminishing_returns`).
    #[arg(long, value_name = "TOKENS")]
    pub max_tokens_budget: Option<u64>,

    /// A JSON Schema (a JSON text or a file) for the final answer: the model gives it through
    /// a `StructuredOutput` tool checked against the schema, with up to 3 tries; the result
    /// then carries `structured_output` (else subtype `error_max_structured_output_retries`).
    #[arg(long, value_name = "SCHEMA")]
    pub json_schema: Option<String>,

    /// MCP servers from these files (`{"mcpServers": {...}}`, Claude Code's format), on top
    /// of the user settings' `mcpServers` and a trusted folder's `.mcp.json`.
    #[arg(long = "mcp-config", value_name = "FILE", num_args = 1..)]
    pub mcp_config: Vec<PathBuf>,

    /// Use only the servers of --mcp-config.
    #[arg(long = "strict-mcp-config")]
    pub strict_mcp_config: bool,
}

/// `--sandbox`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    /// The best back end here (bubblewrap, else Landlock); none available: allowed commands
    /// run unsandboxed with a warning, others are asked.
    Auto,
    /// No sandbox: commands allowed by a rule (or bypassPermissions) run as they are, every
    /// other one is asked.
    Off,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the offline demo: copy the bundled example project to a temporary directory, let
    /// the agent fix its failing test from the recorded session, show the diff and the tests.
    Demo {
        /// Talk to the real API instead of replaying the recording (needs ANTHROPIC_API_KEY).
        #[arg(long)]
        live: bool,
        /// Keep the temporary directory.
        #[arg(long)]
        keep: bool,
    },
    /// List this folder's sessions, newest first: id, start, turns, cost, interactive or
    /// headless, first prompt (`--resume ID` reopens one).
    Sessions {
        /// One JSON list instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List a session's turns, or go back to the end of one: its files (what any tool
    /// changed: Write and Edit, commands, MCP servers; not what .gitignore ignores), its
    /// conversation, or both (the default). A rewind can be undone with `--undo`.
    #[command(group(clap::ArgGroup::new("target").args(["turn", "undo"])))]
    Rewind {
        /// The session's id (`agent sessions` lists them).
        #[arg(long, value_name = "ID")]
        session: String,
        /// The turn whose end to go back to (0: before the first); without it (and without
        /// `--undo`), the turns are listed.
        #[arg(long, value_name = "N", conflicts_with = "undo")]
        turn: Option<u64>,
        /// Undo the session's last rewind (a second `--undo` redoes it); refused once a turn
        /// began after it.
        #[arg(long)]
        undo: bool,
        /// Restore the files only.
        #[arg(long, conflicts_with_all = ["conversation", "both"], requires = "target")]
        code: bool,
        /// Restore the conversation only.
        #[arg(long, conflicts_with = "both", requires = "target")]
        conversation: bool,
        /// Restore both (the default for `--turn`; `--undo` restores what the undone rewind
        /// restored).
        #[arg(long, requires = "target")]
        both: bool,
        /// Overwrite files changed since the session last changed them (by you, a
        /// formatter or a command); without it such a rewind is refused.
        #[arg(long, requires = "target")]
        force: bool,
    },
    /// Serve an editor over the Agent Client Protocol on stdin and stdout (Zed, JetBrains
    /// IDEs, Neovim and Emacs plugins): each session it opens runs in the folder it names,
    /// with the flags given before `acp` (model, permission mode, settings, sandbox).
    Acp,
    /// Run the tasks of a task file (one JSON object a line: id, repo, ref, prompt, and
    /// model, max_turns, max_budget_usd, allowed_tools, permission_mode), each as a headless
    /// session in its own checkout, several at once; results in OUT/results.jsonl. Running
    /// it again goes on where it stopped. `--max-budget-usd` is the whole batch's.
    Batch {
        /// The task file (with `--report`, a results.jsonl).
        tasks: PathBuf,
        /// Show the results as a table and write report.html beside them; run nothing.
        #[arg(long)]
        report: bool,
        /// Tasks at once [default: 4 per core, at most 32].
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        /// The output folder.
        #[arg(long, value_name = "DIR", default_value = "agent-batch")]
        out: PathBuf,
        /// Only this slice: INDEX/COUNT, INDEX from 1 (`2/3`: tasks 2, 5, 8, ...).
        #[arg(long, value_name = "INDEX/COUNT")]
        shard: Option<String>,
        /// With a Kubernetes Indexed Job: the slice is JOB_COMPLETION_INDEX (from 0) of COUNT.
        #[arg(long, value_name = "COUNT", conflicts_with = "shard")]
        shard_count: Option<usize>,
    },
    /// Configure MCP servers, as `claude mcp` does.
    Mcp {
        /// What to do.
        #[command(subcommand)]
        action: McpAction,
    },
}

/// Where an MCP server's configuration is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum McpScope {
    /// Yours, for this folder only (`~/.config/agent/mcp.json`, keyed by the folder).
    Local,
    /// The project's `.mcp.json`, shared with everyone working in it (runs only where the
    /// folder is trusted).
    Project,
    /// Yours, in every folder (`~/.config/agent/mcp.json`).
    User,
}

impl From<McpScope> for session::mcp_config::Scope {
    fn from(scope: McpScope) -> Self {
        match scope {
            McpScope::Local => Self::Local,
            McpScope::Project => Self::Project,
            McpScope::User => Self::User,
        }
    }
}

/// `agent mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Adds a stdio server (`agent mcp add NAME -- COMMAND ARGS...`) or, with
    /// `--transport http`, a remote one (`agent mcp add --transport http NAME URL`).
    Add {
        /// Where to keep it.
        #[arg(long, short = 's', value_enum, default_value_t = McpScope::Local)]
        scope: McpScope,
        /// `stdio` or `http`.
        #[arg(long, short = 't', default_value = "stdio")]
        transport: String,
        /// An environment variable of the server, `KEY=VALUE` (repeatable).
        #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// A request header of an http server, `Name: value` (repeatable).
        #[arg(long = "header", short = 'H', value_name = "HEADER")]
        headers: Vec<String>,
        /// The server's name (its tools are `mcp__NAME__TOOL`).
        name: String,
        /// The command and its arguments, or the URL.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Adds a server from its JSON (`{"command": ..., "args": [...]}` or `{"type": "http", "url": ...}`).
    AddJson {
        /// Where to keep it.
        #[arg(long, short = 's', value_enum, default_value_t = McpScope::Local)]
        scope: McpScope,
        /// The server's name.
        name: String,
        /// Its configuration.
        json: String,
    },
    /// Lists the servers of this folder with where each is configured and whether it starts.
    List,
    /// Serves the agent's tools (Read, Write, Edit, Glob, Grep, Bash, NotebookEdit) as an MCP
    /// server on stdio, under this folder's permission rules and sandbox; a call that would
    /// be asked is refused with the reason (`agent --allowedTools 'Bash(npm test:*)' mcp
    /// serve` allows more).
    Serve,
    /// Shows one server's configuration.
    Get {
        /// The server's name.
        name: String,
    },
    /// Removes a server.
    Remove {
        /// Where it is kept (by default the first place that has it: local, project, user).
        #[arg(long, short = 's', value_enum)]
        scope: Option<McpScope>,
        /// The server's name.
        name: String,
    },
}

/// `--input-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    /// A prompt (`-p`, a positional prompt, or stdin as text).
    Text,
    /// User messages as JSON lines on stdin.
    StreamJson,
}

/// `--output-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The final answer (live text on a terminal).
    Text,
    /// One JSON result object.
    Json,
    /// One JSON object per line, Claude Code's stream-json shapes.
    StreamJson,
}

/// `--permission-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PermissionModeArg {
    /// Reads run; commands no rule allows run in the read-only sandbox; edits are asked
    /// (headless: refused with a message).
    Default,
    /// Also file edits inside the workspace, and commands may write the workspace (in the
    /// sandbox).
    #[value(name = "acceptEdits")]
    AcceptEdits,
    /// Run everything no deny or ask rule names; file tools stay confined to the workspace,
    /// commands to the workspace-write sandbox.
    #[value(name = "bypassPermissions")]
    BypassPermissions,
    /// Read-only: reads run, commands run in the read-only sandbox, edits are refused.
    Plan,
    /// Claude Code's: what no rule allows is refused, never asked (default mode, asking
    /// no one).
    #[value(name = "dontAsk")]
    DontAsk,
}

/// The flags the Agent SDK passes when it drives the agent (`--input-format stream-json`)
/// that this agent acts on, and the ones taken out of the command line before it is parsed
/// ([`SdkFlags::accepted`]), which the `init` line lists rather than refusing to start.
#[derive(Debug, clap::Args)]
pub struct SdkFlags {
    /// `stdio`: permission questions go to the program driving the agent as `can_use_tool`
    /// control requests.
    #[arg(long, value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,
    /// Lets the driving program switch to bypassPermissions later.
    #[arg(long)]
    pub allow_dangerously_skip_permissions: bool,
    /// `adaptive`, `enabled` or `disabled`: extended thinking on or off.
    #[arg(long, value_name = "MODE")]
    pub thinking: Option<String>,
    /// 0 turns extended thinking off, more turns it on.
    #[arg(long, value_name = "TOKENS")]
    pub max_thinking_tokens: Option<u64>,
    /// The built-in tools offered: names, comma-separated (empty: none; `default`: all).
    #[arg(long, value_name = "TOOLS", num_args = 0..=1, default_missing_value = "")]
    pub tools: Option<String>,
    /// Which settings files apply: `user`, `project`, `local`, comma-separated (empty: none
    /// but `--settings`) [default: all].
    #[arg(long, value_name = "SOURCES")]
    pub setting_sources: Option<String>,
    /// The flags the SDK passed that are accepted without being acted on
    /// ([`session::control::take_accepted_flags`]), for the init line.
    #[arg(skip)]
    pub accepted: Vec<String>,
}

impl PermissionModeArg {
    /// The tools' mode of the same name.
    pub fn mode(self) -> tools::PermissionMode {
        match self {
            Self::Default | Self::DontAsk => tools::PermissionMode::Default,
            Self::AcceptEdits => tools::PermissionMode::AcceptEdits,
            Self::BypassPermissions => tools::PermissionMode::BypassPermissions,
            Self::Plan => tools::PermissionMode::Plan,
        }
    }
}

impl Args {
    /// What the session is opened with: the flags that belong to it, rule lists split as
    /// [`split_rules`] splits them.
    pub fn session_options(&self) -> session::Options {
        let mut options = session::Options::default();
        options.cwd.clone_from(&self.cwd);
        options.settings.clone_from(&self.permissions.settings);
        options.trust = self.trust;
        let model = &mut options.model;
        model.model.clone_from(&self.model.model);
        model.provider.clone_from(&self.model.provider);
        model.fallback_model.clone_from(&self.model.fallback_model);
        model.effort = self.model.effort;
        model.base_url.clone_from(&self.model.base_url);
        model.ca_cert.clone_from(&self.model.ca_cert);
        let list = |list: &str| {
            list.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        options.setting_sources = self.sdk.setting_sources.as_deref().map(list);
        options.tools = (self.sdk.tools.as_deref())
            .filter(|tools| *tools != "default")
            .map(list);
        model.thinking = session::control::thinking_flag(
            self.sdk.thinking.as_deref(),
            self.sdk.max_thinking_tokens,
        );
        let permissions = &mut options.permissions;
        permissions.mode = self
            .permissions
            .dangerously_skip_permissions
            .then_some(tools::PermissionMode::BypassPermissions)
            .or(self
                .permissions
                .permission_mode
                .map(PermissionModeArg::mode));
        permissions.allowed_tools = split_rules(&self.permissions.allowed_tools);
        permissions.disallowed_tools = split_rules(&self.permissions.disallowed_tools);
        permissions.add_dirs.clone_from(&self.permissions.add_dir);
        permissions.sandbox_off = self
            .permissions
            .sandbox
            .map(|choice| choice == SandboxArg::Off);
        permissions.never_ask =
            self.permissions.permission_mode == Some(PermissionModeArg::DontAsk);
        permissions.allow_bypass = self.sdk.allow_dangerously_skip_permissions;
        let resume = &mut options.resume;
        resume.continue_latest = self.session.continue_session;
        resume.resume.clone_from(&self.session.resume);
        resume.session_id.clone_from(&self.session.session_id);
        resume.fork = self.session.fork_session;
        options.limits.max_turns = self.session.max_turns;
        options.limits.max_tokens_budget = self.session.max_tokens_budget;
        options.limits.max_budget_usd = self.session.max_budget_usd;
        options.cassette.record.clone_from(&self.model.record);
        options.cassette.replay.clone_from(&self.model.replay);
        options.cassette.lenient = self.model.replay_lenient;
        options
            .mcp
            .config_files
            .clone_from(&self.session.mcp_config);
        options.mcp.strict = self.session.strict_mcp_config;
        options.json_schema.clone_from(&self.session.json_schema);
        options
            .system_prompt
            .clone_from(&self.session.system_prompt);
        options
            .append_system_prompt
            .clone_from(&self.session.append_system_prompt);
        options
    }
}

/// `--effort`'s value.
fn parse_effort(value: &str) -> Result<protocol::Effort, String> {
    protocol::Effort::from_name(value)
        .ok_or_else(|| format!("{value:?} is not a level: {}", session::effort::LEVELS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory as _;
        Args::command().debug_assert();
    }
}
