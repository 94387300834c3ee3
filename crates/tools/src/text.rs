//! How the file tools turn a file's bytes into text and back, and how Edit matches across
//! line endings.
//!
//! **Encoding.** A file that is valid UTF-8 is UTF-8. Any other text file (no NUL byte in its
//! first 8 KiB) is read as windows-1252 in the WHATWG definition, which maps every byte to
//! one character (the 27 printable extras of windows-1252, the rest as Latin-1), so decoding
//! loses nothing and encoding the same text gives the same bytes: Read shows such a file
//! with a note naming the encoding, and Write and Edit write it back in that encoding,
//! refusing text with a character it cannot hold instead of writing U+FFFD or anything
//! else. A new file is written as UTF-8.
//!
//! **Line endings.** Edit matches `old_string` whatever the line endings (`\n` in the
//! model's text matches `\n` or `\r\n` in the file), and each line of the result keeps the
//! ending the file had at that place: the replaced lines' own endings in order, then the
//! file's most common one.

use std::borrow::Cow;

/// A text file's encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// UTF-8.
    Utf8,
    /// windows-1252 (WHATWG: every byte is one character, round-trips exactly).
    Windows1252,
}

impl Encoding {
    /// The encoding of a file's content.
    pub(crate) fn of(bytes: &[u8]) -> Self {
        if std::str::from_utf8(bytes).is_ok() {
            Self::Utf8
        } else {
            Self::Windows1252
        }
    }

    /// Its name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Utf8 => "UTF-8",
            Self::Windows1252 => "windows-1252",
        }
    }

    /// `bytes` as text.
    pub(crate) fn decode(self, bytes: &[u8]) -> Cow<'_, str> {
        match self {
            Self::Utf8 => String::from_utf8_lossy(bytes),
            Self::Windows1252 => {
                encoding_rs::WINDOWS_1252
                    .decode_without_bom_handling(bytes)
                    .0
            }
        }
    }

    /// `text` as bytes of this encoding.
    ///
    /// # Errors
    ///
    /// The first character the encoding cannot hold.
    pub(crate) fn encode(self, text: &str) -> Result<Cow<'_, [u8]>, char> {
        match self {
            Self::Utf8 => Ok(Cow::Borrowed(text.as_bytes())),
            Self::Windows1252 => {
                let (bytes, _, unmappable) = encoding_rs::WINDOWS_1252.encode(text);
                if !unmappable {
                    return Ok(bytes);
                }
                // Name the culprit: the first character that does not survive a round trip.
                let culprit = text
                    .chars()
                    .find(|c| {
                        let mut buffer = [0u8; 4];
                        let (_, _, unmappable) =
                            encoding_rs::WINDOWS_1252.encode(c.encode_utf8(&mut buffer));
                        unmappable
                    })
                    .unwrap_or(char::REPLACEMENT_CHARACTER);
                Err(culprit)
            }
        }
    }

    /// The note Read adds for a file that is not UTF-8.
    pub(crate) fn read_note(self) -> Option<String> {
        match self {
            Self::Utf8 => None,
            Self::Windows1252 => Some(
                "[This file is not UTF-8: it is shown decoded as windows-1252 (Latin-1), one character per byte, nothing lost. Write and Edit keep this encoding and refuse characters it cannot hold.]"
                    .to_owned(),
            ),
        }
    }
}

/// `text` in the file's encoding, or the tool's error naming the character it cannot hold.
pub(crate) fn encode_for<'a>(
    encoding: Encoding,
    text: &'a str,
    path: &std::path::Path,
) -> Result<Cow<'a, [u8]>, executor::ToolError> {
    encoding.encode(text).map_err(|culprit| {
        executor::ToolError::InvalidInput(format!(
            "{} is a {} file, which cannot hold {culprit:?} (U+{:04X}); nothing was written. Write only characters of that encoding, or convert the file to UTF-8 first (for example with iconv in Bash)",
            path.display(),
            encoding.name(),
            u32::from(culprit)
        ))
    })
}

/// A match of `old` in `content` regardless of line endings: the byte range in `content`
/// and the line endings it spans, in order.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) endings: Vec<&'static str>,
}

/// Every non-overlapping match of `old` in `content`, where a `\n` of `old` matches `\n` or
/// `\r\n` of `content` (and `\r\n` in `old` is read as `\n`).
pub(crate) fn find_all(content: &str, old: &str) -> Vec<Found> {
    let old = old.replace("\r\n", "\n");
    if old.is_empty() {
        return Vec::new();
    }
    // The content with CRLF as LF, and for each of its bytes the offset in `content`.
    let mut normalized = String::with_capacity(content.len());
    let mut origin = Vec::with_capacity(content.len() + 1);
    let bytes = content.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'\r' && bytes.get(index + 1) == Some(&b'\n') {
            // The `\n` of a CRLF stands for both bytes: it starts at the `\r`.
            origin.push(index);
            normalized.push('\n');
            index += 2;
            continue;
        }
        let width = utf8_width(bytes[index]);
        origin.extend(index..index + width);
        normalized.push_str(&content[index..index + width]);
        index += width;
    }
    origin.push(content.len());
    let mut found = Vec::new();
    for (start, matched) in normalized.match_indices(old.as_str()) {
        let end = start + matched.len();
        let (start, end) = (origin[start], origin[end]);
        let endings = content[start..end]
            .match_indices('\n')
            .map(|(offset, _)| {
                let at = start + offset;
                if at > start && content.as_bytes()[at - 1] == b'\r' {
                    "\r\n"
                } else {
                    "\n"
                }
            })
            .collect();
        found.push(Found {
            start,
            end,
            endings,
        });
    }
    found
}

/// The width of the UTF-8 sequence starting with `lead`.
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// The line ending most lines of `content` use (`\n` for a file without any).
pub(crate) fn dominant_ending(content: &str) -> &'static str {
    let crlf = content.matches("\r\n").count();
    let lf = content.matches('\n').count() - crlf;
    if crlf > lf { "\r\n" } else { "\n" }
}

/// `new` with its line endings as the file has them: the `k`-th line break takes
/// `endings[k]`, the ones past the end `fallback`.
pub(crate) fn with_endings(new: &str, endings: &[&str], fallback: &str) -> String {
    let new = new.replace("\r\n", "\n");
    let mut out = String::with_capacity(new.len() + endings.len());
    for (index, piece) in new.split('\n').enumerate() {
        if index > 0 {
            out.push_str(endings.get(index - 1).copied().unwrap_or(fallback));
        }
        out.push_str(piece);
    }
    out
}

/// The change from `old` to `new` as Claude Code's `structuredPatch`: hunks with 3 lines of
/// context, `{oldStart, oldLines, newStart, newLines, lines}` (1-based line numbers; each line
/// prefixed with ` `, `-` or `+`, without its line ending).
pub(crate) fn structured_patch(old: &str, new: &str) -> serde_json::Value {
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_lines(old, new);
    let hunks: Vec<serde_json::Value> = diff
        .grouped_ops(3)
        .iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let old_range = first.old_range().start..last.old_range().end;
            let new_range = first.new_range().start..last.new_range().end;
            let lines: Vec<String> = group
                .iter()
                .flat_map(|op| diff.iter_changes(op))
                .map(|change| {
                    let sign = match change.tag() {
                        ChangeTag::Equal => ' ',
                        ChangeTag::Delete => '-',
                        ChangeTag::Insert => '+',
                    };
                    let value = change.value();
                    let value = value.strip_suffix('\n').unwrap_or(value);
                    let value = value.strip_suffix('\r').unwrap_or(value);
                    format!("{sign}{value}")
                })
                .collect();
            Some(serde_json::json!({
                "oldStart": old_range.start + 1,
                "oldLines": old_range.len(),
                "newStart": new_range.start + 1,
                "newLines": new_range.len(),
                "lines": lines,
            }))
        })
        .collect();
    serde_json::Value::Array(hunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin1_round_trips_and_is_never_turned_into_replacement_characters() {
        // "café crème" in Latin-1, the input of the public report.
        let bytes = b"caf\xe9 cr\xe8me\n";
        let encoding = Encoding::of(bytes);
        assert_eq!(encoding, Encoding::Windows1252);
        let text = encoding.decode(bytes);
        assert_eq!(text, "café crème\n");
        assert_eq!(encoding.encode(&text).unwrap().as_ref(), bytes);
        // Every byte survives.
        let all: Vec<u8> = (1..=255).collect();
        let decoded = Encoding::Windows1252.decode(&all);
        assert_eq!(
            Encoding::Windows1252.encode(&decoded).unwrap().as_ref(),
            &all[..]
        );
        assert_eq!(Encoding::Windows1252.encode("smile 😀"), Err('😀'));
        assert_eq!(Encoding::of("café".as_bytes()), Encoding::Utf8);
    }

    #[test]
    fn matches_across_line_endings_and_keeps_each_lines_ending() {
        // An LF file with one CRLF line, and the reverse.
        let mixed = "one\ntwo\r\nthree\nfour\n";
        let found = find_all(mixed, "two\nthree");
        assert_eq!(
            found,
            [Found {
                start: 4,
                end: 14,
                endings: vec!["\r\n"]
            }]
        );
        let replaced = with_endings(
            "TWO\nTHREE\nextra",
            &found[0].endings,
            dominant_ending(mixed),
        );
        assert_eq!(replaced, "TWO\r\nTHREE\nextra");
        let reverse = "a\r\nb\nc\r\nd\r\n";
        let found = find_all(reverse, "b\nc\nd");
        assert_eq!(found[0].endings, ["\n", "\r\n"]);
        assert_eq!(&reverse[found[0].start..found[0].end], "b\nc\r\nd");
        assert_eq!(dominant_ending(reverse), "\r\n");
        // Pure CRLF, and a CRLF old_string.
        let crlf = "x\r\ny\r\n";
        assert_eq!(find_all(crlf, "x\ny").len(), 1);
        assert_eq!(find_all(crlf, "x\r\ny").len(), 1);
        assert!(find_all(crlf, "x\n\ny").is_empty());
        // Multi-byte text keeps its offsets.
        let text = "é\r\nü\n";
        let found = find_all(text, "é\nü");
        assert_eq!(&text[found[0].start..found[0].end], "é\r\nü");
    }

    #[test]
    fn patches_have_claude_codes_hunk_shape() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\n";
        assert_eq!(
            structured_patch(old, new),
            serde_json::json!([{
                "oldStart": 1, "oldLines": 7, "newStart": 1, "newLines": 7,
                "lines": [" a", " b", " c", "-d", "+D", " e", " f", " g"],
            }])
        );
        assert_eq!(structured_patch("same\n", "same\n"), serde_json::json!([]));
        assert_eq!(
            structured_patch("", "new\n"),
            serde_json::json!([{"oldStart": 1, "oldLines": 0, "newStart": 1, "newLines": 1, "lines": ["+new"]}])
        );
    }
}

/// `text` without terminal escape sequences (colours, cursor moves, titles, hyperlinks) and
/// without control characters other than line breaks, carriage returns and tabs: what a
/// command printed for a terminal, as the model should read it. Parsed with `vte`
/// (alacritty's parser), so a sequence split oddly is still recognised. Borrowed when there
/// is nothing to strip.
pub(crate) fn strip_escapes(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.bytes().any(|byte| {
        byte == 0x1b || (byte < 0x20 && !matches!(byte, b'\n' | b'\r' | b'\t')) || byte == 0x7f
    }) {
        return std::borrow::Cow::Borrowed(text);
    }
    struct Plain(String);
    impl vte::Perform for Plain {
        fn print(&mut self, c: char) {
            self.0.push(c);
        }
        fn execute(&mut self, byte: u8) {
            if matches!(byte, b'\n' | b'\r' | b'\t') {
                self.0.push(char::from(byte));
            }
        }
    }
    let mut plain = Plain(String::with_capacity(text.len()));
    vte::Parser::new().advance(&mut plain, text.as_bytes());
    std::borrow::Cow::Owned(plain.0)
}

#[cfg(test)]
mod strip_tests {
    #[test]
    fn escape_sequences_are_stripped_for_the_model() {
        use super::strip_escapes;
        assert_eq!(
            strip_escapes(
                "\x1b[1;31merror\x1b[0m: x\x1b[K\r\n\x1b]8;;http://e\x07link\x1b]8;;\x07\x07"
            ),
            "error: x\r\nlink"
        );
        assert!(matches!(
            strip_escapes("plain\n"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(strip_escapes("caf\u{e9} \t ok"), "caf\u{e9} \t ok");
    }
}
