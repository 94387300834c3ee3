//! Inline drawing: finished lines go into the terminal's scrollback once, and a small live
//! region under them (calls in flight, the spinner, a question, the input line, the status
//! line) is redrawn in place.
//!
//! This is the model Claude Code's renderer (Ink's static output) and ratatui's inline
//! viewport share: no alternate screen, so everything written stays in the scrollback, and
//! only the last few rows ever change. [`Painter::frame`] builds one frame as bytes:
//!
//! 1. begin a synchronized update (DEC private mode 2026) when the terminal supports it,
//!    so the terminal shows the frame whole, never half drawn;
//! 2. move the cursor to the first row of the live region drawn last time and erase from
//!    there to the end of the screen;
//! 3. write the new finished lines (they scroll up into the scrollback like any output);
//! 4. write the live region, each row cut to the terminal's width so the terminal never wraps
//!    it (a wrapped row would throw off the count of rows to go back up next time);
//! 5. put the cursor where the input is, and end the synchronized update.
//!
//! Everything here is pure (bytes out), so frames are tested on a terminal model.

use std::fmt::Write as _;

use unicode_width::UnicodeWidthChar as _;

/// Erases from the cursor's row (the cursor at its start) to the end of the screen, without
/// an `ED` at the screen's top-left corner: tmux (`scroll-on-clear`, on by default) takes an
/// erase from there for a cleared screen and pushes what the screen shows into its history
/// first, which after a resize had left the live region there (checked on tmux 3.3a). So:
/// one column right, `ED 0` from there, back, and `EL 0` for the rest of the row.
const ERASE_BELOW: &str = "\x1b[C\x1b[J\r\x1b[K";

/// Begin synchronized update (DEC private mode 2026 set): the terminal holds the screen
/// until the matching end. Specified in
/// <https://gist.github.com/christianparpart/d8a62cc1ab659194337d73e399004036>.
pub const SYNC_BEGIN: &str = "\x1b[?2026h";
/// End synchronized update (DEC private mode 2026 reset).
pub const SYNC_END: &str = "\x1b[?2026l";
/// DECRQM for mode 2026: a terminal that knows the mode answers `CSI ? 2026 ; Ps $ y`.
pub const SYNC_QUERY: &str = "\x1b[?2026$p";

/// Whether `reply` (bytes read from the terminal after [`SYNC_QUERY`]) says synchronized
/// output is supported: `Ps` 1 (set) or 2 (reset); 0 (unknown) and 4 (permanently reset)
/// say no, as does no answer.
pub fn sync_supported(reply: &[u8]) -> bool {
    let text = String::from_utf8_lossy(reply);
    ["\x1b[?2026;1$y", "\x1b[?2026;2$y"]
        .iter()
        .any(|answer| text.contains(answer))
}

/// Whether `reply` holds a terminal's answer to the primary device attributes request
/// (`CSI c`): `CSI ? Ps ; ... c`.
pub fn device_attributes_answered(reply: &[u8]) -> bool {
    let text = String::from_utf8_lossy(reply);
    text.match_indices("\x1b[?").any(|(at, _)| {
        let rest = &text[at + 3..];
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(rest.len());
        digits > 0 && rest[digits..].starts_with('c')
    })
}

/// Whether `reply` holds an answer to the kitty keyboard protocol's flags query
/// (`CSI ? u`): `CSI ? flags u`.
pub fn kitty_keys_answered(reply: &[u8]) -> bool {
    let text = String::from_utf8_lossy(reply);
    text.match_indices("\x1b[?").any(|(at, _)| {
        let rest = &text[at + 3..];
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        digits > 0 && rest[digits..].starts_with('u')
    })
}

/// The live region of one frame: rows drawn under the finished lines, and where the cursor
/// goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Live {
    /// Rows, each already styled (SGR sequences allowed) and safe to print; a row wider than
    /// the terminal is cut.
    pub rows: Vec<String>,
    /// The cursor's row (index into `rows`) and column (in cells); `None` hides it.
    pub cursor: Option<(usize, usize)>,
}

/// Draws frames inline on a terminal of a known size. See the module docs.
#[derive(Debug)]
pub struct Painter {
    width: usize,
    height: usize,
    sync: bool,
    /// The cursor's row within the live region drawn last (0 before the first frame).
    cursor_row: usize,
    /// Whether the cursor was left visible.
    cursor_shown: bool,
    /// The live rows drawn last, as written (fitted), and where the cursor was left in
    /// them: a frame with nothing finished that changes only some rows (the spinner's
    /// tick, the elapsed seconds) rewrites those rows alone. Empty: the next frame draws
    /// the whole region.
    drawn: Vec<String>,
    drawn_cursor: Option<(usize, usize)>,
    /// The cursor's column on its row, as the last frame left it.
    cursor_column: usize,
    /// Whether the terminal re-wraps rows when it narrows (see [`terminal_reflows`]).
    reflow: bool,
    /// What ends a row: `\r\n`, or `\n` where the terminal's output processing adds the
    /// carriage return itself (see [`Painter::set_onlcr`]).
    newline: &'static str,
    /// The terminal changed size since `drawn` was drawn: `drawn` is kept for where its rows
    /// now are, and the next frame draws the whole region.
    resized: bool,
}

impl Painter {
    /// A painter for a terminal of `width` columns and `height` rows; `sync`: whether the
    /// terminal supports synchronized output (see [`sync_supported`]).
    pub fn new(width: u16, height: u16, sync: bool) -> Self {
        Self {
            width: usize::from(width.max(2)),
            height: usize::from(height.max(2)),
            sync,
            cursor_row: 0,
            cursor_shown: true,
            drawn: Vec::new(),
            drawn_cursor: None,
            cursor_column: 0,
            reflow: true,
            newline: "\r\n",
            resized: false,
        }
    }

    /// Whether the terminal's output processing turns each `\n` into `\r\n` (`ONLCR`
    /// with `OPOST`, as [`crate::tui`] leaves it): rows then end with `\n` alone, a byte
    /// fewer on the wire than `\r\n` (which would arrive as `\r\r\n`).
    pub fn set_onlcr(&mut self, onlcr: bool) {
        self.newline = if onlcr { "\n" } else { "\r\n" };
    }

    /// Whether the terminal re-wraps the rows already on it when it narrows (true unless
    /// set otherwise; see [`terminal_reflows`]): where the live region drawn last begins
    /// after a resize depends on it.
    pub fn set_reflow(&mut self, reflow: bool) {
        self.reflow = reflow;
    }

    /// The terminal changed size to `width` columns and `height` rows: the next frame
    /// erases the live region drawn last from where its first row now is and draws it
    /// whole at the new width.
    ///
    /// A terminal that re-wraps (tmux, VTE, kitty, iTerm2, WezTerm, Alacritty, Windows
    /// Terminal) keeps the cursor's place in the text and breaks every row longer than the
    /// new width onto more rows, so the region's first row is that many more rows above
    /// the cursor; one that does not (xterm, the Linux console) cuts rows and moves
    /// nothing. Rows the terminal pushed into its scrollback while re-wrapping are beyond
    /// reach (a region of a few rows under a cursor near the screen's bottom has none).
    /// Sizes in cells; each call counts from the region as drawn, so a drag through many
    /// sizes ends where one resize to the last size would.
    pub fn resize(&mut self, width: u16, height: u16) {
        self.width = usize::from(width.max(2));
        self.height = usize::from(height.max(2));
        self.resized = true;
        self.cursor_row = self.rows_above_cursor();
    }

    /// How many rows above the cursor the live region drawn last now begins, at the
    /// current width: the rows before the cursor's, each as many rows as the terminal
    /// breaks it into, and the rows the cursor's own row breaks into before the cursor.
    fn rows_above_cursor(&self) -> usize {
        let row = self
            .drawn_cursor
            .map_or(self.drawn.len().saturating_sub(1), |(row, _)| row);
        if !self.reflow || self.drawn.is_empty() {
            return row;
        }
        let width = self.width;
        let above: usize = self.drawn[..row.min(self.drawn.len())]
            .iter()
            .map(|drawn| row_width(drawn).div_ceil(width).max(1))
            .sum();
        above + self.cursor_column / width
    }

    /// The terminal's width in columns.
    pub fn width(&self) -> usize {
        self.width
    }

    /// One frame: `finished` lines (each ends up on its own row or rows, then in the
    /// scrollback) and the new live region, as the bytes to write.
    ///
    /// The live region keeps its last rows when it is taller than the screen allows (all
    /// rows but one), so the input and status lines stay visible.
    pub fn frame(&mut self, finished: &[String], live: &Live) -> Vec<u8> {
        let room = self.height.saturating_sub(1).max(1);
        let skip = live.rows.len().saturating_sub(room);
        let rows: Vec<String> = live.rows[skip..]
            .iter()
            .map(|row| fit(&sanitize(row), self.width - 1))
            .collect();
        let cursor = live
            .cursor
            .filter(|(row, _)| *row >= skip && *row - skip < rows.len())
            .map(|(row, column)| (row - skip, column.min(self.width - 1)));
        if finished.is_empty()
            && !rows.is_empty()
            && rows.len() == self.drawn.len()
            && !self.resized
        {
            return self.changed_rows(rows, cursor);
        }
        let mut out = self.begin();
        out.push('\r');
        if self.cursor_row > 0 {
            let _ = write!(out, "\x1b[{}A", self.cursor_row);
        }
        out.push_str(ERASE_BELOW);
        for line in finished {
            for row in line.split('\n') {
                for row in wrap_words(&sanitize(row), self.width) {
                    out.push_str(&row);
                    // Styles never leak onto the next row.
                    if row.contains('\x1b') && !style_at(&row, "").is_empty() {
                        out.push_str("\x1b[0m");
                    }
                    out.push_str(self.newline);
                }
            }
        }
        for (index, row) in rows.iter().enumerate() {
            if index > 0 {
                out.push_str(self.newline);
            }
            out.push_str(row);
        }
        self.cursor_row = rows.len().saturating_sub(1);
        self.cursor_column = rows.last().map_or(0, |row| row_width(row));
        self.resized = false;
        self.end(out, rows, cursor)
    }

    /// A frame's first bytes: synchronized output begun where the terminal has it, and the
    /// cursor hidden while drawing, so it never flickers across the screen.
    fn begin(&self) -> String {
        let mut out = String::new();
        if self.sync {
            out.push_str(SYNC_BEGIN);
        }
        if self.cursor_shown {
            out.push_str("\x1b[?25l");
        }
        out
    }

    /// A frame's last bytes after its live `rows` were written: the cursor put at
    /// `cursor`, synchronized output ended; `rows` kept as what is on the screen.
    fn end(
        &mut self,
        mut out: String,
        rows: Vec<String>,
        cursor: Option<(usize, usize)>,
    ) -> Vec<u8> {
        self.drawn = rows;
        self.drawn_cursor = cursor;
        self.place_cursor(&mut out, cursor);
        if self.sync {
            out.push_str(SYNC_END);
        }
        out.into_bytes()
    }

    /// A frame that changes only live rows, drawn over the last one of the same height:
    /// each changed row rewritten in place (`CSI K` erases what the old one left), the
    /// cursor put back. Nothing changed: no bytes.
    fn changed_rows(&mut self, rows: Vec<String>, cursor: Option<(usize, usize)>) -> Vec<u8> {
        let changed: Vec<usize> = (0..rows.len())
            .filter(|index| rows[*index] != self.drawn[*index])
            .collect();
        if changed.is_empty() && cursor == self.drawn_cursor {
            return Vec::new();
        }
        let mut out = self.begin();
        for index in changed {
            self.move_to_row(&mut out, index);
            self.cursor_column = rewrite_row(&mut out, &self.drawn[index], &rows[index]);
        }
        self.end(out, rows, cursor)
    }

    /// Moves the cursor from its row in the live region to row `to`.
    fn move_to_row(&mut self, out: &mut String, to: usize) {
        if to < self.cursor_row {
            let _ = write!(out, "\x1b[{}A", self.cursor_row - to);
        } else if to > self.cursor_row {
            let _ = write!(out, "\x1b[{}B", to - self.cursor_row);
        }
        self.cursor_row = to;
    }

    /// Leaves the cursor at `cursor` (row in the live region, column), shown, or hidden on
    /// the region's last row.
    fn place_cursor(&mut self, out: &mut String, cursor: Option<(usize, usize)>) {
        match cursor {
            Some((row, column)) => {
                self.move_to_row(out, row);
                out.push('\r');
                if column > 0 {
                    let _ = write!(out, "\x1b[{column}C");
                }
                out.push_str("\x1b[?25h");
                self.cursor_column = column;
                self.cursor_shown = true;
            }
            None => {
                let last = self.drawn.len().max(1) - 1;
                self.move_to_row(out, last);
                self.cursor_shown = false;
            }
        }
    }

    /// Clears the screen and the scrollback (`ED 2`, `ED 3`) and puts the cursor home: what
    /// `/clear` shows, as Claude Code's does. The next frame starts at the top.
    pub fn clear_screen(&mut self) -> Vec<u8> {
        self.cursor_row = 0;
        self.cursor_column = 0;
        self.resized = false;
        self.drawn.clear();
        b"\x1b[2J\x1b[3J\x1b[H".to_vec()
    }

    /// The bytes [`Painter::clear`] would write now, without forgetting the region.
    pub fn clear_bytes(&self) -> Vec<u8> {
        let mut out = String::from("\r");
        if self.cursor_row > 0 {
            let _ = write!(out, "\x1b[{}A", self.cursor_row);
        }
        out.push_str(ERASE_BELOW);
        out.push_str("\x1b[?25h");
        out.into_bytes()
    }

    /// Erases the live region and leaves the cursor at its start, shown: what to write before
    /// giving the terminal back (to a command or at exit).
    pub fn clear(&mut self) -> Vec<u8> {
        let mut out = String::from("\r");
        if self.cursor_row > 0 {
            let _ = write!(out, "\x1b[{}A", self.cursor_row);
        }
        out.push_str(ERASE_BELOW);
        out.push_str("\x1b[?25h");
        self.cursor_row = 0;
        self.cursor_column = 0;
        self.resized = false;
        self.cursor_shown = true;
        self.drawn.clear();
        out.into_bytes()
    }
}

/// `line` with every escape sequence but SGR (`CSI ... m`, colours and styles) and every
/// other control character shown as an escape (`\u{1b}`), tabs as a space: what a frame
/// writes, whatever a caller passed (the last line of defence of "no text reaches the
/// terminal unescaped").
pub fn sanitize(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b'
            && let Some(sgr) = sgr_at(rest)
        {
            out.push_str(&rest[..sgr]);
            rest = &rest[sgr..];
            continue;
        }
        match c {
            '\t' => out.push(' '),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Rewrites a live row that showed `old` to show `new`, from where they first differ: the
/// cursor to that column, the styles in effect there set again, then either only what
/// changed, when what follows it is the same text in the same style at the same columns
/// (the spinner's glyph, a counter's digits), or the rest of `new` and an erase of what
/// `old` left after it (a streaming preview's row only grows). Leaves no style set;
/// returns the column the cursor is left at.
fn rewrite_row(out: &mut String, old: &str, new: &str) -> usize {
    let (mut at, mut column, mut style) = (0, 0, String::new());
    loop {
        let rest = &new[at..];
        let unit = match rest.chars().next() {
            Some('\x1b') => sgr_at(rest).unwrap_or(1),
            Some(c) => c.len_utf8(),
            None => break,
        };
        if old.get(at..at + unit) != Some(&rest[..unit]) {
            break;
        }
        let piece = &rest[..unit];
        if piece.starts_with('\x1b') {
            track_style(&mut style, piece);
        } else {
            column += piece.chars().filter_map(|c| c.width()).sum::<usize>();
        }
        at += unit;
    }
    out.push('\r');
    if column > 0 {
        let _ = write!(out, "\x1b[{column}C");
    }
    let (old_units, new_units) = (units(old.get(at..).unwrap_or_default()), units(&new[at..]));
    let same = old_units
        .iter()
        .rev()
        .zip(new_units.iter().rev())
        .take_while(|(old, new)| old == new)
        .count();
    let (old_middle, new_middle) = (
        &old_units[..old_units.len() - same],
        &new_units[..new_units.len() - same],
    );
    let after = |units: &[&str]| {
        let mut style = style.clone();
        for unit in units.iter().filter(|unit| unit.starts_with('\x1b')) {
            track_style(&mut style, unit);
        }
        style
    };
    let cells = |units: &[&str]| -> usize {
        units
            .iter()
            .filter(|unit| !unit.starts_with('\x1b'))
            .flat_map(|unit| unit.chars())
            .filter_map(|c| c.width())
            .sum()
    };
    let in_place = same > 0
        && cells(old_middle) == cells(new_middle)
        && after(old_middle) == after(new_middle);
    let written = if in_place { new_middle } else { &new_units[..] };
    out.push_str(&style);
    for unit in written {
        out.push_str(unit);
    }
    if !after(written).is_empty() {
        out.push_str("\x1b[0m");
    }
    if !in_place {
        out.push_str("\x1b[K");
    }
    column + cells(written)
}

/// `text` cut into the pieces a row is compared by: SGR sequences and characters.
fn units(text: &str) -> Vec<&str> {
    let mut units = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let length = if c == '\x1b' {
            sgr_at(rest).unwrap_or(1)
        } else {
            c.len_utf8()
        };
        units.push(&rest[..length]);
        rest = &rest[length..];
    }
    units
}

/// A run of a row that [`wrap_words`] places whole: a word, or the spaces between two.
struct Piece {
    /// Its text, SGR sequences inside it included.
    text: String,
    /// The columns it takes.
    width: usize,
    /// Spaces (dropped where the row breaks).
    space: bool,
    /// The SGR sequences in effect where it starts (set again when it starts a row).
    style: String,
}

/// `row` (sanitized: printable text and SGR sequences) broken at spaces into rows of at
/// most `width` columns, where the terminal would otherwise break it in the middle of a
/// word (`finding files by patt` / `ern`). A continued row keeps the row's indentation
/// (up to half the width); a word wider than a row is cut where the row ends. The styles
/// in effect at a break are set again at the next row's start (the caller resets them at
/// each row's end).
pub fn wrap_words(row: &str, width: usize) -> Vec<String> {
    let width = width.max(8);
    if strip_styles(row)
        .chars()
        .filter_map(|c| c.width())
        .sum::<usize>()
        <= width
    {
        return vec![row.to_owned()];
    }
    let pieces = pieces(row);
    // The row's own indentation, styles before it or not.
    let indent = strip_styles(row).chars().take_while(|c| *c == ' ').count();
    let indent = if indent <= width / 2 { indent } else { 0 };
    let mut rows = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    let mut gap: Option<&Piece> = None;
    for piece in &pieces {
        if piece.space {
            if used == 0 && rows.is_empty() {
                line.push_str(&piece.text);
                used = piece.width;
            } else {
                gap = Some(piece);
            }
            continue;
        }
        let gap_width = gap.map_or(0, |gap| gap.width);
        if used > indent && used + gap_width + piece.width > width {
            rows.push(std::mem::take(&mut line));
            line = format!("{}{}", " ".repeat(indent), piece.style);
            used = indent;
        } else if let Some(gap) = gap {
            line.push_str(&gap.text);
            used += gap.width;
        }
        gap = None;
        // A word wider than what is left: cut where each row ends.
        let mut rest = piece.text.as_str();
        while !rest.is_empty() {
            if rest.starts_with('\x1b')
                && let Some(length) = sgr_at(rest)
            {
                line.push_str(&rest[..length]);
                rest = &rest[length..];
                continue;
            }
            let Some(c) = rest.chars().next() else { break };
            let cells = c.width().unwrap_or(0);
            if used + cells > width && used > indent {
                rows.push(std::mem::take(&mut line));
                line = format!(
                    "{}{}{}",
                    " ".repeat(indent),
                    piece.style,
                    style_at(&piece.text, rest)
                );
                used = indent;
            }
            line.push(c);
            used += cells;
            rest = &rest[c.len_utf8()..];
        }
    }
    rows.push(line);
    rows
}

/// `row` cut into words and runs of spaces, each with the style in effect where it starts.
fn pieces(row: &str) -> Vec<Piece> {
    let mut pieces: Vec<Piece> = Vec::new();
    let mut style = String::new();
    let mut rest = row;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b'
            && let Some(length) = sgr_at(rest)
        {
            let sequence = &rest[..length];
            match pieces.last_mut() {
                Some(last) => last.text.push_str(sequence),
                None => pieces.push(Piece {
                    text: sequence.to_owned(),
                    width: 0,
                    space: false,
                    style: String::new(),
                }),
            }
            track_style(&mut style, sequence);
            rest = &rest[length..];
            continue;
        }
        let space = c == ' ';
        let cells = c.width().unwrap_or(0);
        match pieces.last_mut() {
            Some(last) if last.space == space && (last.width > 0 || !last.text.is_empty()) => {
                last.text.push(c);
                last.width += cells;
            }
            _ => pieces.push(Piece {
                text: c.to_string(),
                width: cells,
                space,
                style: style.clone(),
            }),
        }
        rest = &rest[c.len_utf8()..];
    }
    pieces
}

/// The SGR sequences in effect at `at` (a suffix of `word`), from `word`'s own.
fn style_at(word: &str, at: &str) -> String {
    let before = &word[..word.len() - at.len()];
    let mut style = String::new();
    let mut rest = before;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b'
            && let Some(length) = sgr_at(rest)
        {
            track_style(&mut style, &rest[..length]);
            rest = &rest[length..];
            continue;
        }
        rest = &rest[c.len_utf8()..];
    }
    style
}

/// `style` (the SGR sequences in effect) after the SGR `sequence`: a reset empties it,
/// anything else adds to it.
fn track_style(style: &mut String, sequence: &str) {
    if sequence == "\x1b[0m" || sequence == "\x1b[m" {
        style.clear();
    } else {
        style.push_str(sequence);
    }
}

/// The length of the SGR sequence `text` starts with (`ESC [` digits and `;` then `m`).
fn sgr_at(text: &str) -> Option<usize> {
    let body = text.strip_prefix("\x1b[")?;
    let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
    body[end..].starts_with('m').then_some(2 + end + 1)
}

/// `text` without its CSI escape sequences (the styles the renderer added): what a terminal
/// model shows of it.
pub fn strip_styles(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for next in chars.by_ref() {
                if ('\x40'..='\x7e').contains(&next) {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The columns a drawn `row` takes (escape sequences take none).
fn row_width(row: &str) -> usize {
    strip_styles(row).chars().filter_map(|c| c.width()).sum()
}

/// Whether the terminal this process runs on re-wraps its rows when it narrows, from
/// `variable` (the environment): `AGENT_TERMINAL_REFLOW` (`0` or `false`: no; anything
/// else: yes) decides; otherwise tmux (`TMUX`) re-wraps, and xterm (which sets
/// `XTERM_VERSION`), the Linux console (`TERM=linux`) and st (`TERM=st*`) cut rows
/// instead; every other terminal is taken to re-wrap, as VTE, kitty, iTerm2,
/// Terminal.app, WezTerm, Alacritty, foot, Konsole, Windows Terminal and xterm.js do.
pub fn terminal_reflows(variable: impl Fn(&str) -> Option<String>) -> bool {
    if let Some(value) = variable("AGENT_TERMINAL_REFLOW") {
        return !matches!(value.trim(), "0" | "false" | "no");
    }
    if variable("TMUX").is_some() {
        return true;
    }
    let term = variable("TERM").unwrap_or_default();
    !(variable("XTERM_VERSION").is_some()
        || term == "linux"
        || term == "st"
        || term.starts_with("st-"))
}

/// `row` cut to `width` columns: escape sequences count no columns and are kept (a row
/// ending in a style gets a reset); a row that does not fit ends with `…` in its last cell.
pub fn fit(row: &str, width: usize) -> String {
    let mut out = String::with_capacity(row.len());
    let mut used = 0;
    let mut styled = false;
    // Where the last visible character starts in `out`.
    let mut last_visible = None;
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters final-byte (0x40..=0x7e).
            out.push(c);
            styled = true;
            if chars.peek() == Some(&'[') {
                out.push('[');
                chars.next();
                for next in chars.by_ref() {
                    out.push(next);
                    if ('\x40'..='\x7e').contains(&next) {
                        break;
                    }
                }
            }
            continue;
        }
        let cells = c.width().unwrap_or(0);
        if used + cells > width {
            // Cut: `…` in the cell left, or in the last character's place.
            if used + 1 > width
                && let Some(at) = last_visible
            {
                out.truncate(at);
            }
            out.push('…');
            break;
        }
        if cells > 0 {
            last_visible = Some(out.len());
        }
        used += cells;
        out.push(c);
    }
    if styled && !style_at(&out, "").is_empty() {
        out.push_str("\x1b[0m");
    }
    out
}

#[cfg(test)]
mod tests {

    /// Our text breaks between words at the terminal's width, keeps its indentation on the
    /// rows it continues on, keeps its styles across a break, and cuts only a word wider
    /// than a row.
    #[test]
    fn rows_wider_than_the_terminal_break_between_words() {
        let visible =
            |rows: &[String]| -> Vec<String> { rows.iter().map(|row| strip_styles(row)).collect() };
        let text = "  Explore (built-in; tools Read, Glob, Grep, Bash): Fast read-only agent for exploring a codebase: finding files by pattern";
        let rows = wrap_words(text, 40);
        let shown = visible(&rows);
        assert!(
            shown.iter().all(|row| crate::display_width(row) <= 40),
            "{shown:?}"
        );
        assert!(
            shown[1..]
                .iter()
                .all(|row| row.starts_with("  ") && !row.starts_with("   ")),
            "{shown:?}"
        );
        let words: Vec<&str> = shown
            .iter()
            .flat_map(|row| row.split_whitespace())
            .collect();
        assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
        assert!(
            shown.iter().any(|row| row.ends_with("by"))
                || shown.iter().any(|row| row.contains(" pattern")),
            "{shown:?}"
        );
        assert!(!shown.iter().any(|row| row.ends_with("patt")), "{shown:?}");

        // A style open at the break is set again on the next row.
        let rows = wrap_words("\x1b[2maaaa bbbb cccc dddd eeee\x1b[0m plain", 12);
        assert_eq!(visible(&rows), ["aaaa bbbb", "cccc dddd", "eeee plain"]);
        assert!(rows[1].starts_with("\x1b[2m"), "{rows:?}");
        assert!(
            !rows[2].starts_with("\x1b[2m") || rows[2].contains("\x1b[0m"),
            "{rows:?}"
        );

        // Indentation after a style counts too.
        let rows = visible(&wrap_words(
            "\x1b[2m  Allowed edits for the rest of this session (/permissions lists it)\x1b[0m",
            40,
        ));
        assert!(
            rows.len() > 1 && rows[1..].iter().all(|row| row.starts_with("  ")),
            "{rows:?}"
        );

        // A word longer than a row is cut where the row ends; wide characters count 2.
        assert_eq!(
            visible(&wrap_words(&"x".repeat(25), 10)),
            ["xxxxxxxxxx", "xxxxxxxxxx", "xxxxx"]
        );
        let rows = visible(&wrap_words("漢字漢字漢字 かな", 10));
        assert_eq!(rows, ["漢字漢字漢", "字 かな"]);
        // A row that fits is left as it is.
        assert_eq!(
            wrap_words("\x1b[1mshort\x1b[0m", 20),
            ["\x1b[1mshort\x1b[0m"]
        );
    }
    use super::*;

    fn screen(parser: &vt100::Parser) -> Vec<String> {
        parser
            .screen()
            .rows(0, parser.screen().size().1)
            .map(|row| row.trim_end().to_owned())
            .collect()
    }

    fn live(rows: &[&str], cursor: Option<(usize, usize)>) -> Live {
        Live {
            rows: rows.iter().map(|row| (*row).to_owned()).collect(),
            cursor,
        }
    }

    #[test]
    fn finished_lines_stay_and_the_live_region_is_redrawn_in_place() {
        let mut parser = vt100::Parser::new(6, 20, 100);
        let mut painter = Painter::new(20, 6, false);
        parser.process(&painter.frame(
            &["one".into()],
            &live(&["⠋ Thinking", "› ab"], Some((1, 4))),
        ));
        assert_eq!(screen(&parser)[..3], ["one", "⠋ Thinking", "› ab"]);
        assert_eq!(parser.screen().cursor_position(), (2, 4));
        // The next frame replaces the live rows, whatever their number.
        parser.process(&painter.frame(
            &["two".into(), "three\nfour".into()],
            &live(&["› abc", "  status"], Some((0, 5))),
        ));
        assert_eq!(
            screen(&parser),
            ["one", "two", "three", "four", "› abc", "  status"]
        );
        assert_eq!(parser.screen().cursor_position(), (4, 5));
        // Finished lines scroll into the scrollback; the live region stays at the bottom.
        let many: Vec<String> = (0..10).map(|n| format!("line {n}")).collect();
        parser.process(&painter.frame(&many, &live(&["› "], Some((0, 2)))));
        let rows = screen(&parser);
        assert_eq!(rows[4], "line 9");
        assert_eq!(rows[5], "›");
        parser.process(&painter.clear());
        assert_eq!(screen(&parser)[5], "");
    }

    /// A question drawn at 120 columns, the terminal narrowed to 60 (in one step or through
    /// a drag of several sizes with no frame between), and the region drawn again at the new
    /// width: on a terminal that re-wraps and on one that cuts, told which it is, the
    /// question's rows are on the terminal once and the finished lines above them all kept.
    /// Told wrong, each model shows what goes wrong (a stale copy left, finished rows
    /// erased), so the painter's count is what the result rests on.
    #[test]
    fn a_resize_redraws_the_region_from_where_the_terminal_left_it() {
        use testkit::screen::{Resize, all_rows, resized};
        let question = format!("Allow Bash {}?", "x".repeat(100));
        let draw = |width: usize| {
            let rows = [
                question.clone(),
                "  1. Yes   2. Yes, and don't ask again for this command   3. No, tell the model"
                    .to_owned(),
                "› 1".to_owned(),
                format!("  ─ model · default · {}", "figures ".repeat(12)),
            ];
            let rows = rows.iter().map(|row| fit(row, width - 1)).collect();
            Live {
                rows,
                cursor: Some((2, 3)),
            }
        };
        let finished: Vec<String> = (0..30).map(|n| format!("finished line {n}")).collect();
        let run = |how: Resize, reflow: bool, steps: &[u16]| {
            let mut parser = vt100::Parser::new(20, 120, 1000);
            let mut painter = Painter::new(120, 20, false);
            painter.set_reflow(reflow);
            parser.process(&painter.frame(&finished, &draw(120)));
            for width in steps {
                parser = resized(&parser, 20, *width, how);
                painter.resize(*width, 20);
            }
            let width = steps.last().copied().unwrap_or(120);
            parser.process(&painter.frame(&[], &draw(usize::from(width))));
            let rows: Vec<String> = all_rows(&parser).into_iter().map(|(row, _)| row).collect();
            let text = rows.join("\n");
            (
                text.matches("Allow Bash").count(),
                (0..30)
                    .filter(|n| text.contains(&format!("finished line {n}\n")))
                    .count(),
                rows,
            )
        };
        for steps in [&[60][..], &[110, 90, 75, 60], &[60, 80]] {
            let (questions, kept, rows) = run(Resize::Rewrap, true, steps);
            assert_eq!((questions, kept), (1, 30), "re-wrap {steps:?}: {rows:#?}");
            let (questions, kept, rows) = run(Resize::Cut, false, steps);
            assert_eq!((questions, kept), (1, 30), "cut {steps:?}: {rows:#?}");
        }
        // Told wrong: a stale copy of the question, or finished rows erased.
        assert_eq!(run(Resize::Rewrap, false, &[60]).0, 2);
        assert!(run(Resize::Cut, true, &[60]).1 < 30);
    }

    /// Any live row changed into any other, written as a change (from where they differ,
    /// in place when what follows is the same), leaves the terminal showing exactly what a
    /// whole redraw shows, colours and styles included: 2,000 pairs of rows made of a few
    /// characters (narrow and wide) and SGR sequences, the second a random edit of the first.
    #[test]
    fn a_changed_row_shows_what_a_whole_redraw_shows() {
        let pieces = [
            "a", "b", "7", "⠋", "漢", " ", "\x1b[2m", "\x1b[36m", "\x1b[1m", "\x1b[0m",
        ];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % below as u64).unwrap_or(0)
        };
        for _ in 0..2_000 {
            let mut old: Vec<&str> = (0..next(12)).map(|_| pieces[next(pieces.len())]).collect();
            let mut new = old.clone();
            for _ in 0..=next(3) {
                let at = next(new.len() + 1);
                match next(3) {
                    0 => new.insert(at, pieces[next(pieces.len())]),
                    1 if at < new.len() => new[at] = pieces[next(pieces.len())],
                    _ if at < new.len() => {
                        new.remove(at);
                    }
                    _ => {}
                }
            }
            if next(4) == 0 {
                std::mem::swap(&mut old, &mut new);
            }
            let (old, new) = (old.concat(), new.concat());
            let region = |row: &str| live(&["top", row, "  status"], None);
            let mut changed = vt100::Parser::new(6, 40, 0);
            let mut painter = Painter::new(40, 6, false);
            changed.process(&painter.frame(&[], &region(&old)));
            changed.process(&painter.frame(&[], &region(&new)));
            let mut whole = vt100::Parser::new(6, 40, 0);
            whole.process(&Painter::new(40, 6, false).frame(&[], &region(&new)));
            // Every cell, its colours and styles (where the hidden cursor rests aside).
            let cells = |parser: &vt100::Parser| -> Vec<Vec<u8>> {
                parser.screen().rows_formatted(0, 40).collect()
            };
            assert_eq!(cells(&changed), cells(&whole), "{old:?} -> {new:?}");
        }
    }

    /// A frame with nothing finished rewrites only the live rows that changed (the spinner's
    /// tick), leaves the screen as a whole redraw would, and writes nothing when nothing
    /// changed.
    #[test]
    fn a_tick_rewrites_only_the_rows_that_changed() {
        let mut parser = vt100::Parser::new(6, 30, 100);
        let mut painter = Painter::new(30, 6, false);
        let region = |glyph: &str, typed: &str| {
            live(
                &[
                    &format!("{glyph} Thinking 3s"),
                    &format!("› {typed}"),
                    "  ─ model · default · $0.01",
                ],
                Some((1, 2 + typed.len())),
            )
        };
        parser.process(&painter.frame(&["answer".into()], &region("⠋", "ab")));
        let tick = painter.frame(&[], &region("⠙", "ab"));
        parser.process(&tick);
        let text = String::from_utf8_lossy(&tick).into_owned();
        // Only the glyph: what follows it is the same text at the same columns.
        assert!(
            text.contains("\r⠙") && !text.contains("Thinking") && !text.contains("model"),
            "{text:?}"
        );
        assert!(!text.contains("\x1b[J"), "{text:?}");
        assert_eq!(
            screen(&parser)[..4],
            [
                "answer",
                "⠙ Thinking 3s",
                "› ab",
                "  ─ model · default · $0.01"
            ]
        );
        assert_eq!(parser.screen().cursor_position(), (2, 4));
        // A shorter row leaves nothing of the longer one; the cursor follows the typing.
        parser.process(&painter.frame(
            &[],
            &live(
                &["⠹ Hm", "› abc", "  ─ model · default · $0.01"],
                Some((1, 5)),
            ),
        ));
        assert_eq!(screen(&parser)[1..3], ["⠹ Hm", "› abc"]);
        assert_eq!(parser.screen().cursor_position(), (2, 5));
        assert!(
            painter
                .frame(
                    &[],
                    &live(
                        &["⠹ Hm", "› abc", "  ─ model · default · $0.01"],
                        Some((1, 5))
                    )
                )
                .is_empty()
        );
        // A growing row (a streaming preview) is written from where it grew, its style set
        // again there.
        parser.process(&painter.frame(
            &[],
            &live(
                &["⠹ Hm", "\x1b[2m› abc\x1b[0m", "  ─ model · default · $0.01"],
                Some((1, 5)),
            ),
        ));
        let grown = painter.frame(
            &[],
            &live(
                &[
                    "⠹ Hm",
                    "\x1b[2m› abc the rest\x1b[0m",
                    "  ─ model · default · $0.01",
                ],
                Some((1, 5)),
            ),
        );
        parser.process(&grown);
        let text = String::from_utf8_lossy(&grown).into_owned();
        assert!(
            text.contains("\x1b[5C\x1b[2m the rest") && !text.contains("abc"),
            "{text:?}"
        );
        assert_eq!(screen(&parser)[2], "› abc the rest");
        assert!(parser.screen().cell(2, 6).is_some_and(vt100::Cell::dim));
        // Finished lines, or another height, draw the whole region again.
        parser.process(&painter.frame(&["more".into()], &live(&["› "], Some((0, 2)))));
        assert_eq!(screen(&parser)[..3], ["answer", "more", "›"]);
    }

    #[test]
    fn live_rows_never_wrap_and_a_tall_region_keeps_its_bottom() {
        let mut parser = vt100::Parser::new(4, 10, 0);
        let mut painter = Painter::new(10, 4, false);
        parser.process(&painter.frame(
            &[],
            &live(
                &["\x1b[1mabcdefghijklmnop\x1b[0m", "b", "c", "d", "› x"],
                Some((4, 3)),
            ),
        ));
        // Three rows fit (one row is kept free); the first rows are left out.
        assert_eq!(screen(&parser), ["c", "d", "› x", ""]);
        assert_eq!(
            fit("\x1b[1mabcdefghijklmnop\x1b[0m", 9),
            "\x1b[1mabcdefgh…\x1b[0m"
        );
        assert_eq!(fit("日本語", 5), "日本…");
        assert_eq!(fit("abc", 3), "abc");
        assert_eq!(strip_styles("\x1b[1;38;2;1;2;3mab\x1b[0mc"), "abc");
        assert_eq!(
            sanitize("\x1b[1mok\x1b[0m\x1b]52;c;AA\x07\x1b[2J\tx\u{9b}"),
            "\x1b[1mok\x1b[0m\\u{1b}]52;c;AA\\u{7}\\u{1b}[2J x\\u{9b}"
        );
        // Drawn again, the region replaces itself exactly.
        parser.process(&painter.frame(&[], &live(&["› y"], Some((0, 3)))));
        assert_eq!(screen(&parser), ["› y", "", "", ""]);
    }

    #[test]
    fn a_frame_is_one_synchronized_update_when_supported() {
        let mut painter = Painter::new(20, 5, true);
        let bytes = String::from_utf8(painter.frame(&["a".into()], &live(&["b"], None))).unwrap();
        assert!(
            bytes.starts_with(SYNC_BEGIN) && bytes.ends_with(SYNC_END),
            "{bytes:?}"
        );
        assert!(sync_supported(b"\x1b[?2026;2$y"));
        assert!(!sync_supported(b"\x1b[?2026;0$y"));
        assert!(!sync_supported(b""));
        assert!(device_attributes_answered(b"\x1b[?2026;2$y\x1b[?62;22c"));
        assert!(device_attributes_answered(b"\x1b[?1;2c"));
        assert!(!device_attributes_answered(b"\x1b[?2026;2$y"));
        assert!(!device_attributes_answered(b"\x1b[?c"));
        assert!(kitty_keys_answered(b"\x1b[?2026;2$y\x1b[?0u\x1b[?62c"));
        assert!(!kitty_keys_answered(b"\x1b[?2026;2$y\x1b[?62c"));
    }
}
