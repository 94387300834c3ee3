//! `results.jsonl`: one object per task, written as each task ends.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::BatchError;

/// How a task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Its session ended with success (exit code 0).
    Done,
    /// It could not start, or its session ended with an error.
    Failed,
    /// It was stopped (Ctrl-C, the batch's budget) before its end.
    Stopped,
}

impl Status {
    /// Its name in `results.jsonl`: `done`, `failed`, `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }
}

/// One line of `results.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TaskResult {
    /// The task's id.
    pub id: String,
    /// How it ended.
    pub status: Status,
    /// The exit code `agent -p` would have given.
    pub exit_code: u8,
    /// What it cost, in dollars (`null`: a model had no price).
    pub total_cost_usd: Option<f64>,
    /// Tokens of every request (main agent and subagents): uncached input.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input written to the prompt cache.
    pub cache_creation_input_tokens: u64,
    /// Input read from the prompt cache.
    pub cache_read_input_tokens: u64,
    /// The model's turns.
    pub num_turns: u32,
    /// Wall time, in milliseconds.
    pub duration_ms: u64,
    /// The task's changes to its checkout (`git diff` against the start), when it ran.
    pub diff_path: Option<PathBuf>,
    /// The session's transcript, when it opened.
    pub transcript_path: Option<PathBuf>,
    /// The final message, or why the task failed.
    pub result: String,
    /// The session's id, when it opened.
    pub session_id: Option<String>,
}

/// `results.jsonl` in the output folder.
#[derive(Debug)]
pub struct ResultsFile {
    path: PathBuf,
}

impl ResultsFile {
    /// The results file of `out`.
    pub fn new(out: &Path) -> Self {
        Self::at(&out.join("results.jsonl"))
    }

    /// The results file `path` (any name).
    pub fn at(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The results written so far, the last line of each task winning (a rerun appends);
    /// none when there is no file yet.
    ///
    /// # Errors
    ///
    /// [`BatchError::Io`] when it cannot be read; [`BatchError::Results`] naming a line
    /// that is not a result (a line cut by a kill mid-write, at the end, is skipped).
    pub fn read(&self) -> Result<Vec<TaskResult>, BatchError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(BatchError::io(&self.path, error)),
        };
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        let mut results: Vec<TaskResult> = Vec::new();
        for (number, line) in lines.iter().enumerate() {
            let result: TaskResult = match serde_json::from_str(line) {
                Ok(result) => result,
                // The last line of a batch killed while writing it.
                Err(_) if number + 1 == lines.len() && !text.ends_with('\n') => continue,
                Err(error) => {
                    return Err(BatchError::Results {
                        file: self.path.clone(),
                        line: number + 1,
                        why: error.to_string(),
                    });
                }
            };
            results.retain(|earlier| earlier.id != result.id);
            results.push(result);
        }
        Ok(results)
    }

    /// Appends `result` as one line, flushed and synced: a batch killed after this loses
    /// nothing of it.
    ///
    /// # Errors
    ///
    /// [`BatchError::Io`].
    pub fn append(&self, result: &TaskResult) -> Result<(), BatchError> {
        let mut line = serde_json::to_string(result)
            .map_err(|error| BatchError::io(&self.path, error.into()))?;
        line.push('\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|error| BatchError::io(&self.path, error))?;
        // A line cut by an earlier kill is ended first, so this one stays whole.
        let cut = std::fs::read(&self.path)
            .map(|bytes| !bytes.is_empty() && !bytes.ends_with(b"\n"))
            .unwrap_or(false);
        if cut {
            line.insert(0, '\n');
        }
        file.write_all(line.as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(|error| BatchError::io(&self.path, error))
    }
}
