//! An arrow-driven list to choose one entry from (`/model`, `/resume`, the rewind list), as
//! Claude Code's pickers work: typing filters the entries (every word typed must appear in
//! an entry's label or detail, case ignored), Up and Down (or Ctrl-P and Ctrl-N, Page Up and
//! Page Down) move the choice, Enter takes it, Esc or Ctrl-C takes none. The chosen entry's
//! preview (a session's first prompts, a model's description) is shown under the list.
//!
//! [`Picker`] is only state and rows: the interactive terminal's task draws it in its live
//! region ([`crate::tui::Handle::pick_blocking`]); [`pick_standalone`] runs one on a terminal the
//! session does not own yet (`agent --resume` without an id, before the session starts).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::display_width;
use crate::tui::dim;

/// One entry: what it is called, a short detail beside it, and the lines shown under the
/// list while it is the chosen one. Text from files or the model: made printable when
/// drawn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Item {
    /// The entry's name (a model's alias, a session's first prompt).
    pub label: String,
    /// Beside the label, dimmed (a model's id, a session's age and cost).
    pub detail: String,
    /// Under the list while this entry is chosen (a session's first prompts).
    pub preview: Vec<String>,
}

/// What a key did to the picker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Still choosing.
    Going,
    /// Enter on the entry at this index of the items given to [`Picker::new`].
    Chosen(usize),
    /// Esc or Ctrl-C: nothing chosen.
    Cancelled,
}

/// The entries shown at most at once; the list scrolls to keep the choice in view.
pub const VISIBLE: usize = 10;

/// A list being chosen from: its entries, the filter typed so far and the choice.
#[derive(Clone, Debug)]
pub struct Picker {
    title: String,
    items: Vec<Item>,
    query: String,
    /// Indexes into `items` of the entries the filter keeps, in order.
    shown: Vec<usize>,
    /// Position in `shown` of the choice.
    selected: usize,
}

impl Picker {
    /// A picker titled `title` over `items`, the choice starting on `initial` (an index of
    /// `items`; the first entry when out of range).
    pub fn new(title: impl Into<String>, items: Vec<Item>, initial: usize) -> Self {
        let shown: Vec<usize> = (0..items.len()).collect();
        Self {
            title: title.into(),
            selected: if initial < items.len() { initial } else { 0 },
            items,
            query: String::new(),
            shown,
        }
    }

    /// The filter typed so far.
    pub fn query(&self) -> &str {
        &self.query
    }

    /// The index (in the items given) of the entry chosen now, if the filter left any.
    pub fn chosen(&self) -> Option<usize> {
        self.shown.get(self.selected).copied()
    }

    /// Applies one key (see the module's docs for which do what).
    pub fn key(&mut self, key: &KeyEvent) -> Step {
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => return Step::Cancelled,
            KeyCode::Char('c' | 'g') if control => return Step::Cancelled,
            KeyCode::Enter => {
                return self.chosen().map_or(Step::Going, Step::Chosen);
            }
            KeyCode::Up => self.move_by(-1),
            KeyCode::Char('p') if control => self.move_by(-1),
            KeyCode::Down | KeyCode::Tab => self.move_by(1),
            KeyCode::Char('n') if control => self.move_by(1),
            KeyCode::PageUp => self.move_by(-(VISIBLE as isize)),
            KeyCode::PageDown => self.move_by(VISIBLE as isize),
            KeyCode::Home => self.selected = 0,
            KeyCode::End => self.selected = self.shown.len().saturating_sub(1),
            KeyCode::Char('u') if control => self.refilter(String::new()),
            KeyCode::Char(c) if !control => {
                let query = format!("{}{c}", self.query);
                self.refilter(query);
            }
            KeyCode::Backspace => {
                let mut query = self.query.clone();
                query.pop();
                self.refilter(query);
            }
            _ => {}
        }
        Step::Going
    }

    /// Moves the choice by `by` entries, stopping at either end.
    fn move_by(&mut self, by: isize) {
        let last = self.shown.len().saturating_sub(1);
        self.selected = self.selected.saturating_add_signed(by).min(last);
    }

    /// Keeps the entries `query` matches; the choice stays on the same entry when it is
    /// still shown, else goes to the first.
    fn refilter(&mut self, query: String) {
        let before = self.chosen();
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        self.shown = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, item)| {
                let text = format!("{} {}", item.label, item.detail).to_lowercase();
                words.iter().all(|word| text.contains(word.as_str()))
            })
            .map(|(index, _)| index)
            .collect();
        self.selected = before
            .and_then(|before| self.shown.iter().position(|index| *index == before))
            .unwrap_or(0);
        self.query = query;
    }

    /// The rows to draw, at most `width` columns each: the title with the filter, the
    /// visible entries (the choice marked `❯`), how many more there are, the choice's
    /// preview, and the keys.
    pub fn rows(&self, width: usize) -> Vec<String> {
        let fit = |row: String| crate::term::fit(&row, width);
        let mut rows = vec![fit(format!(
            "\x1b[1m{}\x1b[0m  \x1b[2mfilter:\x1b[0m {}\x1b[7m \x1b[0m",
            crate::printable(&self.title, false),
            crate::printable(&self.query, false)
        ))];
        if self.shown.is_empty() {
            rows.push(fit(dim(&format!(
                "  nothing matches {:?}",
                crate::printable(&self.query, false)
            ))));
        }
        let first = self
            .selected
            .saturating_sub(VISIBLE - 1)
            .min(self.shown.len().saturating_sub(VISIBLE));
        if first > 0 {
            rows.push(fit(dim(&format!("  ↑ {first} more"))));
        }
        let label_width = self
            .shown
            .iter()
            .map(|index| display_width(&crate::printable(&self.items[*index].label, false)))
            .max()
            .unwrap_or(0)
            .min(width / 2);
        for (position, index) in self.shown.iter().enumerate().skip(first).take(VISIBLE) {
            let item = &self.items[*index];
            let label = crate::term::fit(&crate::printable(&item.label, false), label_width);
            let pad = " ".repeat(label_width.saturating_sub(display_width(&label)));
            let detail = crate::printable(&item.detail, false);
            rows.push(fit(if position == self.selected {
                format!("\x1b[36m❯ \x1b[1m{label}\x1b[0m{pad}  \x1b[2m{detail}\x1b[0m")
            } else {
                format!("  {label}{pad}  \x1b[2m{detail}\x1b[0m")
            }));
        }
        let after = self.shown.len().saturating_sub(first + VISIBLE);
        if after > 0 {
            rows.push(fit(dim(&format!("  ↓ {after} more"))));
        }
        if let Some(index) = self.chosen() {
            for line in &self.items[index].preview {
                rows.push(fit(dim(&format!("    {}", crate::printable(line, false)))));
            }
        }
        rows.push(fit(dim(
            "  ↑↓ choose · type to filter · Enter select · Esc cancel",
        )));
        rows
    }
}

/// Runs `picker` on the terminal (stdin and stdout) before any session owns it: raw mode,
/// the list drawn inline under the cursor and erased when done. `None` when nothing was
/// chosen.
///
/// # Errors
///
/// The terminal could not be put in raw mode or read.
pub fn pick_standalone(mut picker: Picker) -> std::io::Result<Option<usize>> {
    use crossterm::event::{Event, KeyEventKind, read};
    use std::io::Write as _;
    crossterm::terminal::enable_raw_mode()?;
    let (columns, lines) = crossterm::terminal::size().unwrap_or((80, 24));
    let mut painter = crate::term::Painter::new(columns, lines, false);
    painter.set_reflow(crate::term::terminal_reflows(|name| {
        std::env::var(name).ok()
    }));
    let mut out = std::io::stdout();
    let outcome = loop {
        let live = crate::term::Live {
            rows: picker.rows(painter.width().saturating_sub(1)),
            cursor: None,
        };
        let frame = painter.frame(&[], &live);
        if let Err(error) = out.write_all(&frame).and_then(|()| out.flush()) {
            break Err(error);
        }
        match read() {
            Ok(Event::Key(key)) if key.kind != KeyEventKind::Release => match picker.key(&key) {
                Step::Going => {}
                Step::Chosen(index) => break Ok(Some(index)),
                Step::Cancelled => break Ok(None),
            },
            Ok(Event::Resize(columns, lines)) => painter.resize(columns, lines),
            Ok(_) => {}
            Err(error) => break Err(error),
        }
    };
    let _ = out.write_all(&painter.clear_bytes());
    let _ = out.flush();
    crossterm::terminal::disable_raw_mode()?;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(picker: &mut Picker, text: &str) {
        for c in text.chars() {
            assert_eq!(picker.key(&key(KeyCode::Char(c))), Step::Going);
        }
    }

    fn items(labels: &[&str]) -> Vec<Item> {
        labels
            .iter()
            .map(|label| Item {
                label: (*label).to_owned(),
                detail: format!("detail of {label}"),
                preview: vec![format!("preview of {label}")],
            })
            .collect()
    }

    fn plain(rows: &[String]) -> Vec<String> {
        rows.iter()
            .map(|row| crate::term::strip_styles(row))
            .collect()
    }

    #[test]
    fn arrows_move_the_choice_and_enter_takes_it() {
        let mut picker = Picker::new("Model", items(&["sonnet", "opus", "haiku"]), 1);
        assert_eq!(picker.chosen(), Some(1));
        assert_eq!(picker.key(&key(KeyCode::Down)), Step::Going);
        assert_eq!(picker.key(&key(KeyCode::Down)), Step::Going);
        assert_eq!(picker.chosen(), Some(2), "stops at the last");
        picker.key(&key(KeyCode::Up));
        picker.key(&key(KeyCode::Home));
        assert_eq!(picker.key(&key(KeyCode::Enter)), Step::Chosen(0));
        assert_eq!(picker.key(&key(KeyCode::Esc)), Step::Cancelled);
        let control_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(picker.key(&control_c), Step::Cancelled);
    }

    #[test]
    fn typing_filters_by_every_word_and_keeps_the_choice_when_it_can() {
        let mut picker = Picker::new(
            "Resume",
            items(&["fix the login bug", "add a login page", "write docs"]),
            1,
        );
        typed(&mut picker, "LOGIN");
        assert_eq!(picker.chosen(), Some(1), "the choice is still shown");
        typed(&mut picker, " bug");
        assert_eq!(picker.chosen(), Some(0), "the only match");
        assert_eq!(picker.query(), "LOGIN bug");
        typed(&mut picker, "z");
        assert_eq!(picker.chosen(), None);
        assert_eq!(
            picker.key(&key(KeyCode::Enter)),
            Step::Going,
            "nothing to take"
        );
        let rows = plain(&picker.rows(80));
        assert!(rows[1].contains("nothing matches"), "{rows:?}");
        picker.key(&key(KeyCode::Backspace));
        assert_eq!(picker.chosen(), Some(0));
        // The detail counts too.
        let mut picker = Picker::new("Resume", items(&["a", "b"]), 0);
        typed(&mut picker, "of b");
        assert_eq!(picker.key(&key(KeyCode::Enter)), Step::Chosen(1));
    }

    #[test]
    fn rows_show_a_window_around_the_choice_and_its_preview() {
        let labels: Vec<String> = (0..25).map(|n| format!("session {n}")).collect();
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let mut picker = Picker::new("Resume", items(&labels), 0);
        for _ in 0..14 {
            picker.key(&key(KeyCode::Down));
        }
        let rows = plain(&picker.rows(60));
        assert!(rows[0].starts_with("Resume  filter:"), "{rows:?}");
        assert_eq!(rows[1], "  ↑ 5 more");
        assert!(rows[2].starts_with("  session 5 "), "{rows:?}");
        assert!(rows[11].starts_with("❯ session 14"), "{rows:?}");
        assert_eq!(rows[12], "  ↓ 10 more");
        assert_eq!(rows[13], "    preview of session 14");
        assert!(rows[14].contains("Enter select"));
        assert!(rows.iter().all(|row| display_width(row) <= 60));
        // Page Down goes ten on; End to the last.
        picker.key(&key(KeyCode::PageDown));
        assert_eq!(picker.chosen(), Some(24));
    }

    #[test]
    fn entries_are_made_printable() {
        let picker = Picker::new(
            "Resume",
            vec![Item {
                label: "evil\x1b]0;title\x07".to_owned(),
                detail: "\x1b[31mred".to_owned(),
                preview: vec!["line\x1b[2J".to_owned()],
            }],
            0,
        );
        let rows = picker.rows(80).join("\n");
        assert!(!rows.contains("\x1b]0;"), "{rows:?}");
        assert!(!rows.contains("\x1b[2J"), "{rows:?}");
        assert!(!rows.contains("\x1b[31m"), "{rows:?}");
    }
}
