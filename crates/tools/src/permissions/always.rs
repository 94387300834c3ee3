//! What "always" grants when the user is asked about a call, as Claude Code offers it: for
//! Write and Edit, every edit in the workspace for the rest of the session (the acceptEdits
//! switch); for Bash, the command's prefix (`Bash(npm test:*)`), which still runs in the
//! workspace-write sandbox; for any other tool (an MCP tool), the tool. A grant lasts for the
//! session; keeping it for later sessions is the front end's offer, saved as
//! [`Always::rule`] in a settings file.
//!
//! Nothing is offered for what "always" must not cover: a command asked to run outside the
//! sandbox (`dangerouslyDisableSandbox`, always asked), a call an ask rule names (the rule
//! would ask again whatever was granted), a command whose prefix would grant arbitrary code
//! (`bash -c`, `eval`, a computed command name: only the exact command is offered, when it
//! reads back exactly; for an interpreter, the script is part of the prefix,
//! `Bash(python3 setup.py:*)`, never `Bash(python3:*)`, which would allow `python3 -c`),
//! a rule for every command (an empty program name), and anything in plan mode.

use std::fmt;
use std::sync::{Arc, PoisonError};

use serde_json::Value;

use super::rules::Rule;
use super::shell::{self, Part};
use super::{DISABLE_SANDBOX_FIELD, PermissionGate, PermissionMode, RuleKind, match_forms};
use crate::session::Shared;

/// What "always" would grant for one call ([`crate::PermissionRequest::always`]), and the way
/// to grant it ([`Always::grant`]).
#[derive(Clone)]
pub struct Always {
    grant: Grant,
    rule: String,
    shared: Arc<Shared>,
}

/// The session-wide effect of an [`Always`].
#[derive(Clone, Debug)]
enum Grant {
    /// The session's mode becomes acceptEdits.
    AcceptEdits,
    /// The rule allows calls for the rest of the session.
    Rule(Rule),
}

impl fmt::Debug for Always {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Always")
            .field("grant", &self.grant)
            .field("rule", &self.rule)
            .finish_non_exhaustive()
    }
}

impl Always {
    /// The allow rule that keeps this for later sessions, as a settings file writes it:
    /// `Edit` (every edit: Write too), `Bash(npm test:*)`, `mcp__github__create_issue`.
    pub fn rule(&self) -> &str {
        &self.rule
    }

    /// The mode it switches the session to (acceptEdits), when that is what it grants
    /// rather than a rule.
    pub fn mode(&self) -> Option<PermissionMode> {
        matches!(self.grant, Grant::AcceptEdits).then_some(PermissionMode::AcceptEdits)
    }

    /// What it grants, for the question: "acceptEdits mode: file edits, and commands writing
    /// the workspace in the sandbox" (what that mode means here),
    /// "`Bash(npm test:*)` commands, in the sandbox" (or "unsandboxed" without a sandbox),
    /// "the tool mcp__github__create_issue".
    pub fn describe(&self) -> String {
        match &self.grant {
            Grant::AcceptEdits => {
                "acceptEdits mode: file edits, and commands writing the workspace in the sandbox"
                    .to_owned()
            }
            Grant::Rule(_) if self.rule.starts_with("Bash(") => {
                if self.shared.sandbox.is_active() {
                    format!("`{}` commands, in the sandbox", self.rule)
                } else {
                    format!(
                        "`{}` commands, unsandboxed (there is no sandbox)",
                        self.rule
                    )
                }
            }
            Grant::Rule(_) if self.rule.starts_with("WebFetch(domain:") => {
                let host = self.rule["WebFetch(domain:".len()..].trim_end_matches(')');
                format!("fetches from {host}")
            }
            Grant::Rule(_) => format!("the tool {}", self.rule),
        }
    }

    /// Grants it for the rest of the session: switches the mode to acceptEdits (from
    /// default), or adds the rule to the session's allow rules. Deny and ask rules still
    /// come first.
    pub fn grant(&self) {
        match &self.grant {
            Grant::AcceptEdits => {
                if self.shared.mode.get() == PermissionMode::Default {
                    self.shared.mode.set(PermissionMode::AcceptEdits);
                }
            }
            Grant::Rule(rule) => {
                let mut rules = self
                    .shared
                    .session_allow
                    .write()
                    .unwrap_or_else(PoisonError::into_inner);
                if !rules.iter().any(|(known, _)| *known == self.rule) {
                    rules.push((self.rule.clone(), rule.clone()));
                }
            }
        }
    }
}

impl PermissionGate {
    /// What "always" would grant for a call of `tool` with `input` asked about now (see the
    /// module docs); `None` when nothing may be offered. The gate puts it in every
    /// [`crate::PermissionRequest`]; a front end asking by other means may call it.
    pub fn always_for(&self, tool: &str, input: &Value) -> Option<Always> {
        if self.shared.mode.get() == PermissionMode::Plan
            || matches!(
                tool,
                crate::plan::EXIT_PLAN_MODE
                    | crate::plan::ENTER_PLAN_MODE
                    | crate::ask::ASK_USER_QUESTION
            )
        {
            return None;
        }
        let (grant, rule) = match tool {
            "Write" | "Edit" | "NotebookEdit" => (Grant::AcceptEdits, "Edit".to_owned()),
            "Bash" => {
                let outside =
                    input.get(DISABLE_SANDBOX_FIELD).and_then(Value::as_bool) == Some(true);
                if outside && self.shared.sandbox.is_active() {
                    return None;
                }
                let command = input.get("command").and_then(Value::as_str)?;
                let rule = self.bash_always(command)?;
                let parsed = self.parse(&rule)?;
                // Never a rule for every command, however it came to be written.
                if parsed.matches_tool("Bash") {
                    return None;
                }
                (Grant::Rule(parsed), rule)
            }
            "Read" | "Glob" | "Grep" => return None,
            super::WEB_FETCH => {
                let url = input.get("url").and_then(Value::as_str)?;
                let host = crate::web::FetchUrl::parse(url).ok()?.host;
                let rule = format!("WebFetch(domain:{host})");
                if self
                    .rule_list(RuleKind::Ask)
                    .iter()
                    .any(|asked| asked.matches_tool(tool) || asked.matches_host(&host))
                {
                    return None;
                }
                (Grant::Rule(self.parse(&rule)?), rule)
            }
            name => {
                if self
                    .rule_list(RuleKind::Ask)
                    .iter()
                    .any(|rule| rule.matches_tool(name))
                {
                    return None;
                }
                (Grant::Rule(self.parse(name)?), name.to_owned())
            }
        };
        Some(Always {
            grant,
            rule,
            shared: Arc::clone(&self.shared),
        })
    }

    /// Adds `rule` (an allow rule as a settings file writes it) to the session's allow rules,
    /// as an "always" answer does (Claude Code's `addRules` permission update for the
    /// session). Deny and ask rules still come first.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidRule`] when `rule` does not parse.
    pub fn allow_for_session(&self, rule: &str) -> Result<(), crate::Error> {
        let base = crate::paths::real_path(&self.shared.workspace.cwd)?;
        let parsed = Rule::parse(rule, &base)?;
        let mut rules = self
            .shared
            .session_allow
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if !rules.iter().any(|(known, _)| known == rule) {
            rules.push((rule.to_owned(), parsed));
        }
        Ok(())
    }

    /// Sets the shell lines every model command of the session runs first, in its own
    /// shell and sandbox (Claude Code's `CLAUDE_ENV_FILE`: the `export` lines SessionStart
    /// hooks write there); empty for none. Commands the user types are not given them.
    pub fn set_command_prelude(&self, prelude: &str) {
        *self
            .shared
            .prelude
            .write()
            .unwrap_or_else(PoisonError::into_inner) = prelude.to_owned();
    }

    /// The rules granted "always" this session, as written (`Bash(npm test:*)`), oldest
    /// first.
    pub fn session_rules(&self) -> Vec<String> {
        self.shared
            .session_allow
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(text, _)| text.clone())
            .collect()
    }

    fn parse(&self, rule: &str) -> Option<Rule> {
        let base = crate::paths::real_path(&self.shared.workspace.cwd).ok()?;
        Rule::parse(rule, &base).ok()
    }

    /// The Bash rule "always" grants for `command`: the prefix of its first part no rule
    /// allows, or the exact command where a prefix would grant arbitrary code; `None` when
    /// an ask rule names a part, or nothing fits.
    fn bash_always(&self, command: &str) -> Option<String> {
        let analysis = shell::analyze(command).ok()?;
        let asked = analysis.parts.iter().any(|part| {
            let forms = match_forms(part, true);
            self.rule_list(RuleKind::Ask)
                .iter()
                .any(|rule| rule.matches_command(&forms, true))
        });
        if asked {
            return None;
        }
        let part = analysis
            .parts
            .iter()
            .find(|part| self.part_unallowed(part).is_some())?;
        if grants_any_code(part) {
            return exact_rule(command);
        }
        let words = shell::strip_wrappers(&part.words, false);
        let first = words.first()?;
        if shell::is_interpreter(&first.text) {
            // `python3:*` would allow `python3 -c ANY`: the script (or the module) is part of
            // the prefix.
            return match words.get(1) {
                Some(flag) if flag.text == "-m" => super::rule_example(part),
                Some(script)
                    if !script.dynamic
                        && !script.text.starts_with('-')
                        && super::plain_word(&script.text)
                        && super::plain_word(&first.text) =>
                {
                    Some(format!("Bash({} {}:*)", first.text, script.text))
                }
                _ => exact_rule(command),
            };
        }
        super::rule_example(part)
    }
}

/// Whether a prefix rule for `part` would allow arbitrary code: a shell or interpreter
/// running code it is given, code evaluated at run time, a computed command name, or a
/// command behind a wrapper (`env`, `sudo`, `xargs`).
fn grants_any_code(part: &Part) -> bool {
    shell::runs_unseen_code(part)
        || shell::evaluates_code(part)
        || super::name_is_dynamic(part)
        || shell::strip_wrappers(&part.words, true).len() != part.words.len()
        || part.words.first().is_some_and(|word| {
            matches!(
                word.text.as_str(),
                "sh" | "bash" | "zsh" | "dash" | "fish" | "eval" | "exec" | "source" | "."
            )
        })
}

/// `Bash(command)`, when the command reads back as exactly itself in a rule (plain words: no
/// quote, `$`, backquote, glob or parenthesis, one line).
fn exact_rule(command: &str) -> Option<String> {
    let command = command.trim();
    let plain = !command.is_empty()
        && !command.contains(['\n', '\r', '\\', '*', '(', ')', '"', '\'', '$', '`'])
        && !command.ends_with(":*");
    plain.then(|| format!("Bash({command})"))
}
