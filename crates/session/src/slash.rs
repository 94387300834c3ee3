//! The slash commands every front end shares: the built-in ones and what each does, what a
//! typed line asks for ([`parse`]), and the nearest known command to a mistyped one. What
//! each command shows is the front end's.

/// The built-in commands, with what each does (`/help` lists them in this order).
pub const BUILT_IN: &[(&str, &str)] = &[
    ("help", "the keys and commands"),
    (
        "clear",
        "start a new session (the old one stays resumable with --resume)",
    ),
    (
        "compact",
        "[focus] summarize the conversation now, to free the context",
    ),
    (
        "context",
        "how full the context is: used, autocompact level, blocking limit",
    ),
    ("cost", "this session's requests, tokens and cost"),
    (
        "model",
        "[name] the model, or switch to another for the next requests",
    ),
    (
        "effort",
        "[low|medium|high|xhigh|max|auto] the effort and thinking of the next requests",
    ),
    (
        "permissions",
        "the permission mode and rules in force, and where each came from",
    ),
    (
        "status",
        "model, mode, folder, session, sandbox, MCP servers",
    ),
    (
        "init",
        "ask the model to write an AGENTS.md for this project",
    ),
    (
        "rewind",
        "[N [code|conversation|both] | undo] go back to the end of a turn",
    ),
    (
        "resume",
        "pick an earlier session of this folder and continue it",
    ),
    ("mcp", "the MCP servers, their status and tools"),
    (
        "todos",
        "the model's todo list (Ctrl-T shows or hides it under the status line)",
    ),
    (
        "agents",
        "the subagents the model can start (built-in, yours, the project's)",
    ),
    (
        "tasks",
        "[ID | stop ID] the background tasks (commands, monitors, subagents); one's output; stop one",
    ),
    ("exit", "exit (also /quit)"),
];

/// Every command a prompt may name, as `/help` lists them and Tab completes them: the
/// built-in ones, then `commands` (with their argument hint) and `skills`, each `(name,
/// what it does)`; names and descriptions neutralised (a repository wrote them).
pub fn entries(
    commands: &[crate::commands::Command],
    skills: &[tools::skills::Skill],
) -> Vec<(String, String)> {
    let clean = |text: &str| render::printable(text, false);
    let mut entries: Vec<(String, String)> = BUILT_IN
        .iter()
        .map(|(name, about)| ((*name).to_owned(), (*about).to_owned()))
        .collect();
    entries.extend(commands.iter().map(|command| {
        let hint = command
            .argument_hint
            .as_deref()
            .map(|hint| format!("{hint} "))
            .unwrap_or_default();
        (
            clean(&command.name),
            format!(
                "{}{} ({})",
                clean(&hint),
                clean(&command.description),
                command.scope
            ),
        )
    }));
    entries.extend(skills.iter().map(|skill| {
        (
            clean(&skill.name),
            format!("{} ({} skill)", clean(&skill.description), skill.scope),
        )
    }));
    entries
}

/// The prompt `/init` sends.
const INIT_PROMPT: &str = "Please analyze this codebase and create an AGENTS.md file at its root, which will be given to future coding agents working in this repository.\n\nWhat to add:\n1. The commands that will be commonly used: how to build, lint and run the tests, including how to run a single test.\n2. The high-level architecture and structure of the code, the \"big picture\" that takes reading several files to understand, so that future agents can be productive more quickly.\n\nUsage notes:\n- If there is already an AGENTS.md (or a CLAUDE.md), suggest improvements to it instead of starting over.\n- Do not list every component or file structure that can be easily discovered, and do not repeat yourself.\n- Include the important parts of a README, of .cursor/rules, .cursorrules or .github/copilot-instructions.md if they exist.\n- Do not make up information that is not backed by the project's files.\n- Begin the file with:\n\n```\n# AGENTS.md\n\nThis file provides guidance to coding agents working with code in this repository.\n```";

/// What `/init` asks the model for: its `AGENTS.md`, or `CLAUDE.md` in a project that uses
/// Claude Code's files (a `.claude/` folder or a `CLAUDE.md`, and no `AGENTS.md`), as Claude
/// Code's `/init` writes it there.
pub fn init_prompt(cwd: &std::path::Path) -> String {
    let claude = (cwd.join(".claude").is_dir() || cwd.join("CLAUDE.md").is_file())
        && !cwd.join("AGENTS.md").exists();
    if claude {
        INIT_PROMPT
            .replace("an AGENTS.md file", "a CLAUDE.md file")
            .replace(
                "If there is already an AGENTS.md (or a CLAUDE.md)",
                "If there is already a CLAUDE.md (or an AGENTS.md)",
            )
            .replace("# AGENTS.md", "# CLAUDE.md")
    } else {
        INIT_PROMPT.to_owned()
    }
}

/// What a line typed at the prompt asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// Nothing (blank line).
    Nothing,
    /// A task for the agent.
    Task(String),
    /// A custom command or skill, expanded.
    Invoke(crate::Invocation),
    /// `/help`.
    Help,
    /// `/clear`.
    Clear,
    /// `/compact [focus]`.
    Compact(Option<String>),
    /// `/context`.
    Context,
    /// `/cost`.
    Cost,
    /// `/model [name]`.
    Model(Option<String>),
    /// `/effort [level]`.
    Effort(Option<String>),
    /// `/permissions`.
    Permissions,
    /// `/status`.
    Status,
    /// `/init`.
    Init,
    /// `/mcp`.
    Mcp,
    /// `/agents`.
    Agents,
    /// `/todos`.
    Todos,
    /// `/tasks [ID | stop ID]`.
    Tasks(Option<String>),
    /// `/rewind [arguments]`.
    Rewind(String),
    /// `/resume`.
    Resume,
    /// `/exit` or `/quit`.
    Exit,
    /// `/something` else.
    Unknown(String),
    /// `!command`: run it (bash mode).
    Shell(String),
}

/// Reads a line typed at the prompt. `/word [arguments]` is a command (letters, digits, `-`,
/// `_` and `:` in the word); anything else, a path such as `/usr/bin is slow` included, is
/// a task.
pub fn parse(line: &str) -> Input {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Input::Nothing;
    }
    if let Some(command) = trimmed.strip_prefix('!') {
        return match command.trim() {
            "" => Input::Nothing,
            command => Input::Shell(command.to_owned()),
        };
    }
    let Some(rest) = trimmed.strip_prefix('/') else {
        return Input::Task(trimmed.to_owned());
    };
    let command = rest.split_whitespace().next().unwrap_or_default();
    if !command
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'))
    {
        return Input::Task(trimmed.to_owned());
    }
    let argument = rest[command.len()..].trim();
    let optional = || (!argument.is_empty()).then(|| argument.to_owned());
    match command {
        "help" => Input::Help,
        "clear" => Input::Clear,
        "compact" => Input::Compact(optional()),
        "context" => Input::Context,
        "cost" => Input::Cost,
        "model" => Input::Model(optional()),
        "effort" => Input::Effort(optional()),
        "permissions" => Input::Permissions,
        "status" => Input::Status,
        "init" => Input::Init,
        "mcp" => Input::Mcp,
        "agents" => Input::Agents,
        "todos" => Input::Todos,
        "tasks" => Input::Tasks(optional()),
        "rewind" => Input::Rewind(argument.to_owned()),
        "resume" => Input::Resume,
        "exit" | "quit" => Input::Exit,
        other => Input::Unknown(other.to_owned()),
    }
}

/// `/tasks`: each background task with its id, kind, state, time and what it runs, running
/// ones first, then the latest ended ones (at most 20 of those).
pub fn tasks_report(tasks: &tools::background::BackgroundTasks) -> String {
    let all = tasks.tasks();
    if all.is_empty() {
        return "No background tasks: none was started in this session.".to_owned();
    }
    let row = |task: &std::sync::Arc<tools::background::Task>| {
        let status = task.status();
        format!(
            "  {:<10} {:<11} {:<9} {:>6}  {}",
            task.id(),
            task.kind(),
            status.as_str(),
            format!("{:.0}s", task.elapsed().as_secs_f64()),
            render::printable(task.label(), false)
        )
    };
    let running = tasks.running();
    let mut lines = vec![format!(
        "Background tasks: {running} running, {} ended (/tasks ID shows one's output, /tasks stop ID stops it):",
        all.len() - running
    )];
    let is_running = |task: &&std::sync::Arc<tools::background::Task>| {
        task.status() == tools::background::TaskStatus::Running
    };
    lines.extend(all.iter().filter(is_running).map(row));
    let ended: Vec<_> = all.iter().filter(|task| !is_running(task)).collect();
    lines.extend(ended.iter().rev().take(20).rev().map(|task| row(task)));
    lines.join("\n")
}

/// `/tasks ID`: the task's state and its last 20 lines of output; `/tasks stop ID`: stops
/// it, or says why not.
pub async fn task_command(tasks: &tools::background::BackgroundTasks, argument: &str) -> String {
    let argument = argument.trim();
    let (stop, id) = match argument.strip_prefix("stop ") {
        Some(id) => (true, id.trim()),
        None => (false, argument),
    };
    let Some(task) = tasks.get(id) else {
        let ids: Vec<String> = tasks.tasks().iter().map(|t| t.id().to_owned()).collect();
        return format!(
            "No background task {:?}{}",
            render::printable(id, false),
            if ids.is_empty() {
                ": none was started".to_owned()
            } else {
                format!(" (the tasks: {})", ids.join(", "))
            }
        );
    };
    if !stop {
        let tail = task.tail(20);
        return format!(
            "{} ({}), {} after {:.0} s: {}\n{}\n(all of it: {})",
            task.id(),
            task.kind(),
            task.status().as_str(),
            task.elapsed().as_secs_f64(),
            render::printable(task.label(), false),
            if tail.is_empty() {
                "(no output yet)".to_owned()
            } else {
                render::printable(&tail, true)
            },
            task.file().display()
        );
    }
    if task.stop().await {
        format!(
            "Stopped {} ({}).",
            task.id(),
            render::printable(task.label(), false)
        )
    } else {
        format!(
            "{} had already ended ({}).",
            task.id(),
            task.status().as_str()
        )
    }
}

/// The known command nearest to `typed` (at most 2 edits away, or one it starts), for
/// "did you mean": among the built-in commands and `others` (custom commands, skills).
pub fn nearest<'a>(typed: &str, others: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let typed = typed.to_ascii_lowercase();
    let names = BUILT_IN
        .iter()
        .map(|(name, _)| *name)
        .chain(["quit"])
        .chain(others);
    let mut best: Option<(usize, &str)> = None;
    for name in names {
        let distance = if !typed.is_empty() && name.starts_with(&typed) {
            0
        } else {
            edit_distance(&typed, name)
        };
        if distance <= 2 && best.is_none_or(|(best, _)| distance < best) {
            best = Some((distance, name));
        }
    }
    best.map(|(_, name)| name.to_owned())
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn tasks_are_listed_and_stopped_by_id() {
        let dir = std::env::temp_dir().join(format!("agent-slash-tasks-{}", std::process::id()));
        let tasks = tools::background::BackgroundTasks::new(dir.clone(), Vec::new());
        assert!(super::tasks_report(&tasks).starts_with("No background tasks"));
        let cancel = tokio_util::sync::CancellationToken::new();
        let stopped = cancel.clone();
        let run = async move {
            stopped.cancelled().await;
            ("stopped early".to_owned(), false)
        };
        let task = tasks
            .start_agent(
                "survey the code".into(),
                "Explore agent: survey".into(),
                None,
                run,
                cancel,
            )
            .unwrap_or_else(|error| panic!("{error}"));
        let report = super::tasks_report(&tasks);
        assert!(
            report.starts_with("Background tasks: 1 running, 0 ended"),
            "{report}"
        );
        let row: Vec<&str> = report
            .lines()
            .nth(1)
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(
            row,
            [
                task.id(),
                "local_agent",
                "running",
                "0s",
                "survey",
                "the",
                "code"
            ],
            "{report}"
        );
        let shown = super::task_command(&tasks, task.id()).await;
        assert!(
            shown.starts_with(&format!(
                "{} (local_agent), running after 0 s: survey the code\n(no output yet)",
                task.id()
            )),
            "{shown}"
        );
        assert_eq!(
            super::task_command(&tasks, &format!("stop {}", task.id())).await,
            format!("Stopped {} (survey the code).", task.id())
        );
        assert_eq!(
            super::task_command(&tasks, &format!("stop {}", task.id())).await,
            format!("{} had already ended (killed).", task.id())
        );
        assert!(
            super::task_command(&tasks, task.id())
                .await
                .contains("stopped early")
        );
        assert_eq!(
            super::task_command(&tasks, "stop bash_9").await,
            format!("No background task \"bash_9\" (the tasks: {})", task.id())
        );
        assert!(super::tasks_report(&tasks).contains("0 running, 1 ended"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn init_writes_claude_md_where_the_project_uses_claude_codes_files() {
        let base = std::env::temp_dir().join(format!("agent-init-prompt-{}", std::process::id()));
        let plain = base.join("plain");
        let claude = base.join("claude");
        std::fs::create_dir_all(&plain).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(claude.join(".claude")).unwrap_or_else(|e| panic!("{e}"));
        let prompt = init_prompt(&plain);
        assert!(prompt.contains("create an AGENTS.md file") && prompt.contains("# AGENTS.md"));
        let prompt = init_prompt(&claude);
        assert!(prompt.contains("create a CLAUDE.md file"), "{prompt}");
        assert!(prompt.contains("# CLAUDE.md") && !prompt.contains("# AGENTS.md"));
        // A project with both keeps its AGENTS.md.
        std::fs::write(claude.join("AGENTS.md"), "x").unwrap_or_else(|e| panic!("{e}"));
        assert!(init_prompt(&claude).contains("# AGENTS.md"));
        let _ = std::fs::remove_dir_all(&base);
    }

    use super::*;

    #[test]
    fn lines_parse_into_commands_and_tasks() {
        assert_eq!(parse("   "), Input::Nothing);
        assert_eq!(parse("/help"), Input::Help);
        assert_eq!(parse(" /exit "), Input::Exit);
        assert_eq!(parse("/quit"), Input::Exit);
        assert_eq!(parse("/clear"), Input::Clear);
        assert_eq!(parse("/mcp"), Input::Mcp);
        assert_eq!(parse("/frob"), Input::Unknown("frob".into()));
        assert_eq!(parse("/exit now"), Input::Exit);
        assert_eq!(parse("/model"), Input::Model(None));
        assert_eq!(
            parse("/model  sonnet "),
            Input::Model(Some("sonnet".into()))
        );
        assert_eq!(
            parse("/compact keep the API notes"),
            Input::Compact(Some("keep the API notes".into()))
        );
        assert_eq!(parse("/compact"), Input::Compact(None));
        assert_eq!(parse("/"), Input::Unknown(String::new()));
        assert_eq!(
            parse("/usr/bin is slow, why?"),
            Input::Task("/usr/bin is slow, why?".into())
        );
        assert_eq!(parse("fix the bug\n"), Input::Task("fix the bug".into()));
        assert_eq!(parse("!ls -la"), Input::Shell("ls -la".into()));
        assert_eq!(parse("! "), Input::Nothing);
    }

    #[test]
    fn unknown_commands_suggest_the_nearest() {
        assert_eq!(nearest("modle", []), Some("model".into()));
        assert_eq!(nearest("comp", []), Some("compact".into()));
        assert_eq!(nearest("stauts", []), Some("status".into()));
        assert_eq!(
            nearest("deploy", ["deploy-staging"]),
            Some("deploy-staging".into())
        );
        assert_eq!(nearest("xyzzy", []), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
