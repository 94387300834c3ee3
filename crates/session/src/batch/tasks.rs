//! The task file (`TASKS.jsonl`) and the shard a run takes of it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::BatchError;

/// One task: a prompt for a headless session in its own checkout of a repository.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Task {
    /// The task's name: unique in the file; letters, digits, `.`, `_`, `-` (it names the
    /// task's folder and files).
    pub id: String,
    /// A local repository (a path, relative to the task file's folder) or a git URL.
    pub repo: String,
    /// What to check out (a branch, tag or commit) [default: the repository's HEAD].
    #[serde(rename = "ref")]
    pub git_ref: Option<String>,
    /// The prompt.
    pub prompt: String,
    /// The model [default: the batch's].
    pub model: Option<String>,
    /// At most this many turns (`--max-turns`).
    pub max_turns: Option<u32>,
    /// At most this many dollars (`--max-budget-usd`), within the batch's total.
    pub max_budget_usd: Option<f64>,
    /// Allow rules added to the batch's (`--allowedTools`), one rule each.
    pub allowed_tools: Option<Vec<String>>,
    /// The permission mode [default: the batch's].
    pub permission_mode: Option<String>,
}

impl Task {
    /// Whether `repo` is a URL to clone rather than a folder.
    pub fn is_url(&self) -> bool {
        let repo = self.repo.as_str();
        repo.contains("://")
            || (repo.contains('@') && repo.contains(':') && !Path::new(repo).exists())
    }

    /// The local repository, relative to `base` (the task file's folder).
    pub fn local_repo(&self, base: &Path) -> PathBuf {
        base.join(&self.repo)
    }
}

/// The tasks of a task file's `text` (`file` names it in errors): one JSON object a line;
/// blank lines and lines starting with `//` are skipped.
///
/// # Errors
///
/// [`BatchError::Task`] naming the line: not JSON, an unknown or missing key, a bad id, a
/// duplicate id, an empty prompt.
pub fn read_tasks(text: &str, file: &Path) -> Result<Vec<Task>, BatchError> {
    let mut tasks: Vec<Task> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line_number = number + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        let bad = |why: String| BatchError::Task {
            file: file.to_path_buf(),
            line: line_number,
            why,
        };
        let task: Task = serde_json::from_str(line).map_err(|error| {
            // serde's "at line 1 column N" is within this line: the column is what helps.
            let text = error.to_string();
            let text = text
                .rfind(" at line ")
                .map_or(text.as_str(), |at| &text[..at]);
            bad(format!("{text} (column {})", error.column()))
        })?;
        if task.id.is_empty()
            || task.id.len() > 100
            || task.id.starts_with('.')
            || !task
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(bad(format!(
                "id {:?}: letters, digits, '.', '_' and '-' only, at most 100, not starting with '.'",
                task.id
            )));
        }
        if tasks.iter().any(|earlier| earlier.id == task.id) {
            return Err(bad(format!("id {:?} is used by an earlier line", task.id)));
        }
        if task
            .git_ref
            .as_deref()
            .is_some_and(|at| at.is_empty() || at.starts_with('-'))
        {
            return Err(bad(
                "ref must name a branch, tag or commit (not empty, not starting with '-')".into(),
            ));
        }
        if task.prompt.trim().is_empty() {
            return Err(bad("the prompt is empty".into()));
        }
        if let Some(mode) = &task.permission_mode {
            mode.parse::<tools::PermissionMode>()
                .map_err(|_| bad(format!("permission_mode {mode:?} is not a mode")))?;
        }
        tasks.push(task);
    }
    Ok(tasks)
}

/// A deterministic slice of the task file, for one of `count` machines or pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which slice, from 1.
    pub index: usize,
    /// How many slices.
    pub count: usize,
}

impl Shard {
    /// `INDEX/COUNT`, INDEX from 1 (`2/3`); or `INDEX` alone with `zero_based_env` (a
    /// Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`, which counts from 0) and a count.
    ///
    /// # Errors
    ///
    /// [`BatchError::Shard`] for anything else (0, an index over the count).
    pub fn parse(text: &str) -> Result<Self, BatchError> {
        let bad = || BatchError::Shard(text.to_owned());
        let (index, count) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = index.trim().parse().map_err(|_| bad())?;
        let count: usize = count.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }

    /// The shard of an Indexed Job's pod: `JOB_COMPLETION_INDEX` (from 0) of `count`.
    ///
    /// # Errors
    ///
    /// [`BatchError::JobIndex`] for an index that is not a number below `count`.
    pub fn from_completion_index(index: &str, count: usize) -> Result<Self, BatchError> {
        let bad = || BatchError::JobIndex {
            count,
            why: format!(
                "JOB_COMPLETION_INDEX={index:?} is not an index from 0 to {}",
                count.saturating_sub(1)
            ),
        };
        let zero: usize = index.trim().parse().map_err(|_| bad())?;
        Self::parse(&format!("{}/{count}", zero + 1)).map_err(|_| bad())
    }

    /// Whether the task at `position` (from 0, in file order) is this shard's.
    pub fn takes(self, position: usize) -> bool {
        position % self.count == self.index - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_read_strictly_and_errors_name_the_line() {
        let file = Path::new("tasks.jsonl");
        let text = "{\"id\": \"a\", \"repo\": \"r\", \"prompt\": \"fix\"}\n\n// note\n{\"id\": \"b\", \"repo\": \"https://x/y.git\", \"ref\": \"v1\", \"prompt\": \"p\", \"max_turns\": 3}\n";
        let tasks = read_tasks(text, file).expect("valid");
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[1].git_ref.as_deref(), Some("v1"));
        assert!(tasks[1].is_url() && !tasks[0].is_url());
        let unknown = read_tasks(
            "{\"id\": \"a\", \"repo\": \"r\", \"prompt\": \"p\", \"modle\": \"x\"}",
            file,
        );
        let message = unknown.unwrap_err().to_string();
        assert!(
            message.contains("tasks.jsonl:1") && message.contains("modle"),
            "{message}"
        );
        let duplicate = read_tasks(
            "{\"id\": \"a\", \"repo\": \"r\", \"prompt\": \"p\"}\n{\"id\": \"a\", \"repo\": \"r\", \"prompt\": \"q\"}",
            file,
        );
        assert!(duplicate.unwrap_err().to_string().contains(":2:"));
        let path_id = read_tasks(
            "{\"id\": \"../x\", \"repo\": \"r\", \"prompt\": \"p\"}",
            file,
        );
        assert!(path_id.is_err());
        let option = read_tasks(
            "{\"id\": \"x\", \"repo\": \"r\", \"ref\": \"--orphan=y\", \"prompt\": \"p\"}",
            file,
        );
        assert!(option.unwrap_err().to_string().contains("ref must name"));
    }

    #[test]
    fn shards_split_the_file_deterministically() {
        let shard = Shard::parse("2/3").expect("valid");
        let taken: Vec<usize> = (0..9).filter(|&at| shard.takes(at)).collect();
        assert_eq!(taken, [1, 4, 7]);
        assert_eq!(
            Shard::from_completion_index("0", 3).expect("valid"),
            Shard { index: 1, count: 3 }
        );
        assert!(
            Shard::parse("0/3").is_err()
                && Shard::parse("4/3").is_err()
                && Shard::parse("x").is_err()
        );
    }
}
