//! Code fences coloured by syntect (its bundled syntaxes and the `base16-ocean.dark` theme,
//! or `InspiredGitHub` on a light background, as [`crate::Theme::current`] says: base16's
//! light variant keeps the dark one's pale accents; loaded once, on the first fence).

use std::sync::OnceLock;

use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

struct Assets {
    syntaxes: SyntaxSet,
    dark: Option<Theme>,
    light: Option<Theme>,
}

fn assets() -> &'static Assets {
    static ASSETS: OnceLock<Assets> = OnceLock::new();
    ASSETS.get_or_init(|| {
        let mut themes = ThemeSet::load_defaults().themes;
        Assets {
            syntaxes: SyntaxSet::load_defaults_newlines(),
            dark: themes.remove("base16-ocean.dark"),
            light: themes.remove("InspiredGitHub"),
        }
    })
}

/// Code longer than this (bytes) is not highlighted.
const MAX_CODE_BYTES: usize = 256 * 1024;
/// Code with a line longer than this (bytes) is not highlighted.
const MAX_LINE_BYTES: usize = 1_000;

/// The lines of `code` (already safe to print) coloured as `language` (a fence's info word:
/// `rust`, `py`, `sh`...), with 24-bit colours and a reset at each line's end; `None` when
/// the language is not known (the caller shows the code plain).
pub fn highlight(code: &str, language: &str) -> Option<Vec<String>> {
    let language = language.trim();
    // Highlighting costs about 10 µs a character on long lines (160 ms for one 16 KB line):
    // such code is shown plain.
    if language.is_empty()
        || code.len() > MAX_CODE_BYTES
        || code.lines().any(|line| line.len() > MAX_LINE_BYTES)
    {
        return None;
    }
    let assets = assets();
    let syntax = assets
        .syntaxes
        .find_syntax_by_token(language)
        .or_else(|| assets.syntaxes.find_syntax_by_extension(language))?;
    let theme = match crate::Theme::current() {
        crate::Theme::Dark => assets.dark.as_ref()?,
        crate::Theme::Light => assets.light.as_ref()?,
    };
    let mut highlighter = HighlightLines::new(syntax, theme);
    let mut lines = Vec::new();
    for line in syntect::util::LinesWithEndings::from(code) {
        let ranges = highlighter.highlight_line(line, &assets.syntaxes).ok()?;
        let mut text = syntect::util::as_24_bit_terminal_escaped(&ranges, false);
        while text.ends_with('\n') || text.ends_with('\r') {
            text.pop();
        }
        text.push_str("\x1b[0m");
        lines.push(text);
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_languages_are_coloured_and_unknown_ones_are_not() {
        let lines = highlight("fn main() {}\nlet x = 1;\n", "rust").unwrap_or_default();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains("\x1b[38;2;"), "{:?}", lines[0]);
        assert!(lines[0].contains("main"));
        assert!(highlight("x", "no-such-language").is_none());
        assert!(highlight("x", "").is_none());
    }
}
