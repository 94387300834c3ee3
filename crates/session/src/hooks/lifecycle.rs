//! The hooks of a turn's end (Stop, SubagentStop) and of a compaction (PreCompact,
//! PostCompact, and SessionStart with `source` `compact`).

use std::path::Path;
use std::sync::Arc;

use context::{Summarizer, SummarizerError, SummaryFuture, SummaryRequest};
use loop_core::{StopDecision, StopFuture, StopHook, StopHookInput};
use serde_json::{Value, json};

use super::{Event, Hooks};

/// The Stop hooks of the settings, as loop-core's stop hook; or a subagent's SubagentStop
/// hooks ([`CommandStopHook::subagent`]). A block or `additionalContext` makes the model go
/// on with them; a `continue: false` ends the run.
#[derive(Debug)]
pub struct CommandStopHook {
    hooks: Hooks,
    /// `Stop` or `SubagentStop`.
    event: Event,
    /// The fields a SubagentStop event adds (`agent_id`, `agent_type`,
    /// `agent_transcript_path`).
    fields: serde_json::Map<String, Value>,
    /// What matchers are matched against (a subagent's type).
    subject: Vec<String>,
}

impl CommandStopHook {
    /// The Stop hooks of `hooks`.
    pub fn new(hooks: Hooks) -> Self {
        Self {
            hooks,
            event: Event::Stop,
            fields: serde_json::Map::new(),
            subject: Vec::new(),
        }
    }

    /// The SubagentStop hooks of `hooks` for one subagent, with Claude Code's payload:
    /// `agent_id`, `agent_type` (also what a matcher is matched against) and
    /// `agent_transcript_path`, besides `stop_hook_active` and `last_assistant_message`. A
    /// hook that blocks makes the subagent go on with the reason, as a Stop hook does.
    pub fn subagent(hooks: Hooks, agent_id: &str, agent_type: &str, transcript: &Path) -> Self {
        let mut fields = serde_json::Map::new();
        fields.insert("agent_id".to_owned(), json!(agent_id));
        fields.insert("agent_type".to_owned(), json!(agent_type));
        fields.insert("agent_transcript_path".to_owned(), json!(transcript));
        Self {
            hooks,
            event: Event::SubagentStop,
            fields,
            subject: vec![agent_type.to_owned()],
        }
    }
}

impl StopHook for CommandStopHook {
    fn on_stop(&self, input: StopHookInput) -> StopFuture<'_> {
        Box::pin(async move {
            let mut fields = self.fields.clone();
            fields.insert("stop_hook_active".to_owned(), json!(input.stop_hook_active));
            fields.insert(
                "last_assistant_message".to_owned(),
                json!(input.last_assistant_message.text()),
            );
            let subjects: Vec<&str> = self.subject.iter().map(String::as_str).collect();
            let verdict = self
                .hooks
                .run(self.event, &subjects, Value::Object(fields))
                .await;
            // Context, as a block, sends the model on with it (Claude Code 2.1.197 gives a
            // Stop hook's additionalContext to the model and the turn goes on).
            let mut reasons = verdict.blocks;
            reasons.extend(verdict.context.into_iter().map(|context| {
                format!("{} hook additional context: {context}", self.event.name())
            }));
            if let Some(reason) = verdict.end {
                StopDecision::Prevent { reason }
            } else if reasons.is_empty() {
                StopDecision::Allow
            } else {
                StopDecision::Block { reasons }
            }
        })
    }
}

/// A summarizer with the compaction hooks around it, as Claude Code runs them around a
/// compaction: PreCompact first (`trigger` `auto` or `manual`, `custom_instructions`), whose
/// block keeps the history as it is ([`SummarizerError::Blocked`]) and whose output is added
/// to the summary's instructions; then the summary; then PostCompact (`compact_summary`)
/// and SessionStart with `source` `compact`, whose context is kept after the summary (the
/// model sees it from then on, as it would see it after Claude Code's compaction).
pub struct HookedSummarizer {
    inner: Arc<dyn Summarizer>,
    hooks: Hooks,
    trigger: &'static str,
    instructions: Option<String>,
    model: String,
}

impl std::fmt::Debug for HookedSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookedSummarizer")
            .field("trigger", &self.trigger)
            .finish_non_exhaustive()
    }
}

impl HookedSummarizer {
    /// `inner` with the compaction hooks of `hooks` around it, or `inner` itself when none
    /// is configured. `manual` is `/compact`; `instructions` the user's focus given with it;
    /// `model` the session's (SessionStart's `model`).
    pub fn wrap(
        inner: Arc<dyn Summarizer>,
        hooks: &Hooks,
        manual: bool,
        instructions: Option<String>,
        model: &str,
    ) -> Arc<dyn Summarizer> {
        if ![Event::PreCompact, Event::PostCompact, Event::SessionStart]
            .iter()
            .any(|event| hooks.has(*event))
        {
            return inner;
        }
        Arc::new(Self {
            inner,
            hooks: hooks.clone(),
            trigger: if manual { "manual" } else { "auto" },
            instructions,
            model: model.to_owned(),
        })
    }
}

impl Summarizer for HookedSummarizer {
    fn summarize(&self, mut request: SummaryRequest) -> SummaryFuture<'_> {
        Box::pin(async move {
            let pre = self
                .hooks
                .run(
                    Event::PreCompact,
                    &[self.trigger],
                    json!({"trigger": self.trigger, "custom_instructions": self.instructions}),
                )
                .await;
            let refusals = pre.refusals();
            if !refusals.is_empty() {
                return Err(SummarizerError::Blocked(refusals.join("\n")));
            }
            if !pre.context.is_empty()
                && let Some(last) = request.messages.last_mut()
            {
                last.content.push(protocol::ContentBlock::text(format!(
                    "Additional instructions from PreCompact hooks for this summary:\n{}",
                    pre.context.join("\n")
                )));
            }
            let mut summary = self.inner.summarize(request).await?;
            self.hooks
                .run(
                    Event::PostCompact,
                    &[self.trigger],
                    json!({"trigger": self.trigger, "compact_summary": summary}),
                )
                .await;
            let start = self
                .hooks
                .run(
                    Event::SessionStart,
                    &["compact"],
                    json!({"source": "compact", "model": self.model}),
                )
                .await;
            if !start.context.is_empty() {
                summary.push_str("\n\nSessionStart hook additional context:\n");
                summary.push_str(&start.context.join("\n"));
            }
            Ok(summary)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use context::Tokens;
    use protocol::MessageParam;

    use super::*;
    use crate::settings::HookMatcher;

    /// Answers every request with "SUMMARY" and keeps the last message it was sent.
    #[derive(Default)]
    struct Fixed(Mutex<Option<MessageParam>>);

    impl Summarizer for Fixed {
        fn summarize(&self, request: SummaryRequest) -> SummaryFuture<'_> {
            *self.0.lock().unwrap() = request.messages.last().cloned();
            Box::pin(std::future::ready(Ok("SUMMARY".to_owned())))
        }
    }

    fn hooks(dir: &Path, configured: Value) -> Hooks {
        let configured: BTreeMap<String, Vec<HookMatcher>> =
            serde_json::from_value(configured).unwrap();
        Hooks::new(super::super::process::tests::env(dir), &configured)
    }

    fn request() -> SummaryRequest {
        SummaryRequest {
            system: "s".into(),
            messages: vec![MessageParam::user_text("summarize")],
            max_output: Tokens(100),
            fork: None,
        }
    }

    #[tokio::test]
    async fn compaction_hooks_run_around_the_summary() {
        let dir = std::env::temp_dir().join(format!("agent-compact-hooks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let hooks = hooks(
            &dir,
            json!({
                "PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": "cat > pre.json; echo 'Keep the API names.'"}]}],
                "PostCompact": [{"hooks": [{"type": "command", "command": "cat > post.json"}]}],
                "SessionStart": [{"matcher": "compact", "hooks": [{"type": "command", "command": "echo 'Branch: main'"}]}],
            }),
        );
        let inner = Arc::new(Fixed::default());
        let summarizer = HookedSummarizer::wrap(
            Arc::clone(&inner) as Arc<dyn Summarizer>,
            &hooks,
            true,
            Some("the parser".into()),
            "m",
        );
        let summary = summarizer.summarize(request()).await.unwrap();
        assert_eq!(
            summary,
            "SUMMARY\n\nSessionStart hook additional context:\nBranch: main"
        );
        let sent = inner.0.lock().unwrap().clone().unwrap();
        assert!(
            serde_json::to_string(&sent).unwrap().contains("Additional instructions from PreCompact hooks for this summary:\\nKeep the API names."),
            "{sent:?}"
        );
        let read = |name: &str| -> Value {
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
        };
        let pre = read("pre.json");
        assert_eq!(
            (pre["trigger"].as_str(), pre["custom_instructions"].as_str()),
            (Some("manual"), Some("the parser"))
        );
        let post = read("post.json");
        assert_eq!(post["compact_summary"], "SUMMARY");
        assert_eq!(post["hook_event_name"], "PostCompact");

        // An automatic compaction: the manual-only PreCompact hook does not run; one that
        // blocks keeps the history.
        let blocking = Hooks::new(
            super::super::process::tests::env(&dir),
            &serde_json::from_value(json!({
                "PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "echo 'not now' >&2; exit 2"}]}],
            }))
            .unwrap(),
        );
        let summarizer =
            HookedSummarizer::wrap(Arc::new(Fixed::default()), &blocking, false, None, "m");
        assert_eq!(
            summarizer.summarize(request()).await,
            Err(SummarizerError::Blocked("not now".into()))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
