//! `agent sessions`: this folder's sessions, newest first, as a table or JSON (the
//! summaries come from [`session::sessions`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use render::picker::{Item, Picker};
use serde_json::Value;
use session::sessions::{Summary, list};

/// The picker `--resume` without an id and `/resume` show: this folder's sessions (`dir`)
/// but `current` (the one the user is in), the ones used at a terminal first and the
/// headless runs after them (a batch of `-p` runs would otherwise push them out of view),
/// each newest first, at most 100; each with its time, turns, cost and kind, and its first
/// prompts as the preview. Also the files, by the picker's indexes. `None` when there is no
/// session.
pub fn picker(dir: &Path, current: Option<&str>) -> Option<(Picker, Vec<PathBuf>)> {
    let mut sessions: Vec<Summary> = list(dir)
        .into_iter()
        .filter(|s| Some(s.id.as_str()) != current)
        .collect();
    // Stable: each kind stays newest first.
    sessions.sort_by_key(|s| s.mode == "headless");
    sessions.truncate(100);
    if sessions.is_empty() {
        return None;
    }
    let items = sessions
        .iter()
        .map(|s| {
            let label: String = s.label().chars().take(60).collect();
            Item {
                label,
                detail: format!(
                    "{} · {} turn{} · {} · {}",
                    session::transcript::short_time(&s.started),
                    s.turns,
                    if s.turns == 1 { "" } else { "s" },
                    s.cost_label(),
                    s.mode
                ),
                preview: s
                    .prompts
                    .iter()
                    .map(|prompt| format!("› {prompt}"))
                    .chain([format!("session {}", s.id)])
                    .collect(),
            }
        })
        .collect();
    let paths = sessions.into_iter().map(|s| s.path).collect();
    Some((Picker::new("Resume a session", items, 0), paths))
}

/// Runs `agent sessions` for the folder `cwd`: a table on stdout, or a JSON list.
///
/// # Errors
///
/// When the folder of sessions cannot be named.
pub fn run(cwd: &Path, json: bool) -> anyhow::Result<u8> {
    let dir = session::transcript::project_dir(cwd)?;
    let sessions = list(&dir);
    if json {
        let list: Vec<Value> = sessions.iter().map(Summary::json).collect();
        // A closed stdout (`agent sessions | head`) ends the listing, not the process.
        let _ = writeln!(std::io::stdout().lock(), "{}", Value::Array(list));
        return Ok(0);
    }
    if sessions.is_empty() {
        eprintln!("agent: no sessions in {}", dir.display());
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "Sessions of {}:",
        render::printable(&cwd.display().to_string(), false)
    );
    let _ = writeln!(
        out,
        "ID                                    STARTED (UTC)     TURNS  COST     MODE         TITLE OR FIRST PROMPT"
    );
    for s in &sessions {
        let started = session::transcript::short_time(&s.started);
        let (cost, prompt) = (
            s.cost_label(),
            s.label().chars().take(60).collect::<String>(),
        );
        let written = writeln!(
            out,
            "{:<37} {:<17} {:>5}  {:<8} {:<12} {}",
            render::printable(&s.id, false),
            started,
            s.turns,
            cost,
            s.mode,
            render::printable(&prompt, false)
        );
        if written.is_err() {
            break;
        }
    }
    Ok(0)
}
