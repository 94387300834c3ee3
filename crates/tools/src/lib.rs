//! Built-in tools (work in progress).
#![deny(missing_docs)]
