//! The crate's one error type.

use std::path::PathBuf;

use executor::ToolError;

/// What can go wrong building a [`crate::ToolSet`] or confining a path.
///
/// Tools report these to the model as [`ToolError::InvalidInput`] (the model can correct the
/// path); the constructor returns them to the caller (a bad rule in the settings).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A permission rule is not in Claude Code's `Tool` / `Tool(specifier)` syntax, or its
    /// path pattern is not a valid glob.
    #[error("invalid permission rule `{rule}`: {reason}")]
    InvalidRule {
        /// The rule as written in the settings.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A permission mode name that is none of `default`, `acceptEdits`, `bypassPermissions`,
    /// `plan`.
    #[error(
        "unknown permission mode `{value}` (expected default, acceptEdits, bypassPermissions or plan)"
    )]
    InvalidMode {
        /// The name given.
        value: String,
    },
    /// The session's private folder (sandboxed commands' temporary folder) could not be
    /// created under the system's temporary folder.
    #[error("could not create the session's private folder: {reason}")]
    PrivateDir {
        /// The I/O error, with the path.
        reason: String,
    },
    /// A path argument contains a NUL byte, which no file name can hold.
    #[error("the path contains a NUL byte; file paths cannot contain NUL")]
    NulByte,
    /// A path resolves (after `..` and symbolic links) outside every workspace root and no
    /// rule allows it.
    #[error(
        "{path} is outside the workspace (allowed roots: {roots}); tools may only use files under the working directory and the additional directories"
    )]
    OutsideWorkspace {
        /// The path after resolution.
        path: PathBuf,
        /// The workspace roots, for the message.
        roots: String,
    },
    /// Write or Edit aimed at a protected folder (the agent's own settings).
    #[error(
        "{path} is protected (the agent's or Claude Code's settings, MCP configuration, or git's configuration and hooks), which the agent's tools may not change; ask the user to edit it"
    )]
    Protected {
        /// The path after resolution.
        path: PathBuf,
    },
    /// Resolving a path met more symbolic links than the limit (a loop).
    #[error("too many levels of symbolic links while resolving {path}")]
    SymlinkLoop {
        /// The path being resolved.
        path: PathBuf,
    },
    /// A relative path with no absolute working directory to resolve it against.
    #[error("cannot resolve the relative path {path}: the session has no working directory")]
    NoWorkingDirectory {
        /// The path given.
        path: PathBuf,
    },
}

impl From<Error> for ToolError {
    fn from(error: Error) -> Self {
        ToolError::InvalidInput(error.to_string())
    }
}
