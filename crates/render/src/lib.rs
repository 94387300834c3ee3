//! Terminal rendering for `agent`'s interactive mode: what the model and the tools produce,
//! made into lines for a terminal of a given width.
//!
//! - [`MarkdownStream`]: Markdown rendered as it streams (headings, emphasis, lists, block
//!   quotes, tables with borders, links, code fences highlighted by syntect), block by block:
//!   a block is drawn once it is complete, so no line already on screen ever changes.
//! - [`diff`]: coloured unified diffs of file changes, collapsed past a limit.
//! - [`printable`]: text from the model or a tool made safe to print (no escape sequence of
//!   its own reaches the terminal).
//!
//! - [`editor`]: the input line's editor and its history file.
//! - [`term`]: inline frames: finished lines into the scrollback, a live region redrawn in
//!   place, synchronized output.
//! - [`tui`] (feature `tui`): the one task that owns the terminal in the interactive session,
//!   drawing all of the above from one queue and reading the keys.
//!
//! Everything but [`tui`] is pure: functions of their input returning `String`s (or bytes)
//! with SGR escape sequences (colours and styles) already in them. Writing them is the
//! caller's business.
//!
//! A model's answer, streamed in pieces: nothing is drawn until a block is complete, and
//! what a tool printed is made safe before it reaches the terminal.
//!
//! ```
//! use render::{MarkdownStream, display_width, printable};
//!
//! let mut stream = MarkdownStream::new(40);
//! assert!(stream.push("# Fix").is_empty(), "the heading may go on");
//! let mut lines = stream.push("ed\n\nThe test **passes** now.\n");
//! lines.extend(stream.finish());
//! assert!(lines.iter().any(|line| line.contains("Fixed")));
//! assert!(lines.iter().all(|line| display_width(line) <= 40));
//!
//! // A tool's output cannot move the cursor or retitle the window.
//! let shown = printable("ok\x1b]0;pwned\x07", false);
//! assert!(!shown.contains('\x1b'));
//! ```

#![deny(missing_docs)]

pub mod diff;
pub mod editor;
mod highlight;
mod markdown;
mod style;
pub mod term;
#[cfg(feature = "tui")]
pub mod tui;

pub use markdown::{MarkdownStream, render_markdown};
pub use style::{Span, Style, display_width, wrap};

/// `text` safe to print on a terminal: control characters (a carriage return or an escape
/// sequence could draw over what the user is asked to approve, OSC 52 writes the clipboard)
/// and the bidirectional-text controls (which reorder what is shown) appear as escapes
/// (`\u{1b}`); line breaks are kept when `keep_newlines`, tabs always.
pub fn printable(text: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\t' => out.push('\t'),
            c if c.is_control() || is_bidi_control(c) => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// Unicode's explicit directional formatting characters (UAX #9).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_bidi_controls_are_shown_not_obeyed() {
        assert_eq!(printable("a\x1b[31mb\rc", false), "a\\u{1b}[31mb\\rc");
        assert_eq!(printable("x\u{202E}y", false), "x\\u{202e}y");
        assert_eq!(printable("one\ntwo\tthree", true), "one\ntwo\tthree");
        assert_eq!(printable("one\ntwo", false), "one\\ntwo");
    }
}
