//! Styled text and word wrapping by display width.

use unicode_width::UnicodeWidthStr as _;

/// How a run of text looks: SGR attributes and a foreground colour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Style {
    /// Bold (SGR 1).
    pub bold: bool,
    /// Dim (SGR 2).
    pub dim: bool,
    /// Italic (SGR 3).
    pub italic: bool,
    /// Underlined (SGR 4).
    pub underline: bool,
    /// Crossed out (SGR 9).
    pub strike: bool,
    /// A foreground colour from the 16 basic ones (SGR 30-37 and 90-97).
    pub color: Option<u8>,
}

impl Style {
    /// No attributes.
    pub const PLAIN: Self = Self {
        bold: false,
        dim: false,
        italic: false,
        underline: false,
        strike: false,
        color: None,
    };

    /// Whether it sets nothing.
    pub fn is_plain(&self) -> bool {
        *self == Self::PLAIN
    }

    /// The SGR sequence that turns this style on (empty for plain).
    pub fn sgr(&self) -> String {
        let mut codes: Vec<String> = Vec::new();
        for (on, code) in [
            (self.bold, 1),
            (self.dim, 2),
            (self.italic, 3),
            (self.underline, 4),
            (self.strike, 9),
        ] {
            if on {
                codes.push(code.to_string());
            }
        }
        if let Some(color) = self.color {
            codes.push(color.to_string());
        }
        if codes.is_empty() {
            String::new()
        } else {
            format!("\x1b[{}m", codes.join(";"))
        }
    }

    /// `text` in this style, reset after.
    pub fn paint(&self, text: &str) -> String {
        if self.is_plain() || text.is_empty() {
            text.to_owned()
        } else {
            format!("{}{text}\x1b[0m", self.sgr())
        }
    }
}

/// A run of text in one style. The text is already safe to print (see
/// [`crate::printable`]) and holds no line break.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The text.
    pub text: String,
    /// Its look.
    pub style: Style,
}

impl Span {
    /// `text` in `style`.
    pub fn new(text: impl Into<String>, style: Style) -> Self {
        Self {
            text: text.into(),
            style,
        }
    }
}

/// The columns `text` takes on a terminal (East Asian wide characters count 2, combining
/// marks 0).
pub fn display_width(text: &str) -> usize {
    text.width()
}

/// Words of `spans` filled into lines of at most `width` columns (a word longer than a line
/// is cut), each line rendered with its SGR sequences. A span holding `"\n"` alone is a
/// hard break. Spaces at a line's end are dropped.
pub fn wrap(spans: &[Span], width: usize) -> Vec<String> {
    let width = width.max(8);
    // Pieces: a word or a run of spaces, each in one style.
    let mut lines: Vec<Vec<Span>> = vec![Vec::new()];
    let mut used = 0;
    for span in spans {
        if span.text == "\n" {
            lines.push(Vec::new());
            used = 0;
            continue;
        }
        for piece in pieces(&span.text) {
            let piece_width = display_width(piece);
            let is_space = piece.starts_with(' ');
            if is_space {
                if used > 0 && used + piece_width <= width {
                    push(&mut lines, piece, span.style);
                    used += piece_width;
                } else if used > 0 {
                    lines.push(Vec::new());
                    used = 0;
                }
                continue;
            }
            if used + piece_width > width && used > 0 {
                trim_end(&mut lines);
                lines.push(Vec::new());
                used = 0;
            }
            if piece_width <= width {
                push(&mut lines, piece, span.style);
                used += piece_width;
                continue;
            }
            // Longer than a line: cut it where the columns run out.
            let mut chunk = String::new();
            let mut chunk_width = 0;
            for c in piece.chars() {
                let c_width = display_width(c.encode_utf8(&mut [0; 4]));
                if used + chunk_width + c_width > width {
                    push(&mut lines, &chunk, span.style);
                    lines.push(Vec::new());
                    used = 0;
                    chunk.clear();
                    chunk_width = 0;
                }
                chunk.push(c);
                chunk_width += c_width;
            }
            push(&mut lines, &chunk, span.style);
            used += chunk_width;
        }
    }
    trim_end(&mut lines);
    lines
        .iter()
        .map(|line| {
            line.iter()
                .map(|span| span.style.paint(&span.text))
                .collect()
        })
        .collect()
}

/// Words and runs of spaces, in order.
fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (at, c) in text.char_indices() {
        let space = c == ' ';
        if in_space.is_some_and(|was| was != space) {
            out.push(&text[start..at]);
            start = at;
        }
        in_space = Some(space);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

fn push(lines: &mut [Vec<Span>], text: &str, style: Style) {
    if text.is_empty() {
        return;
    }
    if let Some(line) = lines.last_mut() {
        match line.last_mut() {
            Some(last) if last.style == style => last.text.push_str(text),
            _ => line.push(Span::new(text, style)),
        }
    }
}

fn trim_end(lines: &mut [Vec<Span>]) {
    if let Some(line) = lines.last_mut() {
        while let Some(last) = line.last_mut() {
            let trimmed = last.text.trim_end_matches(' ').len();
            if trimmed == 0 {
                line.pop();
            } else {
                last.text.truncate(trimmed);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> Vec<Span> {
        vec![Span::new(text, Style::PLAIN)]
    }

    #[test]
    fn words_fill_lines_and_long_words_are_cut() {
        assert_eq!(
            wrap(&plain("the quick brown fox jumps over"), 10),
            ["the quick", "brown fox", "jumps over"]
        );
        assert_eq!(wrap(&plain("abcdefghijkl"), 8), ["abcdefgh", "ijkl"]);
        // Wide characters take two columns.
        assert_eq!(
            wrap(&plain("日本語の文章です"), 8),
            ["日本語の", "文章です"]
        );
        assert_eq!(wrap(&plain(""), 8), [""]);
    }

    #[test]
    fn styles_survive_wrapping_and_are_reset() {
        let spans = vec![
            Span::new("plain ", Style::PLAIN),
            Span::new(
                "bold words",
                Style {
                    bold: true,
                    ..Style::PLAIN
                },
            ),
        ];
        assert_eq!(
            wrap(&spans, 10),
            ["plain \x1b[1mbold\x1b[0m", "\x1b[1mwords\x1b[0m"]
        );
        let broken = vec![
            Span::new("a", Style::PLAIN),
            Span::new("\n", Style::PLAIN),
            Span::new("b", Style::PLAIN),
        ];
        assert_eq!(wrap(&broken, 10), ["a", "b"]);
    }
}
