//! Helpers every tool uses: input decoding, blocking work, text shaping.

use std::io;
use std::path::Path;

use executor::ToolError;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Decodes a tool input. The executor has checked it against the schema already; this
/// catches direct callers.
///
/// # Errors
///
/// [`ToolError::InvalidInput`] naming the problem.
pub(crate) fn parse_input<T: DeserializeOwned>(tool: &str, input: Value) -> Result<T, ToolError> {
    serde_json::from_value(input)
        .map_err(|error| ToolError::InvalidInput(format!("invalid input for {tool}: {error}")))
}

/// Runs blocking file-system work off the async threads and stops waiting when `cancel`
/// fires. The work receives the token and must poll it in its loops; it is not waited for
/// once cancelled (reads only: never use this for work that must finish, such as a write).
///
/// # Errors
///
/// The work's error; [`ToolError::Killed`] when cancelled; [`ToolError::CouldNotRun`] when the
/// worker panicked.
pub(crate) async fn run_cancellable<T, F>(
    cancel: &CancellationToken,
    work: F,
) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(CancellationToken) -> Result<T, ToolError> + Send + 'static,
{
    let token = cancel.clone();
    let handle = tokio::task::spawn_blocking(move || work(token));
    tokio::select! {
        joined = handle => joined.map_err(worker_failed)?,
        () = cancel.cancelled() => Err(ToolError::Killed("interrupted before it finished".into())),
    }
}

/// Runs blocking work that must finish once started (a write), off the async threads.
///
/// # Errors
///
/// The work's error; [`ToolError::CouldNotRun`] when the worker panicked.
pub(crate) async fn run_to_completion<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(worker_failed)?
}

fn worker_failed(error: tokio::task::JoinError) -> ToolError {
    ToolError::CouldNotRun(format!("the tool's worker thread failed: {error}"))
}

/// Maps an I/O error on `path`: problems the model can act on (missing, permission, not a
/// directory) are invalid input; the rest could not run.
pub(crate) fn io_error(action: &str, path: &Path, error: &io::Error) -> ToolError {
    let message = format!("could not {action} {}: {error}", path.display());
    match error.kind() {
        io::ErrorKind::NotFound
        | io::ErrorKind::PermissionDenied
        | io::ErrorKind::NotADirectory
        | io::ErrorKind::IsADirectory
        | io::ErrorKind::AlreadyExists
        | io::ErrorKind::InvalidInput
        | io::ErrorKind::InvalidFilename
        | io::ErrorKind::ReadOnlyFilesystem => ToolError::InvalidInput(message),
        _ => ToolError::CouldNotRun(message),
    }
}

/// `line` cut to `max` characters, with a marker saying how many were cut.
pub(crate) fn truncate_line(line: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(line),
        Some((cut, _)) => {
            let rest = line[cut..].chars().count();
            std::borrow::Cow::Owned(format!(
                "{}… [line truncated: {rest} more characters]",
                &line[..cut]
            ))
        }
    }
}

/// Keeps the first and last `max / 2` characters of `text` when it has more than `max`,
/// with a marker in the middle saying how many were cut (plus `already_cut` characters
/// dropped before `text` was assembled).
pub(crate) fn truncate_middle(text: &str, max: usize, already_cut: u64) -> String {
    let total = text.chars().count();
    if total <= max && already_cut == 0 {
        return text.to_owned();
    }
    let keep_head = max / 2;
    let keep_tail = max - keep_head;
    if total <= max {
        // Only the reader's own cut: the halves are already in place around it.
        let middle = text
            .char_indices()
            .nth(keep_head.min(total))
            .map_or(text.len(), |(at, _)| at);
        return format!(
            "{}\n\n[... {already_cut} characters truncated ...]\n\n{}",
            &text[..middle],
            &text[middle..]
        );
    }
    let head_end = text
        .char_indices()
        .nth(keep_head)
        .map_or(text.len(), |(at, _)| at);
    let tail_start = text
        .char_indices()
        .nth(total - keep_tail)
        .map_or(text.len(), |(at, _)| at);
    let cut = (total - keep_head - keep_tail) as u64 + already_cut;
    format!(
        "{}\n\n[... {cut} characters truncated ...]\n\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

/// Lines of `text` from 1-based `first` to `last` (inclusive) as `N<TAB>line`, carriage
/// returns dropped.
pub(crate) fn numbered(text: &str, first: usize, last: usize) -> String {
    text.split('\n')
        .enumerate()
        .skip(first.saturating_sub(1))
        .take(last.saturating_sub(first.saturating_sub(1)))
        .map(|(index, line)| format!("{}\t{}", index + 1, line.strip_suffix('\r').unwrap_or(line)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `Tool` impl of a file tool: its name, the module's `DESCRIPTION`, its schema, and
/// `$run(&shared, &workspace, &input, ...)` on a blocking thread.
///
/// - `file_tool!(T, "Read", run)`: concurrency-safe and read-only; `run` also gets the
///   call's cancellation token and stops when it fires.
/// - `file_tool!(T, "Write", writes(prepare))`: `prepare` makes every check and works the
///   write out (`crate::files::PreparedWrite`): alone, it is the validation (see
///   `executor::Tool::validate`); the call commits what it returns. Runs alone and, once
///   started, to completion
///   (reporting "interrupted" for a file written anyway would mislead the model).
macro_rules! file_tool {
    ($tool:ident, $name:literal, writes($prepare:path)) => {
        impl Tool for $tool {
            fn name(&self) -> &str {
                $name
            }

            fn description(&self) -> &str {
                DESCRIPTION
            }

            fn input_schema(&self) -> &Value {
                &self.schema
            }

            /// Everything but the write: the file read first and unchanged, the change
            /// possible (see [`executor::Tool::validate`]).
            fn validate<'a>(
                &'a self,
                input: &'a Value,
                context: &'a ToolContext,
            ) -> executor::ValidateFuture<'a> {
                Box::pin(async move {
                    let input: Input = parse_input($name, input.clone())?;
                    let shared = Arc::clone(&self.shared);
                    let workspace = shared.effective(&context.workspace);
                    run_to_completion(move || $prepare(&shared, &workspace, &input).map(|_| ()))
                        .await
                })
            }

            fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
                Box::pin(async move {
                    let input: Input = parse_input($name, input)?;
                    let shared = Arc::clone(&self.shared);
                    let workspace = shared.effective(&context.workspace);
                    run_to_completion(move || {
                        $prepare(&shared, &workspace, &input)?.commit(&shared)
                    })
                    .await
                })
            }
        }
    };
    ($tool:ident, $name:literal, $run:path) => {
        impl Tool for $tool {
            fn name(&self) -> &str {
                $name
            }

            fn description(&self) -> &str {
                DESCRIPTION
            }

            fn input_schema(&self) -> &Value {
                &self.schema
            }

            fn is_concurrency_safe(&self, _input: &Value) -> bool {
                true
            }

            fn is_read_only(&self, _input: &Value) -> bool {
                true
            }

            fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
                Box::pin(async move {
                    let input: Input = parse_input($name, input)?;
                    let shared = Arc::clone(&self.shared);
                    let workspace = shared.effective(&context.workspace);
                    run_cancellable(&context.cancel, move |cancel| {
                        $run(&shared, &workspace, &input, &cancel)
                    })
                    .await
                })
            }
        }
    };
}
pub(crate) use file_tool;

/// 64 random bits from the operating system (std's hasher keys come from `getrandom`).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_truncation_counts_characters() {
        assert_eq!(truncate_line("abc", 3), "abc");
        assert_eq!(
            truncate_line("abcdé", 3),
            "abc… [line truncated: 2 more characters]"
        );
        assert_eq!(
            truncate_line("ééé", 1),
            "é… [line truncated: 2 more characters]"
        );
    }

    #[test]
    fn middle_truncation_says_how_much_was_cut() {
        assert_eq!(truncate_middle("short", 10, 0), "short");
        assert_eq!(
            truncate_middle("0123456789", 4, 0),
            "01\n\n[... 6 characters truncated ...]\n\n89"
        );
        assert_eq!(
            truncate_middle("abcd", 4, 100),
            "ab\n\n[... 100 characters truncated ...]\n\ncd"
        );
        assert_eq!(
            truncate_middle("éééééé", 2, 0),
            "é\n\n[... 4 characters truncated ...]\n\né"
        );
    }

    #[test]
    fn numbering_starts_at_one_without_padding() {
        assert_eq!(numbered("a\r\nb\nc", 1, 3), "1\ta\n2\tb\n3\tc");
        assert_eq!(numbered("a\nb\nc\nd", 2, 3), "2\tb\n3\tc");
        assert_eq!(numbered("a", 1, 9), "1\ta");
    }
}
