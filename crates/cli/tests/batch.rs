//! `agent batch` against a scripted model: many tasks over several repositories at once,
//! results written as each ends, reruns that go on where the batch stopped, shards.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// The tasks file: `count` tasks over `repos` in turn, task `i`'s prompt holding the
/// marker `TASK-i:`; tasks in `writes` write a file (acceptEdits), the others answer.
fn tasks_file(dir: &Path, repos: &[&Path], count: usize, writes: &[usize]) -> std::path::PathBuf {
    let mut text = String::new();
    for i in 0..count {
        let mut task = json!({
            "id": format!("t{i}"),
            "repo": repos[i % repos.len()],
            "prompt": format!("TASK-{i}: do the thing"),
        });
        if writes.contains(&i) {
            task["permission_mode"] = json!("acceptEdits");
        }
        text.push_str(&task.to_string());
        text.push('\n');
    }
    let path = dir.join("tasks.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

/// A script answering each task by its marker: a Write then text for `writes`, an API
/// error for `failing`, text for the rest.
fn script(count: usize, writes: &[usize], failing: &[usize]) -> Script {
    routes(Script::new(Vec::new()), count, writes, failing)
}

/// `script` with the routes of [`script`] added (routes added earlier answer first).
fn routes(mut script: Script, count: usize, writes: &[usize], failing: &[usize]) -> Script {
    for i in 0..count {
        let marker = format!("TASK-{i}:");
        let replies = if failing.contains(&i) {
            // Once per run: the rerun fails too.
            vec![
                Reply::error(400, "invalid_request_error", "scripted failure"),
                Reply::error(400, "invalid_request_error", "scripted failure"),
            ]
        } else if writes.contains(&i) {
            vec![
                Reply::turn(Turn::new().tool_use(
                    &format!("toolu_{i}"),
                    "Write",
                    json!({"file_path": format!("out-{i}.txt"), "content": format!("made by {i}\n")}),
                )),
                Reply::turn(Turn::new().text(&format!("Wrote file {i}."))),
            ]
        } else {
            vec![Reply::turn(Turn::new().text(&format!("Answer {i}.")))]
        };
        script = script.route(&marker, replies);
    }
    script
}

fn results(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect()
}

/// The ids in `out`'s results, sorted.
fn sorted_ids(out: &Path) -> Vec<String> {
    let mut ids: Vec<String> = results(out)
        .iter()
        .map(|line| line["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

async fn batch(
    repo: &common::Repo,
    server: &Server,
    file: &Path,
    out: &Path,
    extra: &[&str],
) -> std::process::Output {
    let mut command = common::command(repo, server);
    command
        .arg("batch")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra);
    command.output().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn many_tasks_over_several_repositories_run_at_once_and_a_rerun_goes_on() {
    let repos: Vec<common::Repo> = (0..5)
        .map(|n| common::repo(&format!("batch-{n}")))
        .collect();
    let dirs: Vec<&Path> = repos.iter().map(|repo| repo.dir.as_path()).collect();
    let (count, writes, failing) = (40, [1, 5, 9, 22, 37], [4, 10]);
    // One server fault mid-stream: task 17's first response is cut off; the retry answers.
    let mut cut = Reply::turn(Turn::new().text("Answer 17, cut off before its end."));
    cut.faults.reset_after = Some(200);
    let faulty = Script::new(Vec::new()).route(
        "TASK-17:",
        vec![cut, Reply::turn(Turn::new().text("Answer 17."))],
    );
    let script = routes(faulty, count, &writes, &failing);
    let server = Server::start_tls(script).await.unwrap();
    let file = tasks_file(&repos[0].home, &dirs, count, &writes);
    let out = repos[0].home.join("out");
    let output = batch(&repos[0], &server, &file, &out, &["--jobs", "8"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "two tasks fail: {stderr}");

    let lines = results(&out);
    assert_eq!(lines.len(), count, "{lines:#?}");
    for line in &lines {
        let id = line["id"].as_str().unwrap();
        let i: usize = id[1..].parse().unwrap();
        let status = line["status"].as_str().unwrap();
        if failing.contains(&i) {
            assert_eq!(status, "failed", "{line}");
            assert!(
                line["result"]
                    .as_str()
                    .unwrap()
                    .contains("scripted failure"),
                "{line}"
            );
            continue;
        }
        assert_eq!(status, "done", "{line}");
        assert_eq!(line["exit_code"], 0);
        assert_eq!(
            line["num_turns"],
            if writes.contains(&i) { 2 } else { 1 },
            "{line}"
        );
        assert!(line["total_cost_usd"].as_f64().is_some(), "{line}");
        let transcript = line["transcript_path"].as_str().unwrap();
        assert!(Path::new(transcript).is_file(), "{line}");
        let diff = std::fs::read_to_string(line["diff_path"].as_str().unwrap()).unwrap();
        if writes.contains(&i) {
            assert_eq!(line["result"], format!("Wrote file {i}."));
            assert!(diff.contains(&format!("+made by {i}")), "{diff}");
            // In the task's own checkout, never in the repository itself.
            assert!(
                out.join("worktrees")
                    .join(id)
                    .join(format!("out-{i}.txt"))
                    .is_file()
            );
            assert!(!dirs[i % 5].join(format!("out-{i}.txt")).exists());
        } else {
            assert_eq!(line["result"], format!("Answer {i}."));
            assert!(diff.is_empty(), "{diff}");
        }
    }

    let asked_17 = server
        .requests()
        .iter()
        .filter(|request| {
            request.json()["messages"][0]
                .to_string()
                .contains("TASK-17:")
        })
        .count();
    assert_eq!(asked_17, 2, "task 17's cut response was asked again");
    // One connection pool for the batch: 8 tasks at a time reuse the connections earlier
    // tasks opened (a session's own pool would open at least one per task: 40), plus the one
    // the mid-stream reset closed.
    let mut connections: Vec<u64> = (server.requests().iter())
        .map(|request| request.connection)
        .collect();
    connections.sort_unstable();
    connections.dedup();
    assert!(
        connections.len() <= 8 + 1,
        "{} connections for {} requests",
        connections.len(),
        server.request_count()
    );

    // Again: the done tasks are skipped, the failed ones run again (and fail again).
    let before = server.request_count();
    let output = batch(&repos[0], &server, &file, &out, &[]).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("38 done earlier"), "{stderr}");
    let lines = results(&out);
    assert_eq!(lines.len(), count + failing.len());
    let rerun: Vec<&str> = lines[count..]
        .iter()
        .map(|line| line["id"].as_str().unwrap())
        .collect();
    assert_eq!(rerun.len(), 2);
    assert!(rerun.contains(&"t4") && rerun.contains(&"t10"), "{rerun:?}");
    assert_eq!(
        server.request_count() - before,
        2,
        "only the failed tasks asked the model"
    );

    // The sweep at a glance: the last result of each task.
    let output = common::command(&repos[0], &server)
        .args(["batch", "--report"])
        .arg(out.join("results.jsonl"))
        .output()
        .await
        .unwrap();
    common::assert_success(&output, "");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("40 task(s): 38 done, 2 failed, 0 stopped"),
        "{table}"
    );
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("Answer 0.") && page.matches("<svg").count() == 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_json_multiplexes_every_session_with_its_task_id() {
    let repo = common::repo("batch-stream");
    let (count, writes, failing) = (6, [1, 4], [3]);
    let server = Server::start_tls(script(count, &writes, &failing))
        .await
        .unwrap();
    let file = tasks_file(&repo.home, &[&repo.dir], count, &writes);
    let out = repo.home.join("out");
    let extra = ["--jobs", "3", "--output-format", "stream-json"];
    let output = batch(&repo, &server, &file, &out, &extra).await;
    assert_eq!(output.status.code(), Some(1), "task 3 fails");
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect();
    for i in 0..count {
        let id = format!("t{i}");
        let own: Vec<&Value> = lines.iter().filter(|line| line["task_id"] == id).collect();
        let kinds: Vec<String> = own
            .iter()
            .map(|line| {
                let subtype = line["subtype"].as_str().map(|s| format!("/{s}"));
                format!(
                    "{}{}",
                    line["type"].as_str().unwrap(),
                    subtype.unwrap_or_default()
                )
            })
            .collect();
        let expected: &[&str] = if writes.contains(&i) {
            &[
                "system/init",
                "assistant",
                "user",
                "assistant",
                "result/success",
                "task_result",
            ]
        } else if failing.contains(&i) {
            &[
                "system/init",
                "result/error_during_execution",
                "task_result",
            ]
        } else {
            &["system/init", "assistant", "result/success", "task_result"]
        };
        assert_eq!(kinds, expected, "{id}: {own:#?}");
        // One session per task, named by every line of it.
        let session = own[0]["session_id"].as_str().unwrap();
        assert!(
            own[..own.len() - 1]
                .iter()
                .all(|line| line["session_id"] == session)
        );
        assert_eq!(own.last().unwrap()["session_id"], session);
        let result = &own[own.len() - 2];
        let task_result = own.last().unwrap();
        assert_eq!(task_result["id"], id);
        if failing.contains(&i) {
            assert_eq!(task_result["status"], "failed");
            assert!(
                result["errors"][0]
                    .as_str()
                    .unwrap()
                    .contains("scripted failure")
            );
        } else {
            let answer = if writes.contains(&i) {
                format!("Wrote file {i}.")
            } else {
                format!("Answer {i}.")
            };
            assert_eq!(result["result"], answer);
            assert_eq!(task_result["result"], answer);
            assert_eq!(task_result["status"], "done");
        }
        if writes.contains(&i) {
            let user = own[2];
            assert_eq!(
                user["message"]["content"][0]["tool_use_id"],
                format!("toolu_{i}")
            );
        }
    }
    assert_eq!(
        lines.len(),
        lines
            .iter()
            .filter(|line| line["task_id"].is_string())
            .count(),
        "every line names its task"
    );
    // The results file holds what the task_result lines said.
    assert_eq!(sorted_ids(&out), ["t0", "t1", "t2", "t3", "t4", "t5"]);
    // No workspace snapshots for batch tasks (each checkout is its own; its diff the record):
    // no shadow store beside any task's sessions.
    let projects = repo.home.join("data/agent/projects");
    let stores: Vec<_> = std::fs::read_dir(&projects)
        .unwrap()
        .flatten()
        .filter(|project| project.path().join("shadow").exists())
        .collect();
    assert!(stores.is_empty(), "{stores:?}");

    // `json` is no batch format: refused before anything runs.
    let before = server.request_count();
    let extra = ["--output-format", "json"];
    let output = batch(&repo, &server, &file, &repo.home.join("out-json"), &extra).await;
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--output-format json"), "{stderr}");
    assert_eq!(server.request_count(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shard_runs_exactly_its_slice() {
    let repo = common::repo("batch-shard");
    let count = 9;
    let server = Server::start_tls(script(count, &[], &[])).await.unwrap();
    let file = tasks_file(&repo.home, &[&repo.dir], count, &[]);
    let out = repo.home.join("out");
    let output = batch(&repo, &server, &file, &out, &["--shard", "2/3"]).await;
    common::assert_success(&output, "");
    let ids = sorted_ids(&out);
    assert_eq!(ids, ["t1", "t4", "t7"]);

    // As a pod of an Indexed Job runs it: the index from the environment, from 0.
    let out = repo.home.join("out-pod");
    let mut command = common::command(&repo, &server);
    command
        .env("JOB_COMPLETION_INDEX", "2")
        .arg("batch")
        .arg(&file)
        .args(["--shard-count", "3", "--out"])
        .arg(&out);
    let output = command.output().await.unwrap();
    common::assert_success(&output, "");
    let ids = sorted_ids(&out);
    assert_eq!(ids, ["t2", "t5", "t8"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_task_file_is_refused_naming_the_line() {
    let repo = common::repo("batch-bad");
    let server = Server::start_tls(Script::new(Vec::new())).await.unwrap();
    let file = repo.home.join("tasks.jsonl");
    std::fs::write(
        &file,
        "{\"id\": \"a\", \"repo\": \".\", \"prompt\": \"p\"}\n{\"id\": \"b\", \"repo\": \".\", \"prompt\": \"p\", \"max_turn\": 3}\n",
    )
    .unwrap();
    let output = batch(&repo, &server, &file, &repo.home.join("out"), &[]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tasks.jsonl:2") && stderr.contains("max_turn"),
        "{stderr}"
    );
    // A missing task file, and --shard-count without the pod's index: usage errors too.
    let missing = batch(
        &repo,
        &server,
        &repo.home.join("nope.jsonl"),
        &repo.home.join("out"),
        &[],
    )
    .await;
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the task file") && stderr.contains("nope.jsonl"),
        "{stderr}"
    );
    let good = repo.home.join("good.jsonl");
    std::fs::write(
        &good,
        "{\"id\": \"a\", \"repo\": \"../repo\", \"prompt\": \"p\"}\n",
    )
    .unwrap();
    let mut command = common::command(&repo, &server);
    command
        .env_remove("JOB_COMPLETION_INDEX")
        .arg("batch")
        .arg(&good)
        .args(["--shard-count", "3", "--out"])
        .arg(repo.home.join("out"));
    let unset = command.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&unset.stderr);
    assert_eq!(unset.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("JOB_COMPLETION_INDEX is not set"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 0);

    // A task whose repository does not exist fails, saying so; the batch goes on.
    let lost = repo.home.join("lost.jsonl");
    std::fs::write(
        &lost,
        "{\"id\": \"lost\", \"repo\": \"../nowhere\", \"prompt\": \"p\"}\n",
    )
    .unwrap();
    let out = repo.home.join("out-lost");
    let output = batch(&repo, &server, &lost, &out, &[]).await;
    assert_eq!(output.status.code(), Some(1));
    let line = &results(&out)[0];
    assert_eq!(line["status"], "failed");
    assert!(
        line["result"].as_str().unwrap().contains("does not exist"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_batch_loses_nothing_finished_and_a_rerun_finishes_exactly_the_rest() {
    let repo = common::repo("batch-kill");
    let count = 6;
    // Tasks 4 and 5 stream for a minute the first time (the batch is killed meanwhile) and
    // answer at once the second.
    let mut script = Script::new(Vec::new());
    for i in 0..count {
        let mut replies = vec![Reply::turn(Turn::new().text(&format!("Answer {i}.")))];
        if i >= 4 {
            let mut slow = Reply::turn(Turn::new().text(&format!("Slow answer {i}.")));
            slow.faults.spread_over = Some(std::time::Duration::from_secs(60));
            replies.insert(0, slow);
        }
        script = script.route(&format!("TASK-{i}:"), replies);
    }
    let server = Server::start_tls(script).await.unwrap();
    let file = tasks_file(&repo.home, &[&repo.dir], count, &[]);
    let out = repo.home.join("out");
    let mut child = common::command(&repo, &server)
        .arg("batch")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .args(["--jobs", "6"])
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Once the four quick tasks have their results and the slow two are streaming.
    for _ in 0..600 {
        let written = std::fs::read_to_string(out.join("results.jsonl"))
            .map_or(0, |text| text.lines().count());
        if written == 4 && server.request_count() >= count {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().await.unwrap();
    let first = results(&out);
    assert_eq!(first.len(), 4, "{first:#?}");
    let slow_sessions: Vec<String> = ["t4", "t5"]
        .iter()
        .map(|id| {
            std::fs::read_to_string(out.join("sessions").join(id))
                .unwrap()
                .trim()
                .to_owned()
        })
        .collect();

    let output = batch(&repo, &server, &file, &out, &[]).await;
    common::assert_success(&output, "");
    let lines = results(&out);
    assert_eq!(lines.len(), count, "{lines:#?}");
    let rerun: Vec<&Value> = lines[4..].iter().collect();
    let mut ids: Vec<&str> = rerun
        .iter()
        .map(|line| line["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["t4", "t5"]);
    for line in rerun {
        assert_eq!(line["status"], "done", "{line}");
        // The interrupted session went on, in its own checkout.
        let id = line["id"].as_str().unwrap();
        let at = usize::from(id == "t5");
        assert_eq!(
            line["session_id"].as_str().unwrap(),
            slow_sessions[at],
            "{line}"
        );
    }
    assert_eq!(
        server.request_count(),
        count + 2,
        "the quick tasks did not run again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_one_task_meets_holds_every_task() {
    let repo = common::repo("batch-429");
    let mut slow =
        Reply::turn(Turn::new().tool_use("toolu_r", "Read", json!({"file_path": "greet.py"})));
    slow.faults.spread_over = Some(std::time::Duration::from_millis(300));
    let script = Script::new(Vec::new())
        .route(
            "TASK-0:",
            vec![
                Reply::error(429, "rate_limit_error", "slow down").header("retry-after", "1"),
                Reply::turn(Turn::new().text("Answer 0.")),
            ],
        )
        .route(
            "TASK-1:",
            vec![slow, Reply::turn(Turn::new().text("Answer 1."))],
        );
    let server = Server::start_tls(script).await.unwrap();
    let file = tasks_file(&repo.home, &[&repo.dir], 2, &[]);
    let out = repo.home.join("out");
    let output = batch(&repo, &server, &file, &out, &["--jobs", "2"]).await;
    common::assert_success(&output, "");
    let requests = server.requests();
    let of = |marker: &str| -> Vec<(std::time::Instant, usize)> {
        requests
            .iter()
            .filter(|request| request.json()["messages"][0].to_string().contains(marker))
            .map(|request| {
                (
                    request.received,
                    request.json()["messages"].as_array().map_or(0, Vec::len),
                )
            })
            .collect()
    };
    let (first, second) = (of("TASK-0:"), of("TASK-1:"));
    assert_eq!(first.len(), 2, "task 0: the limited request and its retry");
    assert_eq!(second.len(), 2, "task 1: the prompt and the tool result");
    let limited_at = first[0].0;
    // Task 1's next request waited for the second task 0 was told to wait, though it was
    // never limited itself.
    let held = second[1].0.duration_since(limited_at);
    assert!(
        held >= std::time::Duration::from_millis(900),
        "task 1 went on after {held:?}"
    );
    assert!(first[1].0.duration_since(limited_at) >= std::time::Duration::from_millis(900));
}

/// The container arguments of the Kubernetes manifest, as written (`args:` of the agent
/// container).
fn manifest_args() -> Vec<String> {
    let manifest = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/kubernetes/batch-job.yaml"
    ))
    .unwrap();
    let mut lines = manifest
        .lines()
        .skip_while(|line| line.trim() != "args:")
        .skip(1);
    let mut args = Vec::new();
    while let Some(item) = lines.next().and_then(|line| line.trim().strip_prefix("- ")) {
        args.push(item.trim_matches('"').to_owned());
    }
    assert!(
        args.contains(&"batch".to_owned()),
        "no args in the manifest: {args:?}"
    );
    args
}

#[tokio::test(flavor = "multi_thread")]
async fn the_indexed_jobs_pods_run_the_task_file_once_between_them() {
    let repo = common::repo("batch-pods");
    let count = 10;
    let server = Server::start_tls(script(count, &[], &[])).await.unwrap();
    let tasks = tasks_file(&repo.home, &[&repo.dir], count, &[]);
    let args = manifest_args();
    let completions: usize = {
        let at = args.iter().position(|arg| arg == "--shard-count").unwrap();
        args[at + 1].parse().unwrap()
    };
    let mut seen = Vec::new();
    for index in 0..completions {
        // As the kubelet does: the mounts' paths, and $(VAR) from the pod's environment.
        let pod_args: Vec<String> = args
            .iter()
            .map(|arg| {
                arg.replace("/tasks/tasks.jsonl", &tasks.display().to_string())
                    .replace("/out/", &format!("{}/", repo.home.join("out").display()))
                    .replace("$(JOB_COMPLETION_INDEX)", &index.to_string())
            })
            .collect();
        let output = common::command(&repo, &server)
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .args(&pod_args)
            .output()
            .await
            .unwrap();
        common::assert_success(&output, &format!("pod {index}: "));
        let out = repo.home.join("out").join(format!("shard-{index}"));
        seen.extend(
            results(&out)
                .iter()
                .map(|line| line["id"].as_str().unwrap().to_owned()),
        );
    }
    seen.sort();
    let mut all: Vec<String> = (0..count).map(|i| format!("t{i}")).collect();
    all.sort();
    assert_eq!(seen, all, "every task once, across the pods");
}
