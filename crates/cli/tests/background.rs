//! Background commands end to end (Claude Code's `run_in_background`, `TaskOutput`,
//! `TaskStop`, task notifications): the real `agent` binary against testkit's scripted model.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{processes_running, repo, result_text, unique_sleep, wait_for_process};
use serde_json::json;
use testkit::{Reply, Script, Server, Turn};

/// A free TCP port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A dev server in the background: started, polled, used by a foreground command, stopped;
/// a second stop and an unknown id are clear errors.
#[tokio::test]
async fn a_background_server_is_started_polled_used_and_stopped() {
    let repo = repo("bg-server");
    let port = free_port();
    let serve = format!("python3 -u -m http.server {port} --bind 127.0.0.1");
    // The network is the user's to give (the commands share it when it is on).
    let config = repo.home.join("config/agent");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("settings.json"),
        json!({"sandbox": {"network": true}}).to_string(),
    )
    .unwrap();
    let fetch = format!(
        "for i in $(seq 50); do python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/notes.txt').read().decode())\" 2>/dev/null && break; sleep 0.1; done"
    );
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_start",
            "Bash",
            json!({"command": serve, "run_in_background": true, "description": "Serve the folder"}),
        )),
        Reply::turn(Turn::new().tool_use("toolu_use", "Bash", json!({"command": fetch}))),
        Reply::turn(Turn::new().tool_use(
            "toolu_poll",
            "TaskOutput",
            json!({"task_id": "bash_1", "block": false}),
        )),
        Reply::turn(Turn::new().tool_use("toolu_stop", "TaskStop", json!({"task_id": "bash_1"}))),
        Reply::turn(
            Turn::new()
                .tool_use("toolu_again", "TaskStop", json!({"task_id": "bash_1"}))
                .tool_use("toolu_unknown", "TaskOutput", json!({"task_id": "bash_9"})),
        ),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = common::command(&repo, &server)
        .args(["-p", "serve it", "--allowedTools", "Bash"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let started = result_text(&server, "toolu_start");
    assert!(
        started.contains("Command running in background with ID: bash_1"),
        "{started}"
    );
    assert!(
        result_text(&server, "toolu_use").contains("remember the milk"),
        "{stderr}"
    );
    let polled = result_text(&server, "toolu_poll");
    assert!(polled.contains("<status>running</status>"), "{polled}");
    assert!(polled.contains("<retrieval_status>not_ready"), "{polled}");
    // The server logged the request the foreground command made.
    assert!(polled.contains("GET /notes.txt"), "{polled}");
    assert!(
        result_text(&server, "toolu_stop").contains("Stopped background task bash_1"),
        "{stderr}"
    );
    let again = result_text(&server, "toolu_again");
    assert!(
        again.contains("background task bash_1 had already ended (killed)"),
        "{again}"
    );
    let unknown = result_text(&server, "toolu_unknown");
    assert!(
        unknown.contains("no background task bash_9; the tasks are bash_1"),
        "{unknown}"
    );
    assert!(
        processes_running(&format!(
            "python3 -u -m http.server {port} --bind 127.0.0.1"
        ))
        .is_empty()
    );
}

/// A background test run: its end reaches the model with the next request as a task
/// notification (id, status, the last lines), and its output file holds everything.
#[tokio::test]
async fn a_finished_background_task_is_told_with_the_next_request() {
    let repo = repo("bg-notify");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_tests",
            "Bash",
            json!({"command": "sleep 0.5; echo 12 passed; echo TESTS-DONE", "run_in_background": true}),
        )),
        Reply::turn(Turn::new().tool_use("toolu_wait", "Bash", json!({"command": "sleep 2"}))),
        Reply::turn(Turn::new().text("The tests passed.")),
    ]))
    .await
    .unwrap();
    let output = common::command(&repo, &server)
        .args(["-p", "test it", "--allowedTools", "Bash"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last = requests[2].json()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(last.contains("<task-notification>"), "{last}");
    assert!(last.contains("<task-id>bash_1</task-id>"), "{last}");
    assert!(last.contains("<status>completed</status>"), "{last}");
    assert!(
        last.contains("12 passed") && last.contains("TESTS-DONE"),
        "{last}"
    );
    // Told once: not in the request before (it was still running), the user saw a line.
    assert!(
        !requests[1]
            .json()
            .to_string()
            .contains("<task-notification>")
    );
    assert!(
        stderr.contains("Background command \"sleep 0.5; echo 12 passed; echo TESTS-DONE\" completed (exit code 0) (bash_1)"),
        "{stderr}"
    );
    let file = last
        .split("<output-file>")
        .nth(1)
        .and_then(|rest| rest.split("</output-file>").next())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(file).unwrap(),
        "12 passed\nTESTS-DONE\n"
    );
}

/// SIGKILL of the agent with three background tasks running leaves none of them, and the
/// session can be continued.
#[tokio::test]
async fn background_tasks_do_not_outlive_a_killed_agent() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let repo = repo("bg-killed");
    let sleeps: Vec<String> = (0..3).map(|tag| unique_sleep(40, 30 + tag)).collect();
    let mut turns: Vec<Reply> = sleeps
        .iter()
        .enumerate()
        .map(|(index, sleep)| {
            Reply::turn(Turn::new().tool_use(
                &format!("toolu_{index}"),
                "Bash",
                json!({"command": sleep, "run_in_background": true}),
            ))
        })
        .collect();
    turns.push(Reply::turn(Turn::new().tool_use(
        "toolu_hold",
        "Bash",
        json!({"command": "sleep 30"}),
    )));
    let server = Server::start_tls(Script::new(turns)).await.unwrap();
    let mut child = common::command(&repo, &server)
        .args(["-p", "start three", "--allowedTools", "Bash"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for sleep in &sleeps {
        wait_for_process(sleep).await;
    }
    kill(Pid::from_raw(child.id().unwrap() as i32), Signal::SIGKILL).unwrap();
    let _ = child.wait().await;
    let killed = Instant::now();
    let left = || -> Vec<i32> {
        sleeps
            .iter()
            .flat_map(|sleep| processes_running(sleep))
            .collect()
    };
    while !left().is_empty() && killed.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let survivors = left();
    for pid in &survivors {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    assert!(
        survivors.is_empty(),
        "background tasks outlived the agent by 3 s"
    );
    // The session goes on.
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("Back."))]))
        .await
        .unwrap();
    let output = common::command(&repo, &server)
        .args(["-p", "again", "--continue"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A headless run waits for its background tasks at most `AGENT_BACKGROUND_WAIT_MS`, then
/// stops the ones still running and says which; the exit code is the turn's.
#[tokio::test]
async fn a_headless_run_stops_what_is_still_running_at_its_end() {
    let repo = repo("bg-headless-end");
    let sleep = unique_sleep(40, 40);
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_s",
            "Bash",
            json!({"command": sleep, "run_in_background": true}),
        )),
        Reply::turn(Turn::new().text("Started.")),
    ]))
    .await
    .unwrap();
    let started = Instant::now();
    let output = common::command(&repo, &server)
        .env("AGENT_BACKGROUND_WAIT_MS", "300")
        .args(["-p", "start it", "--allowedTools", "Bash"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "stopped background task bash_1 (`{sleep}`, started"
        )),
        "{stderr}"
    );
    assert!(processes_running(&sleep).is_empty());
}

/// A subagent in the background: the Task call returns its id at once, the main agent goes
/// on for two more turns, and the subagent's report reaches it as a task notification.
#[tokio::test]
async fn a_background_subagents_report_arrives_later() {
    let repo = repo("bg-agent");
    let server = Server::start_tls(
        Script::new(vec![
            Reply::turn(Turn::new().tool_use(
                "toolu_task",
                "Task",
                json!({"description": "survey the code", "prompt": "SUB: look around", "run_in_background": true}),
            )),
            Reply::turn(Turn::new().tool_use("toolu_a", "Bash", json!({"command": "sleep 1"}))),
            Reply::turn(Turn::new().tool_use("toolu_b", "Bash", json!({"command": "sleep 1.5"}))),
            Reply::turn(Turn::new().text("Done.")),
        ])
        .route(
            "SUB:",
            vec![
                Reply::turn(Turn::new().tool_use("toolu_s", "Bash", json!({"command": "sleep 0.5"}))),
                Reply::turn(Turn::new().text("Found three modules.")),
            ],
        ),
    )
    .await
    .unwrap();
    let output = common::command(&repo, &server)
        .args(["-p", "look", "--allowedTools", "Bash"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let started = result_text(&server, "toolu_task");
    assert!(
        started.contains("started in the background with ID: agent_1"),
        "{started}"
    );
    let main: Vec<String> = server
        .requests()
        .iter()
        .map(|request| request.json())
        .filter(|request| {
            !request["messages"][0]
                .to_string()
                .contains("SUB: look around")
        })
        .map(|request| request.to_string())
        .collect();
    assert_eq!(main.len(), 4, "{stderr}");
    // Not with the Task's own result: it arrived with a later request, once.
    assert!(!main[1].contains("<task-notification>"));
    let told: Vec<&String> = main
        .iter()
        .filter(|request| request.contains("<task-id>agent_1</task-id>"))
        .collect();
    assert!(!told.is_empty(), "{stderr}");
    assert!(told[0].contains("Found three modules."), "{}", told[0]);
    assert!(
        told[0].contains("Agent \\\"survey the code\\\" completed"),
        "{}",
        told[0]
    );
}

/// Monitor: each line the command prints is an event, told with the next request as it
/// comes (only what is new), and the monitor is stopped at its deadline.
#[tokio::test]
async fn a_monitors_events_arrive_as_they_come_and_it_ends_at_its_deadline() {
    let repo = repo("bg-monitor");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_m",
            "Monitor",
            json!({"description": "watch the build", "command": "echo first; sleep 1; echo second; sleep 30", "timeout_ms": 3000}),
        )),
        Reply::turn(Turn::new().tool_use("toolu_1", "Bash", json!({"command": "sleep 0.5"}))),
        Reply::turn(Turn::new().tool_use("toolu_2", "Bash", json!({"command": "sleep 1.5"}))),
        Reply::turn(Turn::new().tool_use("toolu_3", "Bash", json!({"command": "sleep 2"}))),
        Reply::turn(Turn::new().text("Watched.")),
    ]))
    .await
    .unwrap();
    let output = common::command(&repo, &server)
        .args(["-p", "watch", "--allowedTools", "Bash,Monitor"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        result_text(&server, "toolu_m")
            .contains("Monitor started with ID: monitor_1, for at most 3000 ms"),
        "{stderr}"
    );
    let last_message = |index: usize| {
        server.requests()[index].json()["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .to_string()
    };
    let first = last_message(2);
    assert!(first.contains("<task-id>monitor_1</task-id>"), "{first}");
    assert!(
        first.contains("first") && !first.contains("second"),
        "{first}"
    );
    let second = last_message(3);
    assert!(
        second.contains("second") && !second.contains("first"),
        "{second}"
    );
    let ended = last_message(4);
    assert!(ended.contains("<status>killed</status>"), "{ended}");
}

/// stream-json reports each background task's start and end as Claude Code's `system`
/// `task_started` and `task_notification` messages, naming the tool_use that started it.
#[tokio::test]
async fn stream_json_reports_task_starts_and_ends() {
    let repo = repo("bg-stream");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_ok",
                    "Bash",
                    json!({"command": "echo fine", "run_in_background": true, "description": "quick check"}),
                )
                .tool_use(
                    "toolu_bad",
                    "Bash",
                    json!({"command": "exit 3", "run_in_background": true}),
                )
                .tool_use(
                    "toolu_late",
                    "Bash",
                    json!({"command": "sleep 2; echo late", "run_in_background": true}),
                ),
        ),
        Reply::turn(Turn::new().tool_use("toolu_wait", "Bash", json!({"command": "sleep 1"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = common::command(&repo, &server)
        .args([
            "-p",
            "check",
            "--allowedTools",
            "Bash",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines = common::lines(&output);
    let of = |subtype: &str, tool_use: &str| {
        lines
            .iter()
            .find(|line| line["subtype"] == subtype && line["tool_use_id"] == tool_use)
            .unwrap_or_else(|| panic!("no {subtype} for {tool_use}: {lines:?}"))
            .clone()
    };
    let started = of("task_started", "toolu_ok");
    assert_eq!(started["type"], "system");
    assert_eq!(started["task_type"], "local_bash");
    assert_eq!(started["description"], "quick check");
    assert_eq!(started["session_id"], lines[0]["session_id"]);
    let id = started["task_id"].as_str().unwrap().to_owned();
    let done = of("task_notification", "toolu_ok");
    assert_eq!(done["task_id"], id.as_str());
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["summary"],
        "Background command \"quick check\" completed (exit code 0)"
    );
    assert_eq!(
        std::fs::read_to_string(done["output_file"].as_str().unwrap()).unwrap(),
        "fine\n"
    );
    let failed = of("task_notification", "toolu_bad");
    assert_eq!(failed["status"], "failed");
    // Each start comes before its end, and both before the result: one that outlived the
    // turn was waited for, and the result is still the last line.
    let position = |line: &serde_json::Value| lines.iter().position(|l| l == line).unwrap();
    assert!(position(&started) < position(&done));
    assert_eq!(of("task_notification", "toolu_late")["status"], "completed");
    assert_eq!(lines.last().unwrap()["type"], "result");
}

/// Monitor's WebSocket form: each text frame of a server on this machine is an event told
/// with the next request, the socket's close ends the watch; a server elsewhere is refused
/// while commands have no network.
#[tokio::test]
async fn a_websocket_monitor_tells_each_frame() {
    use futures_util::SinkExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "ws://127.0.0.1:{}/events",
        listener.local_addr().unwrap().port()
    );
    let socket_server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut socket = tokio_tungstenite::accept_async(tcp).await.unwrap();
        for text in ["build started", "build done:\n3 warnings"] {
            socket.send(text.into()).await.unwrap();
        }
        socket
            .send(tokio_tungstenite::tungstenite::Message::Binary(
                vec![0u8; 5].into(),
            ))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        socket.close(None).await.unwrap();
    });
    let repo = repo("bg-ws");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(
            Turn::new()
                .tool_use(
                    "toolu_m",
                    "Monitor",
                    json!({"description": "dev server", "ws": {"url": url}}),
                )
                .tool_use(
                    "toolu_far",
                    "Monitor",
                    json!({"description": "far", "ws": {"url": "ws://192.0.2.1:9/"}}),
                ),
        ),
        Reply::turn(Turn::new().tool_use("toolu_1", "Bash", json!({"command": "sleep 0.5"}))),
        Reply::turn(Turn::new().tool_use("toolu_2", "Bash", json!({"command": "sleep 2"}))),
        Reply::turn(Turn::new().text("Watched.")),
    ]))
    .await
    .unwrap();
    let output = common::command(&repo, &server)
        .args(["-p", "watch", "--allowedTools", "Bash,Monitor"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    socket_server.await.unwrap();
    assert!(result_text(&server, "toolu_m").contains("Monitor started with ID: monitor_1"));
    let far = result_text(&server, "toolu_far");
    assert!(far.contains("only this machine's own servers"), "{far}");
    let told: String = server.requests()[2..]
        .iter()
        .map(|request| {
            request.json()["messages"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        told.contains("build started")
            && told.contains("build done: 3 warnings")
            && told.contains("[binary frame, 5 bytes]"),
        "{told}"
    );
    assert!(
        told.contains("Monitor \\\"dev server\\\" ended: the WebSocket closed"),
        "{told}"
    );
}

/// A background command no rule lets write runs in the read-only sandbox, and the model is
/// told so when it starts (nothing asks again when its writes fail, as in the foreground).
#[tokio::test]
async fn a_read_only_background_command_says_so() {
    let repo = repo("bg-read-only");
    let server = Server::start_tls(Script::new(vec![
        Reply::turn(Turn::new().tool_use(
            "toolu_ro",
            "Bash",
            json!({"command": "echo hi > out.txt", "run_in_background": true}),
        )),
        Reply::turn(Turn::new().tool_use("toolu_wait", "Bash", json!({"command": "sleep 1"}))),
        Reply::turn(Turn::new().text("Done.")),
    ]))
    .await
    .unwrap();
    let output = common::run(&repo, &server, &["-p", "write"]).await;
    assert!(output.status.success());
    let started = result_text(&server, "toolu_ro");
    assert!(
        started.contains("It runs in the read-only sandbox"),
        "{started}"
    );
    assert!(!repo.dir.join("out.txt").exists());
}
