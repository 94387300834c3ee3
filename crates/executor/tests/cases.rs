//! The executor's promised behaviours, with test tools that sleep, fail, or spawn real child
//! processes (so that killing a process group is tested for real).
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor::{
    AbortPolicy, AllowAll, CanUseTool, ExecutorConfig, ExecutorEvent, Outcome, PermissionDecision,
    StreamingToolExecutor, Tool, ToolCall, ToolContext, ToolError, ToolFuture, ToolOutput,
    ToolProgress, Workspace,
};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use protocol::{ToolResultContent, ToolUseId};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Records when each call started and ended (tokio time, so paused clocks are exact).
#[derive(Default)]
struct Tracker {
    spans: Mutex<Vec<(String, Instant, Option<Instant>)>>,
}

impl Tracker {
    fn start(&self, id: &ToolUseId) -> usize {
        let mut spans = self.spans.lock().unwrap();
        spans.push((id.to_string(), Instant::now(), None));
        spans.len() - 1
    }

    fn end(&self, slot: usize) {
        self.spans.lock().unwrap()[slot].2 = Some(Instant::now());
    }

    fn spans(&self) -> Vec<(String, Instant, Option<Instant>)> {
        self.spans.lock().unwrap().clone()
    }
}

/// Sleeps `ms` (watching cancellation), then succeeds or fails as `fail` says:
/// `"error"` (a non-fatal error result), `"fatal"` (could not run), `"panic"`.
struct Sleepy {
    name: &'static str,
    safe: bool,
    schema: Value,
    tracker: Arc<Tracker>,
}

fn sleepy(name: &'static str, safe: bool, tracker: &Arc<Tracker>) -> Arc<dyn Tool> {
    Arc::new(Sleepy {
        name,
        safe,
        schema: json!({"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"]}),
        tracker: Arc::clone(tracker),
    })
}

impl Tool for Sleepy {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "sleeps"
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        self.safe
    }
    fn timeout(&self, input: &Value) -> Option<Duration> {
        input["timeout_ms"].as_u64().map(Duration::from_millis)
    }
    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let slot = self.tracker.start(&context.tool_use_id);
            let ms = input["ms"].as_u64().unwrap_or(0);
            context.progress(ToolProgress::message(format!("sleeping {ms} ms")));
            let finished = tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => true,
                () = context.cancel.cancelled() => false,
            };
            self.tracker.end(slot);
            if !finished {
                return Err(ToolError::Killed("cancelled".into()));
            }
            match input["fail"].as_str() {
                Some("error") => Ok(ToolOutput::error(format!(
                    "{} failed after {ms} ms",
                    self.name
                ))),
                Some("fatal") => Err(ToolError::CouldNotRun("could not start".into())),
                Some("panic") => panic!("tool bug"),
                _ => Ok(ToolOutput::text(format!(
                    "{} done after {ms} ms",
                    self.name
                ))),
            }
        })
    }
}

/// Runs `sh -c CMD` in its own process group in `dir`; on cancellation kills the whole group.
/// Records each call's process group id.
struct Shell {
    name: &'static str,
    schema: Value,
    dir: PathBuf,
    groups: Arc<Mutex<HashMap<String, i32>>>,
}

impl Tool for Shell {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "runs a shell command"
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        true
    }
    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let command = input["cmd"].as_str().unwrap_or_default().to_owned();
            let mut child = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(&command)
                .current_dir(&self.dir)
                .process_group(0)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|error| ToolError::CouldNotRun(error.to_string()))?;
            let pid = child.id().unwrap() as i32;
            self.groups
                .lock()
                .unwrap()
                .insert(context.tool_use_id.to_string(), pid);
            let mut stdout = child.stdout.take().unwrap();
            let mut output = String::new();
            tokio::select! {
                status = async {
                    stdout.read_to_string(&mut output).await.ok();
                    child.wait().await
                } => {
                    let status = status.map_err(|error| ToolError::CouldNotRun(error.to_string()))?;
                    match status.code() {
                        Some(0) => Ok(ToolOutput::text(output)),
                        Some(code) => Ok(ToolOutput::error(format!("{output}exit status {code}"))),
                        None => Err(ToolError::Killed("killed by a signal".into())),
                    }
                }
                () = context.cancel.cancelled() => {
                    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                    let _ = child.wait().await;
                    Err(ToolError::Killed("cancelled".into()))
                }
            }
        })
    }
}

fn shell(
    name: &'static str,
    dir: &std::path::Path,
    groups: &Arc<Mutex<HashMap<String, i32>>>,
) -> Arc<dyn Tool> {
    Arc::new(Shell {
        name,
        schema: json!({"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"],"additionalProperties":false}),
        dir: dir.to_owned(),
        groups: Arc::clone(groups),
    })
}

fn executor(
    tools: Vec<Arc<dyn Tool>>,
    policy: AbortPolicy,
    parent: &CancellationToken,
) -> StreamingToolExecutor {
    executor_with(
        tools,
        Arc::new(AllowAll),
        ExecutorConfig {
            policy,
            ..ExecutorConfig::default()
        },
        parent,
    )
}

fn executor_with(
    tools: Vec<Arc<dyn Tool>>,
    gate: Arc<dyn CanUseTool>,
    config: ExecutorConfig,
    parent: &CancellationToken,
) -> StreamingToolExecutor {
    StreamingToolExecutor::new(
        tools,
        gate,
        config,
        parent.clone(),
        Arc::new(Workspace::default()),
    )
}

/// (tool_use id, outcome, is_error, text) of each Completed event, in the order they came.
fn results(events: &[ExecutorEvent]) -> Vec<(String, Outcome, bool, String)> {
    events
        .iter()
        .filter_map(|event| match event {
            ExecutorEvent::Completed(done) => Some((
                done.result.tool_use_id.to_string(),
                done.outcome.clone(),
                done.result.is_error == Some(true),
                match &done.result.content {
                    ToolResultContent::Text(text) => text.clone(),
                    other => format!("{other:?}"),
                },
            )),
            _ => None,
        })
        .collect()
}

fn ids(results: &[(String, Outcome, bool, String)]) -> Vec<&str> {
    results.iter().map(|result| result.0.as_str()).collect()
}

#[tokio::test(start_paused = true)]
async fn safe_tools_run_together_and_results_keep_model_order() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![
            sleepy("A", true, &tracker),
            sleepy("B", true, &tracker),
            sleepy("C", true, &tracker),
        ],
        AbortPolicy::default(),
        &parent,
    );
    let start = Instant::now();
    executor.add_tool(ToolCall::new("a", "A", json!({"ms": 50})));
    executor.add_tool(ToolCall::new("b", "B", json!({"ms": 1})));
    executor.add_tool(ToolCall::new("c", "C", json!({"ms": 10})));
    let events = executor.drain().await;
    let elapsed = start.elapsed();
    let results = results(&events);
    assert_eq!(ids(&results), ["a", "b", "c"]);
    assert!(results.iter().all(|result| result.1 == Outcome::Success));
    assert_eq!(results[1].3, "B done after 1 ms");
    // Together: the slowest call's 50 ms, not the sum (61 ms).
    assert_eq!(elapsed, Duration::from_millis(50));
    // Progress flowed while they ran, and every call was started before any result.
    let progress = events
        .iter()
        .filter(|event| matches!(event, ExecutorEvent::Progress { .. }))
        .count();
    assert_eq!(progress, 3);
    let first_completed = events
        .iter()
        .position(|event| matches!(event, ExecutorEvent::Completed(_)))
        .unwrap();
    assert_eq!(
        events[..first_completed]
            .iter()
            .filter(|e| matches!(e, ExecutorEvent::Started { .. }))
            .count(),
        3
    );
    // b and c ended before a: each said so when it ended, before any Completed; a did not
    // (its Completed is not held back).
    let finished: Vec<(usize, &str, &str)> = events[..first_completed]
        .iter()
        .filter_map(|event| match event {
            ExecutorEvent::Finished {
                index,
                tool_use_id,
                is_error: false,
                preview,
            } => Some((*index, tool_use_id.as_str(), preview.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished,
        [
            (1, "b", "B done after 1 ms"),
            (2, "c", "C done after 10 ms")
        ]
    );
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, ExecutorEvent::Finished { index: 0, .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn an_unsafe_edit_overlaps_nothing() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![
            sleepy("Read", true, &tracker),
            sleepy("Edit", false, &tracker),
        ],
        AbortPolicy::default(),
        &parent,
    );
    executor.add_tool(ToolCall::new("r1", "Read", json!({"ms": 20})));
    executor.add_tool(ToolCall::new("e", "Edit", json!({"ms": 5})));
    executor.add_tool(ToolCall::new("r2", "Read", json!({"ms": 1})));
    let results = results(&executor.drain().await);
    assert_eq!(ids(&results), ["r1", "e", "r2"]);
    let spans = tracker.spans();
    let span = |id: &str| {
        spans
            .iter()
            .find(|span| span.0 == id)
            .map(|span| (span.1, span.2.unwrap()))
            .unwrap()
    };
    let (r1, e, r2) = (span("r1"), span("e"), span("r2"));
    assert!(e.0 >= r1.1, "the Edit starts after the first Read ends");
    assert!(r2.0 >= e.1, "the second Read never overtakes the Edit");
}

#[tokio::test]
async fn sibling_abort_kills_the_process_group_and_names_the_failed_tool() {
    let dir = tempdir();
    let groups = Arc::new(Mutex::new(HashMap::new()));
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![
            shell("A", &dir, &groups),
            shell("B", &dir, &groups),
            sleepy("C", true, &tracker),
        ],
        AbortPolicy::OnAnyError,
        &parent,
    );
    let start = std::time::Instant::now();
    executor.add_tool(ToolCall::new(
        "a",
        "A",
        json!({"cmd": "sleep 0.005; exit 3"}),
    ));
    executor.add_tool(ToolCall::new(
        "b",
        "B",
        json!({"cmd": "sleep 1; echo hi > marker"}),
    ));
    executor.add_tool(ToolCall::new("c", "C", json!({"ms": 1})));
    let results = results(&executor.drain().await);
    let elapsed = start.elapsed();
    assert_eq!(ids(&results), ["a", "b", "c"]);
    // A: its real result, an error with the exit status.
    assert_eq!(results[0].1, Outcome::ToolError);
    assert!(results[0].2);
    assert_eq!(results[0].3, "exit status 3");
    // B: cancelled because of A, within a bounded time, naming A.
    assert_eq!(
        results[1].1,
        Outcome::SiblingFailed {
            failed: "a".into(),
            failed_tool: "A".into(),
            was_running: true
        }
    );
    assert_eq!(
        results[1].3,
        "Error: this call was cancelled before it completed because the parallel A call (a) failed. It is safe to retry."
    );
    assert!(
        elapsed < Duration::from_millis(900),
        "B was not waited for: {elapsed:?}"
    );
    // C: its real content.
    assert_eq!(
        (results[2].1.clone(), results[2].3.as_str()),
        (Outcome::Success, "C done after 1 ms")
    );
    // B's whole process group is gone, and the marker is never written.
    let group = groups.lock().unwrap()["b"];
    assert_eq!(
        group_after_kill(group).await,
        Vec::<i32>::new(),
        "B's process group was killed"
    );
    tokio::time::sleep(Duration::from_millis(1300).saturating_sub(start.elapsed())).await;
    assert!(
        !dir.join("marker").exists(),
        "the killed command wrote its marker"
    );
}

#[tokio::test]
async fn a_plain_non_zero_exit_does_not_cascade_under_the_default_policy() {
    let dir = tempdir();
    let groups = Arc::new(Mutex::new(HashMap::new()));
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![
            shell("A", &dir, &groups),
            shell("B", &dir, &groups),
            sleepy("C", true, &tracker),
        ],
        AbortPolicy::default(),
        &parent,
    );
    executor.add_tool(ToolCall::new(
        "a",
        "A",
        json!({"cmd": "sleep 0.005; exit 3"}),
    ));
    executor.add_tool(ToolCall::new(
        "b",
        "B",
        json!({"cmd": "sleep 0.2; echo hi > marker; echo wrote"}),
    ));
    executor.add_tool(ToolCall::new("c", "C", json!({"ms": 1})));
    let results = results(&executor.drain().await);
    let outcomes: Vec<&Outcome> = results.iter().map(|result| &result.1).collect();
    assert_eq!(
        outcomes,
        [&Outcome::ToolError, &Outcome::Success, &Outcome::Success]
    );
    assert_eq!(results[1].3, "wrote\n");
    assert!(dir.join("marker").exists());
}

#[tokio::test]
async fn user_abort_interrupts_unfinished_calls_and_keeps_finished_ones() {
    let dir = tempdir();
    let groups = Arc::new(Mutex::new(HashMap::new()));
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![
            shell("T1", &dir, &groups),
            sleepy("T2", true, &tracker),
            sleepy("T3", true, &tracker),
        ],
        AbortPolicy::default(),
        &parent,
    );
    executor.add_tool(ToolCall::new("t1", "T1", json!({"cmd": "sleep 5"})));
    executor.add_tool(ToolCall::new("t2", "T2", json!({"ms": 10})));
    executor.add_tool(ToolCall::new("t3", "T3", json!({"ms": 10_000})));
    let abort = parent.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        abort.cancel();
    });
    let start = std::time::Instant::now();
    let results = results(&executor.drain().await);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "abort took {:?}",
        start.elapsed()
    );
    assert_eq!(ids(&results), ["t1", "t2", "t3"]);
    let interrupted = "Interrupted by user: this tool call was stopped before it completed.";
    assert_eq!(
        (&results[0].1, results[0].3.as_str()),
        (&Outcome::Interrupted, interrupted)
    );
    assert_eq!(
        (&results[1].1, results[1].3.as_str()),
        (&Outcome::Success, "T2 done after 10 ms")
    );
    assert_eq!(
        (&results[2].1, results[2].3.as_str()),
        (&Outcome::Interrupted, interrupted)
    );
    let group = groups.lock().unwrap()["t1"];
    assert_eq!(
        group_after_kill(group).await,
        Vec::<i32>::new(),
        "T1's process group was killed"
    );
    // A call added after the abort never starts.
    executor.add_tool(ToolCall::new("t4", "T2", json!({"ms": 1})));
    let late = executor.drain().await;
    assert!(
        !late
            .iter()
            .any(|event| matches!(event, ExecutorEvent::Started { .. }))
    );
    assert_eq!(results_of(&late), [("t4".to_owned(), Outcome::Interrupted)]);
}

fn results_of(events: &[ExecutorEvent]) -> Vec<(String, Outcome)> {
    results(events)
        .into_iter()
        .map(|result| (result.0, result.1))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn calls_that_cannot_run_get_actionable_errors_and_never_start() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![sleepy("Read", true, &tracker)],
        AbortPolicy::OnAnyError,
        &parent,
    );
    let mut invalid = ToolCall::new("bad_json", "Read", json!({}));
    invalid.input_problem = Some(executor::InputProblem::InvalidJson {
        raw: "{\"ms\": oops}".into(),
        error: "expected value at line 1 column 8".into(),
    });
    let mut cut = ToolCall::new("cut", "Read", json!({}));
    cut.input_problem = Some(executor::InputProblem::Truncated);
    executor.add_tool(ToolCall::new("unknown", "Teleport", json!({})));
    executor.add_tool(invalid);
    executor.add_tool(cut);
    executor.add_tool(ToolCall::new("schema", "Read", json!({"ms": "soon"})));
    executor.add_tool(ToolCall::new("ok", "Read", json!({"ms": 1})));
    executor.add_tool(ToolCall::new("ok", "Read", json!({"ms": 1})));
    let events = executor.drain().await;
    let results = results(&events);
    let started: Vec<&ExecutorEvent> = events
        .iter()
        .filter(|e| matches!(e, ExecutorEvent::Started { .. }))
        .collect();
    assert_eq!(started.len(), 1, "only the valid call ran");
    assert_eq!(
        results
            .iter()
            .map(|r| (r.0.as_str(), r.1.clone(), r.2))
            .collect::<Vec<_>>(),
        [
            ("unknown", Outcome::UnknownTool, true),
            ("bad_json", Outcome::UnusableInput, true),
            ("cut", Outcome::UnusableInput, true),
            ("schema", Outcome::SchemaViolation, true),
            // Pre-run rejections do not cascade, even under OnAnyError.
            ("ok", Outcome::Success, false),
            // A repeated id is answered, never run.
            ("ok", Outcome::DuplicateId, true),
        ]
    );
    assert_eq!(
        results[5].3,
        "Error: this Read call repeats the tool_use id ok of an earlier call, so it was not run. Give every call its own id."
    );
    assert_eq!(
        results[0].3,
        "Error: No such tool available: Teleport. Available tools: Read"
    );
    assert_eq!(
        results[1].3,
        "Error: the input of this Read call (tool_use id bad_json) is not valid JSON (expected value at line 1 column 8), so it was not run. Input received: {\"ms\": oops}. Send the call again with a complete JSON object."
    );
    assert!(results[2].3.contains("cut off by the output token limit"));
    assert_eq!(
        results[3].3,
        "InputValidationError: Read failed due to the following issue:\n`ms` must be integer, got string"
    );
}

#[tokio::test(start_paused = true)]
async fn permission_denial_is_an_event_and_an_error_result() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let gate = |call: &ToolCall, _: &dyn Tool| {
        if call.id.as_str() == "denied" {
            PermissionDecision::deny("writes outside the workspace")
        } else {
            PermissionDecision::allow()
        }
    };
    let mut executor = executor_with(
        vec![sleepy("Edit", false, &tracker)],
        Arc::new(gate),
        ExecutorConfig::default(),
        &parent,
    );
    executor.add_tool(ToolCall::new("denied", "Edit", json!({"ms": 5})));
    executor.add_tool(ToolCall::new("allowed", "Edit", json!({"ms": 5})));
    let events = executor.drain().await;
    let denial = events.iter().find_map(|event| match event {
        ExecutorEvent::PermissionDenied {
            tool_use_id,
            reason,
            input,
            ..
        } => Some((tool_use_id.as_str(), reason.as_str(), input.clone())),
        _ => None,
    });
    assert_eq!(
        denial,
        Some((
            "denied",
            "Permission to use Edit was denied: writes outside the workspace",
            json!({"ms": 5})
        ))
    );
    assert_eq!(
        results_of(&events),
        [
            ("denied".to_owned(), Outcome::PermissionDenied),
            ("allowed".to_owned(), Outcome::Success)
        ]
    );
    assert_eq!(tracker.spans().len(), 1, "the denied call never ran");
}

#[tokio::test(start_paused = true)]
async fn timeouts_and_panics_are_fatal_and_cascade_by_default() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![sleepy("S", true, &tracker)],
        AbortPolicy::default(),
        &parent,
    );
    executor.add_tool(ToolCall::new(
        "slow",
        "S",
        json!({"ms": 60_000, "timeout_ms": 30}),
    ));
    executor.add_tool(ToolCall::new("sibling", "S", json!({"ms": 1_000})));
    let results = results(&executor.drain().await);
    assert_eq!(
        results[0].1,
        Outcome::TimedOut {
            after: Duration::from_millis(30)
        }
    );
    assert_eq!(
        results[0].3,
        "Error: S timed out after 30 ms and was stopped."
    );
    assert!(
        matches!(&results[1].1, Outcome::SiblingFailed { failed, was_running: true, .. } if failed.as_str() == "slow")
    );

    let mut executor = executor_with(
        vec![sleepy("S", true, &tracker)],
        Arc::new(AllowAll),
        ExecutorConfig {
            policy: AbortPolicy::Never,
            ..ExecutorConfig::default()
        },
        &parent,
    );
    executor.add_tool(ToolCall::new(
        "boom",
        "S",
        json!({"ms": 1, "fail": "panic"}),
    ));
    executor.add_tool(ToolCall::new("fine", "S", json!({"ms": 2})));
    assert_eq!(
        results_of(&executor.drain().await),
        [
            ("boom".to_owned(), Outcome::CouldNotRun),
            ("fine".to_owned(), Outcome::Success)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn queued_and_later_calls_never_start_after_a_sibling_abort() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![sleepy("S", true, &tracker), sleepy("W", false, &tracker)],
        AbortPolicy::default(),
        &parent,
    );
    executor.add_tool(ToolCall::new(
        "fails",
        "S",
        json!({"ms": 5, "fail": "fatal"}),
    ));
    executor.add_tool(ToolCall::new("write", "W", json!({"ms": 5})));
    let first = results_of(&executor.drain().await);
    executor.add_tool(ToolCall::new("late", "S", json!({"ms": 5})));
    let late = results_of(&executor.drain().await);
    assert_eq!(first[0], ("fails".to_owned(), Outcome::CouldNotRun));
    let not_run = Outcome::SiblingFailed {
        failed: "fails".into(),
        failed_tool: "S".into(),
        was_running: false,
    };
    assert_eq!(first[1], ("write".to_owned(), not_run.clone()));
    assert_eq!(late, [("late".to_owned(), not_run)]);
    assert_eq!(tracker.spans().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn discard_drops_the_attempt_and_the_executor_serves_the_retry() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![sleepy("S", true, &tracker), sleepy("W", false, &tracker)],
        AbortPolicy::default(),
        &parent,
    );
    executor.add_tool(ToolCall::new("w1", "W", json!({"ms": 100})));
    executor.add_tool(ToolCall::new("s1", "S", json!({"ms": 1})));
    // Let w1 start, then drop the attempt.
    assert!(matches!(
        executor.next_event().await,
        Some(ExecutorEvent::Started { .. })
    ));
    tokio::time::sleep(Duration::from_millis(1)).await;
    let discarded = executor.discard();
    assert_eq!(
        discarded
            .iter()
            .map(|d| (d.tool_use_id.as_str(), d.had_started))
            .collect::<Vec<_>>(),
        [("w1", true), ("s1", false)]
    );
    assert!(executor.is_empty());
    executor.add_tool(ToolCall::new("w2", "W", json!({"ms": 3})));
    let events = executor.drain().await;
    assert_eq!(results_of(&events), [("w2".to_owned(), Outcome::Success)]);
    // w1 was cancelled; nothing of the old attempt leaked into the new one.
    let spans = tracker.spans();
    assert_eq!(
        spans.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["w1", "w2"]
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_executor_cancels_running_calls() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let mut executor = executor(
        vec![sleepy("S", true, &tracker)],
        AbortPolicy::default(),
        &parent,
    );
    executor.add_tool(ToolCall::new("long", "S", json!({"ms": 60_000})));
    assert!(matches!(
        executor.next_event().await,
        Some(ExecutorEvent::Started { .. })
    ));
    tokio::time::sleep(Duration::from_millis(1)).await;
    let start = Instant::now();
    drop(executor);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let spans = tracker.spans();
    assert_eq!(
        spans[0].2,
        Some(start),
        "the call ended when the executor was dropped"
    );
}

/// The live members of `group`, given up to 500 ms to die: SIGKILL is delivered
/// asynchronously, and only the group leader is waited for.
async fn group_after_kill(group: i32) -> Vec<i32> {
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    loop {
        let live = live_members(group);
        if live.is_empty() || std::time::Instant::now() > deadline {
            return live;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Processes of process group `group` that are alive (killed ones may linger as zombies
/// until their new parent reaps them; those count as dead).
fn live_members(group: i32) -> Vec<i32> {
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, pgrp, ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|pgrp| pgrp.parse::<i32>().ok()) == Some(group)
            && fields[0] != "Z"
        {
            live.push(pid);
        }
    }
    live
}

/// A temporary folder removed on drop.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> TempDir {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "executor-test-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

#[tokio::test(start_paused = true)]
async fn a_permission_denial_does_not_cascade_even_under_on_any_error() {
    let tracker = Arc::new(Tracker::default());
    let parent = CancellationToken::new();
    let gate = |call: &ToolCall, _: &dyn Tool| {
        if call.id.as_str() == "denied" {
            PermissionDecision::deny("not allowed")
        } else {
            PermissionDecision::allow()
        }
    };
    let mut executor = executor_with(
        vec![sleepy("Read", true, &tracker)],
        Arc::new(gate),
        ExecutorConfig {
            policy: AbortPolicy::OnAnyError,
            ..ExecutorConfig::default()
        },
        &parent,
    );
    executor.add_tool(ToolCall::new("denied", "Read", json!({"ms": 1})));
    executor.add_tool(ToolCall::new("slow", "Read", json!({"ms": 20})));
    assert_eq!(
        results_of(&executor.drain().await),
        [
            ("denied".to_owned(), Outcome::PermissionDenied),
            ("slow".to_owned(), Outcome::Success)
        ]
    );
}
