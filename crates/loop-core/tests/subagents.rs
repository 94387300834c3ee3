//! The Task tool's nested loops on a paused clock, with a scripted model per conversation and
//! a host that builds each subagent from the test's definitions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex, Weak};

use loop_core::subagent::{
    AgentDefinition, AgentSource, ChildRun, Spawn, SubagentHost, TASK_TOOL, TaskScope, TaskTool,
};
use loop_core::{LoopConfig, LoopEvent, LoopOutcome, Terminal};
use protocol::{MessageParam, StopReason};
use serde_json::json;
use testkit::model::*;

/// Picks each subagent's model by the marker in its prompt; adds a Task tool whenever the
/// definition lists it (depth is left to the tool, so its own limit is what is tested).
struct Host {
    models: Vec<(&'static str, Arc<ScriptedModel>)>,
    definitions: Arc<[AgentDefinition]>,
    log: ProbeLog,
    /// (agent id, depth, events seen, finished)
    seen: Mutex<Vec<(String, u32, usize, bool)>>,
    /// Subagents started and not finished, now and at most.
    live: Mutex<(usize, usize)>,
    running: Arc<[Arc<tokio::sync::Semaphore>]>,
    me: Weak<Host>,
}

impl Host {
    fn new(
        models: Vec<(&'static str, Arc<ScriptedModel>)>,
        definitions: Vec<AgentDefinition>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            models,
            definitions: definitions.into(),
            log: log(),
            seen: Mutex::new(Vec::new()),
            live: Mutex::new((0, 0)),
            running: TaskScope::limits(),
            me: me.clone(),
        })
    }

    fn task(&self, parent: LoopConfig, depth: u32) -> Arc<dyn executor::Tool> {
        let host: Arc<dyn SubagentHost> = self.me.upgrade().unwrap();
        Arc::new(TaskTool::new(
            host,
            TaskScope {
                definitions: Arc::clone(&self.definitions),
                parent,
                depth,
                fork_point: None,
                parent_tools: None,
                running: Arc::clone(&self.running),
            },
        ))
    }
}

impl SubagentHost for Host {
    fn start(
        &self,
        spawn: &Spawn,
        parent: &LoopConfig,
        messages: &[MessageParam],
    ) -> Result<ChildRun, String> {
        let text = format!("{messages:?}");
        let model = self
            .models
            .iter()
            .find(|(marker, _)| text.contains(marker))
            .map(|(_, model)| Arc::clone(model))
            .ok_or("no model for this prompt")?;
        let mut config = parent.clone();
        config.max_turns = None;
        config.system = vec![spawn.definition.system_prompt.clone()];
        let mut tools = vec![Probe::tool("Read", true, &self.log)];
        if spawn.definition.allows(TASK_TOOL) {
            tools.push(self.task(config.clone(), spawn.depth + 1));
        }
        self.seen
            .lock()
            .unwrap()
            .push((spawn.agent_id.clone(), spawn.depth, 0, false));
        let mut live = self.live.lock().unwrap();
        live.0 += 1;
        live.1 = live.1.max(live.0);
        Ok(ChildRun {
            config,
            deps: deps(model, tools),
        })
    }

    fn event(&self, spawn: &Spawn, _event: &LoopEvent) {
        if let Some(entry) = self
            .seen
            .lock()
            .unwrap()
            .iter_mut()
            .find(|e| e.0 == spawn.agent_id)
        {
            entry.2 += 1;
        }
    }

    fn finished(&self, spawn: &Spawn, _outcome: &LoopOutcome) {
        self.live.lock().unwrap().0 -= 1;
        if let Some(entry) = self
            .seen
            .lock()
            .unwrap()
            .iter_mut()
            .find(|e| e.0 == spawn.agent_id)
        {
            entry.3 = true;
        }
    }
}

fn agent(name: &str, tools: Option<&[&str]>, max_turns: Option<u32>) -> AgentDefinition {
    AgentDefinition {
        name: name.to_owned(),
        description: format!("{name} agent"),
        system_prompt: format!("You are {name}."),
        tools: tools.map(|tools| tools.iter().map(|t| (*t).to_owned()).collect()),
        model: None,
        max_turns,
        source: AgentSource::User,
    }
}

async fn run_parent(host: &Arc<Host>, parent: Arc<ScriptedModel>) -> LoopOutcome {
    let config = LoopConfig::for_model("claude-sonnet-4-5");
    let tools = vec![host.task(config.clone(), 1)];
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    loop_core::run_loop(
        config,
        deps(parent, tools),
        vec![MessageParam::user_text("go")],
        sender,
        tokio_util::sync::CancellationToken::new(),
    )
    .await
}

fn task(id: &str, prompt: &str, kind: &str) -> (String, serde_json::Value) {
    (
        id.to_owned(),
        json!({"description": id, "prompt": prompt, "subagent_type": kind}),
    )
}

/// Two subagents; the first answers 500 ms later than the second: results in model order,
/// every event handed to the host, both finished.
#[tokio::test(start_paused = true)]
async fn parallel_subagents_answer_in_model_order() {
    let slow = ScriptedModel::from_list(vec![
        Reply::new()
            .sleep(500)
            .text("alpha done")
            .end(StopReason::EndTurn),
    ]);
    let fast = ScriptedModel::from_list(vec![
        Reply::new().text("beta done").end(StopReason::EndTurn),
    ]);
    let (a, a_input) = task("toolu_a", "ALPHA", "worker");
    let (b, b_input) = task("toolu_b", "BETA", "worker");
    let parent = ScriptedModel::from_list(vec![
        Reply::new()
            .tool(&a, "Task", a_input)
            .tool(&b, "Agent", b_input)
            .end(StopReason::ToolUse),
        Reply::new().text("both").end(StopReason::EndTurn),
    ]);
    let host = Host::new(
        vec![("ALPHA", Arc::clone(&slow)), ("BETA", Arc::clone(&fast))],
        vec![agent("worker", Some(&["Read"]), None)],
    );
    let outcome = run_parent(&host, Arc::clone(&parent)).await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let results = last_results(&parent.request(1));
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].0, "toolu_a");
    assert!(results[0].1.contains("alpha done"), "{results:?}");
    assert_eq!(results[1].0, "toolu_b");
    assert!(results[1].1.contains("beta done"), "{results:?}");
    // The second finished first: it was asked, and answered, while the first slept.
    let alpha_done = slow.stream_done.lock().unwrap()[0];
    let beta_done = fast.stream_done.lock().unwrap()[0];
    assert!(beta_done < alpha_done);
    let seen = host.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|(_, depth, events, finished)| *depth == 1 && *events > 3 && *finished)
    );
}

/// A subagent at its max turns returns what it had, with a note.
#[tokio::test(start_paused = true)]
async fn a_subagent_at_its_max_turns_returns_its_partial_text() {
    let child = ScriptedModel::new(|n, _| {
        Reply::new()
            .text(&format!("partial {n}"))
            .tool(&format!("r{n}"), "Read", json!({}))
            .end(StopReason::ToolUse)
    });
    let (id, input) = task("toolu_t", "LOOP", "looper");
    let parent = ScriptedModel::from_list(vec![
        Reply::new()
            .tool(&id, "Task", input)
            .end(StopReason::ToolUse),
        Reply::new().text("ok").end(StopReason::EndTurn),
    ]);
    let host = Host::new(
        vec![("LOOP", Arc::clone(&child))],
        vec![agent("looper", Some(&["Read"]), Some(2))],
    );
    run_parent(&host, Arc::clone(&parent)).await;
    assert_eq!(child.request_count(), 2);
    let results = last_results(&parent.request(1));
    assert!(results[0].1.contains("partial 1"), "{results:?}");
    assert!(results[0].1.contains("limit of 2 turns"), "{results:?}");
}

/// Nesting stops at depth 2: a depth-2 subagent's Task call is refused.
#[tokio::test(start_paused = true)]
async fn nesting_stops_at_depth_two() {
    let level = |marker: &'static str, next: &'static str| {
        ScriptedModel::from_list(vec![
            Reply::new()
                .tool(
                    &format!("toolu_{marker}"),
                    "Task",
                    json!({"description": "deeper", "prompt": next, "subagent_type": "nester"}),
                )
                .end(StopReason::ToolUse),
            Reply::new()
                .text(&format!("{marker} done"))
                .end(StopReason::EndTurn),
        ])
    };
    let one = level("ONE", "TWO");
    let two = level("TWO", "THREE");
    let parent = ScriptedModel::from_list(vec![
        Reply::new()
            .tool(
                "toolu_0",
                "Task",
                json!({"description": "start", "prompt": "ONE", "subagent_type": "nester"}),
            )
            .end(StopReason::ToolUse),
        Reply::new().text("done").end(StopReason::EndTurn),
    ]);
    let host = Host::new(
        vec![("ONE", Arc::clone(&one)), ("TWO", Arc::clone(&two))],
        vec![agent("nester", Some(&["Read", "Task"]), None)],
    );
    run_parent(&host, Arc::clone(&parent)).await;
    let depths: Vec<u32> = host.seen.lock().unwrap().iter().map(|e| e.1).collect();
    assert_eq!(depths, [1, 2]);
    let refused = last_results(&two.request(1));
    assert!(refused[0].1.contains("nest at most 2 deep"), "{refused:?}");
}

/// Twelve Task calls in one response: at most ten subagents run at once, all twelve answer,
/// in model order; `--max-turns` of the parent bounds each subagent too.
#[tokio::test(start_paused = true)]
async fn at_most_ten_subagents_run_at_once_and_the_parents_turn_limit_holds() {
    let child = ScriptedModel::new(|_, _| {
        Reply::new()
            .sleep(100)
            .text("done")
            .end(StopReason::EndTurn)
    });
    let mut first = Reply::new();
    for i in 0..12 {
        first = first.tool(
            &format!("toolu_{i:02}"),
            "Task",
            json!({"description": "work", "prompt": format!("WORK {i}"), "subagent_type": "worker"}),
        );
    }
    let parent = ScriptedModel::from_list(vec![
        first.end(StopReason::ToolUse),
        Reply::new().text("all done").end(StopReason::EndTurn),
    ]);
    let host = Host::new(
        vec![("WORK", Arc::clone(&child))],
        vec![agent("worker", Some(&["Read"]), None)],
    );
    run_parent(&host, Arc::clone(&parent)).await;
    assert_eq!(host.live.lock().unwrap().1, 10);
    let results = last_results(&parent.request(1));
    let ids: Vec<String> = results.iter().map(|(id, _)| id.clone()).collect();
    let expected: Vec<String> = (0..12).map(|i| format!("toolu_{i:02}")).collect();
    assert_eq!(ids, expected);
    assert!(results.iter().all(|(_, text)| text.contains("done")));

    // A parent limited to 2 turns: a subagent that would go on stops at 2 as well.
    let looping = ScriptedModel::new(|n, _| {
        Reply::new()
            .tool(&format!("r{n}"), "Read", json!({}))
            .end(StopReason::ToolUse)
    });
    let (id, input) = task("toolu_t", "LOOP", "worker");
    let limited = ScriptedModel::from_list(vec![
        Reply::new()
            .tool(&id, "Task", input)
            .end(StopReason::ToolUse),
        Reply::new().text("ok").end(StopReason::EndTurn),
    ]);
    let host = Host::new(
        vec![("LOOP", Arc::clone(&looping))],
        vec![agent("worker", Some(&["Read"]), None)],
    );
    let mut config = LoopConfig::for_model("claude-sonnet-4-5");
    config.max_turns = Some(2);
    let tools = vec![host.task(config.clone(), 1)];
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    loop_core::run_loop(
        config,
        deps(Arc::clone(&limited), tools),
        vec![MessageParam::user_text("go")],
        sender,
        tokio_util::sync::CancellationToken::new(),
    )
    .await;
    assert_eq!(looping.request_count(), 2);
    assert!(
        last_results(&limited.request(1))[0]
            .1
            .contains("limit of 2 turns")
    );
}
