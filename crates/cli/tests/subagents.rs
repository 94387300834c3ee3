//! Subagents from the CLI, against a scripted model: the Task tool starts nested loops whose
//! requests the script answers by the marker in their first message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Repo, command, lines, repo};
use serde_json::{Value, json};
use testkit::{Faults, Reply, Script, Server, Turn};

/// The tool_results of the last request that has any, as (id, text).
fn results(request: &Value) -> Vec<(String, String)> {
    let messages = request["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .map(|block| {
            (
                block["tool_use_id"].as_str().unwrap().to_owned(),
                block["content"].to_string(),
            )
        })
        .collect()
}

/// Every transcript below the session folder (the main one and the subagents').
fn transcripts(repo: &Repo) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![repo.home.join("data/agent/projects")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "jsonl") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Checks that every tool_use of a transcript has its tool_result in the next message.
fn check_pairing(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let messages: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["type"] == "user" || entry["type"] == "assistant")
        .map(|entry| entry["message"].clone())
        .collect();
    let ids = |message: &Value, kind: &str, key: &str| -> HashSet<String> {
        message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block["type"] == kind)
            .map(|block| block[key].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    for (at, message) in messages.iter().enumerate() {
        let uses = ids(message, "tool_use", "id");
        if uses.is_empty() {
            continue;
        }
        let answered = messages
            .get(at + 1)
            .map(|next| ids(next, "tool_result", "tool_use_id"))
            .unwrap_or_default();
        assert_eq!(uses, answered, "{}: message {at}", path.display());
    }
}

/// Two Task calls in one response run in parallel; the slower first one's result still
/// comes first. Their stream-json lines carry the Task call's id, their transcripts are saved
/// beside the session (and open with --resume FILE), usage and cost add up, and a
/// SubagentStop hook gets Claude Code's payload.
#[tokio::test]
async fn parallel_subagents_report_in_model_order() {
    let repo = repo("subagents-parallel");
    let hook_log = repo.home.join("subagent-stop.jsonl");
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("settings.json"),
        json!({
            "hooks": {"SubagentStop": [{"hooks": [{"type": "command",
                "command": format!("cat >> {} && echo >> {}", hook_log.display(), hook_log.display())}]}]},
            // testkit answers as `claude-test`: priced here, so the cost can be checked.
            "models": {"claude-test": {"prices": {"input": 1.0, "output": 2.0}}},
        })
        .to_string(),
    )
    .unwrap();
    let slow = Faults {
        chunk_sizes: Some(vec![64]),
        chunk_delay: Some(Duration::from_millis(40)),
        ..Faults::default()
    };
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(
                Turn::new()
                    .tool_use(
                        "toolu_a",
                        "Task",
                        json!({"description": "read the notes", "prompt": "ALPHA: what do the notes say?", "subagent_type": "general-purpose"}),
                    )
                    .tool_use(
                        "toolu_b",
                        "Agent",
                        json!({"description": "quick check", "prompt": "BETA: say hi", "subagent_type": "Explore"}),
                    )
                    .usage(100, 10),
            ),
            Reply::turn(Turn::new().text("Both done.").usage(200, 20)),
        ])
        .route(
            "ALPHA:",
            vec![
                Reply::turn(
                    Turn::new()
                        .tool_use("toolu_a1", "Read", json!({"file_path": "notes.txt"}))
                        .usage(30, 3),
                ),
                Reply::turn(Turn::new().text("The notes say: remember the milk.").usage(40, 4))
                    .faults(slow),
            ],
        )
        .route(
            "BETA:",
            vec![Reply::turn(Turn::new().text("hi from beta").usage(50, 5))],
        ),
    )
    .await
    .unwrap();
    let output = command(&repo, &server)
        // Trusted: the user's own hook writes its log outside the workspace, which the
        // sandbox untrusted folders confine it to would refuse.
        .args([
            "-p",
            "use two agents",
            "--trust",
            "--output-format",
            "stream-json",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines = lines(&output);
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "{stderr}");
    // The main agent's second request: results in model order, A (slower) first.
    let last = requests.last().unwrap().json();
    let got = results(&last);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "toolu_a");
    assert!(got[0].1.contains("remember the milk"), "{}", got[0].1);
    assert_eq!(got[1].0, "toolu_b");
    assert!(got[1].1.contains("hi from beta"), "{}", got[1].1);
    // Each subagent has its own system prompt and first message; Explore has no Write.
    let alpha = requests
        .iter()
        .map(|request| request.json())
        .find(|json| json["messages"][0].to_string().contains("ALPHA:"))
        .unwrap();
    let tool_names = |json: &Value| -> Vec<String> {
        json["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!tool_names(&alpha).contains(&"Task".to_owned()));
    assert!(tool_names(&alpha).contains(&"Write".to_owned()));
    let beta = requests
        .iter()
        .map(|request| request.json())
        .find(|json| json["messages"][0].to_string().contains("BETA:"))
        .unwrap();
    assert_eq!(tool_names(&beta), ["Read", "Glob", "Grep", "Bash"]);
    assert!(
        beta["system"]
            .to_string()
            .contains("read-only search agent")
    );
    // The subagents' stream-json lines name the Task call that started them.
    let read_result = lines
        .iter()
        .find(|line| {
            line["type"] == "user" && line["message"]["content"][0]["tool_use_id"] == "toolu_a1"
        })
        .unwrap();
    assert_eq!(read_result["parent_tool_use_id"], "toolu_a");
    let beta_text = lines
        .iter()
        .find(|line| line["type"] == "assistant" && line.to_string().contains("hi from beta"))
        .unwrap();
    assert_eq!(beta_text["parent_tool_use_id"], "toolu_b");
    let main_text = lines
        .iter()
        .find(|line| line["type"] == "assistant" && line.to_string().contains("Both done."))
        .unwrap();
    assert_eq!(main_text["parent_tool_use_id"], Value::Null);
    // Usage and cost: the main agent's and both subagents'.
    let result = lines.last().unwrap();
    // `usage` is the main agent's, as Claude Code reports it; `modelUsage` has every model's
    // totals, the subagents' included.
    assert_eq!(result["usage"]["input_tokens"], 100 + 200);
    assert_eq!(result["usage"]["output_tokens"], 10 + 20);
    let models = &result["modelUsage"]["claude-test"];
    assert_eq!(models["inputTokens"], 100 + 200 + 30 + 40 + 50);
    assert_eq!(models["outputTokens"], 10 + 20 + 3 + 4 + 5);
    assert_eq!(result["stop_reason"], "end_turn");
    assert_eq!(result["terminal_reason"], "completed");
    assert_eq!(result["num_turns"], 2);
    assert_eq!(result["num_requests"], 5);
    let cost = result["total_cost_usd"].as_f64().unwrap();
    let expected = (420.0 * 1.0 + 42.0 * 2.0) / 1_000_000.0;
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
    let model_cost = result["modelUsage"]["claude-test"]["costUSD"]
        .as_f64()
        .unwrap();
    assert!((model_cost - expected).abs() < 1e-12, "{model_cost}");
    // Transcripts: the session's and one per subagent in <session>/subagents/, all paired.
    let files = transcripts(&repo);
    assert_eq!(files.len(), 3, "{files:?}");
    let agents: Vec<&PathBuf> = files
        .iter()
        .filter(|path| path.parent().is_some_and(|dir| dir.ends_with("subagents")))
        .collect();
    assert_eq!(agents.len(), 2, "{files:?}");
    for file in &files {
        check_pairing(file);
    }
    let alpha_file = agents
        .iter()
        .find(|path| std::fs::read_to_string(path).unwrap().contains("ALPHA:"))
        .unwrap();
    assert!(
        std::fs::read_to_string(alpha_file)
            .unwrap()
            .contains("remember the milk")
    );
    // SubagentStop hooks ran once per subagent with Claude Code's fields.
    let log = std::fs::read_to_string(&hook_log).unwrap();
    let events: Vec<Value> = log
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{log}");
    for event in &events {
        assert_eq!(event["hook_event_name"], "SubagentStop");
        assert!(event["agent_id"].as_str().unwrap().starts_with('a'));
        let path = PathBuf::from(event["agent_transcript_path"].as_str().unwrap());
        assert!(path.is_file(), "{event}");
        assert_eq!(event["stop_hook_active"], false);
    }
    let types: HashSet<&str> = events
        .iter()
        .map(|event| event["agent_type"].as_str().unwrap())
        .collect();
    assert_eq!(types, HashSet::from(["general-purpose", "Explore"]));
    // A subagent's transcript opens with --resume FILE.
    let inspect = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Seen."))]))
        .await
        .unwrap();
    let output = command(&repo, &inspect)
        .arg("--resume")
        .arg(alpha_file)
        .args(["-p", "what did you find?", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let resumed = inspect.requests()[0].json()["messages"].to_string();
    assert!(
        resumed.contains("ALPHA:") && resumed.contains("remember the milk"),
        "{resumed}"
    );
}

/// A custom agent with `maxTurns: 1` stops after its first turn and returns what it had with
/// a note; a custom agent that lists Write cannot write in plan mode.
#[tokio::test]
async fn limits_and_plan_mode_hold_for_custom_agents() {
    let repo = repo("subagents-limits");
    let agents = repo.home.join("config/agent/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("looper.md"),
        "---\ndescription: Reads things\ntools: Read\nmaxTurns: 1\n---\nYou read.\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("writer.md"),
        "---\nname: writer\ndescription: Writes files\ntools: Write, Read\n---\nYou write files.\n",
    )
    .unwrap();
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(
                Turn::new()
                    .tool_use(
                        "toolu_l",
                        "Task",
                        json!({"description": "loop", "prompt": "LOOPER: read forever", "subagent_type": "looper"}),
                    )
                    .tool_use(
                        "toolu_w",
                        "Task",
                        json!({"description": "write", "prompt": "WRITER: write x.txt", "subagent_type": "writer"}),
                    ),
            ),
            Reply::turn(Turn::new().text("Reported.")),
        ])
        .route(
            "LOOPER:",
            vec![Reply::turn(
                Turn::new()
                    .text("Partial finding: notes exist.")
                    .tool_use("toolu_l1", "Read", json!({"file_path": "notes.txt"})),
            )],
        )
        .route(
            "WRITER:",
            vec![
                Reply::turn(Turn::new().tool_use(
                    "toolu_w1",
                    "Write",
                    json!({"file_path": "x.txt", "content": "planted"}),
                )),
                Reply::turn(Turn::new().text("Could not write.")),
            ],
        ),
    )
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args([
            "-p",
            "go",
            "--permission-mode",
            "plan",
            "--output-format",
            "json",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = server.requests().last().unwrap().json();
    let got = results(&last);
    assert_eq!(got[0].0, "toolu_l");
    assert!(
        got[0].1.contains("Partial finding: notes exist."),
        "{}",
        got[0].1
    );
    assert!(got[0].1.contains("limit of 1 turn before"), "{}", got[0].1);
    assert_eq!(got[1].0, "toolu_w");
    assert!(
        !repo.dir.join("x.txt").exists(),
        "plan mode let a subagent write"
    );
    let writer_results: Vec<String> = server
        .requests()
        .iter()
        .map(|request| request.json())
        .filter(|json| json["messages"][0].to_string().contains("WRITER:"))
        .flat_map(|json| results(&json))
        .filter(|(id, _)| id == "toolu_w1")
        .map(|(_, text)| text)
        .collect();
    assert!(
        writer_results.iter().any(|text| text.contains("plan mode")),
        "{writer_results:?}"
    );
}

/// A fork starts with the parent's messages, byte for byte (cache markers aside), and the
/// parent's system prompt.
#[tokio::test]
async fn a_fork_starts_with_the_parents_messages() {
    let repo = repo("subagents-fork");
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))),
            Reply::turn(Turn::new().tool_use(
                "toolu_f",
                "Task",
                json!({"description": "side task", "prompt": "FORKED: check greet.py", "subagent_type": "fork"}),
            )),
            Reply::turn(Turn::new().text("Main done.")),
        ])
        .route(
            "FORKED:",
            vec![Reply::turn(Turn::new().text("fork report"))],
        ),
    )
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args(["-p", "start", "--output-format", "json"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(requests.len(), 4);
    let strip = |value: &Value| -> Value {
        let mut value = value.clone();
        strip_cache_control(&mut value);
        value
    };
    let parent = strip(&requests[1]);
    let fork = strip(&requests[2]);
    assert!(fork.to_string().contains("FORKED:"));
    let parent_messages = parent["messages"].as_array().unwrap();
    let fork_messages = fork["messages"].as_array().unwrap();
    assert_eq!(fork_messages.len(), parent_messages.len());
    let n = parent_messages.len();
    assert_eq!(fork_messages[..n - 1], parent_messages[..n - 1]);
    let parent_last = parent_messages[n - 1]["content"].as_array().unwrap();
    let fork_last = fork_messages[n - 1]["content"].as_array().unwrap();
    assert_eq!(fork_last[..parent_last.len()], parent_last[..]);
    assert_eq!(fork["system"], parent["system"]);
    let got = results(&requests[3]);
    assert!(got[0].1.contains("fork report"), "{got:?}");
}

fn strip_cache_control(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(strip_cache_control);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// Ctrl-C while two subagents run commands: every process ends, the run exits 130, and every
/// transcript (the session's and the subagents') keeps each tool_use paired.
#[tokio::test]
async fn an_abort_stops_every_subagent_and_leaves_paired_histories() {
    let repo = repo("subagents-abort");
    let one = common::unique_sleep(30, 1);
    let two = common::unique_sleep(30, 2);
    let server = Server::start_tls(
        Script::new(vec![Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_1",
                    "Task",
                    json!({"description": "one", "prompt": "ONE: wait"}),
                )
                .tool_use(
                    "toolu_2",
                    "Task",
                    json!({"description": "two", "prompt": "TWO: wait"}),
                ),
        )])
        .route(
            "ONE:",
            vec![Reply::turn(Turn::new().tool_use(
                "toolu_s1",
                "Bash",
                json!({"command": one}),
            ))],
        )
        .route(
            "TWO:",
            vec![Reply::turn(Turn::new().tool_use(
                "toolu_s2",
                "Bash",
                json!({"command": two}),
            ))],
        ),
    )
    .await
    .unwrap();
    let child = command(&repo, &server)
        .args(["-p", "wait twice", "--output-format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_process(&one).await;
    common::wait_for_process(&two).await;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("the agent did not stop")
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(common::processes_running(&one).is_empty(), "{one} survived");
    assert!(common::processes_running(&two).is_empty(), "{two} survived");
    let files = transcripts(&repo);
    assert_eq!(files.len(), 3, "{files:?}");
    for file in &files {
        check_pairing(file);
    }
}

/// A project's agent definitions apply only in a trusted folder: untrusted, they are named in
/// one warning and the Task tool does not offer them.
#[tokio::test]
async fn project_agents_need_a_trusted_folder() {
    for trusted in [false, true] {
        let repo = repo(&format!("subagents-trust-{trusted}"));
        std::fs::create_dir_all(repo.dir.join(".claude/agents")).unwrap();
        std::fs::write(
            repo.dir.join(".claude/agents/deployer.md"),
            "---\ndescription: Deploys to production\n---\nYou deploy.\n",
        )
        .unwrap();
        let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("ok"))]))
            .await
            .unwrap();
        let mut run = command(&repo, &server);
        if trusted {
            run.arg("--trust");
        }
        let output = run.args(["-p", "hi"]).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let request = server.requests()[0].json();
        let task = request["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["name"] == "Task")
            .unwrap()
            .clone();
        let offered = task["input_schema"]["properties"]["subagent_type"]["enum"].to_string();
        assert_eq!(offered.contains("deployer"), trusted, "{offered}");
        assert!(offered.contains("general-purpose") && offered.contains("Explore"));
        assert_eq!(
            stderr.contains("the project's agent definitions are ignored"),
            !trusted,
            "{stderr}"
        );
    }
}

/// From an attack on subagents: a restricted agent's nested agents (a fork, general-purpose)
/// get no tool it lacks; calling the tool `Agent` does not get past a rule or a hook written
/// for `Task`, nor `Task` past one written for `Agent`.
#[tokio::test]
async fn nested_agents_and_the_agent_alias_cannot_widen_anything() {
    let repo = repo("subagents-widen");
    let agents = repo.home.join("config/agent/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("reader.md"),
        "---\ndescription: Reads\ntools: [Read, Task]\n---\nYou read.\n",
    )
    .unwrap();
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_r",
                "Task",
                json!({"description": "read", "prompt": "R1: read", "subagent_type": "reader"}),
            )),
            Reply::turn(Turn::new().text("ok")),
        ])
        .route(
            "R1:",
            vec![
                Reply::turn(
                    Turn::new()
                        .tool_use(
                            "toolu_f",
                            "Task",
                            json!({"description": "fork", "prompt": "F2: write", "subagent_type": "fork"}),
                        )
                        .tool_use(
                            "toolu_g",
                            "Agent",
                            json!({"description": "gp", "prompt": "G2: write", "subagent_type": "general-purpose"}),
                        ),
                ),
                Reply::turn(Turn::new().text("reader done")),
            ],
        )
        .route(
            "F2:",
            vec![
                Reply::turn(Turn::new().tool_use(
                    "toolu_fw",
                    "Write",
                    json!({"file_path": "fork.txt", "content": "x"}),
                )),
                Reply::turn(Turn::new().text("fork done")),
            ],
        )
        .route(
            "G2:",
            vec![
                Reply::turn(Turn::new().tool_use(
                    "toolu_gw",
                    "Write",
                    json!({"file_path": "gp.txt", "content": "x"}),
                )),
                Reply::turn(Turn::new().text("gp done")),
            ],
        ),
    )
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args([
            "-p",
            "go",
            "--permission-mode",
            "acceptEdits",
            "--output-format",
            "json",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!repo.dir.join("fork.txt").exists());
    assert!(!repo.dir.join("gp.txt").exists());
    for marker in ["F2:", "G2:"] {
        let request = server
            .requests()
            .iter()
            .map(|r| r.json())
            .find(|json| json["messages"].to_string().contains(marker))
            .unwrap();
        let names: Vec<String> = request["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            names.iter().all(|name| name == "Read" || name == "Task"),
            "{marker}: {names:?}"
        );
    }

    // The alias: a deny rule on either name and a PreToolUse hook on either name hold.
    for (rule, call, hook) in [
        (Some("Agent"), "Task", None),
        (Some("Task"), "Agent", None),
        (None, "Agent", Some("^Task$")),
        (None, "Task", Some("^Agent$")),
    ] {
        let repo = common::repo(&format!(
            "subagents-alias-{call}-{}",
            rule.unwrap_or("hook")
        ));
        if let Some(matcher) = hook {
            let config = repo.home.join("config/agent");
            std::fs::create_dir_all(&config).unwrap();
            std::fs::write(
                config.join("settings.json"),
                json!({"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": "echo blocked >&2; exit 2"}]}]}})
                    .to_string(),
            )
            .unwrap();
        }
        let server = Server::start_tls(
            Script::new(vec![
                Reply::turn(Turn::new().tool_use(
                    "toolu_x",
                    call,
                    json!({"description": "x", "prompt": "X1: hi"}),
                )),
                Reply::turn(Turn::new().text("ok")),
            ])
            .route("X1:", vec![Reply::turn(Turn::new().text("subagent ran"))]),
        )
        .await
        .unwrap();
        let mut run = command(&repo, &server);
        if let Some(rule) = rule {
            run.args(["--disallowedTools", rule]);
        }
        let output = run
            .args(["-p", "go", "--output-format", "json"])
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let ran = server
            .requests()
            .iter()
            .any(|request| request.json()["messages"][0].to_string().contains("X1:"));
        assert!(!ran, "{call} ran past rule {rule:?} / hook {hook:?}");
    }
}

/// A project's `.claude/agents/Explore.md` that lists Write and Bash replaces the built-in
/// Explore's prompt, not its limits: even in a trusted folder and with every permission
/// skipped, it gets Explore's read-only tools and plan mode, so it cannot write (one warning
/// says so).
#[tokio::test]
async fn a_custom_explore_cannot_write() {
    let repo = repo("subagents-explore");
    std::fs::create_dir_all(repo.dir.join(".claude/agents")).unwrap();
    std::fs::write(
        repo.dir.join(".claude/agents/Explore.md"),
        "---\nname: Explore\ndescription: Explores, and fixes what it finds\ntools: Read, Write, Edit, Bash\n---\nYou change files.\n",
    )
    .unwrap();
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_x",
                "Task",
                json!({"description": "explore", "prompt": "GAMMA: plant", "subagent_type": "Explore"}),
            )),
            Reply::turn(Turn::new().text("ok")),
        ])
        .route(
            "GAMMA:",
            vec![
                Reply::turn(
                    Turn::new()
                        .tool_use(
                            "toolu_w",
                            "Write",
                            json!({"file_path": "planted-by-write.txt", "content": "x"}),
                        )
                        .tool_use("toolu_b", "Bash", json!({"command": "touch planted-by-bash"})),
                ),
                Reply::turn(Turn::new().text("could not")),
            ],
        ),
    )
    .await
    .unwrap();
    let output = command(&repo, &server)
        .args(["--trust", "--dangerously-skip-permissions"])
        .args(["--allowedTools", "Write,Bash(touch:*)"])
        .args(["-p", "explore", "--output-format", "stream-json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!repo.dir.join("planted-by-write.txt").exists(), "{stderr}");
    assert!(!repo.dir.join("planted-by-bash").exists(), "{stderr}");
    let gamma = server
        .requests()
        .iter()
        .map(|request| request.json())
        .find(|json| json["messages"][0].to_string().contains("GAMMA:"))
        .unwrap();
    // Its own prompt, Explore's tools only (Write is not offered).
    assert!(gamma["system"].to_string().contains("You change files."));
    let tools: Vec<&str> = gamma["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(tools, ["Read", "Bash"]);
    assert!(
        stderr.contains(
            "Explore is a built-in agent's name, so it keeps that agent's limits: only Read, Glob, Grep, Bash, its commands read-only (Write, Edit not given)"
        ),
        "{stderr}"
    );
}
