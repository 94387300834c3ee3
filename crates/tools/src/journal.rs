//! What Write and Edit tell a session about each change they make, so it can be undone
//! (the session's checkpoints: `agent rewind`, `/rewind`).

use std::fmt;
use std::path::Path;

/// Where Write and Edit record the files they change. Both calls come from the tool's own
/// thread, in this order, for every file they replace or create:
///
/// 1. [`WriteJournal::before_write`], before anything on disk changes: an error refuses the
///    change (the file is left as it was, and the model is told why), so a change that could
///    not be undone is never made.
/// 2. [`WriteJournal::after_write`], once the new content is in place.
///
/// Paths are absolute and resolved as the tool resolved them (the file the change reached).
/// Changes made by Bash commands are not seen here.
pub trait WriteJournal: Send + Sync + fmt::Debug {
    /// `path` is about to be replaced; `previous` is its content (`None`: there is no file
    /// yet).
    ///
    /// # Errors
    ///
    /// A reason, in words, when the previous content could not be kept.
    fn before_write(&self, path: &Path, previous: Option<&[u8]>) -> Result<(), String>;

    /// `path` now holds `written`.
    fn after_write(&self, path: &Path, written: &[u8]);
}
