//! A quote-aware splitter for shell command lines, so permission rules see every command a
//! line would run.
//!
//! It is not a shell and never runs anything. [`analyze`] finds the simple commands of a line:
//!
//! - it splits outside quotes on `&&`, `||`, `;`, `|`, `|&`, `&` and newlines; single quotes,
//!   double quotes, `$'...'`, backslash escapes, line continuations and `#` comments are
//!   honoured, so `echo "x; y"` is one command;
//! - commands inside `$( )`, backticks, `<( )` / `>( )`, `( )` subshells, `${ }` and `$(( ))`
//!   are reported as commands of their own, and so are the scripts given to `bash -c` /
//!   `sh -c` (also behind `sudo`, `env`, ...), to `eval`, and to `find -exec`;
//! - leading keywords (`if`, `then`, `while`, `do`, `!`, `time`, `{`, ...), closing ones
//!   (`fi`, `done`, `}`), loop headers and leading `NAME=value` assignments are removed;
//!   here-document bodies are skipped (they are data).
//!
//! Whatever it does not understand is an error, never a guess: `case`, function definitions,
//! arrays, `;;`, unterminated quotes or substitutions, a command substitution inside an
//! unquoted here-document, nesting deeper than 32 levels. Callers turn errors into "ask".
//!
//! **Why hand-written.** Word splitters (`shlex`) do not see `;` or `&&`; the POSIX parser
//! crates either pull a large dependency tree or stop at the grammar (they do not look inside
//! `bash -c '...'`). The grammar needed here is small and every case is a test below.

use std::fmt;

/// Deepest nesting of substitutions, subshells and `bash -c` scripts before giving up.
const MAX_DEPTH: usize = 32;

/// Keywords that may precede a command and are not part of it.
const LEADING_KEYWORDS: [&str; 10] = [
    "if", "then", "else", "elif", "do", "while", "until", "!", "time", "{",
];

/// Keywords that close a compound command; nothing but redirections may follow them.
const CLOSING_KEYWORDS: [&str; 4] = ["fi", "done", "}", "esac"];

/// Keywords whose syntax this splitter does not follow.
const UNSUPPORTED_KEYWORDS: [&str; 4] = ["case", "function", "select", "coproc"];

/// Shells whose `-c` argument is a script to look into.
const SHELLS: [&str; 8] = ["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"];

/// One word of a command, after quote removal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Word {
    /// The text with quotes and escapes removed; expansions are kept as written (`$HOME`,
    /// `$(date)`).
    pub(crate) text: String,
    /// Holds an expansion only known at run time (`$x`, `${x}`, `$(...)`, backticks).
    pub(crate) dynamic: bool,
    /// Holds an unquoted glob character (`*`, `?`, `[`).
    pub(crate) glob: bool,
    /// Holds quoting or escaping.
    pub(crate) quoted: bool,
    /// Is a variable assignment (`NAME=value`, the name unquoted).
    pub(crate) assignment: bool,
}

impl Word {
    /// Whether this word is the unquoted, static keyword `keyword`.
    fn is_keyword(&self, keyword: &str) -> bool {
        !self.quoted && !self.dynamic && self.text == keyword
    }
}

/// What a redirection does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedirectKind {
    /// `<`, `<&file`: reads a file.
    Read,
    /// `>`, `>>`, `>|`, `&>`, `&>>`, `<>`, `>&file`: writes a file.
    Write,
    /// `>&2`, `2>&1`, `<&0`, `>&-`: copies or closes a descriptor.
    Duplicate,
    /// `<<`, `<<-`: a here-document.
    HereDoc,
    /// `<<<`: a here-string.
    HereString,
}

/// A redirection of a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Redirect {
    /// What it does.
    pub(crate) kind: RedirectKind,
    /// The file, descriptor or delimiter.
    pub(crate) target: Word,
}

impl Redirect {
    /// Whether this redirection writes a file other than `/dev/null`.
    pub(crate) fn writes_file(&self) -> bool {
        self.kind == RedirectKind::Write && self.target.text != "/dev/null"
    }
}

/// One simple command of a line, ready for permission matching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    /// The command's source text (trimmed), redirections included.
    pub(crate) raw: String,
    /// The command's words without leading keywords and assignments; empty for a command
    /// that is only redirections (`> file`).
    pub(crate) words: Vec<Word>,
    /// The command's redirections.
    pub(crate) redirects: Vec<Redirect>,
    /// Only carries other commands (`bash -c '...'`, `eval ...`), which are parts of their
    /// own: judged by deny and ask rules, never needs an allow rule itself.
    pub(crate) carrier: bool,
    /// Variables were assigned before the command (`GIT_EXTERNAL_DIFF=x git diff`): removed
    /// from `words` so deny rules see the command, but such a part is never covered by an
    /// allow rule on its words (the variables can change what the command runs).
    pub(crate) assignments: bool,
}

impl Part {
    /// The words joined by single spaces: the form rules match, whatever the quoting.
    pub(crate) fn joined(words: &[Word]) -> String {
        words
            .iter()
            .map(|word| word.text.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The simple commands of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Analysis {
    /// Every command the line runs, nested ones first.
    pub(crate) parts: Vec<Part>,
    /// The line is more than one plain command: operators, substitutions, subshells or
    /// scripts run by another command.
    pub(crate) compound: bool,
}

/// Why a line could not be analysed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// A quote, substitution or group is not closed.
    Unterminated(&'static str),
    /// Syntax this splitter does not follow.
    Unsupported(&'static str),
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unterminated(what) => write!(f, "unterminated {what}"),
            Self::Unsupported(what) => write!(f, "{what} is not supported by the command checker"),
            Self::TooDeep => write!(f, "nested more than {MAX_DEPTH} levels deep"),
        }
    }
}

/// Finds every simple command `line` would run (see the module docs).
///
/// # Errors
///
/// [`ParseError`] for anything the splitter does not understand.
pub(crate) fn analyze(line: &str) -> Result<Analysis, ParseError> {
    analyze_at(line, 0)
}

fn analyze_at(line: &str, depth: usize) -> Result<Analysis, ParseError> {
    if depth > MAX_DEPTH {
        return Err(ParseError::TooDeep);
    }
    let mut parser = Parser::new(line, depth);
    parser.list(false)?;
    let mut compound = parser.commands.len() != 1 || parser.nested;
    let mut parts = Vec::new();
    for command in parser.commands {
        let Some(part) = strip_keywords(command)? else {
            continue;
        };
        let inner = strip_wrappers(&part.words, true);
        let script = match shell_script(inner)? {
            Some(script) => Some(script),
            None => eval_script(inner)?,
        };
        if let Some(script) = script {
            compound = true;
            parts.extend(analyze_at(&script, depth + 1)?.parts);
            parts.push(Part {
                carrier: true,
                ..part
            });
            continue;
        }
        for clause in find_exec(inner)? {
            compound = true;
            parts.push(Part {
                raw: Part::joined(&clause),
                words: clause,
                redirects: Vec::new(),
                carrier: false,
                assignments: false,
            });
        }
        parts.push(part);
    }
    Ok(Analysis { parts, compound })
}

/// Removes keywords and assignments; `None` when nothing is left to judge.
fn strip_keywords(command: SimpleCommand) -> Result<Option<Part>, ParseError> {
    let SimpleCommand {
        raw,
        mut words,
        redirects,
    } = command;
    let mut skip = 0;
    while let Some(word) = words.get(skip) {
        if !LEADING_KEYWORDS
            .iter()
            .any(|keyword| word.is_keyword(keyword))
        {
            break;
        }
        skip += 1;
        if word.text == "time" {
            while words
                .get(skip)
                .is_some_and(|word| word.text.starts_with('-'))
            {
                skip += 1;
            }
        }
    }
    words.drain(..skip);
    if let Some(first) = words.first() {
        if CLOSING_KEYWORDS
            .iter()
            .any(|keyword| first.is_keyword(keyword))
        {
            if words.len() > 1 {
                return Err(ParseError::Unsupported("words after a closing keyword"));
            }
            words.clear();
        } else if first.is_keyword("for") {
            // A loop header runs nothing itself; its expansions were found by the parser.
            return Ok(None);
        }
    }
    let assignments = words.iter().take_while(|word| word.assignment).count();
    words.drain(..assignments);
    if words.is_empty() && !redirects.iter().any(Redirect::writes_file) {
        return Ok(None);
    }
    Ok(Some(Part {
        raw,
        words,
        redirects,
        carrier: false,
        assignments: assignments > 0,
    }))
}

/// The last path component of a command name (`/bin/rm` -> `rm`).
pub(crate) fn basename(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Index of the first word after `words[0]`'s options; `with_argument` lists the options that
/// take the next word as their argument.
fn skip_options(words: &[Word], with_argument: &[&str]) -> usize {
    let mut index = 1;
    while let Some(word) = words.get(index) {
        let text = word.text.as_str();
        if text == "--" {
            return index + 1;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        index += if with_argument.contains(&text) { 2 } else { 1 };
    }
    index.min(words.len())
}

/// Whether `part` runs code this splitter cannot see: a shell or `eval`/`source` that is not
/// a carrier of a static script (`sh` reading stdin, `bash script.sh`, `source x`), or an
/// interpreter given code on its command line or stdin (`python -c`, `perl -e`, `node -e`).
pub(crate) fn runs_unseen_code(part: &Part) -> bool {
    if part.carrier {
        return false;
    }
    // A wrapper given a command line as one string (`env -S "rm x"`, `flock f -c "rm x"`,
    // `su -c "rm x"`), wherever it stands among the wrappers.
    // `trap 'rm x' EXIT`: the handler is code.
    if part.words.first().is_some_and(|first| first.text == "trap") {
        return true;
    }
    let string_command = part.words.iter().enumerate().any(|(index, word)| {
        let flags: &[&str] = match basename(&word.text) {
            "env" => &["-S", "--split-string"],
            "flock" | "su" | "runuser" | "script" => &["-c", "--command"],
            _ => return false,
        };
        part.words[index + 1..].iter().any(|arg| {
            flags.iter().any(|flag| {
                let letter = flag.strip_prefix('-').filter(|letter| letter.len() == 1);
                arg.text == *flag
                    || arg.text.starts_with(&format!("{flag}="))
                    // `-qc`: short options run together.
                    || letter.is_some_and(|letter| {
                        arg.text.starts_with('-')
                            && !arg.text.starts_with("--")
                            && arg.text.contains(letter)
                    })
            })
        })
    });
    if string_command {
        return true;
    }
    let words = strip_wrappers(&part.words, true);
    let Some(first) = words.first() else {
        return false;
    };
    let name = basename(&first.text);
    SHELLS.contains(&name)
        || matches!(name, "eval" | "source" | "." | "exec")
        || (INTERPRETERS
            .iter()
            .any(|interpreter| name.starts_with(interpreter))
            && words
                .iter()
                .skip(1)
                .any(|word| matches!(word.text.as_str(), "-c" | "-e" | "-E" | "--eval" | "-")))
}

/// Whether `part` makes the shell evaluate text as code: prompt expansion (`${x@P}`),
/// arithmetic (`$((x))`, `$[x]`, `((x))`, `let`, `[[ x -eq 1 ]]`: an array subscript in the
/// value runs `$(...)`), or indirection (`${!x}`), whose result the splitter cannot know.
pub(crate) fn evaluates_code(part: &Part) -> bool {
    let raw = part.raw.as_str();
    ["@P", "$((", "$[", "${!", "(("]
        .iter()
        .any(|marker| raw.contains(marker))
        || braced_expansions(raw).any(|inner| !is_plain_parameter(inner))
        || part.words.first().is_some_and(|first| {
            matches!(
                first.text.as_str(),
                "let" | "[[" | "declare" | "typeset" | "read" | "printf" | "mapfile" | "readarray"
            ) && raw.contains('$')
        })
}

/// The insides of the `${...}` expansions of `raw` (unbalanced ones end at the text's end).
fn braced_expansions(raw: &str) -> impl Iterator<Item = &str> {
    raw.match_indices("${").map(move |(at, _)| {
        let inner = &raw[at + 2..];
        inner.find('}').map_or(inner, |end| &inner[..end])
    })
}

/// `NAME`, a positional parameter or a special one: no operator that could evaluate the
/// value as arithmetic (`${x:_}` offsets, `${x[_]}` subscripts) or as a prompt.
fn is_plain_parameter(inner: &str) -> bool {
    let name = inner
        .strip_prefix('#')
        .filter(|rest| !rest.is_empty())
        .unwrap_or(inner);
    !name.is_empty()
        && (name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || matches!(name, "@" | "*" | "?" | "$" | "!" | "-" | "#"))
}

/// Commands that run the rest of their arguments as a command, for deny and ask rules.
pub(crate) fn is_wrapper(name: &str) -> bool {
    matches!(
        name,
        "time"
            | "nohup"
            | "nice"
            | "stdbuf"
            | "timeout"
            | "sudo"
            | "doas"
            | "env"
            | "command"
            | "builtin"
            | "exec"
            | "xargs"
            | "setsid"
            | "ionice"
            | "unshare"
            | "flock"
            | "chrt"
            | "taskset"
            | "chroot"
            | "setpriv"
            | "prlimit"
            | "watch"
            | "strace"
            | "ltrace"
            | "nsenter"
            | "runuser"
            | "firejail"
            | "systemd-run"
            | "catchsegv"
            | "valgrind"
            | "busybox"
            | "parallel"
    )
}

/// Interpreters that take code as an argument (`python3 -c`, `perl -e`, `node -e`, ...).
const INTERPRETERS: [&str; 6] = ["python", "perl", "ruby", "node", "php", "lua"];

/// Whether the program `name` (a path or a bare name) is an interpreter that also runs code
/// given on its command line (`python3`, `perl`, `node`, ...).
pub(crate) fn is_interpreter(name: &str) -> bool {
    let name = basename(name);
    INTERPRETERS
        .iter()
        .any(|interpreter| name.starts_with(interpreter))
        || matches!(
            name,
            "deno" | "bun" | "Rscript" | "julia" | "tclsh" | "awk" | "gawk"
        )
}

/// Strips wrappers that run their arguments as a command: `time`, `nice`, `nohup`,
/// `timeout`, `stdbuf` always (they do not change what runs); with `all`, also `sudo`,
/// `doas`, `env`, `command`, `builtin`, `exec` and `xargs` (used to find commands for deny
/// and ask rules, never to allow).
pub(crate) fn strip_wrappers(words: &[Word], all: bool) -> &[Word] {
    let mut rest = words;
    loop {
        let Some(first) = rest.first() else {
            return rest;
        };
        if first.dynamic {
            return rest;
        }
        let skip = match basename(&first.text) {
            "time" | "nohup" => skip_options(rest, &[]),
            "nice" => skip_options(rest, &["-n"]),
            "stdbuf" => skip_options(rest, &["-i", "-o", "-e"]),
            "timeout" => {
                let after = skip_options(rest, &["-s", "-k"]);
                (after + 1).min(rest.len())
            }
            "sudo" | "doas" if all => skip_options(
                rest,
                &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"],
            ),
            "command" | "builtin" | "setsid" if all => skip_options(rest, &[]),
            "ionice" if all => skip_options(rest, &["-c", "-n", "--class", "--classdata"]),
            "unshare" if all => skip_options(rest, &[]),
            // WRAPPER [options] ONE-ARGUMENT COMMAND...
            "flock" | "chrt" | "taskset" | "chroot" if all => {
                let after = skip_options(rest, &["-w", "-E", "--timeout", "--conflict-exit-code"]);
                (after + 1).min(rest.len())
            }
            "exec" if all => skip_options(rest, &["-a"]),
            "xargs" if all => skip_options(
                rest,
                &[
                    "-I",
                    "-L",
                    "-n",
                    "-P",
                    "-s",
                    "-d",
                    "-E",
                    "-a",
                    "--delimiter",
                ],
            ),
            "env" if all => {
                let mut index = skip_options(rest, &["-u", "-C", "-S", "--unset", "--chdir"]);
                while rest.get(index).is_some_and(|word| word.text.contains('=')) {
                    index += 1;
                }
                index
            }
            _ => return rest,
        };
        if skip == 0 || skip >= rest.len() {
            // A wrapper with nothing to run (`time` alone): judge it as it is.
            return rest;
        }
        rest = &rest[skip..];
    }
}

/// The script of `bash -c SCRIPT` (and the other shells), if `words` runs one.
fn shell_script(words: &[Word]) -> Result<Option<String>, ParseError> {
    let Some(first) = words.first() else {
        return Ok(None);
    };
    if first.dynamic || !SHELLS.contains(&basename(&first.text)) {
        return Ok(None);
    }
    let mut has_c = false;
    let mut index = 1;
    while let Some(word) = words.get(index) {
        let text = word.text.as_str();
        index += 1;
        if text == "--" {
            continue;
        }
        if let Some(flags) = text.strip_prefix('-').filter(|_| !text.starts_with("--")) {
            has_c |= flags.contains('c');
            if flags.ends_with('o') || flags.ends_with('O') {
                index += 1; // `-o errexit` takes an argument
            }
            continue;
        }
        if text.starts_with("--") || text.starts_with('+') {
            if text == "+o" || text == "+O" {
                index += 1;
            }
            continue;
        }
        if !has_c {
            return Ok(None); // `bash script.sh`: a file we cannot see, judged as `bash`
        }
        if word.dynamic {
            return Err(ParseError::Unsupported(
                "a `-c` script computed at run time",
            ));
        }
        return Ok(Some(word.text.clone()));
    }
    if has_c {
        return Err(ParseError::Unsupported("`-c` without a script"));
    }
    Ok(None)
}

/// The script `eval` runs: its arguments joined by spaces.
fn eval_script(words: &[Word]) -> Result<Option<String>, ParseError> {
    match words.first() {
        Some(first) if first.is_keyword("eval") => {
            if words.iter().any(|word| word.dynamic) {
                return Err(ParseError::Unsupported(
                    "`eval` of a string computed at run time",
                ));
            }
            Ok(Some(Part::joined(&words[1..])))
        }
        _ => Ok(None),
    }
}

/// The commands `find ... -exec CMD ;` runs.
fn find_exec(words: &[Word]) -> Result<Vec<Vec<Word>>, ParseError> {
    let mut clauses = Vec::new();
    if words
        .first()
        .is_none_or(|first| first.dynamic || basename(&first.text) != "find")
    {
        return Ok(clauses);
    }
    let mut rest = words.iter();
    while let Some(word) = rest.next() {
        if !matches!(word.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let mut clause = Vec::new();
        let mut closed = false;
        for word in rest.by_ref() {
            if word.text == ";" || word.text == "+" {
                closed = true;
                break;
            }
            clause.push(word.clone());
        }
        if !closed || clause.is_empty() {
            return Err(ParseError::Unsupported(
                "`find -exec` without a command and `;`",
            ));
        }
        clauses.push(clause);
    }
    Ok(clauses)
}

/// A simple command as parsed, before keywords and assignments are removed.
#[derive(Debug)]
struct SimpleCommand {
    raw: String,
    words: Vec<Word>,
    redirects: Vec<Redirect>,
}

/// A here-document whose body starts after the current line.
#[derive(Debug)]
struct PendingHereDoc {
    delimiter: String,
    strip_tabs: bool,
    quoted: bool,
}

/// Builds one word.
#[derive(Default)]
struct WordBuf {
    bytes: Vec<u8>,
    word: Word,
    seen_equals: bool,
}

impl WordBuf {
    fn push(&mut self, byte: u8) {
        self.bytes.push(byte);
    }

    fn expansion(&mut self, source: &str) {
        self.bytes.extend_from_slice(source.as_bytes());
        self.word.dynamic = true;
    }

    fn finish(mut self) -> Word {
        // Only whole UTF-8 sequences and ASCII bytes are ever pushed, so this is lossless.
        self.word.text = String::from_utf8_lossy(&self.bytes).into_owned();
        self.word
    }
}

fn is_name(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_suffix(b"+").unwrap_or(bytes);
    match bytes.split_first() {
        Some((first, rest)) => {
            (first.is_ascii_alphabetic() || *first == b'_')
                && rest.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        }
        None => false,
    }
}

/// A recursive-descent reader over one line (one function per grammar position).
struct Parser<'s> {
    src: &'s str,
    pos: usize,
    depth: usize,
    commands: Vec<SimpleCommand>,
    /// A substitution, subshell or group was entered.
    nested: bool,
    heredocs: Vec<PendingHereDoc>,
}

impl<'s> Parser<'s> {
    fn new(src: &'s str, depth: usize) -> Self {
        Self {
            src,
            pos: 0,
            depth,
            commands: Vec::new(),
            nested: false,
            heredocs: Vec::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + offset).copied()
    }

    fn advance(&mut self, count: usize) {
        self.pos = (self.pos + count).min(self.src.len());
    }

    fn slice(&self, start: usize, end: usize) -> &'s str {
        self.src.get(start..end).unwrap_or_default()
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        self.nested = true;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => self.advance(1),
                Some(b'\\') if self.peek_at(1) == Some(b'\n') => self.advance(2),
                _ => return,
            }
        }
    }

    fn skip_comment(&mut self) {
        while let Some(byte) = self.peek() {
            if byte == b'\n' {
                return;
            }
            self.advance(1);
        }
    }

    /// A list of commands separated by operators; with `close`, ends at the `)` that closes
    /// the enclosing `$(`, `(`, `<(` or `>(`, and consumes it.
    fn list(&mut self, close: bool) -> Result<(), ParseError> {
        loop {
            self.skip_blanks();
            let Some(byte) = self.peek() else {
                return if close {
                    Err(ParseError::Unterminated("`(`, `$(`, `<(` or `>(`"))
                } else {
                    Ok(())
                };
            };
            match byte {
                b'#' => self.skip_comment(),
                b'\n' => {
                    self.advance(1);
                    self.here_documents()?;
                }
                b';' => {
                    if self.peek_at(1) == Some(b';') {
                        return Err(ParseError::Unsupported("`;;`"));
                    }
                    self.advance(1);
                }
                b'&' if self.peek_at(1) != Some(b'>') => {
                    let double = self.peek_at(1) == Some(b'&');
                    self.advance(if double { 2 } else { 1 });
                }
                b'|' => {
                    let double = matches!(self.peek_at(1), Some(b'|' | b'&'));
                    self.advance(if double { 2 } else { 1 });
                }
                b')' => {
                    if close {
                        self.advance(1);
                        return Ok(());
                    }
                    return Err(ParseError::Unsupported("an unmatched `)`"));
                }
                b'(' => {
                    self.advance(1);
                    self.subshell()?;
                }
                _ => self.command()?,
            }
        }
    }

    /// After `(`: the commands up to the matching `)`.
    fn subshell(&mut self) -> Result<(), ParseError> {
        self.enter()?;
        self.list(true)?;
        self.leave();
        Ok(())
    }

    /// One simple command: words and redirections up to an operator.
    fn command(&mut self) -> Result<(), ParseError> {
        let start = self.pos;
        let mut words: Vec<Word> = Vec::new();
        let mut redirects = Vec::new();
        loop {
            self.skip_blanks();
            let Some(byte) = self.peek() else {
                break;
            };
            match byte {
                b'\n' | b';' | b'|' | b')' => break,
                b'&' if self.peek_at(1) != Some(b'>') => break,
                b'#' => {
                    self.skip_comment();
                    break;
                }
                b'(' => {
                    // `if ( ... )`, `! ( ... )`: a subshell after keywords; anything else
                    // (`f()`, `a=(1 2)`, `((...))` after a word) is not followed.
                    let after_keywords = words.iter().all(|word| {
                        LEADING_KEYWORDS
                            .iter()
                            .any(|keyword| word.is_keyword(keyword))
                    });
                    if !after_keywords {
                        return Err(ParseError::Unsupported(
                            "`(` after a word (function definitions, arrays)",
                        ));
                    }
                    self.advance(1);
                    self.subshell()?;
                    continue;
                }
                _ => {}
            }
            if let Some(redirect) = self.redirect()? {
                redirects.push(redirect);
                continue;
            }
            let word = self.word()?;
            if words.is_empty()
                && UNSUPPORTED_KEYWORDS
                    .iter()
                    .any(|keyword| word.is_keyword(keyword))
            {
                return Err(ParseError::Unsupported(
                    "`case`, `function`, `select` and `coproc`",
                ));
            }
            words.push(word);
        }
        if !words.is_empty() || !redirects.is_empty() {
            let raw = self.slice(start, self.pos).trim().to_owned();
            self.commands.push(SimpleCommand {
                raw,
                words,
                redirects,
            });
        }
        Ok(())
    }

    /// A redirection at the current position, if there is one.
    fn redirect(&mut self) -> Result<Option<Redirect>, ParseError> {
        let bytes = self.src.as_bytes();
        let mut at = self.pos;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        let has_fd = at > self.pos;
        let rest = bytes.get(at..).unwrap_or_default();
        let (kind, length, strip_tabs) = if rest.starts_with(b"<<<") {
            (RedirectKind::HereString, 3, false)
        } else if rest.starts_with(b"<<-") {
            (RedirectKind::HereDoc, 3, true)
        } else if rest.starts_with(b"<<") {
            (RedirectKind::HereDoc, 2, false)
        } else if rest.starts_with(b"<(") || rest.starts_with(b">(") {
            if has_fd {
                return Err(ParseError::Unsupported("a descriptor before `<(` or `>(`"));
            }
            return Ok(None); // process substitution: a word
        } else if rest.starts_with(b"<>") {
            (RedirectKind::Write, 2, false)
        } else if rest.starts_with(b"<&") {
            (RedirectKind::Duplicate, 2, false)
        } else if rest.starts_with(b"<") {
            (RedirectKind::Read, 1, false)
        } else if rest.starts_with(b">>") || rest.starts_with(b">|") {
            (RedirectKind::Write, 2, false)
        } else if rest.starts_with(b">&") {
            (RedirectKind::Duplicate, 2, false)
        } else if rest.starts_with(b">") {
            (RedirectKind::Write, 1, false)
        } else if !has_fd && rest.starts_with(b"&>>") {
            (RedirectKind::Write, 3, false)
        } else if !has_fd && rest.starts_with(b"&>") {
            (RedirectKind::Write, 2, false)
        } else {
            return Ok(None);
        };
        let opener = rest.first().copied();
        self.pos = at;
        self.advance(length);
        self.skip_blanks();
        let starts_substitution = self.peek_at(1) == Some(b'(');
        match self.peek() {
            None | Some(b'\n' | b';' | b'&' | b'|' | b')' | b'(') => {
                return Err(ParseError::Unsupported("a redirection without a target"));
            }
            Some(b'<' | b'>') if !starts_substitution => {
                return Err(ParseError::Unsupported("a redirection without a target"));
            }
            _ => {}
        }
        let target = self.word()?;
        let kind = match kind {
            RedirectKind::Duplicate
                if !(target.text == "-" || target.text.bytes().all(|b| b.is_ascii_digit())) =>
            {
                // `>&file` is `&>file`; `<&file` reads it.
                if opener == Some(b'<') {
                    RedirectKind::Read
                } else {
                    RedirectKind::Write
                }
            }
            RedirectKind::HereDoc => {
                self.heredocs.push(PendingHereDoc {
                    delimiter: target.text.clone(),
                    strip_tabs,
                    quoted: target.quoted,
                });
                RedirectKind::HereDoc
            }
            other => other,
        };
        Ok(Some(Redirect { kind, target }))
    }

    /// Skips the bodies of the here-documents opened on the line just ended.
    fn here_documents(&mut self) -> Result<(), ParseError> {
        for doc in std::mem::take(&mut self.heredocs) {
            while self.pos < self.src.len() {
                let line_end = self
                    .src
                    .get(self.pos..)
                    .unwrap_or_default()
                    .find('\n')
                    .map_or(self.src.len(), |offset| self.pos + offset);
                let line = self.slice(self.pos, line_end);
                self.pos = (line_end + 1).min(self.src.len());
                let candidate = if doc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if candidate == doc.delimiter {
                    break;
                }
                if !doc.quoted && (line.contains("$(") || line.contains('`')) {
                    return Err(ParseError::Unsupported(
                        "a command substitution inside a here-document",
                    ));
                }
            }
        }
        Ok(())
    }

    /// One word, up to a blank or an operator.
    fn word(&mut self) -> Result<Word, ParseError> {
        let start = self.pos;
        let mut word = WordBuf::default();
        while let Some(byte) = self.peek() {
            match byte {
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b')' => break,
                b'<' | b'>' if self.pos == start && self.peek_at(1) == Some(b'(') => {
                    self.advance(2);
                    self.subshell()?;
                    word.expansion(self.slice(start, self.pos));
                }
                b'<' | b'>' => break,
                b'(' => {
                    return Err(ParseError::Unsupported(
                        "`(` inside a word (arrays, extended globs, function definitions)",
                    ));
                }
                b'\'' => self.single_quoted(&mut word)?,
                b'"' => self.double_quoted(&mut word)?,
                b'\\' => {
                    match self.peek_at(1) {
                        Some(b'\n') => {}
                        Some(next) => {
                            word.push(next);
                            word.word.quoted = true;
                        }
                        None => word.push(b'\\'),
                    }
                    self.advance(2);
                }
                b'$' => self.dollar(&mut word, false)?,
                b'`' => self.backtick(&mut word)?,
                b'*' | b'?' | b'[' => {
                    word.word.glob = true;
                    word.push(byte);
                    self.advance(1);
                }
                b'=' => {
                    if !word.seen_equals {
                        word.seen_equals = true;
                        word.word.assignment =
                            !word.word.quoted && !word.word.dynamic && is_name(&word.bytes);
                    }
                    word.push(byte);
                    self.advance(1);
                }
                _ => {
                    word.push(byte);
                    self.advance(1);
                }
            }
        }
        Ok(word.finish())
    }

    /// At `'`: up to the next `'`, literally.
    fn single_quoted(&mut self, word: &mut WordBuf) -> Result<(), ParseError> {
        self.advance(1);
        let rest = self.src.get(self.pos..).unwrap_or_default();
        let Some(length) = rest.find('\'') else {
            return Err(ParseError::Unterminated("single quote"));
        };
        word.bytes
            .extend_from_slice(self.slice(self.pos, self.pos + length).as_bytes());
        word.word.quoted = true;
        self.advance(length + 1);
        Ok(())
    }

    /// At `"`: up to the closing `"`, with `\`, `$` and backticks active.
    fn double_quoted(&mut self, word: &mut WordBuf) -> Result<(), ParseError> {
        self.advance(1);
        word.word.quoted = true;
        loop {
            let Some(byte) = self.peek() else {
                return Err(ParseError::Unterminated("double quote"));
            };
            match byte {
                b'"' => {
                    self.advance(1);
                    return Ok(());
                }
                b'\\' => match self.peek_at(1) {
                    Some(b'\n') => self.advance(2),
                    Some(next @ (b'$' | b'`' | b'"' | b'\\')) => {
                        word.push(next);
                        self.advance(2);
                    }
                    _ => {
                        word.push(b'\\');
                        self.advance(1);
                    }
                },
                b'$' => self.dollar(word, true)?,
                b'`' => self.backtick(word)?,
                _ => {
                    word.push(byte);
                    self.advance(1);
                }
            }
        }
    }

    /// At `$`: a substitution, expansion, ANSI-C string or a literal `$`.
    fn dollar(&mut self, word: &mut WordBuf, in_double_quotes: bool) -> Result<(), ParseError> {
        let start = self.pos;
        match self.peek_at(1) {
            Some(b'(') if self.peek_at(2) == Some(b'(') => {
                self.advance(3);
                self.enter()?;
                self.arithmetic()?;
                self.leave();
            }
            Some(b'(') => {
                self.advance(2);
                self.subshell()?;
            }
            Some(b'{') => {
                self.advance(2);
                self.enter()?;
                self.parameter()?;
                self.leave();
            }
            Some(b'\'') if !in_double_quotes => {
                self.advance(1);
                return self.ansi_c(word);
            }
            Some(b'"') if !in_double_quotes => {
                self.advance(1);
                return self.double_quoted(word);
            }
            Some(next) if next.is_ascii_alphabetic() || next == b'_' => {
                self.advance(2);
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    self.advance(1);
                }
            }
            Some(next) if next.is_ascii_digit() || b"@*#?$!-".contains(&next) => self.advance(2),
            _ => {
                word.push(b'$');
                self.advance(1);
                return Ok(());
            }
        }
        word.expansion(self.slice(start, self.pos));
        Ok(())
    }

    /// After `$'`: an ANSI-C quoted string up to an unescaped `'`.
    fn ansi_c(&mut self, word: &mut WordBuf) -> Result<(), ParseError> {
        self.advance(1);
        word.word.quoted = true;
        loop {
            match self.peek() {
                None => return Err(ParseError::Unterminated("`$'` string")),
                Some(b'\'') => {
                    self.advance(1);
                    return Ok(());
                }
                Some(b'\\') => {
                    let start = self.pos;
                    self.advance(2);
                    word.bytes
                        .extend_from_slice(self.slice(start, self.pos).as_bytes());
                }
                Some(byte) => {
                    word.push(byte);
                    self.advance(1);
                }
            }
        }
    }

    /// After `$((`: up to the matching `))`, looking into substitutions.
    fn arithmetic(&mut self) -> Result<(), ParseError> {
        let mut depth = 0usize;
        let mut scratch = WordBuf::default();
        loop {
            match self.peek() {
                None => return Err(ParseError::Unterminated("`$((`")),
                Some(b'(') => {
                    depth += 1;
                    self.advance(1);
                }
                Some(b')') if depth == 0 => {
                    if self.peek_at(1) == Some(b')') {
                        self.advance(2);
                        return Ok(());
                    }
                    return Err(ParseError::Unsupported("`$((` closed by a single `)`"));
                }
                Some(b')') => {
                    depth -= 1;
                    self.advance(1);
                }
                Some(b'$') => self.dollar(&mut scratch, false)?,
                Some(b'`') => self.backtick(&mut scratch)?,
                Some(b'\'') => self.single_quoted(&mut scratch)?,
                Some(b'"') => self.double_quoted(&mut scratch)?,
                Some(_) => self.advance(1),
            }
        }
    }

    /// After `${`: up to the matching `}`, looking into substitutions.
    fn parameter(&mut self) -> Result<(), ParseError> {
        let mut scratch = WordBuf::default();
        loop {
            match self.peek() {
                None => return Err(ParseError::Unterminated("`${`")),
                Some(b'}') => {
                    self.advance(1);
                    return Ok(());
                }
                Some(b'\\') => self.advance(2),
                Some(b'\'') => self.single_quoted(&mut scratch)?,
                Some(b'"') => self.double_quoted(&mut scratch)?,
                Some(b'$') => self.dollar(&mut scratch, false)?,
                Some(b'`') => self.backtick(&mut scratch)?,
                Some(_) => self.advance(1),
            }
        }
    }

    /// At a backtick: the command up to the closing backtick, parsed on its own.
    fn backtick(&mut self, word: &mut WordBuf) -> Result<(), ParseError> {
        let start = self.pos;
        self.advance(1);
        let mut inner = Vec::new();
        loop {
            match self.peek() {
                None => return Err(ParseError::Unterminated("backtick")),
                Some(b'`') => {
                    self.advance(1);
                    break;
                }
                Some(b'\\') => match self.peek_at(1) {
                    Some(next @ (b'`' | b'\\' | b'$')) => {
                        inner.push(next);
                        self.advance(2);
                    }
                    _ => {
                        inner.push(b'\\');
                        self.advance(1);
                    }
                },
                Some(byte) => {
                    inner.push(byte);
                    self.advance(1);
                }
            }
        }
        let inner = String::from_utf8_lossy(&inner).into_owned();
        self.enter()?;
        let mut sub = Parser::new(&inner, self.depth);
        sub.list(false)?;
        self.commands.append(&mut sub.commands);
        self.leave();
        word.expansion(self.slice(start, self.pos));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// The parts of `line` as `(raw, joined words)`; carriers are marked with a leading `^`.
    fn parts(line: &str) -> Vec<String> {
        analyze(line)
            .unwrap_or_else(|error| panic!("{line:?} did not parse: {error}"))
            .parts
            .iter()
            .map(|part| {
                let words = Part::joined(&part.words);
                if part.carrier {
                    format!("^{words}")
                } else {
                    words
                }
            })
            .collect()
    }

    fn check(line: &str, expected: &[&str]) {
        assert_eq!(parts(line), expected, "splitting {line:?}");
    }

    fn check_error(line: &str) {
        assert!(analyze(line).is_err(), "{line:?} should not parse");
    }

    #[test]
    fn splits_on_every_operator_outside_quotes() {
        for line in [
            "git status && rm -rf x",
            "git status&&rm -rf x",
            "git status || rm -rf x",
            "git status; rm -rf x",
            "git status;rm -rf x",
            "git status | rm -rf x",
            "git status|rm -rf x",
            "git status |& rm -rf x",
            "git status & rm -rf x",
            "git status&rm -rf x",
            "git status\nrm -rf x",
            "git status \\\n && rm -rf x",
        ] {
            check(line, &["git status", "rm -rf x"]);
            assert!(analyze(line).unwrap().compound);
        }
        check("a; b; c && d | e", &["a", "b", "c", "d", "e"]);
        check(
            "sleep 30 & sleep 30; echo done",
            &["sleep 30", "sleep 30", "echo done"],
        );
        check("ls &", &["ls"]);
        check("ls;", &["ls"]);
    }

    #[test]
    fn quoted_operators_are_text() {
        check("git status \"a && b\"", &["git status a && b"]);
        check("echo \"x; y\"", &["echo x; y"]);
        check("echo 'a | b' \"c & d\"", &["echo a | b c & d"]);
        check("echo a\\;b a\\&\\&b", &["echo a;b a&&b"]);
        check("echo \"a \\\" ; b\"", &["echo a \" ; b"]);
        check("echo $'it\\'s ; fine'", &["echo it\\'s ; fine"]);
        check("echo \"line1\nline2\"", &["echo line1\nline2"]);
        check("echo a#b", &["echo a#b"]);
        let analysis = analyze("git status \"a && b\"").unwrap();
        assert!(!analysis.compound);
        assert_eq!(analysis.parts[0].raw, "git status \"a && b\"");
    }

    #[test]
    fn quote_removal_exposes_the_real_command() {
        check("'rm' -rf x", &["rm -rf x"]);
        check("\\rm x", &["rm x"]);
        check("r\"\"m x", &["rm x"]);
        check("\"git\" status", &["git status"]);
    }

    #[test]
    fn substitutions_are_commands_of_their_own() {
        check("git status $(rm x)", &["rm x", "git status $(rm x)"]);
        check("git status `rm x`", &["rm x", "git status `rm x`"]);
        check("echo \"$(rm x)\"", &["rm x", "echo $(rm x)"]);
        check("echo \"`rm x`\"", &["rm x", "echo `rm x`"]);
        check(
            "echo $(echo $(rm x))",
            &["rm x", "echo $(rm x)", "echo $(echo $(rm x))"],
        );
        check(
            "echo `echo \\`rm x\\``",
            &["rm x", "echo `rm x`", "echo `echo \\`rm x\\``"],
        );
        check(
            "diff <(rm a) >(rm b)",
            &["rm a", "rm b", "diff <(rm a) >(rm b)"],
        );
        check("echo ${x:-$(rm x)}", &["rm x", "echo ${x:-$(rm x)}"]);
        check(
            "echo $(( 1 + $(rm x) ))",
            &["rm x", "echo $(( 1 + $(rm x) ))"],
        );
        check("x=$(rm y)", &["rm y"]);
        check(
            "echo $(ls | rm x; pwd)",
            &["ls", "rm x", "pwd", "echo $(ls | rm x; pwd)"],
        );
        assert!(analyze("echo $(pwd)").unwrap().compound);
    }

    #[test]
    fn shell_scripts_eval_and_find_exec_are_looked_into() {
        check("bash -c 'rm x'", &["rm x", "^bash -c rm x"]);
        check(
            "sh -c \"git status && rm x\"",
            &["git status", "rm x", "^sh -c git status && rm x"],
        );
        check("bash -lc 'rm x'", &["rm x", "^bash -lc rm x"]);
        check("/bin/bash -e -c 'rm x'", &["rm x", "^/bin/bash -e -c rm x"]);
        check(
            "bash -o errexit -c 'rm x' name",
            &["rm x", "^bash -o errexit -c rm x name"],
        );
        check("sudo bash -c 'rm x'", &["rm x", "^sudo bash -c rm x"]);
        check(
            "bash -c 'bash -c \"rm x\"'",
            &["rm x", "^bash -c rm x", "^bash -c bash -c \"rm x\""],
        );
        check("eval 'rm x'", &["rm x", "^eval rm x"]);
        check(
            "find . -name '*.tmp' -exec rm {} \\;",
            &["rm {}", "find . -name *.tmp -exec rm {} ;"],
        );
        check(
            "find . -execdir rm {} +",
            &["rm {}", "find . -execdir rm {} +"],
        );
        check("bash script.sh", &["bash script.sh"]);
        check("git status | sh", &["git status", "sh"]);
        check_error("bash -c \"$SCRIPT\"");
        check_error("bash -c");
        check_error("eval \"$cmd\"");
        check_error("find . -exec rm {}");
    }

    #[test]
    fn keywords_groups_and_assignments_are_removed() {
        check("(cd sub && rm x)", &["cd sub", "rm x"]);
        check("{ rm x; }", &["rm x"]);
        check("if true; then rm x; else ls; fi", &["true", "rm x", "ls"]);
        check("if ( cd a ); then b; fi", &["cd a", "b"]);
        check("for f in *.txt; do rm \"$f\"; done", &["rm $f"]);
        check("for f in $(ls); do echo $f; done", &["ls", "echo $f"]);
        check(
            "while read line; do echo $line; done < list",
            &["read line", "echo $line"],
        );
        check("! grep -q x file", &["grep -q x file"]);
        check("time -p make", &["make"]);
        check("FOO=bar BAZ='q q' rm x", &["rm x"]);
        check("X=1", &[]);
        check("a='x=1' b", &["b"]);
        let words = &analyze("FOO=bar rm x").unwrap().parts[0].words;
        assert!(!words[0].assignment);
        assert!(analyze("'A=1' x").unwrap().parts[0].words[0].text == "A=1");
    }

    #[test]
    fn redirections_are_recorded_apart_from_words() {
        let analysis = analyze("echo hi > out.txt 2>&1").unwrap();
        let part = &analysis.parts[0];
        assert_eq!(Part::joined(&part.words), "echo hi");
        assert_eq!(part.redirects.len(), 2);
        assert_eq!(part.redirects[0].kind, RedirectKind::Write);
        assert_eq!(part.redirects[0].target.text, "out.txt");
        assert_eq!(part.redirects[1].kind, RedirectKind::Duplicate);
        assert!(part.redirects[0].writes_file());
        assert!(!part.redirects[1].writes_file());
        for (line, kind, target) in [
            ("cmd &> log", RedirectKind::Write, "log"),
            ("cmd &>> log", RedirectKind::Write, "log"),
            ("cmd >> log", RedirectKind::Write, "log"),
            ("cmd >| log", RedirectKind::Write, "log"),
            ("cmd >&log", RedirectKind::Write, "log"),
            ("cmd >&2", RedirectKind::Duplicate, "2"),
            ("cmd 2>&-", RedirectKind::Duplicate, "-"),
            ("cmd < in", RedirectKind::Read, "in"),
            ("cmd 2>/dev/null", RedirectKind::Write, "/dev/null"),
            ("cmd <<< word", RedirectKind::HereString, "word"),
            ("cmd>out", RedirectKind::Write, "out"),
        ] {
            let analysis = analyze(line).unwrap();
            let part = &analysis.parts[0];
            assert_eq!(Part::joined(&part.words), "cmd", "{line}");
            assert_eq!(part.redirects[0].kind, kind, "{line}");
            assert_eq!(part.redirects[0].target.text, target, "{line}");
        }
        check("echo 2 > x", &["echo 2"]);
        check("> empty.txt", &[""]);
        check("cat < <(rm x)", &["rm x", "cat"]);
    }

    #[test]
    fn here_documents_are_data() {
        check("cat <<EOF\nrm x\nEOF\necho done", &["cat", "echo done"]);
        check("cat <<'EOF' > f\n$(rm x)\nEOF", &["cat"]);
        check("cat <<-EOF\n\trm x\n\tEOF\nls", &["cat", "ls"]);
        check("cat << \"END\"\n`rm x`\nEND", &["cat"]);
        check_error("cat <<EOF\n$(rm x)\nEOF");
    }

    #[test]
    fn comments_and_expansions() {
        check("ls # && rm x", &["ls"]);
        check("# only a comment", &[]);
        check("ls\n# rm x\npwd", &["ls", "pwd"]);
        let analysis = analyze("$CMD x").unwrap();
        assert!(analysis.parts[0].words[0].dynamic);
        let analysis = analyze("echo $HOME *.rs").unwrap();
        assert!(!analysis.parts[0].words[0].dynamic);
        assert!(analysis.parts[0].words[1].dynamic);
        assert!(analysis.parts[0].words[2].glob);
        check("echo $ a", &["echo $ a"]);
    }

    #[test]
    fn what_is_not_understood_is_an_error() {
        for line in [
            "echo 'unterminated",
            "echo \"unterminated",
            "echo $(ls",
            "echo `ls",
            "echo ${x",
            "echo $((1 + 2)",
            "(ls",
            "ls )",
            "case x in a) rm x;; esac",
            "x=1;; y",
            "f() { rm x; }",
            "function f { rm x; }",
            "a=(1 2)",
            "echo >",
            "echo > ;",
            "ls @(a|b)",
            "done rm x",
        ] {
            check_error(line);
        }
        let deep = format!("{}x{}", "$(".repeat(40), ")".repeat(40));
        assert_eq!(analyze(&deep), Err(ParseError::TooDeep));
        let deep = format!("{}x{}", "`".repeat(2), "`".repeat(2));
        let _ = analyze(&deep);
    }

    #[test]
    fn wrappers_are_stripped_for_matching() {
        let words = |line: &str| analyze(line).unwrap().parts[0].words.clone();
        let strip = |line: &str, all: bool| Part::joined(strip_wrappers(&words(line), all));
        assert_eq!(strip("timeout 10 npm test", false), "npm test");
        assert_eq!(strip("timeout -s KILL 10 npm test", false), "npm test");
        assert_eq!(strip("nice -n 5 nohup make", false), "make");
        assert_eq!(strip("sudo rm x", false), "sudo rm x");
        assert_eq!(strip("sudo -u root rm x", true), "rm x");
        assert_eq!(strip("env -i A=1 B=2 rm x", true), "rm x");
        assert_eq!(strip("xargs -n 1 rm", true), "rm");
        assert_eq!(strip("command rm x", true), "rm x");
        assert_eq!(strip("exec rm x", true), "rm x");
    }

    #[test]
    fn never_panics_on_arbitrary_input() {
        // Every prefix of a line full of syntax: errors are fine, panics are not.
        let line =
            "a && 'b' \"c $(d `e` ${f:-g}) $((1+(2)))\" <(h) >&2 <<E\n$i\nE\n$'j\\'k' é\\ü #l";
        for end in 0..=line.len() {
            if let Some(prefix) = line.get(..end) {
                let _ = analyze(prefix);
            }
        }
    }
}
