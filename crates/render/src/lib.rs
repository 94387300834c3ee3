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
pub mod notify;
#[cfg(feature = "tui")]
pub mod picker;
mod style;
pub mod term;
#[cfg(feature = "tui")]
pub mod tui;

pub use markdown::{MarkdownStream, render_markdown};
pub use style::{Span, Style, Theme, display_width, wrap};

/// `text` in a Markdown code fence longer than any run of backticks in it.
pub fn fenced(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}\n{text}\n{fence}")
}

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

/// [`printable`], but colour and text style (SGR: `ESC [ ... m`) pass through, limited to
/// what cannot hide text: colours (8, 16, 256 and true colour, foreground and background),
/// bold, dim, italic, underline, reverse and their resets. Every other escape sequence
/// (cursor moves, erasing, concealed or blinking text, titles, hyperlinks) is dropped,
/// neither shown nor obeyed, and so is an SGR sequence holding anything else. When colour
/// was set, the text ends with a reset, so it does not leak into what follows. For command
/// output shown in colour (`ls --color=always`, `cargo --color=always`).
pub fn printable_colored(text: &str, keep_newlines: bool) -> String {
    if !text.contains('\x1b') {
        return printable(text, keep_newlines);
    }
    let mut out = Colored {
        out: String::with_capacity(text.len()),
        keep_newlines,
        colored: false,
    };
    let mut parser = vte::Parser::new();
    parser.advance(&mut out, text.as_bytes());
    if out.colored {
        out.out.push_str("\x1b[0m");
    }
    out.out
}

/// The [`vte::Perform`] of [`printable_colored`].
struct Colored {
    out: String,
    keep_newlines: bool,
    colored: bool,
}

impl vte::Perform for Colored {
    fn print(&mut self, c: char) {
        // A C1 control (U+0080..U+009F: CSI, OSC in their 8-bit forms) is shown, never sent.
        if is_bidi_control(c) || c.is_control() {
            self.out.extend(c.escape_default());
        } else {
            self.out.push(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' if self.keep_newlines => self.out.push('\n'),
            b'\t' => self.out.push('\t'),
            // Other controls are shown, as `printable` shows them.
            byte => self.out.extend(char::from(byte).escape_default()),
        }
    }

    fn csi_dispatch(
        &mut self,
        params: &vte::Params,
        intermediates: &[u8],
        ignore: bool,
        action: char,
    ) {
        if action != 'm' || ignore || !intermediates.is_empty() {
            return;
        }
        let mut codes: Vec<Vec<u16>> = params.iter().map(<[u16]>::to_vec).collect();
        if codes.is_empty() {
            codes.push(vec![0]);
        }
        if !harmless_sgr(&codes) {
            return;
        }
        let text: Vec<String> = codes
            .iter()
            .map(|code| {
                code.iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(":")
            })
            .collect();
        self.out.push_str(&format!("\x1b[{}m", text.join(";")));
        self.colored = true;
    }
}

/// Whether every code of an SGR sequence only colours or styles text (see
/// [`printable_colored`]); `38;5;N`, `38;2;R;G;B` and their `48` forms may take the codes
/// after them.
fn harmless_sgr(codes: &[Vec<u16>]) -> bool {
    let mut index = 0;
    while index < codes.len() {
        let code = &codes[index];
        match code.first().copied().unwrap_or(0) {
            0..=4 | 7 | 22..=24 | 27 | 30..=37 | 39..=47 | 49 | 90..=97 | 100..=107 => {}
            38 | 48 if code.len() > 1 => {}
            38 | 48 => match codes.get(index + 1).and_then(|next| next.first()) {
                Some(5) => index += 2,
                Some(2) => index += 4,
                _ => return false,
            },
            _ => return false,
        }
        index += 1;
    }
    true
}

/// Unicode's explicit directional formatting characters (UAX #9).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fence_is_longer_than_any_backtick_run_in_the_text() {
        assert_eq!(super::fenced("print(1)"), "```\nprint(1)\n```");
        assert_eq!(super::fenced("a ```rust b"), "````\na ```rust b\n````");
        assert_eq!(super::fenced("`````"), "``````\n`````\n``````");
    }

    use super::*;

    #[test]
    fn colours_pass_and_every_other_sequence_is_dropped() {
        assert_eq!(
            printable_colored("\x1b[1;31merror\x1b[0m: x\x1b[K\r", false),
            "\x1b[1;31merror\x1b[0m: x\\r\x1b[0m"
        );
        assert_eq!(
            printable_colored("\x1b[38;5;208mo\x1b[48;2;1;2;3mb\x1b[m", false),
            "\x1b[38;5;208mo\x1b[48;2;1;2;3mb\x1b[0m\x1b[0m"
        );
        // Concealed or blinking text, titles, hyperlinks, cursor moves: gone.
        assert_eq!(
            printable_colored("a\x1b[8mhidden\x1b]0;title\x07b\x1b[2Ac\x1b[5;31md", false),
            "ahiddenbcd"
        );
        assert_eq!(printable_colored("plain\n", true), "plain\n");
        assert_eq!(printable_colored("x\u{202E}y", false), "x\\u{202e}y");
        // 8-bit CSI and OSC (C1 controls, as UTF-8) beside a colour: shown, not obeyed.
        let shown = printable_colored("\x1b[32mok\x1b[0m \u{9b}2J \u{9d}0;T\u{9c}", false);
        assert!(
            !shown.contains('\u{9b}') && !shown.contains('\u{9d}'),
            "{shown:?}"
        );
        assert!(shown.contains("\\u{9b}2J"), "{shown:?}");
    }

    #[test]
    fn escapes_and_bidi_controls_are_shown_not_obeyed() {
        assert_eq!(printable("a\x1b[31mb\rc", false), "a\\u{1b}[31mb\\rc");
        assert_eq!(printable("x\u{202E}y", false), "x\\u{202e}y");
        assert_eq!(printable("one\ntwo\tthree", true), "one\ntwo\tthree");
        assert_eq!(printable("one\ntwo", false), "one\\ntwo");
    }
}
