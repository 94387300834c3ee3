//! A terminal model that resizes as real terminals do, on top of [`vt100`] (whose own
//! [`vt100::Screen::set_size`] cuts rows and drops the bottom of the screen when it
//! shortens, which no terminal does).
//!
//! Two behaviours, as terminals differ ([`Resize`]):
//!
//! - **re-wrap** (tmux, VTE, kitty, iTerm2, WezTerm, Alacritty, xterm.js): every line, from
//!   the scrollback's first to the screen's last, is broken again at the new width; the
//!   cursor keeps its place in its line; the cursor's row on the screen stays where it was
//!   when the rows above it allow, and what no longer fits above goes into the scrollback
//!   (tmux 3.3a checked by hand: `resize-window` narrower keeps `cursor_y`, the extra row
//!   goes to `history_size`);
//! - **cut** (xterm, the Linux console): rows keep their text up to the new width, nothing
//!   moves but what a shorter screen pushes into the scrollback to keep the cursor on it.
//!
//! The rebuilt model holds text only (styles are dropped), and the cursor's visibility.

/// How a terminal treats its rows when it changes size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resize {
    /// Lines are broken again at the new width.
    Rewrap,
    /// Rows are cut at the new width.
    Cut,
}

/// Every row of `parser`, scrollback first, as text, each with whether the terminal
/// wrapped it onto the next row (a soft break, not a line end).
pub fn all_rows(parser: &vt100::Parser) -> Vec<(String, bool)> {
    let mut screen = parser.screen().clone();
    let (rows, columns) = screen.size();
    screen.set_scrollback(usize::MAX);
    let back = screen.scrollback();
    let mut all: Vec<(String, bool)> = Vec::new();
    let mut offset = back;
    loop {
        // At `offset`, the view's first row is row `back - offset` of the whole.
        screen.set_scrollback(offset);
        let first = back - offset;
        for (index, text) in screen.rows(0, columns).enumerate() {
            if first + index >= all.len() {
                let wrapped = u16::try_from(index).is_ok_and(|row| screen.row_wrapped(row));
                all.push((text, wrapped));
            }
        }
        if offset == 0 {
            break;
        }
        offset = offset.saturating_sub(usize::from(rows));
    }
    all
}

/// `parser`'s terminal after it changed to `rows` by `columns`, as a terminal that
/// resizes the way `how` says does (see the module docs).
pub fn resized(parser: &vt100::Parser, rows: u16, columns: u16, how: Resize) -> vt100::Parser {
    let screen = parser.screen();
    let (old_rows, old_columns) = screen.size();
    let hidden = screen.hide_cursor();
    let (cursor_y, cursor_x) = screen.cursor_position();
    let all = all_rows(parser);
    let scrolled = all.len() - usize::from(old_rows);
    let cursor_at = scrolled + usize::from(cursor_y);
    // The text as lines: (text, index of the line the cursor is on, its column there).
    let mut lines: Vec<String> = Vec::new();
    let mut cursor = (0, usize::from(cursor_x));
    let mut open = false;
    for (index, (text, wrapped)) in all.iter().enumerate() {
        let text = match how {
            // A row's text as the terminal keeps it: its cells, blanks at the end included
            // where the line goes on.
            Resize::Rewrap if *wrapped => pad(text, usize::from(old_columns)),
            Resize::Rewrap => text.clone(),
            Resize::Cut => text.chars().take(usize::from(columns)).collect(),
        };
        if index == cursor_at {
            let before = if open {
                lines.last().map_or(0, |line| line.chars().count())
            } else {
                0
            };
            cursor = (
                if open { lines.len() - 1 } else { lines.len() },
                before + cursor.1,
            );
        }
        if open {
            if let Some(line) = lines.last_mut() {
                line.push_str(&text);
            }
        } else {
            lines.push(text);
        }
        open = how == Resize::Rewrap && *wrapped;
    }
    // Empty lines below the cursor's are not kept.
    while lines.len() > cursor.0 + 1 && lines.last().is_some_and(|line| line.trim().is_empty()) {
        lines.pop();
    }
    let width = usize::from(columns.max(1));
    let height = |line: &str| match how {
        Resize::Rewrap => line.chars().count().div_ceil(width).max(1),
        Resize::Cut => 1,
    };
    let cursor_line_starts: usize = lines[..cursor.0].iter().map(|line| height(line)).sum();
    let (cursor_row, cursor_column) = match how {
        Resize::Rewrap => (cursor_line_starts + cursor.1 / width, cursor.1 % width),
        Resize::Cut => (cursor_line_starts, cursor.1.min(width - 1)),
    };
    // The cursor's screen row stays where it was if the rows above it allow, and on the
    // screen.
    let screen_row = usize::from(cursor_y)
        .min(cursor_row)
        .min(usize::from(rows) - 1);
    let top = cursor_row - screen_row;
    let mut rebuilt = vt100::Parser::new(rows, columns, 100_000);
    let mut bytes = String::new();
    let mut written = 0;
    for (index, line) in lines.iter().enumerate() {
        if written >= top + usize::from(rows) {
            break;
        }
        if index > 0 {
            bytes.push_str("\r\n");
        }
        // A line going on below the screen's last row: its rows up to there.
        let room = top + usize::from(rows) - written;
        if height(line) > room {
            bytes.extend(line.chars().take(room * width));
            written += room;
        } else {
            bytes.push_str(line);
            written += height(line);
        }
    }
    // Blank rows under the text, so the screen's first row is `top`.
    for _ in written..top + usize::from(rows) {
        bytes.push_str("\r\n");
    }
    rebuilt.process(bytes.as_bytes());
    let row_on_screen = cursor_row - top;
    bytes = format!("\x1b[{};{}H", row_on_screen + 1, cursor_column + 1);
    if hidden {
        bytes.push_str("\x1b[?25l");
    }
    rebuilt.process(bytes.as_bytes());
    rebuilt
}

/// `text` with spaces after it up to `columns` characters.
fn pad(text: &str, columns: usize) -> String {
    let count = text.chars().count();
    format!("{text}{}", " ".repeat(columns.saturating_sub(count)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(rows: u16, columns: u16, bytes: &str) -> vt100::Parser {
        let mut parser = vt100::Parser::new(rows, columns, 1000);
        parser.process(bytes.as_bytes());
        parser
    }

    fn text(parser: &vt100::Parser) -> Vec<String> {
        all_rows(parser).into_iter().map(|(text, _)| text).collect()
    }

    /// The case checked on tmux 3.3a by hand: a 100-character line, `short`, `B` and the
    /// cursor after it, narrowed from 120 to 60 columns on a 10-row screen.
    #[test]
    fn rewrap_keeps_the_cursors_row_and_pushes_what_no_longer_fits_into_the_scrollback() {
        let parser = model(10, 120, &format!("{}\r\nshort\r\nB", "A".repeat(100)));
        let narrow = resized(&parser, 10, 60, Resize::Rewrap);
        assert_eq!(narrow.screen().cursor_position(), (2, 1));
        let rows = text(&narrow);
        assert_eq!(rows[0], "A".repeat(60));
        assert_eq!(&rows[1..4], ["A".repeat(40), "short".into(), "B".into()]);
        // Widened again: one line.
        let wide = resized(&narrow, 10, 120, Resize::Rewrap);
        assert_eq!(text(&wide)[0], "A".repeat(100));
        assert_eq!(wide.screen().cursor_position(), (2, 1));
    }

    #[test]
    fn cut_keeps_rows_in_place_and_a_shorter_screen_scrolls() {
        let parser = model(10, 120, &format!("{}\r\nshort\r\nB", "A".repeat(100)));
        let narrow = resized(&parser, 10, 60, Resize::Cut);
        assert_eq!(narrow.screen().cursor_position(), (2, 1));
        assert_eq!(
            &text(&narrow)[..3],
            ["A".repeat(60), "short".into(), "B".into()]
        );
        let short = resized(&parser, 2, 120, Resize::Cut);
        assert_eq!(short.screen().cursor_position(), (1, 1));
        assert_eq!(
            &text(&short)[..3],
            ["A".repeat(100), "short".into(), "B".into()]
        );
    }
}
