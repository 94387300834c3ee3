//! HTML to Markdown for WebFetch, on a well-kept converter ([`htmd`]: turndown's rules) over
//! html5ever, held to bounds a hostile page cannot pass: at most [`MAX_HTML_BYTES`] of the
//! page are read (the Markdown goes back cut far shorter anyway); the page is parsed
//! [`CHUNK_BYTES`] at a time and given up between chunks once the fetch's deadline passes or
//! its call is dropped (the parser's scope checks grow with the nesting, so a deep page is
//! slow to parse); a tree deeper than [`MAX_DEPTH`] elements is read as its text, walked
//! without recursion (the converter recurses once per level); and the work runs on a thread
//! of its own with a [`STACK_BYTES`] stack.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use html5ever::tendril::{StrTendril, TendrilSink as _};
use markup5ever_rcdom::{Handle, NodeData, RcDom};
use tokio::sync::oneshot;

/// The most bytes of a page's HTML read (2 MiB: about ten times what the Markdown the model
/// gets can hold).
pub const MAX_HTML_BYTES: usize = 2 << 20;

/// The deepest tree converted as Markdown; a deeper one is read as text. Real pages stay
/// under about 100.
pub const MAX_DEPTH: usize = 1000;

/// The conversion thread's stack (the converter recurses once per level: about 1 KiB each).
pub const STACK_BYTES: usize = 32 << 20;

/// How much HTML is parsed between two looks at the deadline.
pub const CHUNK_BYTES: usize = 4096;

/// Elements whose content is not the page's text.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed",
    "head", "title",
];

/// Elements that start a line of their own in [`tree_text`].
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "tr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "blockquote",
    "section",
    "article",
    "table",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "hr",
];

/// `html` as Markdown (see the module docs), off the async threads; `None` when `deadline`
/// passed first. Dropping the future stops the work at its next chunk.
pub async fn convert(html: String, deadline: Instant) -> Option<String> {
    /// Tells the thread to stop when the call that wanted the page is gone.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let _guard = StopOnDrop(Arc::clone(&stop));
    spawn(html, deadline, stop)?.await.ok().flatten()
}

/// Starts converting `html` on a thread of its own, until `deadline` or `stop`; `None` when
/// no thread could be made.
fn spawn(
    html: String,
    deadline: Instant,
    stop: Arc<AtomicBool>,
) -> Option<oneshot::Receiver<Option<String>>> {
    let (sender, receiver) = oneshot::channel();
    std::thread::Builder::new()
        .name("html-to-markdown".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let stopped = || stop.load(Ordering::Relaxed) || Instant::now() >= deadline;
            let _ = sender.send(to_markdown_until(&html, &stopped));
        })
        .ok()?;
    Some(receiver)
}

/// `html` as Markdown: scripts, styles and other parts that are not text left out; control
/// characters removed; runs of blank lines folded. Synchronous and without a deadline: see
/// [`convert`].
pub fn to_markdown(html: &str) -> String {
    to_markdown_until(html, &|| false).unwrap_or_default()
}

/// [`to_markdown`], given up (`None`) as soon as `stopped` says so between two chunks.
fn to_markdown_until(html: &str, stopped: &dyn Fn() -> bool) -> Option<String> {
    let mut rest = cut(html, MAX_HTML_BYTES);
    let mut parser = html5ever::parse_document(RcDom::default(), Default::default());
    while !rest.is_empty() {
        if stopped() {
            return None;
        }
        let chunk = cut(rest, CHUNK_BYTES);
        parser.process(StrTendril::from_slice(chunk));
        rest = &rest[chunk.len()..];
    }
    let dom = parser.finish();
    if stopped() {
        return None;
    }
    let markdown = if tree_depth(&dom.document) <= MAX_DEPTH {
        htmd::HtmlToMarkdown::builder()
            .skip_tags(SKIPPED.to_vec())
            .build()
            .tree_to_markdown(&dom.document)
    } else {
        tree_text(&dom.document)
    };
    Some(fold(&super::fetch::clean(markdown)))
}

/// `text` with runs of blank lines folded to one and lines' trailing blanks dropped.
fn fold(text: &str) -> String {
    let mut folded = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        folded.push_str(line);
        folded.push('\n');
    }
    folded.trim().to_owned()
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The depth of the tree under `root`, walked without recursion.
fn tree_depth(root: &Handle) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(Rc::clone(root), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        for child in node.children.borrow().iter() {
            stack.push((Rc::clone(child), depth + 1));
        }
    }
    deepest
}

/// The text of the tree under `root`, in document order, walked without recursion: what
/// the page's Markdown would say without its formatting, and no more (scripts, styles,
/// comments and the head left out as the converter leaves them out).
fn tree_text(root: &Handle) -> String {
    let mut text = String::new();
    let mut stack = vec![Rc::clone(root)];
    while let Some(node) = stack.pop() {
        match &node.data {
            NodeData::Text { contents } => text.push_str(&contents.borrow()),
            NodeData::Element { name, .. } => {
                let tag: &str = &name.local;
                if SKIPPED.contains(&tag) {
                    continue;
                }
                if BLOCKS.contains(&tag) {
                    text.push('\n');
                }
            }
            NodeData::Comment { .. }
            | NodeData::ProcessingInstruction { .. }
            | NodeData::Doctype { .. } => continue,
            NodeData::Document => {}
        }
        stack.extend(node.children.borrow().iter().rev().map(Rc::clone));
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    #[test]
    fn html_becomes_markdown_without_scripts_or_escapes() {
        let markdown = to_markdown(
            "<html><head><title>T</title><style>p{}</style></head><body>\
             <h1>Install</h1><script>alert(1)</script><p>Run <code>cargo add x</code>.</p>\
             <p>\u{1b}[31mred\u{1b}[0m</p><ul><li>one</li><li>two</li></ul>\
             <a href=\"https://docs.rs/x\">docs</a></body></html>",
        );
        assert!(markdown.starts_with("# Install"), "{markdown}");
        assert!(markdown.contains("Run `cargo add x`."), "{markdown}");
        assert!(markdown.contains("[docs](https://docs.rs/x)"), "{markdown}");
        assert!(
            !markdown.contains("alert") && !markdown.contains("p{}"),
            "{markdown}"
        );
        assert!(!markdown.contains('\u{1b}'), "{markdown}");
        assert!(markdown.contains("[31mred"), "{markdown}");
    }

    /// Attacks: deep nesting crashed the converter (a stack overflow aborting the process at
    /// 2,500 `<b>`); 200,000 `<div>` (or `<div/>`, which HTML does not close) held a core
    /// for minutes, even after the fetch had given up.
    #[test]
    fn deep_pages_are_read_as_text_or_given_up() {
        let page = format!(
            "<html><body>{}deep words</body></html>",
            "<b>".repeat(2_500)
        );
        assert_eq!(to_markdown(&page), "deep words");
        let hidden = format!(
            "<body>{}<!-- x > HIDDEN --><noscript>NS</noscript><title>T</title>seen</body>",
            "<i>".repeat(1_500)
        );
        assert_eq!(to_markdown(&hidden), "seen");
        for page in [
            "<div>".repeat(300_000),
            "<div/>".repeat(300_000),
            "<a".repeat(1_000_000),
        ] {
            let started = Instant::now();
            let deadline = started + Duration::from_millis(300);
            let stopped = || Instant::now() >= deadline;
            let _ = to_markdown_until(&page, &stopped);
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{:?}",
                started.elapsed()
            );
        }
        // Unclosed paragraphs and list items do not nest: such a page is converted.
        let items: String = (0..3_000).map(|n| format!("<li>item {n}")).collect();
        let list = to_markdown(&format!("<ul>{items}</ul>"));
        assert!(list.contains("item 2999"));
        assert!(list.lines().count() > 2_000);
    }

    #[tokio::test]
    async fn a_conversion_stops_when_told_or_at_its_deadline() {
        let far = Instant::now() + Duration::from_secs(600);
        let stop = Arc::new(AtomicBool::new(false));
        let receiver = spawn("<div>".repeat(300_000), far, Arc::clone(&stop)).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let told = Instant::now();
        stop.store(true, Ordering::Relaxed);
        assert_eq!(receiver.await.unwrap(), None);
        assert!(
            told.elapsed() < Duration::from_secs(2),
            "{:?}",
            told.elapsed()
        );
        assert_eq!(
            convert("<p>late</p>".to_owned(), Instant::now()).await,
            None
        );
        let soon = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            convert("<p>on time</p>".to_owned(), soon).await.as_deref(),
            Some("on time")
        );
    }

    #[test]
    fn at_most_the_limit_is_read() {
        let page = format!("<p>{}</p><p>END</p>", "a".repeat(MAX_HTML_BYTES));
        assert!(!to_markdown(&page).contains("END"));
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(to_markdown("<p>é</p>"), "é");
    }
}
