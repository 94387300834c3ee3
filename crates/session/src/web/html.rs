//! HTML to Markdown for WebFetch, on a well-kept converter ([`htmd`]: turndown's rules on
//! html5ever), held to bounds a hostile page cannot pass: at most [`MAX_HTML_BYTES`] of the
//! page are converted (the Markdown goes back cut far shorter anyway); a page nested deeper
//! than [`MAX_DEPTH`] elements (by a scan of its tags before parsing, then by its tree) is
//! read as plain text instead, since both the parser's scope checks and the converter's
//! recursion grow with the depth; and the conversion runs on a thread of its own with a
//! [`STACK_BYTES`] stack.

use tokio::sync::oneshot;

/// The most bytes of a page's HTML converted (2 MiB: about ten times what the Markdown the
/// model gets can hold).
pub const MAX_HTML_BYTES: usize = 2 << 20;

/// The deepest nesting of elements converted as Markdown; deeper pages are read as text.
/// Real pages stay under about 100.
pub const MAX_DEPTH: usize = 1000;

/// The conversion thread's stack (the converter recurses once per level: about 1 KiB each).
pub const STACK_BYTES: usize = 32 << 20;

/// Elements a page may leave open without nesting (their end tags are implied by the next
/// sibling), and void elements, which never hold anything.
const NOT_NESTING: &[&str] = &[
    "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "thead", "tbody", "tfoot",
    "colgroup", "rp", "rt", "area", "base", "br", "col", "embed", "hr", "img", "input", "link",
    "meta", "source", "track", "wbr", "param", "keygen",
];

/// `html` as Markdown (see the module docs), converted off the async threads.
pub async fn convert(html: String) -> String {
    let (sender, receiver) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("html-to-markdown".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let _ = sender.send(to_markdown(&html));
        });
    match spawned {
        Ok(_) => receiver.await.unwrap_or_default(),
        // No thread could be made: the page's text, which needs no recursion.
        Err(_) => String::new(),
    }
}

/// `html` as Markdown: scripts, styles and other parts that are not text left out; control
/// characters removed; runs of blank lines folded. Synchronous: see [`convert`].
pub fn to_markdown(html: &str) -> String {
    let html = cut(html, MAX_HTML_BYTES);
    let markdown = if estimated_depth(html) > MAX_DEPTH {
        plain_text(html)
    } else {
        let converter = htmd::HtmlToMarkdown::builder()
            .skip_tags(vec![
                "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object",
                "embed", "head",
            ])
            .build();
        match converter.html_to_tree(html) {
            Ok(tree) if tree_depth(&tree) <= MAX_DEPTH => converter.tree_to_markdown(&tree),
            _ => plain_text(html),
        }
    };
    fold(&super::fetch::clean(markdown))
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

/// The deepest nesting the tags of `html` reach as written: start tags open a level, end
/// tags close one, elements that never nest (see [`NOT_NESTING`]) and self-closed tags do
/// neither. An upper bound on what a parser builds, found without parsing.
fn estimated_depth(html: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        let closing = rest.starts_with('/');
        let name: String = rest
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect::<String>()
            .to_ascii_lowercase();
        if name.is_empty() || NOT_NESTING.contains(&name.as_str()) {
            continue;
        }
        let end = rest.find('>').unwrap_or(rest.len());
        if closing {
            depth = depth.saturating_sub(1);
        } else if !rest[..end].ends_with('/') {
            depth += 1;
            deepest = deepest.max(depth);
        }
    }
    deepest
}

/// The depth of the element tree under `root`, walked without recursion.
fn tree_depth(root: &std::rc::Rc<htmd::Node>) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(std::rc::Rc::clone(root), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        for child in node.children.borrow().iter() {
            stack.push((std::rc::Rc::clone(child), depth + 1));
        }
    }
    deepest
}

/// The text of `html` without its tags, scripts and styles, the common entities decoded:
/// what a page too deep to convert is read as.
fn plain_text(html: &str) -> String {
    let mut text = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        text.push_str(&rest[..at]);
        rest = &rest[at..];
        let lower: String = rest
            .chars()
            .take(8)
            .collect::<String>()
            .to_ascii_lowercase();
        let skip_to = ["script", "style"]
            .iter()
            .find(|name| lower[1..].starts_with(*name))
            .map(|name| format!("</{name}"));
        let end = match skip_to {
            Some(closing) => rest
                .to_ascii_lowercase()
                .find(&closing)
                .map_or(rest.len(), |at| at + closing.len()),
            None => 0,
        };
        rest = &rest[end..];
        let close = rest.find('>').map_or(rest.len(), |at| at + 1);
        let tag = &rest[..close];
        if ["<br", "<p", "<div", "<li", "<h", "<tr", "</p", "</div"]
            .iter()
            .any(|block| tag.to_ascii_lowercase().starts_with(block))
        {
            text.push('\n');
        }
        rest = &rest[close..];
    }
    text.push_str(rest);
    text.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

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
    /// 2,500 `<b>`) or kept a core busy for minutes (200,000 `<div>`).
    #[test]
    fn deep_pages_are_read_as_text_quickly() {
        for (open, count) in [("<b>", 2_500), ("<div>", 200_000), ("<b><i>", 100_000)] {
            let page = format!("<html><body>{}deep words</body></html>", open.repeat(count));
            let started = std::time::Instant::now();
            let text = to_markdown(&page);
            assert_eq!(text, "deep words", "{open} x {count}");
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "{open}"
            );
        }
        // Unclosed paragraphs and list items do not nest: such a page is converted.
        let items: String = (0..3_000).map(|n| format!("<li>item {n}")).collect();
        let list = to_markdown(&format!("<ul>{items}</ul>"));
        assert!(list.contains("item 2999"), "{}", &list[list.len() - 40..]);
        assert!(list.lines().count() > 2_000);
    }

    #[test]
    fn at_most_the_limit_is_converted() {
        let page = format!("<p>{}</p><p>END</p>", "a".repeat(MAX_HTML_BYTES));
        assert!(!to_markdown(&page).contains("END"));
        assert_eq!(cut("héllo", 2), "h");
    }

    #[test]
    fn plain_text_drops_tags_scripts_and_styles() {
        assert_eq!(
            plain_text("<p>a &amp; b</p><script>x()</script><STYLE>p{}</STYLE>c"),
            "\na & b\nc"
        );
    }
}
