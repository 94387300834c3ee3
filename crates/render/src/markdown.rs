//! Markdown to terminal lines, whole ([`render_markdown`]) or as it streams
//! ([`MarkdownStream`]).

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::style::{Span, Style, display_width, wrap};
use crate::{highlight, printable};

/// Colours used (the basic 16, so the user's terminal theme decides the shades).
const CYAN: u8 = 36;
const BLUE: u8 = 34;

/// Markdown rendered as it arrives, one complete block at a time.
///
/// Text is buffered until a block is known to be complete: a blank line outside a code
/// fence, or a fence's closing line. Complete blocks are rendered and returned; the open
/// one waits, so a line once returned is final (nothing already drawn is laid out again).
/// [`MarkdownStream::finish`] renders whatever is left when the text ends.
#[derive(Debug)]
pub struct MarkdownStream {
    width: usize,
    buffer: String,
    /// Whether a block was returned already (the next one is preceded by a blank line).
    started: bool,
    /// Where in `buffer` the first line not yet examined starts, and the fence open there:
    /// each line is examined once, however many pieces it arrives in.
    scanned: usize,
    fence: Option<(char, usize)>,
}

impl MarkdownStream {
    /// A stream rendering for a terminal `width` columns wide.
    pub fn new(width: usize) -> Self {
        Self {
            width,
            buffer: String::new(),
            started: false,
            scanned: 0,
            fence: None,
        }
    }

    /// Adds streamed text; returns the lines of the blocks it completed (possibly none).
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.buffer.push_str(text);
        // No block completes without a line ending: a line arriving in many pieces is not
        // scanned again for each (a 2 MB line would cost its length squared).
        if !text.contains('\n') {
            return Vec::new();
        }
        let (cut, scanned, fence) = complete_prefix(&self.buffer, self.scanned, self.fence);
        self.scanned = scanned;
        self.fence = fence;
        let Some(cut) = cut else {
            return Vec::new();
        };
        let rest = self.buffer.split_off(cut);
        let done = std::mem::replace(&mut self.buffer, rest);
        self.scanned -= cut;
        self.render_part(&done)
    }

    /// Renders what is left (the text ended): the last block's lines.
    pub fn finish(&mut self) -> Vec<String> {
        let done = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        self.fence = None;
        self.render_part(&done)
    }

    /// The width it renders for, in columns.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Renders the blocks completed from now on for a terminal `width` columns wide (the
    /// terminal was resized).
    pub fn set_width(&mut self, width: usize) {
        self.width = width;
    }

    /// The text of the block still open (raw Markdown, as it arrived).
    pub fn pending(&self) -> &str {
        &self.buffer
    }

    /// Whether text is waiting for its block to complete.
    pub fn is_pending(&self) -> bool {
        !self.buffer.trim().is_empty()
    }

    fn render_part(&mut self, text: &str) -> Vec<String> {
        if text.trim().is_empty() {
            return Vec::new();
        }
        let mut lines = render_markdown(text, self.width);
        if self.started && !lines.is_empty() {
            lines.insert(0, String::new());
        }
        self.started |= !lines.is_empty();
        lines
    }
}

/// The length of the longest prefix of `text` made of complete blocks: up to the last
/// blank line outside a fence, or the end of the last closing fence line, whichever is
/// later (`None` when no block is complete yet); examining the complete lines from `from`
/// on, with `fence` open there. Also returns where the examination stopped (the start of
/// the line still arriving) and the fence open there.
fn complete_prefix(
    text: &str,
    from: usize,
    mut fence: Option<(char, usize)>,
) -> (Option<usize>, usize, Option<(char, usize)>) {
    let mut cut = None;
    let mut at = from;
    for line in text[from..].split_inclusive('\n') {
        if !line.ends_with('\n') {
            break; // The last line is still arriving.
        }
        let end = at + line.len();
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let marker = fence_marker(trimmed).filter(|_| indent <= 3);
        match (fence, marker) {
            (None, Some(open)) => fence = Some(open),
            (Some((c, n)), Some((close_c, close_n)))
                if close_c == c
                    && close_n >= n
                    && trimmed.trim_start_matches(c).trim().is_empty() =>
            {
                fence = None;
                cut = Some(end);
            }
            (None, None) if line.trim().is_empty() => cut = Some(end),
            _ => {}
        }
        at = end;
    }
    (cut, at, fence)
}

/// A fence's character and length when `line` opens or closes one (three or more backticks
/// or tildes).
fn fence_marker(line: &str) -> Option<(char, usize)> {
    let c = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let count = line.chars().take_while(|x| *x == c).count();
    (count >= 3).then_some((c, count))
}

/// `text` (Markdown) as lines for a terminal `width` columns wide: blocks separated by one
/// blank line, paragraphs re-flowed, every piece of text made safe to print.
pub fn render_markdown(text: &str, width: usize) -> Vec<String> {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut writer = Writer::new(width);
    for event in Parser::new_ext(text, options) {
        writer.event(event);
    }
    writer.flush_inline();
    while writer.lines.last().is_some_and(String::is_empty) {
        writer.lines.pop();
    }
    writer.lines
}

/// A list being written: `None` for bullets, else the next number.
type List = Option<u64>;

/// A table being collected.
#[derive(Debug, Default)]
struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<Vec<Span>>>,
    head_rows: usize,
    in_head: bool,
}

#[derive(Debug)]
struct Writer {
    width: usize,
    lines: Vec<String>,
    inline: Vec<Span>,
    styles: Vec<Style>,
    lists: Vec<List>,
    quotes: usize,
    /// The marker of a list item whose first line is not written yet.
    marker: Option<String>,
    code: Option<(String, String)>,
    table: Option<Table>,
    links: Vec<String>,
    /// A block ended: the next one starts after a blank line.
    gap: bool,
}

impl Writer {
    fn new(width: usize) -> Self {
        Self {
            width: width.max(20),
            lines: Vec::new(),
            inline: Vec::new(),
            styles: vec![Style::PLAIN],
            lists: Vec::new(),
            quotes: 0,
            marker: None,
            code: None,
            table: None,
            links: Vec::new(),
            gap: false,
        }
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, change: impl FnOnce(&mut Style)) {
        let mut style = self.style();
        change(&mut style);
        self.styles.push(style);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    fn text(&mut self, text: &str) {
        let style = self.style();
        if let Some(table) = &mut self.table {
            if let Some(cell) = table.rows.last_mut().and_then(|row| row.last_mut()) {
                cell.push(Span::new(printable(text, false), style));
            }
            return;
        }
        self.inline.push(Span::new(printable(text, false), style));
    }

    /// The prefix of every line at this depth: quote bars, then list indentation.
    fn prefix(&self) -> String {
        let mut prefix = Style {
            dim: true,
            ..Style::PLAIN
        }
        .paint(&"│ ".repeat(self.quotes));
        prefix.push_str(&"  ".repeat(self.lists.len().saturating_sub(1)));
        prefix
    }

    fn prefix_width(&self) -> usize {
        self.quotes * 2 + self.lists.len().saturating_sub(1) * 2
    }

    /// Starts a block: a blank line after the previous one.
    fn begin_block(&mut self) {
        if self.gap && !self.lines.is_empty() {
            if self.quotes > 0 {
                let prefix = self.prefix();
                self.lines.push(prefix.trim_end().to_owned());
            } else {
                self.lines.push(String::new());
            }
        }
        self.gap = false;
    }

    /// Writes the collected inline text as a re-flowed paragraph.
    fn flush_inline(&mut self) {
        if self.inline.is_empty() && self.marker.is_none() {
            return;
        }
        let spans = std::mem::take(&mut self.inline);
        let marker = self.marker.take();
        let prefix = self.prefix();
        let marker_width = marker.as_deref().map_or(0, display_width);
        let width = self
            .width
            .saturating_sub(self.prefix_width() + marker_width);
        let lines = wrap(&spans, width);
        for (index, line) in lines.into_iter().enumerate() {
            let lead = match (&marker, index) {
                (Some(marker), 0) => marker.clone(),
                (Some(_), _) => " ".repeat(marker_width),
                (None, _) => String::new(),
            };
            self.lines.push(format!("{prefix}{lead}{line}"));
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match &mut self.code {
                Some((_, code)) => code.push_str(&text),
                None => self.text(&text),
            },
            Event::Code(code) => {
                let style = Style {
                    color: Some(CYAN),
                    ..self.style()
                };
                let span = Span::new(printable(&code, false), style);
                match &mut self.table {
                    Some(table) => {
                        if let Some(cell) = table.rows.last_mut().and_then(|row| row.last_mut()) {
                            cell.push(span);
                        }
                    }
                    None => self.inline.push(span),
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                for (index, line) in html.lines().enumerate() {
                    if index > 0 {
                        self.inline.push(Span::new("\n", Style::PLAIN));
                    }
                    self.text(line);
                }
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.inline.push(Span::new("\n", Style::PLAIN)),
            Event::Rule => {
                self.flush_inline();
                self.begin_block();
                let width = self.width.saturating_sub(self.prefix_width()).min(80);
                let prefix = self.prefix();
                self.lines.push(format!(
                    "{prefix}{}",
                    Style {
                        dim: true,
                        ..Style::PLAIN
                    }
                    .paint(&"─".repeat(width))
                ));
                self.gap = true;
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                if self.marker.is_none() {
                    self.flush_inline();
                    self.begin_block();
                }
            }
            Tag::Heading { level, .. } => {
                self.flush_inline();
                self.begin_block();
                self.push_style(|style| {
                    style.bold = true;
                    style.underline = level == HeadingLevel::H1;
                    if level >= HeadingLevel::H3 {
                        style.color = Some(BLUE);
                    }
                });
            }
            Tag::BlockQuote(_) => {
                self.flush_inline();
                self.begin_block();
                self.quotes += 1;
            }
            Tag::CodeBlock(kind) => {
                self.flush_inline();
                self.begin_block();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((language, String::new()));
            }
            Tag::List(start) => {
                self.flush_inline();
                if self.lists.is_empty() {
                    self.begin_block();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush_inline();
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}. ");
                        *number += 1;
                        marker
                    }
                    _ => "• ".to_owned(),
                };
                self.marker = Some(marker);
            }
            Tag::Emphasis => self.push_style(|style| style.italic = true),
            Tag::Strong => self.push_style(|style| style.bold = true),
            Tag::Strikethrough => self.push_style(|style| style.strike = true),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                self.push_style(|style| {
                    style.underline = true;
                    style.color = Some(BLUE);
                });
            }
            Tag::Table(alignments) => {
                self.flush_inline();
                self.begin_block();
                self.table = Some(Table {
                    alignments,
                    ..Table::default()
                });
            }
            Tag::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_head = true;
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|table| table.rows.last_mut()) {
                    row.push(Vec::new());
                }
            }
            Tag::FootnoteDefinition(_)
            | Tag::HtmlBlock
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_)
            | Tag::Superscript
            | Tag::Subscript => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_inline();
                self.gap = true;
            }
            TagEnd::Heading(_) => {
                self.flush_inline();
                self.pop_style();
                self.gap = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                self.quotes = self.quotes.saturating_sub(1);
                self.gap = true;
            }
            TagEnd::CodeBlock => {
                if let Some((language, code)) = self.code.take() {
                    self.code_lines(&language, &code);
                }
                self.gap = true;
            }
            TagEnd::List(_) => {
                self.flush_inline();
                self.lists.pop();
                self.gap = self.lists.is_empty();
            }
            TagEnd::Item => {
                self.flush_inline();
                self.gap = false;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link | TagEnd::Image => {
                self.pop_style();
                if let Some(dest) = self.links.pop() {
                    let shown: String = self
                        .inline
                        .iter()
                        .rev()
                        .take(4)
                        .map(|span| span.text.as_str())
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    if !dest.is_empty() && !shown.ends_with(&dest) {
                        let style = Style {
                            dim: true,
                            ..Style::PLAIN
                        };
                        self.text_styled(&format!(" ({dest})"), style);
                    }
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.table_lines(&table);
                }
                self.gap = true;
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_head = false;
                    table.head_rows = table.rows.len();
                }
            }
            TagEnd::TableRow
            | TagEnd::TableCell
            | TagEnd::FootnoteDefinition
            | TagEnd::HtmlBlock
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_)
            | TagEnd::Superscript
            | TagEnd::Subscript => {}
        }
    }

    fn text_styled(&mut self, text: &str, style: Style) {
        self.styles.push(style);
        self.text(text);
        self.styles.pop();
    }

    /// A code block: coloured when its language is known, indented, never re-flowed.
    fn code_lines(&mut self, language: &str, code: &str) {
        let safe = printable(code, true);
        let prefix = format!("{}  ", self.prefix());
        let lines = highlight::highlight(&safe, language).unwrap_or_else(|| {
            safe.lines()
                .map(|line| {
                    Style {
                        color: Some(CYAN),
                        ..Style::PLAIN
                    }
                    .paint(line)
                })
                .collect()
        });
        for line in lines {
            self.lines.push(format!("{prefix}{line}"));
        }
    }

    /// A table with box-drawing borders, the header row bold, columns as wide as their
    /// widest cell; when the whole does not fit, the widest columns narrow and their cells
    /// wrap between words onto more rows (every word of every cell stays). When even
    /// columns of [`MIN_COLUMN`] do not fit, each row becomes a list item of
    /// `header: cell` lines ([`Writer::table_as_list`]).
    fn table_lines(&mut self, table: &Table) {
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        if columns == 0 {
            return;
        }
        let plain =
            |cell: &Vec<Span>| -> String { cell.iter().map(|span| span.text.as_str()).collect() };
        let mut widths = vec![1usize; columns];
        for row in &table.rows {
            for (index, cell) in row.iter().enumerate() {
                widths[index] = widths[index].max(display_width(&plain(cell)));
            }
        }
        // Fit the width: borders take 3 columns a cell plus 1.
        let room = self
            .width
            .saturating_sub(self.prefix_width() + 3 * columns + 1);
        let floor = |width: usize| width.min(MIN_COLUMN);
        if widths.iter().map(|width| floor(*width)).sum::<usize>() > room {
            self.table_as_list(table);
            return;
        }
        while widths.iter().sum::<usize>() > room {
            let Some(widest) = widths.iter_mut().filter(|width| **width > MIN_COLUMN).max() else {
                break;
            };
            *widest -= 1;
        }
        let prefix = self.prefix();
        let border = |left: &str, middle: &str, right: &str| {
            let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            format!("{prefix}{left}{}{right}", parts.join(middle))
        };
        self.lines.push(border("┌", "┬", "┐"));
        for (row_index, row) in table.rows.iter().enumerate() {
            let head = row_index < table.head_rows;
            // Each cell's lines, wrapped to its column.
            let cells: Vec<Vec<String>> = widths
                .iter()
                .enumerate()
                .map(|(index, width)| match row.get(index) {
                    Some(cell) if !plain(cell).is_empty() => cell_lines(cell, *width, head),
                    _ => vec![String::new()],
                })
                .collect();
            let height = cells.iter().map(Vec::len).max().unwrap_or(1);
            for line_index in 0..height {
                let mut line = format!("{prefix}│");
                for (index, width) in widths.iter().enumerate() {
                    let text = cells[index].get(line_index).map_or("", String::as_str);
                    let pad = width.saturating_sub(display_width(&crate::term::strip_styles(text)));
                    let (left, right) = match table.alignments.get(index) {
                        Some(Alignment::Right) => (pad, 0),
                        Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                        _ => (0, pad),
                    };
                    line.push_str(&format!(
                        " {}{text}{} │",
                        " ".repeat(left),
                        " ".repeat(right)
                    ));
                }
                self.lines.push(line);
            }
            if row_index + 1 == table.head_rows && table.rows.len() > table.head_rows {
                self.lines.push(border("├", "┼", "┤"));
            }
        }
        self.lines.push(border("└", "┴", "┘"));
    }

    /// A table too wide for the terminal even with narrow columns, as a list: each body row
    /// an item, each cell a `header: cell` line under it, wrapped to the width.
    fn table_as_list(&mut self, table: &Table) {
        let prefix = self.prefix();
        let room = self.width.saturating_sub(self.prefix_width() + 2).max(8);
        let header: Vec<String> = table
            .rows
            .first()
            .filter(|_| table.head_rows > 0)
            .map(|row| {
                row.iter()
                    .map(|cell| cell.iter().map(|span| span.text.as_str()).collect())
                    .collect()
            })
            .unwrap_or_default();
        for row in table.rows.iter().skip(table.head_rows) {
            for (index, cell) in row.iter().enumerate() {
                let mut spans = Vec::new();
                if let Some(name) = header.get(index).filter(|name| !name.is_empty()) {
                    let bold = Style {
                        bold: true,
                        ..Style::PLAIN
                    };
                    spans.push(Span::new(format!("{name}: "), bold));
                }
                spans.extend(cell.iter().cloned());
                for (line_index, line) in crate::wrap(&spans, room).into_iter().enumerate() {
                    let mark = if index == 0 && line_index == 0 {
                        "• "
                    } else {
                        "  "
                    };
                    self.lines.push(format!("{prefix}{mark}{line}"));
                }
            }
        }
    }
}

/// The narrowest a table's column gets before the table is shown as a list instead.
const MIN_COLUMN: usize = 8;

/// A table cell's spans wrapped to `width` columns, bold in a header row.
fn cell_lines(cell: &[Span], width: usize, head: bool) -> Vec<String> {
    let spans: Vec<Span> = cell
        .iter()
        .map(|span| Span {
            text: span.text.clone(),
            style: Style {
                bold: span.style.bold || head,
                ..span.style
            },
        })
        .collect();
    if display_width(
        &spans
            .iter()
            .map(|span| span.text.as_str())
            .collect::<String>(),
    ) <= width
    {
        return vec![
            spans
                .iter()
                .map(|span| span.style.paint(&span.text))
                .collect(),
        ];
    }
    crate::wrap(&spans, width)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines without their SGR sequences.
    fn plain(lines: &[String]) -> Vec<String> {
        let sgr = |line: &str| {
            let mut out = String::new();
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                if c == '\x1b' {
                    for next in chars.by_ref() {
                        if next == 'm' {
                            break;
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            out
        };
        lines.iter().map(|line| sgr(line)).collect()
    }

    #[test]
    fn headings_emphasis_lists_and_quotes() {
        let lines = render_markdown(
            "# Title\n\nSome **bold** and *italic* and `code`.\n\n- one\n- two\n  - nested\n\n1. first\n2. second\n\n> quoted\n> text\n",
            60,
        );
        assert_eq!(
            plain(&lines),
            [
                "Title",
                "",
                "Some bold and italic and code.",
                "",
                "• one",
                "• two",
                "  • nested",
                "",
                "1. first",
                "2. second",
                "",
                "│ quoted text",
            ]
        );
        assert!(lines[0].contains("\x1b[1;4m"), "{:?}", lines[0]);
        assert!(lines[2].contains("\x1b[1mbold\x1b[0m"), "{:?}", lines[2]);
        assert!(lines[2].contains("\x1b[3mitalic\x1b[0m"), "{:?}", lines[2]);
    }

    #[test]
    fn paragraphs_reflow_and_list_items_hang() {
        let lines = render_markdown("- a list item long enough to wrap around\n", 24);
        assert_eq!(
            plain(&lines),
            ["• a list item long", "  enough to wrap around"]
        );
    }

    #[test]
    fn tables_get_borders_and_fences_colour() {
        let lines = render_markdown(
            "| Name | Count |\n|---|--:|\n| apples | 3 |\n| kiwis | 12 |\n\n```rust\nfn main() {}\n```\n",
            60,
        );
        assert_eq!(
            plain(&lines),
            [
                "┌────────┬───────┐",
                "│ Name   │ Count │",
                "├────────┼───────┤",
                "│ apples │     3 │",
                "│ kiwis  │    12 │",
                "└────────┴───────┘",
                "",
                "  fn main() {}",
            ]
        );
        assert!(lines[7].contains("\x1b[38;2;"), "{:?}", lines[7]);
    }

    /// A table wider than the terminal keeps every word: the widest columns narrow and
    /// their cells wrap onto more rows, borders aligned; when even narrow columns cannot
    /// fit, the rows become list items of `header: cell` lines.
    #[test]
    fn tables_wrap_their_cells_and_fall_back_to_a_list() {
        let text = "| Tool | What it does | Cost |\n|---|---|--:|\n| Read | reads a file from the workspace, with line numbers and an offset | free |\n| Bash | runs a shell command in the sandbox and returns its output | varies |\n";
        let lines = plain(&render_markdown(text, 60));
        let widths: Vec<usize> = lines.iter().map(|line| display_width(line)).collect();
        assert!(
            widths
                .iter()
                .all(|width| *width == widths[0] && *width <= 60),
            "{lines:#?}"
        );
        let words = |text: &str| -> Vec<String> {
            text.split(|c: char| c.is_whitespace() || "│┌┐└┘├┤┬┴┼─|:-".contains(c))
                .filter(|word| !word.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let shown = words(&lines.join(" "));
        for word in words(text) {
            assert!(shown.contains(&word), "{word:?} missing from {lines:#?}");
        }
        assert!(lines.len() > 7, "the long cells took more rows: {lines:#?}");
        assert!(!lines.join("").contains('…'), "{lines:#?}");

        // At 30 columns the table still fits, its cells wrapped; at 24 it cannot.
        let lines = plain(&render_markdown(text, 30));
        assert!(
            lines[0].starts_with('┌') && lines.iter().all(|line| display_width(line) <= 30),
            "{lines:#?}"
        );
        let lines = plain(&render_markdown(text, 24));
        assert_eq!(lines[0], "• Tool: Read", "{lines:#?}");
        assert!(lines[1].starts_with("  What it does: reads"), "{lines:#?}");
        assert!(
            lines.iter().any(|line| line == "• Tool: Bash"),
            "{lines:#?}"
        );
        assert!(
            lines.iter().all(|line| display_width(line) <= 30),
            "{lines:#?}"
        );
        let shown = words(&lines.join(" "));
        for word in words(text) {
            assert!(shown.contains(&word), "{word:?} missing from {lines:#?}");
        }
    }

    #[test]
    fn links_show_their_target_and_escapes_are_neutralised() {
        let lines = render_markdown("See [the docs](https://example.com/docs).\n", 80);
        assert_eq!(plain(&lines), ["See the docs (https://example.com/docs)."]);
        let lines = render_markdown("<https://example.com>\n", 80);
        assert_eq!(plain(&lines), ["https://example.com"]);
        let lines = render_markdown("evil \x1b]52;c;aGk=\x07 text\n\n```\n\x1b[2J\n```\n", 80);
        assert!(
            lines
                .iter()
                .all(|line| !line.contains("\x1b]") && !line.contains("\x1b[2J")),
            "{lines:?}"
        );
    }

    #[test]
    fn a_stream_returns_complete_blocks_only_and_each_line_once() {
        let text = "## Plan\n\nFirst a paragraph\nthat goes on.\n\n```sh\ncargo test\n\necho done\n```\nAfter.";
        let mut stream = MarkdownStream::new(80);
        let mut streamed = Vec::new();
        // Every split of the text, one byte at a time where it is a char boundary.
        let mut at = 0;
        let mut seen_after_fence = false;
        while at < text.len() {
            let mut next = at + 1;
            while !text.is_char_boundary(next) {
                next += 1;
            }
            let lines = stream.push(&text[at..next]);
            // The fence's blank line never ends the block early.
            if plain(&lines).iter().any(|line| line.contains("echo done")) {
                seen_after_fence = true;
            }
            assert!(
                !plain(&lines).iter().any(|line| line.trim() == "cargo test") || seen_after_fence,
                "the code block was cut at its blank line"
            );
            streamed.extend(lines);
            at = next;
        }
        streamed.extend(stream.finish());
        assert_eq!(plain(&streamed), plain(&render_markdown(text, 80)));
        assert_eq!(
            plain(&streamed),
            [
                "Plan",
                "",
                "First a paragraph that goes on.",
                "",
                "  cargo test",
                "  ",
                "  echo done",
                "",
                "After.",
            ]
        );
    }
}
