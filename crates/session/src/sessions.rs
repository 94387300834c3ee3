//! The sessions of a folder, newest first, summarized for a list or a picker.
//!
//! Each session file (`<sessions>/<id>.jsonl`, ours or Claude Code's) is read for: its id,
//! when it started (its first entry's time), the folder it ran in, its first prompt, its
//! turns (the user's prompts), its cost (each assistant entry's usage at its model's
//! built-in prices; `null` when a model has none) and whether it was interactive (Claude
//! Code's `entrypoint` of its last entry that has one: `cli` interactive, `sdk-cli` headless;
//! `unknown` for files that do not say). Damaged lines are skipped.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// How many of a session's first prompts a [`Summary`] keeps.
pub const PROMPTS_KEPT: usize = 3;

/// What `agent sessions` shows of one session.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The session id (the file's name without `.jsonl`).
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// Its first entry's time (RFC 3339), empty when none has one.
    pub started: String,
    /// The folder it ran in.
    pub folder: String,
    /// The first prompt, on one line.
    pub first_prompt: String,
    /// The first [`PROMPTS_KEPT`] prompts, each on one line (a picker's preview).
    pub prompts: Vec<String>,
    /// The user's prompts.
    pub turns: usize,
    /// US dollars; `None` when a response's model has no known prices.
    pub cost: Option<f64>,
    /// `interactive`, `headless` or `unknown`.
    pub mode: &'static str,
    /// The title a hook gave it (Claude Code's `custom-title` entries: the last one).
    pub title: Option<String>,
}

impl Summary {
    /// Its cost as a list shows it (`$0.0123`, `?` when unknown).
    pub fn cost_label(&self) -> String {
        self.cost
            .map_or_else(|| "?".to_owned(), |cost| format!("${cost:.4}"))
    }

    /// It as `agent sessions --json` lists it: `session_id`, `path`, `started`, `folder`,
    /// `first_prompt`, `turns`, `total_cost_usd`, `mode`, `title`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "session_id": self.id, "path": self.path, "started": self.started,
            "folder": self.folder, "first_prompt": self.first_prompt, "turns": self.turns,
            "total_cost_usd": self.cost, "mode": self.mode, "title": self.title,
        })
    }

    /// What names it in a list: its title, else its first prompt.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.first_prompt)
    }
}

/// The summary of one session file; `None` when it holds no entry at all.
pub fn summarize(path: &Path) -> Option<Summary> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut summary = Summary {
        id: path.file_stem()?.to_string_lossy().into_owned(),
        path: path.to_path_buf(),
        started: String::new(),
        folder: String::new(),
        first_prompt: String::new(),
        prompts: Vec::new(),
        turns: 0,
        cost: Some(0.0),
        mode: "unknown",
        title: None,
    };
    let mut any = false;
    // Turns as `agent_turn` entries count them (a rewind writes earlier prompts again).
    let mut marked_turns = 0;
    for entry in text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
    {
        any = true;
        if summary.started.is_empty()
            && let Some(time) = entry["timestamp"].as_str()
        {
            summary.started = time.to_owned();
        }
        if summary.folder.is_empty()
            && let Some(cwd) = entry["cwd"].as_str()
        {
            summary.folder = cwd.to_owned();
        }
        // What it was used as last (a headless session continued in a terminal is
        // interactive from then on).
        match entry["entrypoint"].as_str() {
            Some("cli") => summary.mode = "interactive",
            Some("sdk-cli" | "sdk-ts" | "sdk-py") => summary.mode = "headless",
            _ => {}
        }
        if entry["subtype"] == crate::transcript::TURN_SUBTYPE {
            marked_turns += 1;
        }
        match entry["type"].as_str() {
            Some("custom-title") => {
                summary.title = entry["customTitle"].as_str().map(str::to_owned);
            }
            Some("user") => {
                if let Some(prompt) = prompt_text(&entry) {
                    summary.turns += 1;
                    if summary.prompts.len() < PROMPTS_KEPT {
                        summary.prompts.push(prompt.chars().take(200).collect());
                    }
                    if summary.first_prompt.is_empty() {
                        summary.first_prompt = prompt;
                    }
                }
            }
            Some("assistant") => {
                if let Some(cost) = entry_cost(&entry) {
                    summary.cost = summary.cost.zip(cost).map(|(total, cost)| total + cost);
                }
            }
            _ => {}
        }
    }
    if marked_turns > 0 {
        summary.turns = marked_turns;
    }
    any.then_some(summary)
}

/// What an assistant entry's response cost: `None` when it records no usage; `Some(None)`
/// when it cannot be priced. Its `costUSD` (the session priced it with the settings' prices
/// then) when present, else its usage at the built-in table's prices for its model.
fn entry_cost(entry: &Value) -> Option<Option<f64>> {
    if let Some(cost) = entry[crate::transcript::COST_FIELD].as_f64() {
        return Some(Some(cost));
    }
    let message = &entry["message"];
    let usage: protocol::Usage = serde_json::from_value(message["usage"].clone()).ok()?;
    let (info, known) = context::lookup(message["model"].as_str().unwrap_or_default());
    Some(
        info.prices
            .filter(|_| known)
            .map(|prices| prices.cost(&usage)),
    )
}

/// The user's own text of a user entry, on one line, as they typed it: not tool results, a
/// compaction summary, reminders (`<system-reminder>`: the user context, an `@file`'s
/// content) or a command's output (`<bash-stdout>`, `<local-command-stdout>`, ...); a
/// `!command` shown as typed, not as its `<bash-input>` record.
pub(crate) fn prompt_text(entry: &Value) -> Option<String> {
    if entry["isCompactSummary"] == true || entry["isMeta"] == true {
        return None;
    }
    let content = &entry["message"]["content"];
    let text = match content {
        Value::String(text) => typed(text)?,
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .filter_map(typed)
            .collect::<Vec<_>>()
            .join(" "),
        _ => return None,
    };
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!line.is_empty()).then_some(line)
}

/// What the responses recorded in the transcript at `path` used and cost, so a resumed
/// session's figures go on from there rather than from zero: every assistant entry's usage
/// (an entry repeating the one before it, as Claude Code writes one entry per content block,
/// counted once), priced at its model's prices; the last one's context. Empty when the file
/// cannot be read.
pub fn totals(path: &Path) -> crate::cost::Totals {
    let mut totals = crate::cost::Totals::default();
    let Ok(text) = std::fs::read_to_string(path) else {
        return totals;
    };
    let mut last_id = String::new();
    for entry in text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
    {
        if entry["type"] != "assistant" {
            last_id.clear();
            continue;
        }
        let message = &entry["message"];
        let id = message["id"].as_str().unwrap_or_default();
        if !id.is_empty() && id == last_id {
            continue;
        }
        last_id = id.to_owned();
        let Ok(usage) = serde_json::from_value::<protocol::Usage>(message["usage"].clone()) else {
            continue;
        };
        totals.add(&usage, entry_cost(&entry).flatten());
        totals.requests += 1;
        totals.context = Some(usage.context_tokens());
    }
    totals
}

/// A text block of a user message as the user typed it: `None` for
/// one the agent generated (a reminder, a command's output, a compaction's summary), a
/// `!command` as typed, and of a headless prompt that came after piped input (which goes
/// first, in a code fence, as Claude Code sends it) the prompt.
pub fn typed(text: &str) -> Option<String> {
    let text = text.trim();
    if let Some(prompt) = after_piped_input(text) {
        return Some(prompt.to_owned());
    }
    if let Some(command) = text
        .strip_prefix("<bash-input>")
        .and_then(|rest| rest.strip_suffix("</bash-input>"))
    {
        return Some(format!("!{command}"));
    }
    let generated = [
        "<system-reminder>",
        "<bash-",
        "<local-command-",
        "<command-",
        context::BOUNDARY_MARKER,
    ];
    (!generated.iter().any(|tag| text.starts_with(tag))).then(|| text.to_owned())
}

/// What follows a leading code fence and a blank line: the prompt of `input | agent -p
/// prompt`; `None` when `text` is not of that form.
fn after_piped_input(text: &str) -> Option<&str> {
    let ticks = text.len() - text.trim_start_matches('`').len();
    if ticks < 3 || !text[ticks..].starts_with('\n') {
        return None;
    }
    let closing = format!("\n{}\n\n", "`".repeat(ticks));
    let at = text.find(&closing)?;
    let prompt = text[at + closing.len()..].trim();
    (!prompt.is_empty()).then_some(prompt)
}

/// Every session of `dir`, newest first (regular files only, links not followed).
pub fn list(dir: &Path) -> Vec<Summary> {
    let mut sessions: Vec<Summary> = crate::transcript::session_files(dir)
        .iter()
        .filter_map(|path| summarize(path))
        .collect();
    sessions.sort_by(|a, b| b.started.cmp(&a.started));
    sessions
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_transcripts_totals_count_each_response_once() {
        let dir = std::env::temp_dir().join(format!("agent-totals-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let assistant = |id: &str, input: u64| {
            json!({"type": "assistant", "message": {"id": id, "model": "claude-sonnet-4-5",
                "content": [], "usage": {"input_tokens": input, "output_tokens": 10}}})
            .to_string()
        };
        let user =
            json!({"type": "user", "message": {"role": "user", "content": "go"}}).to_string();
        let lines = [
            user.clone(),
            assistant("msg_1", 1_000),
            // Claude Code's second entry of the same response.
            assistant("msg_1", 1_000),
            user,
            assistant("msg_2", 3_000),
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let totals = totals(&path);
        assert_eq!(totals.requests, 2);
        assert_eq!((totals.input, totals.output), (4_000, 20));
        assert_eq!(totals.context, Some(3_010));
        // Sonnet 4.5: $3 and $15 per million.
        let cost = totals.cost.unwrap();
        assert!((cost - (0.012 + 0.0003)).abs() < 1e-9, "{cost}");
        assert_eq!(super::totals(&dir.join("missing.jsonl")).requests, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Found by a user's trial: the rewind list showed `<system-reminder>` and
    /// `<bash-input>` where `explain @src/mod1.py` and `!ls` were typed.
    #[test]
    fn a_prompt_is_shown_as_typed() {
        let entry = |content: Value| json!({"type": "user", "message": {"role": "user", "content": content}});
        let mentioned = entry(json!([
            {"type": "text", "text": "<system-reminder>\nContents of src/mod1.py:\n1\tdef f(): pass\n</system-reminder>"},
            {"type": "text", "text": "explain @src/mod1.py"},
        ]));
        assert_eq!(
            prompt_text(&mentioned).as_deref(),
            Some("explain @src/mod1.py")
        );
        let shell = entry(json!("<bash-input>ls -la</bash-input>"));
        assert_eq!(prompt_text(&shell).as_deref(), Some("!ls -la"));
        let output = entry(json!(
            "<bash-stdout>a\nb</bash-stdout><bash-stderr></bash-stderr>"
        ));
        assert_eq!(prompt_text(&output), None);
        let summary = json!({"isCompactSummary": true, "message": {"content": "Summary"}});
        assert_eq!(prompt_text(&summary), None);
        assert_eq!(
            prompt_text(&entry(json!("  two\n lines "))).as_deref(),
            Some("two lines")
        );
        // `cat log | agent -p "why did it fail?"`: the prompt, not the log.
        let piped = entry(json!("```\nERROR: disk full\n```\n\nwhy did it fail?"));
        assert_eq!(prompt_text(&piped).as_deref(), Some("why did it fail?"));
        let fenced = entry(json!("````\nuses ``` inside\n````\n\nexplain"));
        assert_eq!(prompt_text(&fenced).as_deref(), Some("explain"));
        let code_only = entry(json!("```\nfn main() {}\n```"));
        assert_eq!(
            prompt_text(&code_only).as_deref(),
            Some("``` fn main() {} ```")
        );
    }
}
