//! Prompt files as Claude Code writes them (custom commands, skills): an optional
//! frontmatter block and a Markdown body whose `$ARGUMENTS` and `$1` .. `$9` take the
//! words the user typed after the name.

use std::collections::BTreeMap;

/// The frontmatter fields and the body of a prompt file.
///
/// The frontmatter is the block between a first line `---` and the next line `---`. Each
/// field is `key: value` (quotes around the value are removed); a key with no value on
/// its line takes the indented lines after it: a YAML list (`- item` lines) joined with
/// `", "`, or a block scalar (`|` keeps line breaks, `>` folds them into spaces). This is
/// the subset of YAML these files use, not a YAML parser. A byte-order mark is skipped;
/// text without a frontmatter block is all body.
pub fn split_frontmatter(text: &str) -> (BTreeMap<String, String>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (BTreeMap::new(), text);
    };
    // The closing line: `---` at the start of the block or after a line break.
    let end = if rest.starts_with("---") {
        Some(0)
    } else {
        rest.find("\n---").map(|at| at + 1)
    };
    let Some(end) = end else {
        return (BTreeMap::new(), text);
    };
    let after = &rest[end + 3..];
    let after = after.trim_start_matches([' ', '\t']);
    let body = after
        .strip_prefix("\r\n")
        .or_else(|| after.strip_prefix('\n'))
        .unwrap_or(after);
    (fields(&rest[..end]), body)
}

/// The fields of a frontmatter block (see [`split_frontmatter`]).
fn fields(block: &str) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    let mut lines = block.lines().peekable();
    while let Some(line) = lines.next() {
        if line.starts_with([' ', '\t', '#']) || line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        // The indented lines that belong to this key.
        let mut nested = Vec::new();
        while let Some(next) = lines.peek() {
            if next.starts_with([' ', '\t']) || next.trim().is_empty() {
                nested.push(next.trim());
                lines.next();
            } else {
                break;
            }
        }
        while nested.last().is_some_and(|line| line.is_empty()) {
            nested.pop();
        }
        let value = match value {
            "" => {
                let items: Vec<&str> = nested
                    .iter()
                    .filter_map(|line| line.strip_prefix('-'))
                    .map(|item| unquote(item.trim()))
                    .collect();
                items.join(", ")
            }
            "|" | "|-" => nested.join("\n"),
            ">" | ">-" => nested.join(" "),
            _ => unquote(value).to_owned(),
        };
        fields.insert(key.trim().to_owned(), value);
    }
    fields
}

/// `value` without one pair of surrounding quotes.
fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value)
}

/// `body` with the user's `arguments`: `$ARGUMENTS` is all of them (trimmed), `$1` .. `$9`
/// each whitespace-separated word (empty when missing). A body that names neither gets the
/// arguments appended after a blank line, as Claude Code does.
pub fn expand_arguments(body: &str, arguments: &str) -> String {
    let arguments = arguments.trim();
    let words: Vec<&str> = arguments.split_whitespace().collect();
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut used = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(arguments);
            used = true;
            rest = tail;
        } else if let Some(digit) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let index = digit as usize - '1' as usize;
            out.push_str(words.get(index).copied().unwrap_or_default());
            used = true;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !used && !arguments.is_empty() {
        out.truncate(out.trim_end().len());
        out.push_str("\n\n");
        out.push_str(arguments);
    }
    out
}

/// Splits a tool list as Claude Code's frontmatter writes it (`allowed-tools: Bash(git
/// add:*), Bash(git status:*), Read`): at commas outside parentheses, each item trimmed,
/// empty items dropped.
pub fn split_tool_list(list: &str) -> Vec<String> {
    // A YAML flow list (`[Read, Grep]`) is the same list.
    let list = list.trim();
    let list = list
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(list);
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (at, c) in list.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&list[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items
        .into_iter()
        .map(|item| unquote(item.trim()))
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_fields_lists_and_block_scalars() {
        let (fields, body) = split_frontmatter(
            "\u{feff}---\nname: pdf\ndescription: >\n  Fill PDF forms.\n  Use for forms.\nallowed-tools:\n  - Bash(git add:*)\n  - 'Read'\nnotes: |\n  one\n  two\nmodel: \"haiku\"\n# a comment\n---\nBody $ARGUMENTS\n",
        );
        assert_eq!(fields["name"], "pdf");
        assert_eq!(fields["description"], "Fill PDF forms. Use for forms.");
        assert_eq!(fields["allowed-tools"], "Bash(git add:*), Read");
        assert_eq!(fields["notes"], "one\ntwo");
        assert_eq!(fields["model"], "haiku");
        assert_eq!(body, "Body $ARGUMENTS\n");
        // No closing line: all body. No frontmatter: all body. An empty block.
        let text = "---\nname: x\nno end";
        assert_eq!(split_frontmatter(text), (BTreeMap::new(), text));
        assert_eq!(split_frontmatter("plain\n").1, "plain\n");
        let (fields, body) = split_frontmatter("---\n---\nbody");
        assert!(fields.is_empty());
        assert_eq!(body, "body");
        let (fields, body) = split_frontmatter("---\r\na: 1\r\n---\r\nbody\r\n");
        assert_eq!(fields["a"], "1");
        assert_eq!(body, "body\r\n");
    }

    #[test]
    fn arguments_and_tool_lists() {
        assert_eq!(
            expand_arguments(
                "Fix #$1 ($2). All: $ARGUMENTS; $5 and $x stay.",
                " 123 high "
            ),
            "Fix #123 (high). All: 123 high;  and $x stay."
        );
        assert_eq!(expand_arguments("Review.\n", "src/"), "Review.\n\nsrc/");
        assert_eq!(expand_arguments("Review.\n", ""), "Review.\n");
        assert_eq!(
            split_tool_list("Bash(git add:*), Bash(a, b),Read ,, "),
            ["Bash(git add:*)", "Bash(a, b)", "Read"]
        );
        assert_eq!(
            split_tool_list(" [Read, 'Grep', \"Glob\"] "),
            ["Read", "Grep", "Glob"]
        );
    }
}
