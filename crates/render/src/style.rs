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

/// The terminal's background, for the colours that must read on it: code fences are
/// coloured with 24-bit foregrounds made for one background (`base16-ocean.dark` or
/// `InspiredGitHub`); the 16 basic colours of diffs and dimmed text follow the
/// terminal's own palette and read on both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Theme {
    /// Light text on a dark background (the default).
    #[default]
    Dark,
    /// Dark text on a light background.
    Light,
}

static LIGHT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Theme {
    /// The theme in force for this process (set by [`Theme::set`]; dark until then).
    pub fn current() -> Self {
        if LIGHT.load(std::sync::atomic::Ordering::Relaxed) {
            Self::Light
        } else {
            Self::Dark
        }
    }

    /// Makes `self` the theme in force.
    pub fn set(self) {
        LIGHT.store(self == Self::Light, std::sync::atomic::Ordering::Relaxed);
    }

    /// The theme a setting names: Claude Code's `theme` values (`dark`, `light`, and their
    /// `-daltonized` and `-ansi` forms). `None` for `auto` or an unknown value (detect).
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim().to_ascii_lowercase();
        if value.starts_with("light") {
            Some(Self::Light)
        } else if value.starts_with("dark") {
            Some(Self::Dark)
        } else {
            None
        }
    }

    /// The theme for a terminal's answer to the background colour query (`OSC 11 ; ?`):
    /// `OSC 11 ; rgb:RRRR/GGGG/BBBB` ended by BEL or ST, each component 1 to 4 hex digits.
    /// Light when the background's relative luminance is over one half.
    pub fn from_background_answer(reply: &[u8]) -> Option<Self> {
        let text = String::from_utf8_lossy(reply);
        let at = text.find("\x1b]11;rgb:")?;
        let rest = &text[at + "\x1b]11;rgb:".len()..];
        let end = rest.find(['\x07', '\x1b'])?;
        let mut components = rest[..end].split('/').map(|hex| {
            let value = u32::from_str_radix(hex, 16).ok()?;
            let max = (1u32 << (4 * hex.len().clamp(1, 4))) - 1;
            Some(f64::from(value) / f64::from(max))
        });
        let (red, green, blue) = (
            components.next()??,
            components.next()??,
            components.next()??,
        );
        let luminance = 0.2126 * red + 0.7152 * green + 0.0722 * blue;
        Some(if luminance > 0.5 {
            Self::Light
        } else {
            Self::Dark
        })
    }

    /// The theme `COLORFGBG` tells (`"15;0"`: foreground 15 on background 0, as rxvt,
    /// Konsole and others set it): a background of 7 or 9 to 15 is light.
    pub fn from_colorfgbg(value: &str) -> Option<Self> {
        let background: u8 = value.rsplit(';').next()?.trim().parse().ok()?;
        Some(if background == 7 || (9..=15).contains(&background) {
            Self::Light
        } else {
            Self::Dark
        })
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

    #[test]
    fn the_theme_comes_from_the_setting_the_background_or_colorfgbg() {
        assert_eq!(Theme::parse("light-daltonized"), Some(Theme::Light));
        assert_eq!(Theme::parse("Dark-ANSI"), Some(Theme::Dark));
        assert_eq!(Theme::parse("auto"), None);
        let answer = |text: &str| Theme::from_background_answer(text.as_bytes());
        assert_eq!(answer("\x1b]11;rgb:ffff/ffff/ffff\x07"), Some(Theme::Light));
        assert_eq!(
            answer("\x1b[?2026;2$y\x1b]11;rgb:0000/0000/0000\x1b\\\x1b[?62c"),
            Some(Theme::Dark)
        );
        assert_eq!(answer("\x1b]11;rgb:fa/fa/f0\x07"), Some(Theme::Light));
        assert_eq!(answer("\x1b]11;rgb:28/2c/34\x07"), Some(Theme::Dark));
        assert_eq!(answer("\x1b]11;rgb:zz/00/00\x07"), None);
        assert_eq!(answer("\x1b[?62;22c"), None);
        assert_eq!(Theme::from_colorfgbg("0;15"), Some(Theme::Light));
        assert_eq!(Theme::from_colorfgbg("15;default;0"), Some(Theme::Dark));
        assert_eq!(Theme::from_colorfgbg("default"), None);
    }
}
