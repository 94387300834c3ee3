//! Files the session has read that changed on disk since by other means than Write and Edit
//! (the user's editor, a formatter, a Bash command): the seeds' changed-file attachments
//! (003_5d025cefc799750b.txt, the "next state" phase).
//!
//! [`FileWatch::changes`] compares every file of the read-file state with what was last seen
//! (length and modification time first, then the content's hash), describes each change as a
//! unified diff against the content kept when it was read (files up to [`SNAPSHOT_BYTES`]),
//! and records the new content as read: the model is told, so its next Edit is not refused
//! as stale.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::session::{FileStamp, Shared};

/// The largest file whose content is kept when read, to show a later change as a diff, in
/// bytes (a changed larger file is named without its lines).
pub const SNAPSHOT_BYTES: u64 = 256 * 1024;

/// The largest file read again to tell whether it changed, in bytes; a larger one whose
/// length or time changed is reported changed and dropped from the read-file state (the
/// model must Read it again before an Edit).
pub const RECHECK_BYTES: u64 = 16 * 1024 * 1024;

/// The most diff lines shown for one file (the rest are counted).
pub const MAX_DIFF_LINES: usize = 80;

/// One file that changed since the session last read or wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// The file (resolved).
    pub path: PathBuf,
    /// What happened.
    pub kind: ChangeKind,
}

/// How a file changed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// Its content changed: a unified diff (3 lines of context, at most [`MAX_DIFF_LINES`]
    /// lines, with a note of how many more), or `None` when no earlier copy was kept, the
    /// file is not UTF-8 text, is too long to diff, or a Read deny or ask rule covers it.
    /// Unless the whole diff is shown, the file is dropped from the read-file state: the
    /// model must Read it again before changing it.
    Modified {
        /// The diff, old to new.
        diff: Option<String>,
    },
    /// It no longer exists (or is no longer a regular file).
    Removed,
    /// It changed and is larger than [`RECHECK_BYTES`]: not compared; it must be read again.
    TooLarge {
        /// Its size now, in bytes.
        bytes: u64,
    },
}

impl FileChange {
    /// The `<system-reminder>` the model gets for this change.
    pub fn reminder(&self) -> String {
        let path = self.path.display();
        let body = match &self.kind {
            ChangeKind::Modified { diff: Some(diff) } => format!(
                "{path} was changed since you last read it, by the user or a program (an editor, a formatter, a command). Take the change into account and do not undo it unless asked. The change (unified diff, old to new):\n{diff}"
            ),
            ChangeKind::Modified { diff: None } => format!(
                "{path} was changed since you last read it, by the user or a program. Read it again before relying on its content."
            ),
            ChangeKind::Removed => format!(
                "{path}, which you read earlier, no longer exists (removed or renamed by the user or a program)."
            ),
            ChangeKind::TooLarge { bytes } => format!(
                "{path} was changed since you last read it ({bytes} bytes now, too large to compare). Read it again before changing it."
            ),
        };
        format!("<system-reminder>\n{body}\n</system-reminder>")
    }
}

/// A handle on one tool set's read-file state ([`crate::ToolSet::file_watch`]).
#[derive(Clone)]
pub struct FileWatch {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FileWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWatch")
            .field("files", &self.shared.read_state.len())
            .finish()
    }
}

impl FileWatch {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// The files read (or written) in this session that changed on disk since, by path;
    /// each is recorded as read again in its new state (a removed or too-large one is
    /// forgotten). Blocking: it stats every file of the read-file state and reads the ones
    /// whose length or modification time changed.
    pub fn changes(&self) -> Vec<FileChange> {
        let mut paths: Vec<(PathBuf, FileStamp)> = self
            .shared
            .read_state
            .iter()
            .map(|entry| (entry.key().clone(), *entry.value()))
            .collect();
        paths.sort_by(|a, b| a.0.cmp(&b.0));
        let mut changes = Vec::new();
        for (path, stamp) in paths {
            let metadata = match std::fs::metadata(&path) {
                Ok(metadata) if metadata.is_file() => metadata,
                _ => {
                    self.forget(&path);
                    changes.push(FileChange {
                        path,
                        kind: ChangeKind::Removed,
                    });
                    continue;
                }
            };
            let modified = metadata.modified().ok();
            if metadata.len() == stamp.len && modified == stamp.modified {
                continue;
            }
            if metadata.len() > RECHECK_BYTES {
                self.forget(&path);
                changes.push(FileChange {
                    path,
                    kind: ChangeKind::TooLarge {
                        bytes: metadata.len(),
                    },
                });
                continue;
            }
            // With an editor, what counts is the text it holds (unsaved changes included),
            // read once the file is known to be the same file, not a link.
            let content =
                match read_same_file(&path).map(|disk| match crate::files::editor(&self.shared) {
                    Some(editor) => crate::files::editor_read(editor, &path).ok(),
                    None => Some(disk),
                }) {
                    Ok(Some(content)) => content,
                    Ok(None) => {
                        self.forget(&path);
                        continue;
                    }
                    Err(Replaced) => {
                        // Now a link, or reached through one: it is not read (a link to a
                        // secret would be shown to the model); the model must Read it again,
                        // where the confinement applies.
                        self.forget(&path);
                        changes.push(FileChange {
                            path,
                            kind: ChangeKind::Modified { diff: None },
                        });
                        continue;
                    }
                };
            let now = FileStamp::of(&content, modified);
            if stamp.same_content(&content) {
                // Touched, not changed: remember the new time, say nothing.
                self.shared.read_state.insert(path, now);
                continue;
            }
            // A file a Read deny or ask rule covers is named, never shown: Read would refuse
            // it (the rule may be newer than the read, or the file was only written).
            let hidden = self.shared.rules.hides("Read", &path);
            let before = self
                .shared
                .snapshots
                .get(&path)
                .map(|entry| Arc::clone(entry.value()));
            let diff = before.filter(|_| !hidden).and_then(|before| {
                let old = std::str::from_utf8(&before).ok()?;
                let new = std::str::from_utf8(&content).ok()?;
                unified_diff(old, new)
            });
            match &diff {
                // The model sees the whole change: the new content counts as read.
                Some(diff) if !diff.cut => {
                    if content.len() as u64 <= SNAPSHOT_BYTES {
                        self.shared
                            .snapshots
                            .insert(path.clone(), content.as_slice().into());
                    } else {
                        self.shared.snapshots.remove(&path);
                    }
                    self.shared.read_state.insert(path.clone(), now);
                }
                // It does not (no earlier copy, not UTF-8, cut, hidden): it must Read the
                // file again before changing it, or a change it never saw is overwritten.
                _ => self.forget(&path),
            }
            changes.push(FileChange {
                path,
                kind: ChangeKind::Modified {
                    diff: diff.map(|diff| diff.text),
                },
            });
        }
        changes
    }

    fn forget(&self, path: &Path) {
        self.shared.read_state.remove(path);
        self.shared.snapshots.remove(path);
    }
}

/// The file at `path` was replaced by a link (or a folder on its way by one), or cannot be
/// read as the regular file it was.
struct Replaced;

/// The content of `path` (a resolved path), read only if it is still the regular file at
/// that very path: opened without following a last link and without blocking, and checked
/// on the descriptor (its type, and the path the kernel opened, which differs when a folder
/// on the way became a link). At most [`RECHECK_BYTES`].
fn read_same_file(path: &Path) -> Result<Vec<u8>, Replaced> {
    use std::io::Read as _;
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;

    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .map_err(|_| Replaced)?;
    if !file.metadata().is_ok_and(|metadata| metadata.is_file()) {
        return Err(Replaced);
    }
    let opened =
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(|_| Replaced)?;
    if opened != path {
        return Err(Replaced);
    }
    let mut content = Vec::new();
    file.take(RECHECK_BYTES)
        .read_to_end(&mut content)
        .map_err(|_| Replaced)?;
    Ok(content)
}

/// A diff as shown: its text, and whether it was cut.
struct Diff {
    text: String,
    cut: bool,
}

/// The most lines either side may have for a diff to be computed (a diff is quadratic in
/// the worst case); larger files are named without one.
pub const MAX_DIFF_INPUT_LINES: usize = 20_000;

/// How long computing one diff may take before a coarser (still correct) one is taken.
const DIFF_DEADLINE: std::time::Duration = std::time::Duration::from_millis(200);

/// `old` to `new` as unified diff hunks (`@@ -a,b +c,d @@`, 3 lines of context), at most
/// [`MAX_DIFF_LINES`] lines; `None` when either side has more than
/// [`MAX_DIFF_INPUT_LINES`] lines.
fn unified_diff(old: &str, new: &str) -> Option<Diff> {
    if old.lines().count() > MAX_DIFF_INPUT_LINES || new.lines().count() > MAX_DIFF_INPUT_LINES {
        return None;
    }
    let diff = similar::TextDiff::configure()
        .timeout(DIFF_DEADLINE)
        .diff_lines(old, new);
    let text = diff.unified_diff().context_radius(3).to_string();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= MAX_DIFF_LINES {
        return Some(Diff {
            text: text.trim_end().to_owned(),
            cut: false,
        });
    }
    let mut shown = lines[..MAX_DIFF_LINES].join("\n");
    shown.push_str(&format!(
        "\n[... {} more lines of the diff not shown; Read the file for the rest]",
        lines.len() - MAX_DIFF_LINES
    ));
    Some(Diff {
        text: shown,
        cut: true,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn diffs_are_unified_and_bounded() {
        let small = unified_diff("a\nb\nc\n", "a\nB\nc\n").unwrap();
        assert_eq!(small.text, "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c");
        assert!(!small.cut);
        let old: String = (0..200).map(|i| format!("{i}\n")).collect();
        let new: String = (0..200).map(|i| format!("x{i}\n")).collect();
        let diff = unified_diff(&old, &new).unwrap();
        assert!(diff.cut);
        assert_eq!(diff.text.lines().count(), MAX_DIFF_LINES + 1);
        assert!(
            diff.text
                .ends_with("more lines of the diff not shown; Read the file for the rest]")
        );
        // Too many lines to diff: none (the file is named, and must be read again).
        let many = "a\n".repeat(MAX_DIFF_INPUT_LINES + 1);
        assert!(unified_diff("a\n", &many).is_none());
        // The worst case within the limit stays bounded by the deadline.
        let old = "a\n".repeat(MAX_DIFF_INPUT_LINES);
        let new = "b\n".repeat(MAX_DIFF_INPUT_LINES);
        let started = std::time::Instant::now();
        assert!(unified_diff(&old, &new).is_some());
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
