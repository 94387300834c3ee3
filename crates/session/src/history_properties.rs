//! One history, as a property: for random scripted sessions (tool turns, max_tokens
//! escalation and recovery, reactive compaction, autocompaction, microcompact, stream
//! restarts), the transcript written from the loop's history events, cut at any byte, loads
//! to exactly the history of the events written whole before the cut; and the whole
//! transcript of a run resumes to the same next request an uninterrupted session would send.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use context::{NoFiles, Tokens, WaterLevels};
use executor::{AllowAll, Workspace};
use loop_core::{
    ApiFailure, Deps, LoopConfig, LoopEvent, ModelError, ModelEvent, NoStopHook, run_loop,
};
use proptest::prelude::*;
use protocol::{MessageParam, StopReason};
use serde_json::json;
use testkit::model::{Client, NoSummary, NullStore, Probe, Reply, ScriptedModel};
use tokio_util::sync::CancellationToken;

use crate::transcript::{Transcript, load};

/// One scripted answer.
#[derive(Clone, Debug)]
enum Answer {
    /// `tools` Probe calls (1 or 2), stop_reason tool_use.
    Tools(usize),
    /// Text cut by max_tokens (escalation the first time in a turn, then recovery).
    Cut,
    /// "prompt is too long" (a reactive compaction).
    TooLong,
    /// Text, then the stream restarts and the answer comes whole: `Tools(1)`.
    Restarted,
    /// The final text.
    Done,
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        4 => (1usize..=2).prop_map(Answer::Tools),
        1 => Just(Answer::Cut),
        1 => Just(Answer::TooLong),
        1 => Just(Answer::Restarted),
    ]
}

/// The scripted answer to request `n`: [`Answer`] as a [`testkit::model::Reply`].
fn reply(n: usize, answer: Answer) -> Reply {
    let tools = |count: usize| {
        (0..count)
            .fold(Reply::new(), |reply, k| {
                reply.tool(&format!("toolu_{n}_{k}"), "Probe", json!({}))
            })
            .end(StopReason::ToolUse)
    };
    match answer {
        Answer::Tools(count) => tools(count),
        Answer::Cut => Reply::new()
            .text(&format!("cut {n}"))
            .end(StopReason::MaxTokens),
        Answer::TooLong => Reply::error(ModelError::PromptTooLong(ApiFailure::new(
            "prompt is too long",
        ))),
        Answer::Restarted => {
            // A text block started, then the stream breaks and the request is made again.
            let mut reply = Reply::new().text("lost");
            reply.steps.truncate(2);
            reply
                .steps
                .push(testkit::model::Step::Event(ModelEvent::Restart {
                    reason: "stream broken".into(),
                    non_streaming: false,
                }));
            reply.steps.extend(tools(1).steps);
            reply
        }
        Answer::Done => Reply::new()
            .text(&format!("done {n}"))
            .end(StopReason::EndTurn),
    }
}

/// Answers request N with `script[N]` (then `Done`), recording every request.
fn scripted(script: Vec<Answer>) -> Arc<ScriptedModel> {
    ScriptedModel::new(move |n, _request| reply(n, script.get(n).cloned().unwrap_or(Answer::Done)))
}

fn config(autocompact_at: u64) -> LoopConfig {
    let mut config = LoopConfig::for_model("claude-sonnet-4-5");
    config.context.levels = WaterLevels::custom(
        Tokens(200_000),
        Tokens(20_000),
        Tokens(autocompact_at),
        Tokens(179_000),
    );
    config.user_context = Some("Working directory: /w".into());
    config
}

/// Runs the loop on `messages` with `script`; returns the events and what it left.
async fn run(
    autocompact_at: u64,
    script: Vec<Answer>,
    messages: Vec<MessageParam>,
) -> (Vec<LoopEvent>, Vec<MessageParam>, Arc<ScriptedModel>) {
    let model = scripted(script);
    let deps = Deps {
        model: Arc::new(Client(Arc::clone(&model))),
        tools: vec![Probe::padded("Probe", 400)],
        permissions: Arc::new(AllowAll),
        summarizer: Arc::new(NoSummary),
        result_store: Box::new(NullStore),
        files: Arc::new(NoFiles),
        stop_hook: Arc::new(NoStopHook),
        workspace: Arc::new(Workspace::default()),
        tool_source: None,
        fork_point: None,
        attachments: None,
        spend: None,
    };
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let outcome = run_loop(
        config(autocompact_at),
        deps,
        messages,
        sender,
        CancellationToken::new(),
    )
    .await;
    let mut events = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        events.push(event);
    }
    (events, outcome.messages, model)
}

/// The history after each written event, with the file's length once the event's entries
/// are written whole (without their last newline: a line is whole once its JSON is).
struct Written {
    /// (end of the event's last JSON, history after it).
    checkpoints: Vec<(u64, Vec<MessageParam>)>,
}

fn persist(path: &std::path::Path, prompt: &MessageParam, events: &[LoopEvent]) -> Written {
    let dir = path.parent().unwrap();
    let transcript = Transcript::open(path.to_path_buf(), "s".into(), dir).unwrap();
    let end = || std::fs::metadata(path).unwrap().len() - 1;
    transcript
        .append_user_context("Working directory: /w")
        .unwrap();
    let mut history = vec![prompt.clone()];
    transcript.append_param(prompt).unwrap();
    let mut checkpoints = vec![(end(), history.clone())];
    for event in events {
        let LoopEvent::History(change) = event else {
            continue;
        };
        transcript.record(change).unwrap();
        change.apply(&mut history);
        checkpoints.push((end(), history.clone()));
    }
    Written { checkpoints }
}

fn normalized(messages: &[MessageParam]) -> Vec<MessageParam> {
    let mut repairs = Vec::new();
    context::normalize_messages(messages.to_vec(), &mut repairs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_transcript_cut_anywhere_resumes_what_was_written(
        script in proptest::collection::vec(answer(), 1..10),
        compact_low in any::<bool>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 12),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let autocompact_at = if compact_low { 2_500 } else { 150_000 };
        let prompt = MessageParam::user_text("do the work");
        let (events, kept, _) =
            runtime.block_on(run(autocompact_at, script.clone(), vec![prompt.clone()]));

        let dir = std::env::temp_dir().join(format!(
            "agent-history-prop-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let written = persist(&path, &prompt, &events);
        let bytes = std::fs::read(&path).unwrap();

        // The whole transcript holds what the loop kept, byte for byte.
        let (_, last) = written.checkpoints.last().unwrap();
        prop_assert_eq!(last, &kept);

        // Cut anywhere: the events written whole before the cut, nothing else.
        let mut offsets: Vec<u64> = cuts.iter().map(|cut| cut.index(bytes.len() + 1) as u64).collect();
        offsets.extend(written.checkpoints.iter().flat_map(|(end, _)| [*end, end + 1, end + 2]));
        let cut_path = dir.join("cut.jsonl");
        for offset in offsets {
            let offset = offset.min(bytes.len() as u64);
            std::fs::write(&cut_path, &bytes[..offset as usize]).unwrap();
            let expected = written
                .checkpoints
                .iter()
                .rev()
                .find(|(end, _)| *end <= offset)
                .map(|(_, history)| history);
            match (load(&cut_path), expected) {
                (Ok(loaded), Some(history)) => {
                    prop_assert!(loaded.skipped.is_empty(), "cut at {}: {:?}", offset, loaded.skipped);
                    prop_assert_eq!(
                        &loaded.messages,
                        &normalized(history),
                        "cut at {} of {}", offset, bytes.len()
                    );
                    prop_assert_eq!(loaded.user_context.as_deref(), Some("Working directory: /w"));
                }
                (Err(error), None) => {
                    prop_assert!(error.to_string().contains("not a transcript"), "{}", error);
                }
                (loaded, expected) => prop_assert!(
                    false,
                    "cut at {}: loaded {:?}, expected {:?}",
                    offset,
                    loaded.map(|loaded| loaded.messages.len()),
                    expected.map(Vec::len)
                ),
            }
        }

        // Resumed from the whole transcript, the next request is the one an uninterrupted
        // session would send: the same run from the kept history and from the loaded one.
        let loaded = load(&path).unwrap().messages;
        let next = MessageParam::user_text("next");
        let mut resumed = loaded;
        resumed.push(next.clone());
        let mut uninterrupted = normalized(&kept);
        uninterrupted.push(next);
        let (_, _, from_file) = runtime.block_on(run(autocompact_at, Vec::new(), normalized(&resumed)));
        let (_, _, from_memory) =
            runtime.block_on(run(autocompact_at, Vec::new(), normalized(&uninterrupted)));
        let from_file = from_file.request(0);
        let from_memory = from_memory.request(0);
        prop_assert_eq!(
            serde_json::to_value(&from_file).unwrap(),
            serde_json::to_value(&from_memory).unwrap()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A step of an interactive session: a prompt and the loop's run, or a command between runs.
#[derive(Clone, Debug)]
enum Step {
    /// A prompt answered by these scripted answers.
    Run(Vec<Answer>),
    /// `/compact`: the history replaced by a summary.
    Compact,
    /// A rewind of the conversation to the end of an earlier turn (0: before the first).
    Rewind(prop::sample::Index),
    /// `--fork-session`: a new file that begins with the history.
    Fork,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => proptest::collection::vec(answer(), 1..5).prop_map(Step::Run),
        1 => Just(Step::Compact),
        1 => any::<prop::sample::Index>().prop_map(Step::Rewind),
        1 => Just(Step::Fork),
    ]
}

/// A transcript and the history the session holds, changed only by applying events.
struct Session {
    dir: std::path::PathBuf,
    transcript: Transcript,
    history: Vec<MessageParam>,
    /// The history at the end of each turn (index 0: before the first).
    ends: Vec<Vec<MessageParam>>,
}

impl Session {
    fn open(dir: &std::path::Path, name: &str) -> Transcript {
        let transcript = Transcript::open(dir.join(name), "s".into(), dir).unwrap();
        transcript
            .append_user_context("Working directory: /w")
            .unwrap();
        transcript
    }

    /// Records `event` and applies it: what the session does with a command's change.
    fn change(&mut self, event: &loop_core::HistoryEvent) {
        self.transcript.record(event).unwrap();
        event.apply(&mut self.history);
    }

    async fn step(&mut self, number: usize, step: &Step) {
        match step {
            Step::Run(script) => {
                // As a turn starts: the prompt written, then the history normalized.
                let prompt = MessageParam::user_text(format!("prompt {number}"));
                self.transcript.append_param(&prompt).unwrap();
                self.history.push(prompt);
                self.history = normalized(&self.history);
                let (events, kept, _) = run(150_000, script.clone(), self.history.clone()).await;
                for event in &events {
                    if let LoopEvent::History(change) = event {
                        self.transcript.record(change).unwrap();
                        change.apply(&mut self.history);
                    }
                }
                assert_eq!(
                    self.history, kept,
                    "the events replay to what the loop kept"
                );
                self.ends.push(self.history.clone());
            }
            Step::Compact => self.change(&loop_core::HistoryEvent::Compacted {
                trigger: loop_core::CompactTrigger::Manual,
                pre_tokens: 1_000,
                messages: vec![MessageParam::user_text(format!(
                    "Summary of {} messages",
                    self.history.len()
                ))],
            }),
            Step::Rewind(index) => {
                let turn = index.index(self.ends.len());
                let messages = self.ends[turn].clone();
                self.change(&loop_core::HistoryEvent::Rewound {
                    turn: turn as u64,
                    messages,
                });
            }
            Step::Fork => {
                let name = format!("fork-{number}.jsonl");
                let fork = Self::open(&self.dir, &name);
                fork.append_history(&self.history).unwrap();
                match load(&self.dir.join(name)) {
                    Ok(loaded) => {
                        assert_eq!(loaded.messages, normalized(&self.history), "the fork");
                    }
                    // Nothing to fork: the file holds no message, and says so.
                    Err(error) => assert!(
                        self.history.is_empty() && error.to_string().contains("not a transcript"),
                        "{error}"
                    ),
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Prompts, `/compact`, rewinds and forks in any order: the session's history changes
    /// only by applying history events, the transcript records each, and loading it (one
    /// replay of the same events) gives the session's history after every step.
    #[test]
    fn session_commands_replay_through_one_apply(
        steps in proptest::collection::vec(step(), 1..8),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let dir = std::env::temp_dir().join(format!(
            "agent-history-steps-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut session = Session {
            transcript: Session::open(&dir, "s.jsonl"),
            dir: dir.clone(),
            history: Vec::new(),
            ends: vec![Vec::new()],
        };
        for (number, step) in steps.iter().enumerate() {
            runtime.block_on(session.step(number, step));
            let loaded = load(&dir.join("s.jsonl"));
            match loaded {
                Ok(loaded) => prop_assert_eq!(
                    &loaded.messages,
                    &normalized(&session.history),
                    "after step {} ({:?})", number, step
                ),
                // Nothing but the user context written yet (a fork or a rewind first).
                Err(error) => prop_assert!(
                    session.history.is_empty(),
                    "after step {} ({:?}): {}", number, step, error
                ),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
