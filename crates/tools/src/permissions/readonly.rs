//! The allow-list of shell commands known to only read.
//!
//! A command is read-only when its name is one of `ls`, `cat`, `head`, `tail`, `wc`, `pwd`,
//! `echo`, `grep` (`egrep`, `fgrep`), `rg` (without `--pre`), `find` (without `-exec`,
//! `-execdir`, `-ok`, `-okdir`, `-delete`, `-fprint*`, `-fls`), `file` (without `-C`),
//! `stat`, `du`, `which`, `tree` (without `-o`), `diff`, `true`, `cd` (it changes no file;
//! the gate still checks that its directory is inside the workspace), or `git` directly
//! followed by
//! `status`, `diff`, `log`, `show`, `ls-files`, `rev-parse` or `blame` (without `--output`).
//! The command name must be static (not `$CMD`). Redirections and chaining are judged by the
//! callers, per part.
//!
//! The list is short on purpose: every entry is a promise that the command changes nothing,
//! whatever its arguments.

use super::shell::{Part, Word};

/// Whether `words` (a command without keywords and assignments) only reads.
pub(crate) fn is_read_only_command(words: &[Word]) -> bool {
    let Some((first, args)) = words.split_first() else {
        return false;
    };
    if first.dynamic || first.glob {
        return false;
    }
    match first.text.as_str() {
        "ls" | "cat" | "head" | "tail" | "wc" | "pwd" | "echo" | "grep" | "egrep" | "fgrep"
        | "stat" | "du" | "which" | "diff" | "true" | "cd" => true,
        "rg" => !has_option(args, &["--pre"]),
        "file" => !has_option(args, &["-C", "--compile"]),
        "tree" => !has_option(args, &["-o"]),
        "find" => !args.iter().any(|arg| {
            matches!(
                arg.text.as_str(),
                "-exec" | "-execdir" | "-ok" | "-okdir" | "-delete" | "-fls"
            ) || arg.text.starts_with("-fprint")
        }),
        "git" => match args.split_first() {
            Some((subcommand, rest)) => {
                !subcommand.dynamic
                    && matches!(
                        subcommand.text.as_str(),
                        "status" | "diff" | "log" | "show" | "ls-files" | "rev-parse" | "blame"
                    )
                    && !has_option(rest, &["--output"])
            }
            None => false,
        },
        _ => false,
    }
}

/// Whether `part` only reads: a read-only command without redirections that write files.
pub(crate) fn is_read_only_part(part: &Part) -> bool {
    if part.redirects.iter().any(|redirect| redirect.writes_file()) {
        return false;
    }
    part.carrier || is_read_only_command(&part.words)
}

/// Whether one of `args` is one of `options`, alone, as `--option=value`, or (for a short
/// option) with its value attached (`-ofile`).
fn has_option(args: &[Word], options: &[&str]) -> bool {
    args.iter().any(|arg| {
        options.iter().any(|option| {
            let text = arg.text.as_str();
            text == *option
                || text
                    .strip_prefix(option)
                    .is_some_and(|rest| rest.starts_with('=') || option.len() == 2)
        })
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::shell::analyze;
    use super::*;

    fn check(line: &str, expected: bool) {
        let analysis = analyze(line).unwrap();
        let read_only = analysis.parts.iter().all(is_read_only_part);
        assert_eq!(read_only, expected, "{line:?}");
    }

    #[test]
    fn the_allow_list() {
        for line in [
            "ls -la",
            "cat README.md",
            "head -n 5 a",
            "tail -f log",
            "wc -l a",
            "pwd",
            "echo hi",
            "grep -rn foo src",
            "rg foo",
            "find . -name '*.rs'",
            "file a",
            "stat a",
            "du -sh .",
            "which cargo",
            "tree src",
            "diff a b",
            "git status",
            "git diff HEAD~1",
            "git log --oneline -5",
            "git show HEAD",
            "git ls-files",
            "git rev-parse HEAD",
            "git blame src/lib.rs",
            "ls 2>/dev/null",
            "ls && pwd",
            "cat a | grep b",
            "bash -c 'ls'",
            "cd sub && ls",
        ] {
            check(line, true);
        }
    }

    #[test]
    fn everything_else() {
        for line in [
            "rm x",
            "ls > out",
            "echo hi >> out",
            "cat a | sh",
            "git push",
            "git -C x status",
            "git diff --output=patch",
            "git log --output patch",
            "rg --pre ./script foo",
            "find . -delete",
            "find . -exec rm {} \\;",
            "find . -fprint out",
            "tree -o out",
            "file -C -m magic",
            "$CMD",
            "sort -o x y",
            "ls; rm x",
            "> x",
            "bash -c 'rm x'",
        ] {
            check(line, false);
        }
    }
}
