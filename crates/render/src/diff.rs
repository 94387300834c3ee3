//! Coloured unified diffs: of two texts ([`unified`]), or of Claude Code's `structuredPatch`
//! hunks that Edit and Write report ([`Hunk`], [`hunk_lines`]).

use serde::Deserialize;
use similar::{ChangeTag, TextDiff};

use crate::printable;
use crate::style::Style;

const RED: u8 = 31;
const GREEN: u8 = 32;

/// One hunk as Claude Code's `structuredPatch` holds it: 1-based starts, line counts, and the
/// lines each prefixed with ` `, `-` or `+` (no line ending).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    /// First line in the old text.
    pub old_start: usize,
    /// Lines of the old text.
    pub old_lines: usize,
    /// First line in the new text.
    pub new_start: usize,
    /// Lines of the new text.
    pub new_lines: usize,
    /// The lines.
    pub lines: Vec<String>,
}

/// Lines added and removed by `hunks`.
pub fn counts(hunks: &[Hunk]) -> (usize, usize) {
    let mut added = 0;
    let mut removed = 0;
    for line in hunks.iter().flat_map(|hunk| &hunk.lines) {
        match line.chars().next() {
            Some('+') => added += 1,
            Some('-') => removed += 1,
            _ => {}
        }
    }
    (added, removed)
}

/// `Updated PATH with N additions and M removals`, as Claude Code words it.
pub fn summary(path: &str, hunks: &[Hunk]) -> String {
    let (added, removed) = counts(hunks);
    let plural =
        |count: usize, word: &str| format!("{count} {word}{}", if count == 1 { "" } else { "s" });
    format!(
        "Updated {} with {} and {}",
        printable(path, false),
        plural(added, "addition"),
        plural(removed, "removal")
    )
}

/// The hunks' lines numbered and coloured (removals red, additions green, context dim),
/// each starting with `indent`, at most `limit` of them followed by a `… +N lines` line.
pub fn hunk_lines(hunks: &[Hunk], indent: &str, limit: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut total = 0;
    for (index, hunk) in hunks.iter().enumerate() {
        if index > 0 {
            total += 1;
            if lines.len() < limit {
                lines.push(format!("{indent}{}", dim().paint("   ⋮")));
            }
        }
        let (mut old, mut new) = (hunk.old_start, hunk.new_start);
        for line in &hunk.lines {
            total += 1;
            let (sign, rest) = line.split_at(line.chars().next().map_or(0, char::len_utf8));
            let (number, style) = match sign {
                "-" => {
                    old += 1;
                    (old - 1, colored(RED))
                }
                "+" => {
                    new += 1;
                    (new - 1, colored(GREEN))
                }
                _ => {
                    old += 1;
                    new += 1;
                    (new - 1, dim())
                }
            };
            if lines.len() < limit {
                let sign = if sign.is_empty() { " " } else { sign };
                lines.push(format!(
                    "{indent}{}",
                    style.paint(&format!("{number:>4} {sign} {}", printable(rest, false)))
                ));
            }
        }
    }
    if total > lines.len() {
        lines.push(format!(
            "{indent}{}",
            dim().paint(&format!("… +{} lines", total - lines.len()))
        ));
    }
    lines
}

/// The change from `old` to `new` as hunks with 3 lines of context (the same shape Edit and
/// Write report).
pub fn hunks(old: &str, new: &str) -> Vec<Hunk> {
    let diff = TextDiff::from_lines(old, new);
    diff.grouped_ops(3)
        .iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let old_range = first.old_range().start..last.old_range().end;
            let new_range = first.new_range().start..last.new_range().end;
            let lines = group
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
            Some(Hunk {
                old_start: old_range.start + 1,
                old_lines: old_range.len(),
                new_start: new_range.start + 1,
                new_lines: new_range.len(),
                lines,
            })
        })
        .collect()
}

/// [`hunk_lines`] of the change from `old` to `new`.
pub fn unified(old: &str, new: &str, indent: &str, limit: usize) -> Vec<String> {
    hunk_lines(&hunks(old, new), indent, limit)
}

fn colored(color: u8) -> Style {
    Style {
        color: Some(color),
        ..Style::PLAIN
    }
}

fn dim() -> Style {
    Style {
        dim: true,
        ..Style::PLAIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_numbered_coloured_and_counted() {
        let old = "one\ntwo\nthree\n";
        let new = "one\n2\nthree\nfour\n";
        let hunks = hunks(old, new);
        assert_eq!(counts(&hunks), (2, 1));
        assert_eq!(
            summary("a.txt", &hunks),
            "Updated a.txt with 2 additions and 1 removal"
        );
        let lines = hunk_lines(&hunks, "  ", 20);
        assert_eq!(
            lines,
            [
                "  \x1b[2m   1   one\x1b[0m",
                "  \x1b[31m   2 - two\x1b[0m",
                "  \x1b[32m   2 + 2\x1b[0m",
                "  \x1b[2m   3   three\x1b[0m",
                "  \x1b[32m   4 + four\x1b[0m",
            ]
        );
        // Collapsed past the limit, with what is left counted.
        let long: String = (0..30).map(|n| format!("line {n}\n")).collect();
        let lines = unified("", &long, "", 20);
        assert_eq!(lines.len(), 21);
        assert!(lines[20].contains("… +10 lines"), "{:?}", lines[20]);
        // A hostile line cannot reach the terminal as an escape.
        let lines = unified("", "\x1b[2Jboom\n", "", 20);
        assert!(!lines[0].contains("\x1b[2J"), "{:?}", lines[0]);
    }

    #[test]
    fn structured_patches_deserialize() {
        let value = serde_json::json!([{"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1, "lines": ["-a", "+b"]}]);
        let hunks: Vec<Hunk> = serde_json::from_value(value).unwrap_or_default();
        assert_eq!(counts(&hunks), (1, 1));
    }
}
