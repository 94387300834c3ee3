//! The command-line flags the Agent SDKs pass that `agent` accepts without acting on them:
//! an SDK program must not die at start because its CLI lacks one of Claude Code's
//! features; the flags are named in the `init` message instead.

use std::ffi::OsString;

/// The flags the SDKs (TypeScript 0.3.197 to 0.3.337, Python 0.2.110 to 0.2.190) may pass
/// that are not acted on, each with how many values follow it: `One`, `None`, or `Many`
/// (values up to the next flag, as `--channels a b`).
const ACCEPTED: &[(&str, Values)] = &[
    ("--thinking-display", Values::One),
    ("--include-hook-events", Values::None),
    ("--replay-user-messages", Values::None),
    ("--debug", Values::None),
    ("--debug-file", Values::One),
    ("--debug-to-stderr", Values::None),
    ("--betas", Values::One),
    ("--agent", Values::One),
    ("--plugin-dir", Values::One),
    ("--plugin-dir-no-mcp", Values::One),
    ("--resume-session-at", Values::One),
    ("--task-budget", Values::One),
    ("--managed-settings", Values::One),
    ("--channels", Values::Many),
    ("--session-mirror", Values::None),
    ("--no-session-persistence", Values::None),
    ("--system-prompt-file", Values::One),
    // The newest SDKs' (TypeScript 0.3.337).
    ("--await-initialize", Values::None),
    ("--initialize-fields", Values::One),
    ("--managed-settings-in-initialize", Values::None),
    ("--permission-prompts", Values::One),
    ("--project-config-root", Values::One),
    ("--resume-drops-turn", Values::One),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Values {
    None,
    One,
    Many,
}

/// Takes the flags the SDKs pass that are not acted on (with their values, `--flag value`
/// or `--flag=value`) out of `args` when they drive a session over the control protocol
/// (`--input-format stream-json` among them); returns the rest, and the flags taken, each
/// once, as written.
/// Any other command line is returned as it is: there an unknown flag stays an error.
pub fn take_accepted_flags(args: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
    let controlled = args
        .windows(2)
        .any(|pair| pair[0] == "--input-format" && pair[1] == "stream-json")
        || args.iter().any(|arg| arg == "--input-format=stream-json");
    if !controlled {
        return (args, Vec::new());
    }
    let mut kept = Vec::with_capacity(args.len());
    let mut taken: Vec<String> = Vec::new();
    let mut rest = args.into_iter().peekable();
    while let Some(arg) = rest.next() {
        // Only what comes before a `--` is a flag.
        if arg == "--" {
            kept.push(arg);
            kept.extend(rest.by_ref());
            break;
        }
        let text = arg.to_string_lossy();
        let (name, inline) = match text.split_once('=') {
            Some((name, _)) => (name.to_owned(), true),
            None => (text.clone().into_owned(), false),
        };
        let Some((flag, values)) = ACCEPTED.iter().find(|(flag, _)| *flag == name) else {
            kept.push(arg);
            continue;
        };
        if !taken.iter().any(|seen| seen == flag) {
            taken.push((*flag).to_owned());
        }
        match (values, inline) {
            (Values::None, _) | (Values::One, true) => {}
            (Values::One, false) => {
                rest.next();
            }
            (Values::Many, _) => {
                while rest
                    .peek()
                    .is_some_and(|next| !next.to_string_lossy().starts_with("--"))
                {
                    rest.next();
                }
            }
        }
    }
    (kept, taken)
}

/// Extended thinking as the SDKs ask for it: `--thinking disabled` or
/// `--max-thinking-tokens 0` off, any other `--thinking` or a positive budget on; `None`
/// when neither flag is given.
pub fn thinking_flag(thinking: Option<&str>, max_tokens: Option<u64>) -> Option<bool> {
    match (thinking, max_tokens) {
        (Some("disabled"), _) | (_, Some(0)) => Some(false),
        (Some(_), _) | (_, Some(_)) => Some(true),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_sdks_flags_are_taken_with_their_values_only_under_the_control_protocol() {
        let line = args(&[
            "agent",
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
            "--thinking-display",
            "summarized",
            "--betas=x,y",
            "--channels",
            "a",
            "b",
            "--model",
            "m",
            "--include-hook-events",
            "--debug-file",
            "/tmp/d",
            "--",
            "--tools",
        ]);
        let (kept, taken) = take_accepted_flags(line);
        assert_eq!(
            kept,
            args(&[
                "agent",
                "--output-format",
                "stream-json",
                "--verbose",
                "--input-format",
                "stream-json",
                "--model",
                "m",
                "--",
                "--tools",
            ])
        );
        assert_eq!(
            taken,
            [
                "--thinking-display",
                "--betas",
                "--channels",
                "--include-hook-events",
                "--debug-file"
            ]
        );
        // Without stream-json input nothing is taken: an unknown flag stays an error.
        let plain = args(&["agent", "-p", "hi", "--betas", "x"]);
        assert_eq!(take_accepted_flags(plain.clone()), (plain, Vec::new()));
    }
}
