//! `Grep {pattern, path?, glob?, type?, output_mode?, -A?, -B?, -C?, context?, -n?, -i?,
//! head_limit?, offset?, multiline?}`: ripgrep's engine over the workspace.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, Workspace};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::types::TypesBuilder;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{parse_input, run_cancellable, truncate_line};
use crate::session::Shared;
use crate::walk;

/// Entries (lines, files, counts) returned when `head_limit` is not given.
pub(crate) const DEFAULT_HEAD_LIMIT: usize = 250;
/// Characters of a matching line shown before it is cut (minified files).
const MAX_COLUMNS: usize = 500;

const DESCRIPTION: &str = "Searches file contents with a regular expression (Rust regex syntax, as ripgrep: `fn\\s+main`, `log.*Error`; escape literal braces and parentheses, as in `interface\\{\\}`). \
Searches `path` (a file or directory, default: the working directory), hidden files included, skipping files ignored by .gitignore (and `.git`) and binary files. Filter files with `glob` (`*.js`, `*.{ts,tsx}`) or `type` (ripgrep's file types: `rust`, `py`, `js`, `ts`, `go`, `java`, ...). \
output_mode: `files_with_matches` (default) lists matching files, most recently modified first; `content` shows matching lines as `path:line:text` (context lines as `path-line-text`, with -A/-B/-C lines after/before/around, `-n` line numbers, on by default); `count` shows matching lines per file. \
`-i` ignores case. By default a match stays within one line; `multiline: true` lets `.` and patterns span lines. \
Results are capped at `head_limit` entries (default 250; 0 for all); `offset` skips entries, for paging. Use this tool for content search, not grep or rg in Bash.";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    Content,
    #[default]
    FilesWithMatches,
    Count,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    #[serde(rename = "type")]
    file_type: Option<String>,
    #[serde(default)]
    output_mode: OutputMode,
    #[serde(rename = "-A")]
    after: Option<u64>,
    #[serde(rename = "-B")]
    before: Option<u64>,
    #[serde(rename = "-C")]
    around: Option<u64>,
    context: Option<u64>,
    #[serde(rename = "-n")]
    line_numbers: Option<bool>,
    #[serde(rename = "-i")]
    ignore_case: Option<bool>,
    head_limit: Option<u64>,
    offset: Option<u64>,
    #[serde(default)]
    multiline: bool,
}

/// The Grep tool.
pub(crate) struct GrepTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl GrepTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let lines = |what: &str| json!({"type": "integer", "minimum": 0, "description": what});
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression to search for"},
                "path": {"type": "string", "description": "File or directory to search. Omit it to search the working directory"},
                "glob": {"type": "string", "description": "Only search files matching this glob, such as `*.js` or `*.{ts,tsx}`"},
                "type": {"type": "string", "description": "Only search files of this ripgrep type, such as `rust`, `py`, `js`"},
                "output_mode": {
                    "type": "string",
                    "enum": ["content", "files_with_matches", "count"],
                    "description": "`files_with_matches` (default): file paths; `content`: matching lines; `count`: matches per file"
                },
                "-A": lines("Lines to show after each match (content mode)"),
                "-B": lines("Lines to show before each match (content mode)"),
                "-C": lines("Lines to show before and after each match (content mode)"),
                "context": lines("Same as -C"),
                "-n": {"type": "boolean", "description": "Show line numbers (content mode). Default true"},
                "-i": {"type": "boolean", "description": "Case-insensitive search"},
                "head_limit": lines("Return at most this many entries (lines, files or counts). Default 250; 0 for no limit"),
                "offset": lines("Skip this many entries first, for paging. Default 0"),
                "multiline": {"type": "boolean", "description": "Let matches span lines (`.` matches newlines). Default false"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

crate::common::file_tool!(GrepTool, "Grep", grep);

/// Splits `glob` on whitespace and on commas outside braces: `*.ts, *.tsx` and `*.{ts,tsx}`
/// both give globs that work.
fn split_globs(glob: &str) -> Vec<String> {
    let mut globs = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in glob.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if c.is_whitespace() || (c == ',' && depth == 0) {
            if !current.is_empty() {
                globs.push(std::mem::take(&mut current));
            }
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        globs.push(current);
    }
    globs
}

/// The `glob` parameter: which files to search. Unlike ripgrep's `--glob`, it only narrows
/// the walk; files ignored by .gitignore stay ignored.
struct GlobFilter {
    include_names: GlobSet,
    include_paths: GlobSet,
    exclude_names: GlobSet,
    exclude_paths: GlobSet,
    has_includes: bool,
}

impl GlobFilter {
    /// Globs without `/` match file names at any depth; globs with `/` match the path
    /// relative to the search root; a leading `!` excludes.
    fn new(globs: &str) -> Result<Self, ToolError> {
        let mut sets = [
            GlobSetBuilder::new(),
            GlobSetBuilder::new(),
            GlobSetBuilder::new(),
            GlobSetBuilder::new(),
        ];
        let mut has_includes = false;
        for glob in split_globs(globs) {
            let (exclude, pattern) = match glob.strip_prefix('!') {
                Some(pattern) => (true, pattern),
                None => (false, glob.as_str()),
            };
            let by_path = pattern.contains('/');
            let pattern = pattern.trim_start_matches('/');
            let compiled = GlobBuilder::new(pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|error| {
                    ToolError::InvalidInput(format!("invalid glob `{glob}`: {error}"))
                })?;
            has_includes |= !exclude;
            sets[usize::from(exclude) * 2 + usize::from(by_path)].add(compiled);
        }
        let [include_names, include_paths, exclude_names, exclude_paths] = sets.map(|set| {
            set.build()
                .map_err(|error| ToolError::InvalidInput(format!("invalid glob: {error}")))
        });
        Ok(Self {
            include_names: include_names?,
            include_paths: include_paths?,
            exclude_names: exclude_names?,
            exclude_paths: exclude_paths?,
            has_includes,
        })
    }

    fn admits(&self, root: &Path, path: &Path) -> bool {
        let relative = path.strip_prefix(root).unwrap_or(path);
        let name = path.file_name().map(Path::new).unwrap_or(relative);
        if self.exclude_names.is_match(name) || self.exclude_paths.is_match(relative) {
            return false;
        }
        !self.has_includes
            || self.include_names.is_match(name)
            || self.include_paths.is_match(relative)
    }
}

fn to_usize(value: Option<u64>) -> Option<usize> {
    value.map(|value| usize::try_from(value).unwrap_or(usize::MAX))
}

/// What the search of one file found.
enum Found {
    /// files_with_matches: the file matched.
    File(Option<SystemTime>),
    /// count: matching lines.
    Count(u64),
    /// content: formatted lines (ending in `\n`).
    Lines(String),
}

fn grep(
    shared: &Shared,
    workspace: &Workspace,
    input: &Input,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let root = shared.search_root(workspace, "Grep", input.path.as_deref())?;
    let metadata = std::fs::metadata(&root)
        .map_err(|_| ToolError::InvalidInput(format!("Path does not exist: {}", root.display())))?;

    let mode = input.output_mode;
    let matcher = build_matcher(input)?;
    let around = to_usize(input.around.or(input.context)).unwrap_or(0);
    let (before, after) = if mode == OutputMode::Content {
        (
            to_usize(input.before).unwrap_or(around),
            to_usize(input.after).unwrap_or(around),
        )
    } else {
        (0, 0)
    };
    // Counting lines costs a pass over every buffer: only content mode shows them.
    let searcher = SearcherBuilder::new()
        .line_number(mode == OutputMode::Content)
        .multi_line(input.multiline)
        .before_context(before)
        .after_context(after)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .build();
    let numbers = input.line_numbers.unwrap_or(true);

    let mut results: Vec<(PathBuf, Found)> = if metadata.is_file() {
        let mut searcher = searcher;
        search_file(&mut searcher, &matcher, &root, mode, numbers, || {
            metadata.modified().ok()
        })
        .map(|found| vec![(root.clone(), found)])
        .unwrap_or_default()
    } else {
        let mut builder = walk::walker(&root, false);
        if let Some(file_type) = &input.file_type {
            let types = TypesBuilder::new()
                .add_defaults()
                .select(file_type)
                .build()
                .map_err(|_| {
                    ToolError::InvalidInput(format!(
                        "unknown file type `{file_type}`; use a ripgrep type such as rust, py, js, ts, go, java, c, cpp, md, json, or use glob"
                    ))
                })?;
            builder.types(types);
        }
        let filter = input.glob.as_deref().map(GlobFilter::new).transpose()?;
        let hides = shared.rules.hides_anything("Grep");
        walk::collect(&builder, cancel, || {
            let mut searcher = searcher.clone();
            let matcher = matcher.clone();
            let filter = filter.as_ref();
            let root = root.as_path();
            move |entry: &ignore::DirEntry, results: &mut Vec<(PathBuf, Found)>| {
                let path = entry.path();
                if filter.is_some_and(|filter| !filter.admits(root, path)) {
                    return;
                }
                if hides && shared.rules.hides("Grep", path) {
                    return;
                }
                let modified = || entry.metadata().ok().and_then(|meta| meta.modified().ok());
                if let Some(found) =
                    search_file(&mut searcher, &matcher, path, mode, numbers, modified)
                {
                    results.push((path.to_path_buf(), found));
                }
            }
        })
    };
    if cancel.is_cancelled() {
        return Err(ToolError::Killed("interrupted while searching".into()));
    }

    let offset = to_usize(input.offset).unwrap_or(0);
    let limit = match to_usize(input.head_limit) {
        None => DEFAULT_HEAD_LIMIT,
        Some(0) => usize::MAX,
        Some(limit) => limit,
    };
    let page = Page { offset, limit };
    let text = match mode {
        OutputMode::FilesWithMatches => render_files(&mut results, page),
        OutputMode::Count => render_counts(&mut results, page),
        OutputMode::Content => render_content(&mut results, page, before + after > 0),
    };
    let structured = structured(mode, &results, &text, page);
    Ok(ToolOutput::text(text).with_structured(structured))
}

/// Claude Code's `GrepOutput` (sdk-tools.d.ts) of a search: what hooks and SDK programs get
/// (the files in the order shown).
fn structured(mode: OutputMode, results: &[(PathBuf, Found)], text: &str, page: Page) -> Value {
    let filenames: Vec<String> = results
        .iter()
        .map(|(path, _)| path.display().to_string())
        .collect();
    let mut structured = json!({
        "mode": match mode {
            OutputMode::FilesWithMatches => "files_with_matches",
            OutputMode::Count => "count",
            OutputMode::Content => "content",
        },
        "numFiles": filenames.len(),
        "filenames": filenames,
    });
    match mode {
        OutputMode::Content => {
            structured["content"] = json!(text);
            structured["numLines"] = json!(text.lines().count());
        }
        OutputMode::Count => {
            let matches: u64 = results
                .iter()
                .map(|(_, found)| match found {
                    Found::Count(count) => *count,
                    _ => 0,
                })
                .sum();
            structured["numMatches"] = json!(matches);
        }
        OutputMode::FilesWithMatches => {}
    }
    if page.limit != usize::MAX {
        structured["appliedLimit"] = json!(page.limit);
    }
    if page.offset > 0 {
        structured["appliedOffset"] = json!(page.offset);
    }
    structured
}

fn build_matcher(input: &Input) -> Result<RegexMatcher, ToolError> {
    let mut builder = RegexMatcherBuilder::new();
    builder
        .case_insensitive(input.ignore_case.unwrap_or(false))
        .multi_line(true);
    if input.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(&input.pattern).map_err(|error| {
        let hint = if input.pattern.contains("\\n") && !input.multiline {
            " (to match across lines, set multiline to true)"
        } else {
            ""
        };
        ToolError::InvalidInput(format!("invalid regular expression: {error}{hint}"))
    })
}

/// Searches one file; `None` when nothing matched or the file is binary or unreadable.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &Path,
    mode: OutputMode,
    numbers: bool,
    modified: impl FnOnce() -> Option<SystemTime>,
) -> Option<Found> {
    match mode {
        OutputMode::FilesWithMatches => {
            let mut sink = FirstMatch::default();
            searcher.search_path(matcher, path, &mut sink).ok()?;
            (sink.matched && !sink.binary).then(|| Found::File(modified()))
        }
        OutputMode::Count => {
            let mut sink = Counter::default();
            searcher.search_path(matcher, path, &mut sink).ok()?;
            (sink.count > 0 && !sink.binary).then_some(Found::Count(sink.count))
        }
        OutputMode::Content => {
            let mut sink = Lines {
                path: path.display().to_string(),
                numbers,
                text: String::new(),
                binary: false,
            };
            searcher.search_path(matcher, path, &mut sink).ok()?;
            (!sink.text.is_empty() && !sink.binary).then_some(Found::Lines(sink.text))
        }
    }
}

/// Stops at the first match.
#[derive(Default)]
struct FirstMatch {
    matched: bool,
    binary: bool,
}

impl Sink for FirstMatch {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, _: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.matched = true;
        Ok(false)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// Counts matching lines.
#[derive(Default)]
struct Counter {
    count: u64,
    binary: bool,
}

impl Sink for Counter {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += found.lines().count() as u64;
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// Formats matching and context lines as ripgrep does without headings.
struct Lines {
    path: String,
    numbers: bool,
    text: String,
    binary: bool,
}

impl Lines {
    fn push(&mut self, number: Option<u64>, separator: char, line: &[u8]) {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = String::from_utf8_lossy(line);
        let line = truncate_line(&line, MAX_COLUMNS);
        self.text.push_str(&self.path);
        self.text.push(separator);
        if let (true, Some(number)) = (self.numbers, number) {
            self.text.push_str(&number.to_string());
            self.text.push(separator);
        }
        self.text.push_str(&line);
        self.text.push('\n');
    }
}

impl Sink for Lines {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let mut number = found.line_number();
        for line in found.lines() {
            self.push(number, ':', line);
            number = number.map(|n| n + 1);
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        self.push(context.line_number(), '-', context.bytes());
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        self.text.push_str("--\n");
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[derive(Clone, Copy)]
struct Page {
    offset: usize,
    limit: usize,
}

impl Page {
    /// The entries of this page, and a note when entries remain.
    fn apply<T>(&self, entries: &[T], noun: &str) -> (std::ops::Range<usize>, Option<String>) {
        let start = self.offset.min(entries.len());
        let end = start.saturating_add(self.limit).min(entries.len());
        let note = (end < entries.len()).then(|| {
            format!(
                "[Showing {noun} {}-{end} of {}. Pass offset={end} for more, or narrow the search.]",
                start + 1,
                entries.len()
            )
        });
        (start..end, note)
    }
}

fn render_files(results: &mut [(PathBuf, Found)], page: Page) -> String {
    if results.is_empty() {
        return "No files found".to_owned();
    }
    let modified = |found: &Found| match found {
        Found::File(time) => *time,
        _ => None,
    };
    results.sort_unstable_by(|(a_path, a), (b_path, b)| {
        modified(b)
            .cmp(&modified(a))
            .then_with(|| a_path.cmp(b_path))
    });
    let (range, note) = page.apply(results, "files");
    let total = results.len();
    let mut text = format!("Found {total} file{}", if total == 1 { "" } else { "s" });
    for (path, _) in &results[range] {
        text.push('\n');
        text.push_str(&path.display().to_string());
    }
    if let Some(note) = note {
        text.push_str("\n\n");
        text.push_str(&note);
    }
    text
}

fn render_counts(results: &mut [(PathBuf, Found)], page: Page) -> String {
    if results.is_empty() {
        return "No matches found".to_owned();
    }
    results.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
    let count = |found: &Found| match found {
        Found::Count(count) => *count,
        _ => 0,
    };
    let total: u64 = results.iter().map(|(_, found)| count(found)).sum();
    let (range, note) = page.apply(results, "files");
    let mut lines: Vec<String> = results[range]
        .iter()
        .map(|(path, found)| format!("{}:{}", path.display(), count(found)))
        .collect();
    lines.push(String::new());
    lines.push(format!(
        "Found {total} matching line{} in {} file{}.",
        if total == 1 { "" } else { "s" },
        results.len(),
        if results.len() == 1 { "" } else { "s" }
    ));
    if let Some(note) = note {
        lines.push(note);
    }
    lines.join("\n")
}

fn render_content(results: &mut [(PathBuf, Found)], page: Page, with_context: bool) -> String {
    results.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
    let mut lines: Vec<&str> = Vec::new();
    for (index, (_, found)) in results.iter().enumerate() {
        if let Found::Lines(text) = found {
            if with_context && index > 0 {
                lines.push("--");
            }
            lines.extend(text.lines());
        }
    }
    if lines.is_empty() {
        return "No matches found".to_owned();
    }
    let (range, note) = page.apply(&lines, "lines");
    let mut text = lines[range].join("\n");
    if let Some(note) = note {
        text.push_str("\n\n");
        text.push_str(&note);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_split_outside_braces() {
        assert_eq!(split_globs("*.{ts,tsx}"), vec!["*.{ts,tsx}"]);
        assert_eq!(split_globs("*.ts, *.tsx"), vec!["*.ts", "*.tsx"]);
        assert_eq!(split_globs("*.ts *.tsx"), vec!["*.ts", "*.tsx"]);
        assert_eq!(split_globs("!vendor/** *.go"), vec!["!vendor/**", "*.go"]);
    }

    #[test]
    fn glob_filters() {
        let root = Path::new("/w");
        let check = |globs: &str, path: &str, expected: bool| {
            let filter = GlobFilter::new(globs).unwrap_or_else(|_| panic!("{globs}"));
            assert_eq!(
                filter.admits(root, Path::new(path)),
                expected,
                "{globs} on {path}"
            );
        };
        check("*.rs", "/w/a.rs", true);
        check("*.rs", "/w/deep/er/a.rs", true);
        check("*.rs", "/w/a.md", false);
        check("*.{ts,tsx}", "/w/src/a.tsx", true);
        check("src/**/*.rs", "/w/src/x/a.rs", true);
        check("src/**/*.rs", "/w/lib/src/a.rs", false);
        check("/src/*.rs", "/w/src/a.rs", true);
        check("!vendor/**", "/w/vendor/a.rs", false);
        check("!vendor/**", "/w/src/a.rs", true);
        check("*.rs !*_test.rs", "/w/a_test.rs", false);
        check("*.rs !*_test.rs", "/w/a.rs", true);
    }

    #[test]
    fn pages() {
        let entries = [1, 2, 3, 4, 5];
        let (range, note) = Page {
            offset: 0,
            limit: 2,
        }
        .apply(&entries, "lines");
        assert_eq!(range, 0..2);
        assert_eq!(
            note.as_deref(),
            Some("[Showing lines 1-2 of 5. Pass offset=2 for more, or narrow the search.]")
        );
        let (range, note) = Page {
            offset: 4,
            limit: 9,
        }
        .apply(&entries, "lines");
        assert_eq!(range, 4..5);
        assert!(note.is_none());
        let (range, _) = Page {
            offset: 9,
            limit: 9,
        }
        .apply(&entries, "lines");
        assert_eq!(range, 5..5);
    }
}
