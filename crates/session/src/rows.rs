//! How a front end shows a tool call: its title (`Bash(cargo test)`, `Task(Explore: ...)`,
//! `server - tool(args) (MCP)`: Claude Code's, for any front end) and, for a terminal, the
//! lines under it (the diff an edit made, a failed command's status and last lines, an
//! error in full, a subagent's totals, the todo list), each already safe to print (control
//! characters escaped; only colours and styles pass). Also the sentence for why a turn
//! stopped and the line for what context management did.

use loop_core::Terminal;
use render::printable;
use serde_json::Value;

/// `Name(short input)` for a tool line: the command, path or pattern, cut to one line of at
/// most 80 characters, control characters escaped.
pub fn tool_label(name: &str, input: &Value) -> String {
    let field = |key: &str| input.get(key).and_then(Value::as_str);
    if matches!(name, "Task" | "Agent") {
        let kind = field("subagent_type").unwrap_or("general-purpose");
        let description = field("description").unwrap_or_default();
        return format!("Task({})", shorten(&format!("{kind}: {description}")));
    }
    if let Some((server, tool)) = name
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
    {
        return format!(
            "{} - {}({}) (MCP)",
            printable(server, false),
            printable(tool, false),
            shorten(&mcp_arguments(input))
        );
    }
    let key = match name {
        "Bash" => "command",
        "Read" | "Write" | "Edit" => "file_path",
        "NotebookEdit" => "notebook_path",
        "Glob" | "Grep" => "pattern",
        "WebFetch" => "url",
        "WebSearch" => "query",
        _ => "",
    };
    let name = printable(name, false);
    let Some(detail) = field(key) else {
        return name;
    };
    format!("{name}({})", shorten(detail))
}

/// `detail`'s first line, cut to 80 characters (`…` when anything was left out),
/// neutralised.
pub fn shorten(detail: &str) -> String {
    let line = detail.lines().next().unwrap_or_default();
    let mut short: String = line.chars().take(80).collect();
    if short.len() < detail.len() {
        short.push('…');
    }
    printable(&short, false)
}

/// An MCP call's input as Claude Code shows it: `key: value` pairs, values as JSON.
pub fn mcp_arguments(input: &Value) -> String {
    match input.as_object() {
        Some(fields) => fields
            .iter()
            .map(|(key, value)| format!("{key}: {value}"))
            .collect::<Vec<_>>()
            .join(", "),
        None => input.to_string(),
    }
}

/// `text` dim (SGR 2), for lines that are about the run rather than its work.
pub fn dim(text: &str) -> String {
    format!("\x1b[2m{text}\x1b[0m")
}

/// A thinking block as a terminal shows it: one dim row, collapsed (`✻ Thinking: its first
/// words… (N lines · Ctrl-O)`), and every line of it, dim, for the turn in full (Ctrl-O).
/// Neutralised: the text is the model's.
pub fn thinking_rows(text: &str) -> (String, Vec<String>) {
    let lines: Vec<&str> = text.trim().lines().collect();
    let first: String = one_line(text).chars().take(80).collect();
    let more = if one_line(text).chars().count() > 80 {
        "…"
    } else {
        ""
    };
    let row = dim(&format!(
        "✻ Thinking: {first}{more} ({} line{} · Ctrl-O)",
        lines.len(),
        if lines.len() == 1 { "" } else { "s" }
    ));
    let mut detail = vec![dim("✻ Thinking:")];
    detail.extend(
        lines
            .iter()
            .map(|line| dim(&format!("  {}", render::printable(line, false)))),
    );
    (row, detail)
}

/// `text` on one line (its lines joined with spaces), neutralised, cut to 200 characters.
pub fn one_line(text: &str) -> String {
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let shown = printable(&joined, false);
    match shown.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &shown[..cut]),
        None => shown,
    }
}

/// What context management did, in a line for the terminal.
pub fn context_line(event: &context::ContextEvent) -> String {
    // Reasons and paths may hold a server's or the file system's text.
    printable(&context_text(event), false)
}

fn context_text(event: &context::ContextEvent) -> String {
    use context::ContextEvent;
    match event {
        ContextEvent::Persisted { bytes, path, .. } => {
            format!("a {bytes}-byte tool result was saved to {path}")
        }
        ContextEvent::PersistFailed { reason, .. } => {
            format!("a large tool result could not be saved and stays in the context: {reason}")
        }
        ContextEvent::Microcompacted {
            cleared,
            bytes,
            reason,
            ..
        } => {
            let why = match reason {
                context::MicrocompactReason::Pays => {
                    "re-reading them would cost more than rewriting the prompt cache"
                }
                context::MicrocompactReason::ColdCache => "the prompt cache had expired",
            };
            format!("cleared {cleared} old tool results ({bytes} bytes) from the context: {why}")
        }
        ContextEvent::Compacted {
            before,
            after,
            summarized,
            ..
        } => format!(
            "compacted the conversation: {before} -> {after} ({summarized} messages summarized)"
        ),
        ContextEvent::CompactFailed {
            reason,
            consecutive,
        } => format!("compaction failed ({consecutive} in a row): {reason}"),
    }
}

/// Red (SGR 31), for errors.
pub fn red(text: &str) -> String {
    render::Style {
        color: Some(31),
        ..render::Style::PLAIN
    }
    .paint(text)
}

/// The lines under a finished tool's `⏺` line: for an applied Edit or Write, what changed
/// (`Updated PATH with N additions and M removals` and the diff, collapsed after 20 lines; a
/// new file's first 10 lines); for a failed command, its exit status in red and its last 5
/// lines of output; any other error in red, in full up to 10 lines; for a subagent, `Done
/// (N tool uses · tokens · time)`; else the result's first line.
pub fn result_lines(done: &executor::CompletedTool, input: &Value) -> Vec<String> {
    const DIFF_LINES: usize = 20;
    const NEW_FILE_LINES: usize = 10;
    const INDENT: &str = "     ";
    let failed = done.result.is_error == Some(true);
    let path = input
        .get("file_path")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !failed
        && matches!(done.name.as_str(), "Edit" | "Write")
        && let Some(structured) = &done.structured
    {
        let created = structured["type"] == "create"
            || (done.name == "Edit" && structured["originalFile"].is_null());
        if created {
            let content = structured["content"]
                .as_str()
                .or_else(|| structured["newString"].as_str())
                .unwrap_or_default();
            let count = content.lines().count();
            let mut lines = vec![format!(
                "  ⎿  Created {} ({count} line{})",
                printable(path, false),
                if count == 1 { "" } else { "s" }
            )];
            for (number, line) in content.lines().take(NEW_FILE_LINES).enumerate() {
                lines.push(format!(
                    "{INDENT}{}",
                    dim(&format!("{:>4} {}", number + 1, printable(line, false)))
                ));
            }
            if count > NEW_FILE_LINES {
                lines.push(format!(
                    "{INDENT}{}",
                    dim(&format!("… +{} lines", count - NEW_FILE_LINES))
                ));
            }
            return lines;
        }
        if let Ok(hunks) =
            serde_json::from_value::<Vec<render::diff::Hunk>>(structured["structuredPatch"].clone())
        {
            let mut lines = vec![format!("  ⎿  {}", render::diff::summary(path, &hunks))];
            lines.extend(render::diff::hunk_lines(&hunks, INDENT, DIFF_LINES));
            return lines;
        }
    }
    let text = result_text(&done.result);
    if failed && done.name == "Bash" {
        let trimmed = text.trim_end();
        let (body, status) = match trimmed.rsplit_once("\n\n") {
            Some((body, last)) if is_exit_status(last) => (body, last),
            _ if is_exit_status(trimmed) => ("", trimmed),
            _ => (trimmed, ""),
        };
        if !status.is_empty() {
            let mut lines = vec![format!("  ⎿  {}", red(&printable(status, false)))];
            // What the command printed, in its colours, when the result keeps it.
            let body = command_output(done).unwrap_or(body);
            let tail: Vec<&str> = body.trim_end().lines().collect();
            let shown = &tail[tail.len().saturating_sub(5)..];
            if tail.len() > shown.len() {
                lines.push(format!(
                    "{INDENT}{}",
                    dim(&format!("… {} earlier lines", tail.len() - shown.len()))
                ));
            }
            for line in shown {
                lines.push(format!(
                    "{INDENT}{}",
                    render::printable_colored(line, false)
                ));
            }
            return lines;
        }
    }
    if failed {
        return error_lines(&text);
    }
    if matches!(done.name.as_str(), "Task" | "Agent")
        && let Some(done_line) = done.structured.as_ref().and_then(subagent_done)
    {
        return vec![format!("  ⎿  {done_line}")];
    }
    if let Some(line) = done.structured.as_ref().and_then(|structured| {
        web_line(&done.name, structured).or_else(|| reader_line(&done.name, structured))
    }) {
        return vec![format!("  ⎿  {line}")];
    }
    if done.name == "Bash" {
        let line = command_output(done)
            .and_then(|stdout| colored_verdict_line(stdout, &text))
            .unwrap_or_else(|| verdict_summary(&text));
        return vec![format!("  ⎿  {line}")];
    }
    vec![format!("  ⎿  {}", result_summary(&done.result))]
}

/// What a reading tool found, as a reader wants it: `Read 9 lines` (`Read 20 of 120 lines`
/// for a part; an image, a PDF, a notebook's cells), `Found 3 files` for Glob and Grep's file
/// lists, `Found 12 lines` for Grep's content and `Found 7 matches` for its counts. From the
/// tool's structured result (Claude Code's shapes); `None` for other tools.
fn reader_line(name: &str, structured: &Value) -> Option<String> {
    let plural = |count: u64, one: &str, many: &str| {
        format!("{count} {}", if count == 1 { one } else { many })
    };
    match name {
        "Read" => match structured["type"].as_str()? {
            "text" => {
                let shown = structured["file"]["numLines"].as_u64()?;
                let total = structured["file"]["totalLines"].as_u64().unwrap_or(shown);
                Some(if shown < total {
                    format!("Read {shown} of {}", plural(total, "line", "lines"))
                } else {
                    format!("Read {}", plural(shown, "line", "lines"))
                })
            }
            "image" => Some("Read an image".to_owned()),
            "pdf" => Some("Read a PDF".to_owned()),
            "notebook" => {
                let cells = structured["file"]["cells"].as_array().map_or(0, Vec::len);
                Some(format!("Read {}", plural(cells as u64, "cell", "cells")))
            }
            _ => None,
        },
        "Glob" => Some(format!(
            "Found {}",
            plural(structured["numFiles"].as_u64()?, "file", "files")
        )),
        "Grep" => match structured["mode"].as_str()? {
            "content" => Some(format!(
                "Found {}",
                plural(structured["numLines"].as_u64()?, "line", "lines")
            )),
            "count" => Some(format!(
                "Found {} in {}",
                plural(structured["numMatches"].as_u64()?, "match", "matches"),
                plural(
                    structured["numFiles"].as_u64().unwrap_or(0),
                    "file",
                    "files"
                )
            )),
            _ => Some(format!(
                "Found {}",
                plural(structured["numFiles"].as_u64()?, "file", "files")
            )),
        },
        _ => None,
    }
}

/// The line of a command's output a reader wants: the last one that says something (has a
/// letter or digit), which is where test runners and compilers put their verdict
/// (`3 passed in 0.02s`, `test result: ok.`, `error: could not compile`), not the first
/// (`=====`, `running 3 tests`).
fn verdict_index(lines: &[&str]) -> Option<usize> {
    lines
        .iter()
        .rposition(|line| line.chars().any(char::is_alphanumeric))
}

/// A command's output summarised by its verdict line (its last line with a letter or a
/// digit), with the count of lines when there are more: `3 passed in 0.02s (12 lines)`; neutralised.
pub fn verdict_summary(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let Some(index) = verdict_index(&lines) else {
        return "(no output)".to_owned();
    };
    let mut short = summary_row(lines[index]);
    if lines.len() > 1 {
        short.push_str(&format!(" ({} lines)", lines.len()));
    }
    short
}

/// `line` trimmed and neutralised, cut to 100 characters (`…` when anything was left out):
/// the text of a summary row.
fn summary_row(line: &str) -> String {
    let escaped = printable(line.trim(), false);
    let mut short: String = escaped.chars().take(100).collect();
    if short.len() < escaped.len() {
        short.push('…');
    }
    short
}

/// [`verdict_summary`] in the output's colours, when it has colours and the verdict line fits
/// the row (100 columns of `plain`, the output without escape sequences, as the model read
/// it); `None` sends the caller to the plain summary.
fn colored_verdict_line(stdout: &str, plain: &str) -> Option<String> {
    if !stdout.contains('\x1b') {
        return None;
    }
    let plain_lines: Vec<&str> = plain.trim_end().lines().collect();
    let width = verdict_index(&plain_lines)
        .map_or(0, |index| render::display_width(plain_lines[index].trim()));
    if width > 100 {
        return None;
    }
    let lines: Vec<&str> = stdout.trim_end().lines().collect();
    let index = lines.iter().rposition(|line| {
        render::term::strip_styles(line)
            .chars()
            .any(char::is_alphanumeric)
    })?;
    let shown = render::printable_colored(lines[index].trim(), false);
    Some(if lines.len() > 1 {
        format!("{shown} ({} lines)", lines.len())
    } else {
        shown
    })
}

/// A web tool's line: `Fetched 12.3 KB from docs.rs (HTTP 200 OK)`, `Redirected to
/// another host (HTTP 301)`, `Did 2 searches in 3.1 s`; neutralised (the host is a
/// server's).
fn web_line(name: &str, structured: &Value) -> Option<String> {
    match name {
        "WebFetch" => {
            let code = structured["code"].as_u64()?;
            let text = structured["codeText"].as_str().unwrap_or_default();
            let url = structured["url"].as_str().unwrap_or_default();
            let host = tools::web::FetchUrl::parse(url)
                .map(|url| url.host)
                .unwrap_or_else(|_| url.to_owned());
            let bytes = structured["bytes"].as_u64().unwrap_or(0);
            let line = if (300..400).contains(&code) {
                format!("Redirected to another host (HTTP {code} {text})")
            } else {
                format!(
                    "Fetched {} from {host} (HTTP {code} {text})",
                    crate::cost::compact_bytes(bytes)
                )
            };
            Some(printable(line.trim_end(), false))
        }
        "WebSearch" => {
            let count = structured["searchCount"].as_u64()?;
            let seconds = structured["durationSeconds"].as_f64().unwrap_or(0.0);
            Some(format!(
                "Did {count} search{} in {seconds:.1} s",
                if count == 1 { "" } else { "es" }
            ))
        }
        _ => None,
    }
}

/// What a Bash command printed, escape sequences and all (its structured `stdout`), when
/// it printed any.
pub fn command_output(done: &executor::CompletedTool) -> Option<&str> {
    done.structured
        .as_ref()?
        .get("stdout")?
        .as_str()
        .filter(|stdout| !stdout.trim().is_empty())
}

/// The task list as rows: `☐` pending, `◐` in progress (bold, its `activeForm`), `☒`
/// completed (dim, struck through), each indented by five spaces. `live`: for the rows
/// under the status line, which a list with nothing left to do (every task completed, or
/// none) leaves empty.
pub fn checklist(tasks: &[tools::todo::Task], live: bool) -> Vec<String> {
    use tools::todo::TodoStatus;
    if live
        && tasks
            .iter()
            .all(|task| task.status == TodoStatus::Completed)
    {
        return Vec::new();
    }
    tasks
        .iter()
        .map(|task| match task.status {
            TodoStatus::Pending => format!("     ☐ {}", printable(&task.subject, false)),
            TodoStatus::InProgress => format!(
                "     \x1b[1m◐ {}\x1b[0m",
                printable(task.active_form.as_deref().unwrap_or(&task.subject), false)
            ),
            TodoStatus::Completed => {
                format!("     \x1b[2;9m☒ {}\x1b[0m", printable(&task.subject, false))
            }
        })
        .collect()
}

/// A failed call's error in full, as far as 10 lines (the reason is often on the second:
/// a hook's message, the exact mismatch), red, under one "Error:" whatever the message
/// starts with; the terminal wraps long lines.
pub fn error_lines(text: &str) -> Vec<String> {
    const ERROR_LINES: usize = 10;
    const INDENT: &str = "     ";
    let text = text.trim();
    let message = ["Error: ", "error: ", "Error ", "error "]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix))
        .unwrap_or(text);
    let all: Vec<&str> = message
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let mut lines = Vec::new();
    for (index, line) in all.iter().take(ERROR_LINES).enumerate() {
        let line = printable(line.trim_end(), false);
        lines.push(if index == 0 {
            format!("  ⎿  {}", red(&format!("Error: {line}")))
        } else {
            format!("{INDENT}{}", red(&line))
        });
    }
    if lines.is_empty() {
        lines.push(format!("  ⎿  {}", red("Error")));
    }
    if all.len() > ERROR_LINES {
        lines.push(format!(
            "{INDENT}{}",
            dim(&format!(
                "… +{} lines (Ctrl-O shows all)",
                all.len() - ERROR_LINES
            ))
        ));
    }
    lines
}

/// A finished subagent's line, from its Task result: `Done (12 tool uses · 35.2k tokens ·
/// 1m 2s)`, as Claude Code shows it.
pub fn subagent_done(structured: &Value) -> Option<String> {
    let uses = structured.get("totalToolUseCount")?.as_u64()?;
    let tokens = structured.get("totalTokens")?.as_u64()?;
    let millis = structured.get("totalDurationMs")?.as_u64()?;
    let tokens = if tokens >= 1000 {
        format!("{:.1}k tokens", tokens as f64 / 1000.0)
    } else {
        format!("{tokens} tokens")
    };
    let seconds = millis / 1000;
    let time = if seconds >= 60 {
        format!("{}m {}s", seconds / 60, seconds % 60)
    } else {
        format!("{:.1}s", millis as f64 / 1000.0)
    };
    Some(format!(
        "Done ({uses} tool use{} · {tokens} · {time})",
        if uses == 1 { "" } else { "s" }
    ))
}

/// Why a turn stopped short, as a sentence for the terminal (the stable names are for JSON).
pub fn stop_sentence(terminal: &Terminal) -> String {
    let detail = |text: &str| printable(text, false);
    match terminal {
        Terminal::Completed => "the turn completed".to_owned(),
        Terminal::MaxTurns => "stopped: the turn limit (--max-turns) was reached".to_owned(),
        Terminal::AbortedStreaming => "interrupted while the model was answering".to_owned(),
        Terminal::AbortedTools => "interrupted while tools were running".to_owned(),
        Terminal::PromptTooLong => {
            "stopped: the conversation is too long for the model even after compacting".to_owned()
        }
        Terminal::BlockingLimit(text) => format!(
            "stopped: the conversation is at the context limit and cannot be compacted ({})",
            detail(text)
        ),
        Terminal::ModelError(error) => {
            format!(
                "stopped: the model request failed: {}",
                detail(&error.to_string())
            )
        }
        Terminal::ImageError(text) => {
            format!("stopped: the API rejected an image: {}", detail(text))
        }
        Terminal::StopHookPrevented(text) => {
            format!("stopped by a Stop hook: {}", detail(text))
        }
        Terminal::RepeatedToolCall => {
            "stopped: the model repeated the same tool call too many times".to_owned()
        }
        Terminal::StopHookCapReached => {
            "stopped: Stop hooks sent the model back to work too many times".to_owned()
        }
        Terminal::MaxBudget(text) => {
            format!("stopped: the spending limit was reached ({})", detail(text))
        }
        Terminal::TokenBudgetReached => "stopped: the output-token budget is used up".to_owned(),
        Terminal::DiminishingReturns => {
            "stopped: the model kept answering briefly; it seems done".to_owned()
        }
    }
}

/// A finished call in full, for Ctrl-O: its `⏺` line, its whole input (pretty JSON) and
/// its whole result, indented.
pub fn detail_lines(done: &executor::CompletedTool, input: &Value) -> Vec<String> {
    let mut lines = vec![format!("⏺ {}", tool_label(&done.name, input))];
    let pretty = serde_json::to_string_pretty(input).unwrap_or_default();
    lines.push(dim("  input:"));
    lines.extend(
        printable(&pretty, true)
            .lines()
            .map(|line| format!("    {line}")),
    );
    lines.push(dim(if done.result.is_error == Some(true) {
        "  result (error):"
    } else {
        "  result:"
    }));
    lines.extend(
        printable(&result_text(&done.result), true)
            .lines()
            .map(|line| format!("    {line}")),
    );
    lines
}

/// Whether `line` is how Bash reports a command's end (`Exit code 2`, `Killed by signal 9
/// (SIGKILL)`, `Command timed out after ...`).
pub fn is_exit_status(line: &str) -> bool {
    let line = line.trim();
    !line.contains('\n')
        && (line.starts_with("Exit code ")
            || line.starts_with("Killed by signal ")
            || line.starts_with("Exited abnormally")
            || line.starts_with("Command timed out"))
}

/// A tool result's text (its text blocks joined).
pub fn result_text(result: &protocol::ToolResultBlock) -> String {
    result.content.text()
}

/// The first line of a tool result, cut to 100 characters, for the `⎿` line.
pub fn result_summary(result: &protocol::ToolResultBlock) -> String {
    let text = result_text(result);
    let lines = text.lines().count();
    let first = text
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("");
    let mut short = summary_row(first);
    if lines > 1 {
        short.push_str(&format!(" (+{} lines)", lines - 1));
    }
    short
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn readers_say_what_they_found() {
        let read = json!({"type": "text", "file": {"filePath": "a.py", "content": "", "numLines": 9, "startLine": 1, "totalLines": 9}});
        assert_eq!(reader_line("Read", &read).as_deref(), Some("Read 9 lines"));
        let part =
            json!({"type": "text", "file": {"numLines": 20, "startLine": 5, "totalLines": 120}});
        assert_eq!(
            reader_line("Read", &part).as_deref(),
            Some("Read 20 of 120 lines")
        );
        let one = json!({"type": "text", "file": {"numLines": 1, "totalLines": 1}});
        assert_eq!(reader_line("Read", &one).as_deref(), Some("Read 1 line"));
        let globbed = json!({"numFiles": 3, "filenames": ["a", "b", "c"]});
        assert_eq!(
            reader_line("Glob", &globbed).as_deref(),
            Some("Found 3 files")
        );
        let files = json!({"mode": "files_with_matches", "numFiles": 1, "filenames": ["a"]});
        assert_eq!(reader_line("Grep", &files).as_deref(), Some("Found 1 file"));
        let content = json!({"mode": "content", "numFiles": 2, "numLines": 12});
        assert_eq!(
            reader_line("Grep", &content).as_deref(),
            Some("Found 12 lines")
        );
        let counted = json!({"mode": "count", "numFiles": 2, "numMatches": 7});
        assert_eq!(
            reader_line("Grep", &counted).as_deref(),
            Some("Found 7 matches in 2 files")
        );
        assert_eq!(reader_line("Bash", &globbed), None);
    }

    #[test]
    fn a_command_is_summarised_by_its_verdict() {
        let pytest = "============================= test session starts ==============================\ncollected 3 items\n\ntest_a.py ...                                                            [100%]\n\n============================== 3 passed in 0.02s ===============================\n";
        assert_eq!(
            verdict_summary(pytest),
            "============================== 3 passed in 0.02s =============================== (6 lines)"
        );
        assert_eq!(
            verdict_summary("running 2 tests\n..\ntest result: ok. 2 passed\n-----\n"),
            "test result: ok. 2 passed (4 lines)"
        );
        assert_eq!(verdict_summary("done"), "done");
        assert_eq!(verdict_summary("\n"), "(no output)");
        let colored = "\x1b[1mrunning\x1b[0m\n\x1b[32mok: 3 passed\x1b[0m\n";
        let line = colored_verdict_line(colored, "running\nok: 3 passed\n").unwrap();
        assert!(
            line.contains("ok: 3 passed") && line.ends_with("(2 lines)"),
            "{line:?}"
        );
    }

    #[test]
    fn web_calls_show_the_host_size_and_status() {
        let fetched = json!({"bytes": 12_400, "code": 200, "codeText": "OK", "url": "https://Docs.rs/serde", "result": "", "durationMs": 5});
        assert_eq!(
            web_line("WebFetch", &fetched).as_deref(),
            Some("Fetched 12.1 KiB from docs.rs (HTTP 200 OK)")
        );
        let moved = json!({"bytes": 0, "code": 301, "codeText": "Moved Permanently", "url": "https://a.dev/"});
        assert_eq!(
            web_line("WebFetch", &moved).as_deref(),
            Some("Redirected to another host (HTTP 301 Moved Permanently)")
        );
        let hostile = json!({"bytes": 1, "code": 200, "codeText": "OK", "url": "\u{1b}[2Jx"});
        assert!(!web_line("WebFetch", &hostile).unwrap().contains('\u{1b}'));
        let searched =
            json!({"query": "q", "results": [], "durationSeconds": 3.06, "searchCount": 2});
        assert_eq!(
            web_line("WebSearch", &searched).as_deref(),
            Some("Did 2 searches in 3.1 s")
        );
        assert_eq!(
            tool_label(
                "WebFetch",
                &json!({"url": "https://docs.rs/x", "prompt": "p"})
            ),
            "WebFetch(https://docs.rs/x)"
        );
        assert_eq!(
            tool_label("WebSearch", &json!({"query": "tokio select"})),
            "WebSearch(tokio select)"
        );
    }
}
