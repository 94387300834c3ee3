//! `agent sessions`: this folder's sessions, newest first, as a table or JSON (the
//! summaries come from [`session::sessions`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use session::sessions::{Summary, list, numbered};

/// Shows this folder's sessions (`dir`), newest first, numbered (through `say`), and asks
/// which to continue (through `ask`: `--resume` without an id, `/resume`). `current` is left out (the
/// session the user is in). `None` when there is none or the answer is empty.
///
/// # Errors
///
/// When the answer is not one of the numbers.
pub fn pick(
    dir: &Path,
    current: Option<&str>,
    say: &mut dyn FnMut(&str),
    ask: &mut dyn FnMut(&str) -> Option<String>,
) -> anyhow::Result<Option<PathBuf>> {
    let sessions: Vec<Summary> = list(dir)
        .into_iter()
        .filter(|s| Some(s.id.as_str()) != current)
        .take(50)
        .collect();
    if sessions.is_empty() {
        say("No earlier sessions in this folder.");
        return Ok(None);
    }
    say(&numbered(&sessions));
    let Some(answer) = ask("Resume which session? (its number; Enter cancels): ")
        .filter(|answer| !answer.is_empty())
    else {
        return Ok(None);
    };
    let chosen = answer
        .parse::<usize>()
        .ok()
        .and_then(|number| number.checked_sub(1))
        .and_then(|index| sessions.get(index));
    match chosen {
        Some(s) => Ok(Some(s.path.clone())),
        None => anyhow::bail!(
            "{:?} is not one of the numbers 1 to {}",
            render::printable(&answer, false),
            sessions.len()
        ),
    }
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
