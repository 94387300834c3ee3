//! The agent `agent` hooks run ([`hooks::agent::HookAgent`]): a loop of its own on the
//! session's provider, with the read-only tools (Read, Glob, Grep, and Bash in the read-only
//! sandbox, in plan mode), the session's rules and sandbox but no prompter and no hooks (a
//! hook's agent never asks the user and never sets off hooks), the transcript readable, a
//! `StructuredOutput` tool for its `{ok, reason}` answer, at most
//! [`hooks::agent::MAX_TURNS`] responses, and the session's spending limit.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};

use loop_core::{Deps, LoopConfig, NoStopHook};
use protocol::MessageParam;
use provider::AnthropicClient;
use tokio_util::sync::CancellationToken;

use crate::hooks::agent::{HookAgent, HookAgentFuture, MAX_TURNS, schema};
use crate::session::ModelSettings;
use crate::structured::{RequireOutput, Shared, StructuredOutputTool};
use crate::{adapter, hooks, subagents, tooling};

/// The tools an agent hook's agent gets of the session's.
const TOOLS: [&str; 4] = ["Read", "Glob", "Grep", "Bash"];

/// Runs agent hooks' agents for one session.
pub(crate) struct HookAgentRunner {
    pub client: AnthropicClient,
    pub fallback: Option<adapter::Fallback>,
    pub models: ModelSettings,
    /// The small fast model's id (a hook without `model` uses it).
    pub fast_model: String,
    /// The session's recipe, with no prompter and no hooks.
    pub recipe: subagents::Recipe,
    /// The session's loop settings.
    pub config: LoopConfig,
    pub spend: Option<Arc<dyn loop_core::SpendGuard>>,
}

impl HookAgentRunner {
    /// The runner of a session whose tools `recipe` builds and whose loop settings are
    /// `config`.
    pub fn new(
        (client, fallback): (AnthropicClient, Option<adapter::Fallback>),
        (models, fast_model): (ModelSettings, String),
        recipe: &subagents::Recipe,
        config: &LoopConfig,
        spend: Option<Arc<dyn loop_core::SpendGuard>>,
    ) -> Self {
        let hooks = hooks::Hooks::new(recipe.hooks.env().clone(), &BTreeMap::new());
        Self {
            client,
            fallback,
            models,
            fast_model,
            recipe: subagents::Recipe {
                prompter: None,
                hooks,
                journal: None,
                // A hook's check reads the workspace; it does not go to the web.
                web: None,
                ..recipe.clone()
            },
            config: config.clone(),
            spend,
        }
    }

    /// The loop settings of one check: the session's limits on `model`, under `system`, with
    /// no user context, no summaries, no thinking and at most [`MAX_TURNS`] responses.
    fn config(&self, model: &str, system: String) -> Result<LoopConfig, String> {
        let mut config = self.config.clone();
        config.system = vec![system];
        config.user_context = None;
        config.max_turns = Some(MAX_TURNS);
        config.summaries = None;
        config.token_budget = None;
        config.last_request = None;
        config.thinking = None;
        let (id, info) = self
            .models
            .resolve(model)
            .map_err(|error| format!("model {model}: {error:#}"))?;
        self.models.apply(&mut config, id, &info);
        Ok(config)
    }

    async fn run(
        &self,
        model: Option<&str>,
        system: String,
        prompt: String,
    ) -> Result<Option<serde_json::Value>, String> {
        let config = self.config(model.unwrap_or(&self.fast_model), system)?;
        let built = self
            .recipe
            .build(tools::PermissionMode::Plan)
            .map_err(|error| error.to_string())?;
        // The transcript it is told of, readable without a question (Claude Code's
        // `Read(/path)` session rule).
        let transcript = self
            .recipe
            .hooks
            .env()
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clone();
        if transcript.is_absolute() {
            let _ = built
                .permissions
                .allow_for_session(&format!("Read(/{})", transcript.display()));
        }
        let answer = Shared::default();
        let mut tools: Vec<Arc<dyn executor::Tool>> = built
            .tools
            .into_iter()
            .filter(|tool| TOOLS.contains(&tool.name()))
            .collect();
        tools.push(Arc::new(StructuredOutputTool::new(
            schema(),
            Arc::clone(&answer),
        )));
        let deps = Deps {
            model: Arc::new(adapter::ProviderModel::with_fallback(
                self.client.clone(),
                self.fallback.clone(),
            )),
            tools,
            permissions: built.gate,
            summarizer: Arc::new(adapter::ProviderSummarizer::new(
                self.client.clone(),
                config.model.clone(),
            )),
            result_store: Box::new(tooling::DirStore::new(
                self.recipe
                    .results_dir
                    .join(format!("hook-agent-{}", uuid::Uuid::new_v4().simple())),
            )),
            files: Arc::new(tooling::WorkspaceFiles::new(Arc::clone(
                &self.recipe.workspace,
            ))),
            stop_hook: Arc::new(RequireOutput::new(
                Arc::clone(&answer),
                Arc::new(NoStopHook),
            )),
            workspace: Arc::clone(&self.recipe.workspace),
            tool_source: None,
            fork_point: None,
            attachments: None,
            spend: self.spend.clone(),
        };
        // Its events are not shown: the hook's answer is what counts.
        let (events, _unread) = tokio::sync::mpsc::unbounded_channel();
        let outcome = loop_core::run_loop(
            config,
            deps,
            vec![MessageParam::user_text(prompt)],
            events,
            CancellationToken::new(),
        )
        .await;
        if let loop_core::Terminal::ModelError(error) = &outcome.terminal {
            return Err(format!("failed: {error}"));
        }
        let value = answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .value
            .clone();
        Ok(value)
    }
}

impl HookAgent for HookAgentRunner {
    fn check<'a>(
        &'a self,
        model: Option<&'a str>,
        system: String,
        prompt: String,
    ) -> HookAgentFuture<'a> {
        Box::pin(self.run(model, system, prompt))
    }
}
