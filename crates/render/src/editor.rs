//! The input line: a small editor (insert, delete, move by character or word, kill to either
//! end, history with Up and Down) drawn as rows of the live region.
//!
//! Keys come in as [`Edit`]s, already decoded from the terminal's bytes by whoever reads
//! them; the editor only keeps text and a cursor, so it is tested without a terminal.

use std::path::Path;

use crate::style::display_width;

/// One editing action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Insert text at the cursor (a typed character, or text that may hold newlines).
    Insert(String),
    /// A paste: inserted as it is, or, past [`PASTE_LINES`] lines, as a placeholder
    /// (`[Pasted text #1 +60 lines]`) that [`LineEditor::submit`] replaces with the text.
    Paste(String),
    /// Delete the character before the cursor (Backspace).
    Backspace,
    /// Delete the character under the cursor (Delete).
    Delete,
    /// Move one character left.
    Left,
    /// Move one character right.
    Right,
    /// Move one word left (Alt-B, Ctrl-Left).
    WordLeft,
    /// Move one word right (Alt-F, Ctrl-Right).
    WordRight,
    /// To the start of the line (Home, Ctrl-A).
    Home,
    /// To the end of the line (End, Ctrl-E).
    End,
    /// Delete from the start of the line to the cursor (Ctrl-U).
    KillToStart,
    /// Delete from the cursor to the end (Ctrl-K).
    KillToEnd,
    /// Delete the word before the cursor (Ctrl-W, Alt-Backspace).
    KillWord,
    /// The previous history entry (Up).
    HistoryPrevious,
    /// The next history entry, or the line being written (Down).
    HistoryNext,
}

/// A paste of more lines than this shows as a placeholder (as Claude Code's does).
pub const PASTE_LINES: usize = 10;
/// A paste longer than this (bytes) shows as a placeholder too, whatever its lines.
pub const PASTE_BYTES: usize = 2_000;

/// A line being written, with its history.
#[derive(Debug, Default)]
pub struct LineEditor {
    text: String,
    /// Byte offset of the cursor in `text` (always on a character boundary).
    cursor: usize,
    history: Vec<String>,
    /// Index into `history` while browsing it; `None` on the line being written.
    browsing: Option<usize>,
    /// The line being written, kept while browsing the history.
    draft: String,
    /// Long pastes: each placeholder and the text it stands for.
    pastes: Vec<(String, String)>,
    /// Whether the line starts with pasted text (a paste into an empty line).
    pasted_start: bool,
    /// Pasted image files: each placeholder (`[Image #1]`) and the path it stands for.
    images: Vec<(String, String)>,
    /// The images pasted so far (their placeholders stay unique for the session).
    images_pasted: usize,
    /// Images whose placeholder was in the last line submitted.
    submitted_images: Vec<(String, String)>,
}

/// The image file a paste names, as terminals and file managers paste a dropped file: one
/// absolute path, `~/` path or `file://` URL, maybe in quotes or with backslash-escaped
/// spaces, ending in `.png`, `.jpg`, `.jpeg`, `.gif` or `.webp` (any case). Only the text is
/// looked at: whether the file exists and is an image is for whoever attaches it.
pub fn pasted_image_path(text: &str) -> Option<String> {
    let text = text.trim();
    if text.contains('\n') {
        return None;
    }
    let unquoted = ["'", "\""]
        .iter()
        .find_map(|quote| text.strip_prefix(quote)?.strip_suffix(quote))
        .map(str::to_owned);
    let path = match unquoted {
        Some(path) => path,
        None => {
            // Backslash escapes (`My\ Shots/a\ b.png`) as shells and terminals write them.
            let mut path = String::with_capacity(text.len());
            let mut chars = text.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => path.extend(chars.next()),
                    c if c.is_whitespace() => return None,
                    c => path.push(c),
                }
            }
            path
        }
    };
    let path = match path.strip_prefix("file://") {
        Some(rest) => percent_decoded(rest)?,
        None => path,
    };
    if !(path.starts_with('/') || path.starts_with("~/")) {
        return None;
    }
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    matches!(extension.as_str(), "png" | "jpg" | "jpeg" | "gif" | "webp").then_some(path)
}

/// `text` with its `%XX` escapes decoded, `None` when they do not make UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%'
            && let Some(byte) = text
                .get(at + 1..at + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl LineEditor {
    /// An empty editor with `history` (oldest first).
    pub fn new(history: Vec<String>) -> Self {
        Self {
            history,
            ..Self::default()
        }
    }

    /// The text written so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether nothing is written.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Applies `edit`.
    pub fn apply(&mut self, edit: Edit) {
        match edit {
            Edit::Insert(text) => {
                self.text.insert_str(self.cursor, &text);
                self.cursor += text.len();
            }
            Edit::Paste(text) => {
                if self.text.trim().is_empty() {
                    self.pasted_start = true;
                }
                if let Some(path) = pasted_image_path(&text) {
                    self.images_pasted += 1;
                    let placeholder = format!("[Image #{}]", self.images_pasted);
                    self.apply(Edit::Insert(format!("{placeholder} ")));
                    self.images.push((placeholder, path));
                    return;
                }
                let lines = text.lines().count();
                if lines <= PASTE_LINES && text.len() <= PASTE_BYTES {
                    self.apply(Edit::Insert(text));
                    return;
                }
                let placeholder =
                    format!("[Pasted text #{} +{lines} lines]", self.pastes.len() + 1);
                self.pastes.push((placeholder.clone(), text));
                self.apply(Edit::Insert(placeholder));
            }
            Edit::Backspace => {
                if let Some(start) = self.previous_boundary() {
                    self.text.replace_range(start..self.cursor, "");
                    self.cursor = start;
                }
            }
            Edit::Delete => {
                if let Some(end) = self.next_boundary() {
                    self.text.replace_range(self.cursor..end, "");
                }
            }
            Edit::Left => self.cursor = self.previous_boundary().unwrap_or(self.cursor),
            Edit::Right => self.cursor = self.next_boundary().unwrap_or(self.cursor),
            Edit::WordLeft => self.cursor = self.word_start(),
            Edit::WordRight => self.cursor = self.word_end(),
            Edit::Home => self.cursor = 0,
            Edit::End => self.cursor = self.text.len(),
            Edit::KillToStart => {
                self.text.replace_range(..self.cursor, "");
                self.cursor = 0;
            }
            Edit::KillToEnd => self.text.truncate(self.cursor),
            Edit::KillWord => {
                let start = self.word_start();
                self.text.replace_range(start..self.cursor, "");
                self.cursor = start;
            }
            Edit::HistoryPrevious => {
                let index = match self.browsing {
                    None if self.history.is_empty() => return,
                    None => {
                        self.draft = std::mem::take(&mut self.text);
                        self.history.len() - 1
                    }
                    Some(0) => return,
                    Some(index) => index - 1,
                };
                self.browsing = Some(index);
                self.set(self.history[index].clone());
            }
            Edit::HistoryNext => match self.browsing {
                None => {}
                Some(index) if index + 1 < self.history.len() => {
                    self.browsing = Some(index + 1);
                    self.set(self.history[index + 1].clone());
                }
                Some(_) => {
                    self.browsing = None;
                    let draft = std::mem::take(&mut self.draft);
                    self.set(draft);
                }
            },
        }
    }

    /// Replaces the text, with the cursor at its end.
    pub fn set(&mut self, text: String) {
        self.cursor = text.len();
        self.text = text;
    }

    /// Whether the line starts with pasted text: a pasted `!rm …` is not a command the user
    /// typed.
    pub fn starts_with_paste(&self) -> bool {
        self.pasted_start
    }

    /// Takes the written line (empty afterwards); a line with text goes into the history
    /// (unless it repeats the last entry).
    pub fn submit(&mut self) -> String {
        self.pasted_start = false;
        let mut line = std::mem::take(&mut self.text);
        // Each placeholder still in the line is its paste, once.
        for (placeholder, text) in std::mem::take(&mut self.pastes) {
            if let Some(at) = line.find(&placeholder) {
                line.replace_range(at..at + placeholder.len(), &text);
            }
        }
        self.submitted_images = std::mem::take(&mut self.images)
            .into_iter()
            .filter(|(placeholder, _)| line.contains(placeholder.as_str()))
            .collect();
        self.cursor = 0;
        self.browsing = None;
        self.draft.clear();
        if !line.trim().is_empty() && self.history.last() != Some(&line) {
            self.history.push(line.clone());
        }
        line
    }

    /// The word that ends at the cursor (no whitespace in it) and where it starts (a byte
    /// offset); empty after a space.
    pub fn word_before_cursor(&self) -> (usize, &str) {
        let before = &self.text[..self.cursor];
        let start = before
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(index, c)| index + c.len_utf8());
        (start, &before[start..])
    }

    /// Replaces the text from byte `start` to the cursor with `text` (the cursor after it).
    pub fn replace_from(&mut self, start: usize, text: &str) {
        let start = start.min(self.cursor);
        self.text.replace_range(start..self.cursor, text);
        self.cursor = start + text.len();
    }

    /// The image files pasted into the line last submitted whose placeholder it still
    /// holds: each placeholder (`[Image #1]`) and the path pasted (see
    /// [`pasted_image_path`]). Empty after the first call.
    pub fn take_images(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.submitted_images)
    }

    /// Empties the line (the history is kept).
    pub fn clear(&mut self) {
        self.text.clear();
        self.pastes.clear();
        self.images.clear();
        self.pasted_start = false;
        self.cursor = 0;
        self.browsing = None;
    }

    /// The history, oldest first.
    pub fn history(&self) -> &[String] {
        &self.history
    }

    /// The line as rows of at most `width` columns, the first starting with `prompt` and the
    /// next ones indented as wide, and the cursor's (row, column). Text is shown as typed
    /// except control characters (made [`crate::printable`]); a newline starts a row; a row
    /// too long breaks after its last space (the space stays at the row's end), a word
    /// longer than a row where the row ends. The last column is kept free for the cursor.
    pub fn rows(&self, prompt: &str, width: usize) -> (Vec<String>, (usize, usize)) {
        let indent_width = display_width(prompt);
        let width = width.max(indent_width + 2);
        let indent = " ".repeat(indent_width);
        // Each character as drawn: its byte offset, text and cells; `None` text: a newline.
        let cells: Vec<(usize, Option<String>, usize)> = self
            .text
            .char_indices()
            .map(|(offset, c)| match c {
                '\n' => (offset, None, 0),
                // A tab is a space on the screen (its width depends on the column).
                '\t' => (offset, Some(" ".to_owned()), 1),
                c => {
                    let shown = crate::printable(c.encode_utf8(&mut [0; 4]), false);
                    let cells = display_width(&shown);
                    (offset, Some(shown), cells)
                }
            })
            .collect();
        // Where each character goes: (row, column).
        let mut places = Vec::with_capacity(cells.len());
        let mut row = 0;
        let mut used = indent_width;
        // The index of the first character of this row, and of the last space in it.
        let mut row_start = 0;
        let mut last_space: Option<usize> = None;
        for (index, (_, shown, cells_wide)) in cells.iter().enumerate() {
            let Some(shown) = shown else {
                places.push((row, used));
                row += 1;
                used = indent_width;
                row_start = index + 1;
                last_space = None;
                continue;
            };
            if used + cells_wide >= width {
                row += 1;
                used = indent_width;
                match last_space.filter(|space| *space >= row_start) {
                    // The word after the last space moves down whole.
                    Some(space) => {
                        for moved in space + 1..index {
                            places[moved] = (row, used);
                            used += cells[moved].2;
                        }
                        row_start = space + 1;
                    }
                    None => row_start = index,
                }
                last_space = None;
            }
            places.push((row, used));
            used += cells_wide;
            if shown == " " {
                last_space = Some(index);
            }
        }
        let mut rows = vec![prompt.to_owned()];
        for ((_, shown, _), (at, _)) in cells.iter().zip(&places) {
            while rows.len() <= *at {
                rows.push(indent.clone());
            }
            if let Some(shown) = shown {
                rows[*at].push_str(shown);
            }
        }
        let cursor = match cells.iter().position(|(offset, ..)| *offset == self.cursor) {
            Some(index) => places[index],
            // At the end: after the last character, on a new row when the row is full.
            None if used + 1 >= width => (row + 1, indent_width),
            None => (row, used),
        };
        while rows.len() <= cursor.0 {
            rows.push(indent.clone());
        }
        (rows, cursor)
    }

    fn previous_boundary(&self) -> Option<usize> {
        self.text[..self.cursor]
            .char_indices()
            .next_back()
            .map(|(index, _)| index)
    }

    fn next_boundary(&self) -> Option<usize> {
        self.text[self.cursor..]
            .chars()
            .next()
            .map(|c| self.cursor + c.len_utf8())
    }

    /// The start of the word before the cursor (spaces before it skipped).
    fn word_start(&self) -> usize {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end();
        trimmed
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(index, c)| index + c.len_utf8())
    }

    /// The end of the word after the cursor (spaces before it skipped).
    fn word_end(&self) -> usize {
        let after = &self.text[self.cursor..];
        let skipped = after.len() - after.trim_start().len();
        let word = after.trim_start();
        let end = word.find(char::is_whitespace).unwrap_or(word.len());
        self.cursor + skipped + end
    }
}

/// Reads a history file: rustyline's format (`#V2` then one entry a line, `\n` and `\\`
/// escaped), which earlier versions of agent wrote, or plain lines. A missing or unreadable
/// file is an empty history. Keeps the last `limit` entries.
pub fn load_history(path: &Path, limit: usize) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut lines = text.lines().peekable();
    let escaped = lines.peek() == Some(&"#V2");
    if escaped {
        lines.next();
    }
    let mut entries: Vec<String> = lines
        .filter(|line| !line.is_empty())
        .map(|line| {
            if escaped {
                unescape(line)
            } else {
                line.to_owned()
            }
        })
        .collect();
    let excess = entries.len().saturating_sub(limit);
    entries.drain(..excess);
    entries
}

/// Writes `entries` (the last `limit`) in the format [`load_history`] reads.
///
/// # Errors
///
/// When the file cannot be written.
pub fn save_history(path: &Path, entries: &[String], limit: usize) -> std::io::Result<()> {
    let mut text = String::from("#V2\n");
    for entry in &entries[entries.len().saturating_sub(limit)..] {
        for c in entry.chars() {
            match c {
                '\\' => text.push_str("\\\\"),
                '\n' => text.push_str("\\n"),
                c => text.push(c),
            }
        }
        text.push('\n');
    }
    std::fs::write(path, text)
}

fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(editor: &mut LineEditor, text: &str) {
        editor.apply(Edit::Insert(text.to_owned()));
    }

    #[test]
    fn editing_keys_change_the_text_at_the_cursor() {
        let mut editor = LineEditor::new(Vec::new());
        typed(&mut editor, "fix the bug");
        editor.apply(Edit::WordLeft);
        typed(&mut editor, "big ");
        assert_eq!(editor.text(), "fix the big bug");
        editor.apply(Edit::KillWord);
        assert_eq!(editor.text(), "fix the bug");
        editor.apply(Edit::Home);
        editor.apply(Edit::Delete);
        typed(&mut editor, "F");
        editor.apply(Edit::WordRight);
        editor.apply(Edit::KillToEnd);
        assert_eq!(editor.text(), "Fix");
        typed(&mut editor, " é");
        editor.apply(Edit::Backspace);
        editor.apply(Edit::Left);
        editor.apply(Edit::KillToStart);
        assert_eq!(editor.text(), " ");
        assert_eq!(editor.submit(), " ");
        assert!(editor.history().is_empty(), "a blank line is not history");
    }

    #[test]
    fn a_pasted_image_path_is_a_placeholder_for_the_image() {
        for (pasted, path) in [
            ("/home/me/shot.png", Some("/home/me/shot.png")),
            ("  '/tmp/My Shots/a b.JPG'\n", Some("/tmp/My Shots/a b.JPG")),
            ("/tmp/My\\ Shots/a\\ b.webp", Some("/tmp/My Shots/a b.webp")),
            (
                "file:///tmp/Screen%20Shot.png",
                Some("/tmp/Screen Shot.png"),
            ),
            ("~/Desktop/x.gif", Some("~/Desktop/x.gif")),
            ("shot.png", None),
            ("/tmp/notes.txt", None),
            ("look at /tmp/a.png", None),
            ("/tmp/a.png\n/tmp/b.png", None),
        ] {
            assert_eq!(pasted_image_path(pasted).as_deref(), path, "{pasted:?}");
        }
        let mut editor = LineEditor::default();
        editor.apply(Edit::Insert("what is in ".into()));
        editor.apply(Edit::Paste("/tmp/one.png".into()));
        editor.apply(Edit::Paste("/tmp/two.png".into()));
        assert_eq!(editor.text(), "what is in [Image #1] [Image #2] ");
        // The user deleted the second: only the first goes.
        for _ in 0.."[Image #2] ".len() {
            editor.apply(Edit::Backspace);
        }
        assert_eq!(editor.submit(), "what is in [Image #1] ");
        assert_eq!(
            editor.take_images(),
            [("[Image #1]".to_owned(), "/tmp/one.png".to_owned())]
        );
        assert!(editor.take_images().is_empty());
        editor.apply(Edit::Paste("/tmp/three.png".into()));
        assert_eq!(editor.text(), "[Image #3] ", "numbers stay unique");
    }

    #[test]
    fn a_long_paste_is_a_placeholder_until_sent() {
        let mut editor = LineEditor::new(Vec::new());
        let long: String = (1..=12).map(|n| format!("line {n}\n")).collect();
        editor.apply(Edit::Insert("look: ".into()));
        editor.apply(Edit::Paste(long.clone()));
        assert_eq!(editor.text(), "look: [Pasted text #1 +12 lines]");
        editor.apply(Edit::Paste("short\npaste".into()));
        assert_eq!(
            editor.text(),
            "look: [Pasted text #1 +12 lines]short\npaste"
        );
        assert_eq!(editor.submit(), format!("look: {long}short\npaste"));
        // A placeholder deleted before sending sends nothing.
        editor.apply(Edit::Paste(long));
        editor.apply(Edit::KillToStart);
        assert_eq!(editor.submit(), "");
    }

    #[test]
    fn the_word_before_the_cursor_is_replaced() {
        let mut editor = LineEditor::new(Vec::new());
        typed(&mut editor, "look at @src/ma now");
        editor.apply(Edit::WordLeft);
        editor.apply(Edit::Left);
        assert_eq!(editor.word_before_cursor(), (8, "@src/ma"));
        editor.replace_from(8, "@src/main.rs ");
        assert_eq!(editor.text(), "look at @src/main.rs  now");
        typed(&mut editor, "x");
        assert_eq!(editor.text(), "look at @src/main.rs x now");
    }

    #[test]
    fn history_is_browsed_and_the_draft_comes_back() {
        let mut editor = LineEditor::new(vec!["first".into(), "second".into()]);
        typed(&mut editor, "draft");
        editor.apply(Edit::HistoryPrevious);
        assert_eq!(editor.text(), "second");
        editor.apply(Edit::HistoryPrevious);
        editor.apply(Edit::HistoryPrevious);
        assert_eq!(editor.text(), "first");
        editor.apply(Edit::HistoryNext);
        editor.apply(Edit::HistoryNext);
        assert_eq!(editor.text(), "draft");
        assert_eq!(editor.submit(), "draft");
        typed(&mut editor, "draft");
        editor.submit();
        assert_eq!(editor.history(), ["first", "second", "draft"]);
    }

    #[test]
    fn rows_wrap_and_place_the_cursor() {
        let mut editor = LineEditor::new(Vec::new());
        typed(&mut editor, "abcdefgh");
        assert_eq!(
            editor.rows("› ", 8),
            (vec!["› abcde".to_owned(), "  fgh".to_owned()], (1, 5))
        );
        typed(&mut editor, "\nxy\x1b");
        let (rows, cursor) = editor.rows("› ", 14);
        assert_eq!(rows, ["› abcdefgh", "  xy\\u{1b}"]);
        assert_eq!(cursor, (1, 10));
        editor.apply(Edit::Home);
        assert_eq!(editor.rows("› ", 8).1, (0, 2));
    }

    /// Words move to the next row whole (as Claude Code's input does); a word wider than a
    /// row is cut; the cursor follows the word it is in.
    #[test]
    fn rows_break_between_words() {
        let mut editor = LineEditor::new(Vec::new());
        typed(&mut editor, "hello world again");
        let (rows, cursor) = editor.rows("› ", 12);
        assert_eq!(rows, ["› hello ", "  world ", "  again"]);
        assert_eq!(cursor, (2, 7));
        for _ in 0.."again".len() + 2 {
            editor.apply(Edit::Left);
        }
        // On the `d` of `world`.
        assert_eq!(editor.rows("› ", 12).1, (1, 6));
        let mut long = LineEditor::new(Vec::new());
        typed(&mut long, "ab cdefghijklmnop");
        assert_eq!(
            long.rows("› ", 8).0,
            ["› ab ", "  cdefg", "  hijkl", "  mnop"]
        );
    }

    #[test]
    fn history_files_round_trip_and_read_rustyline_files() {
        let dir = std::env::temp_dir().join(format!("render-history-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("history");
        std::fs::write(&path, "#V2\nls\nsay \\\\n\\nnext\n").unwrap();
        assert_eq!(load_history(&path, 10), ["ls", "say \\n\nnext"]);
        save_history(&path, &["a".into(), "b\nc".into(), "d\\".into()], 2).unwrap();
        assert_eq!(load_history(&path, 10), ["b\nc", "d\\"]);
        assert_eq!(load_history(&path, 1), ["d\\"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
