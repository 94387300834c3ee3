//! Settings files in Claude Code's schema: `~/.config/agent/settings.json`, then the
//! project's `.agent/settings.json` and `.agent/settings.local.json`; later files win for
//! single values, lists are concatenated; flags win over all of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Deserialize;

/// `permissions` in settings.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionSettings {
    /// Rules allowed without asking.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Rules always asked.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Rules refused.
    #[serde(default)]
    pub deny: Vec<String>,
    /// `default`, `acceptEdits`, `bypassPermissions` or `plan`.
    #[serde(default)]
    pub default_mode: Option<String>,
    /// Extra directories.
    #[serde(default)]
    pub additional_directories: Vec<PathBuf>,
}

/// One hook. `agent` runs `command` hooks; other types (Claude Code's `prompt`) are accepted
/// with a warning so a shared settings file stays valid.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct HookCommand {
    /// `command` (or another type, not run).
    #[serde(rename = "type")]
    pub kind: String,
    /// Run with `bash -c`; required for `command` hooks.
    #[serde(default)]
    pub command: Option<String>,
    /// Seconds before the hook is abandoned (default 60, at least 1).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// The other fields of other hook types, kept and ignored.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// Hooks for the tools a matcher names. As in Claude Code, the matcher is a regular
/// expression over the whole tool name (`Edit|Write`, `Notebook.*`, or a plain name, which
/// matches only itself); `*`, an empty string or no matcher matches every tool.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HookMatcher {
    /// The pattern.
    #[serde(default)]
    pub matcher: Option<String>,
    /// The commands.
    pub hooks: Vec<HookCommand>,
}

impl HookMatcher {
    /// The matcher as an anchored regular expression; `None` matches everything.
    ///
    /// # Errors
    ///
    /// The regex syntax error of a pattern that does not compile.
    pub fn pattern(&self) -> Result<Option<regex::Regex>, regex::Error> {
        match self.matcher.as_deref().map(str::trim) {
            None | Some("") | Some("*") => Ok(None),
            Some(pattern) => regex::Regex::new(&format!("^(?:{pattern})$")).map(Some),
        }
    }

    /// Whether this matcher applies to `tool` (a pattern that does not compile matches
    /// nothing; [`parse`] refuses such files).
    pub fn matches(&self, tool: &str) -> bool {
        match self.pattern() {
            Ok(None) => true,
            Ok(Some(pattern)) => pattern.is_match(tool),
            Err(_) => false,
        }
    }
}

/// `sandbox` in settings. Claude Code's own keys (`enabled`, `excludedCommands`, a
/// `network` object, ...) are accepted and ignored.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSettings {
    /// `auto` (default) or `off`.
    #[serde(default)]
    pub mode: Option<String>,
    /// `true` lets workspace-write commands use the network (Claude Code's object form is
    /// ignored: no network).
    #[serde(default)]
    pub network: Option<serde_json::Value>,
    /// Other keys, kept and ignored.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl SandboxSettings {
    /// Whether `network` is `true`.
    pub fn network(&self) -> bool {
        matches!(self.network, Some(serde_json::Value::Bool(true)))
    }
}

/// The settings that `agent` uses.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Permission rules and mode.
    #[serde(default)]
    pub permissions: PermissionSettings,
    /// Hooks by event (`Stop`, `PreToolUse`, `PostToolUse`, ...).
    #[serde(default)]
    pub hooks: BTreeMap<String, Vec<HookMatcher>>,
    /// Default model.
    #[serde(default)]
    pub model: Option<String>,
    /// Environment for tools and hooks.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The OS sandbox of Bash commands. Honoured from the user's settings only: a project's
    /// settings cannot loosen it.
    #[serde(default)]
    pub sandbox: Option<SandboxSettings>,
    /// Keys of Claude Code's schema this tool does not use are accepted and ignored.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
    /// The files merged into these settings, lowest precedence first, each with what it said
    /// (for errors that name the file a value came from).
    #[serde(skip)]
    pub layers: Vec<(PathBuf, Settings)>,
}

/// Hook events Claude Code defines. `agent` runs PreToolUse, PostToolUse and Stop; the
/// others are accepted (a settings file shared with Claude Code stays valid) with a warning.
pub const HOOK_EVENTS: [&str; 10] = [
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "Notification",
    "UserPromptSubmit",
    "SubagentStop",
    "PreCompact",
    "SessionStart",
    "SessionEnd",
    "PermissionRequest",
];

/// The hook events `agent` runs.
pub const RUN_HOOK_EVENTS: [&str; 3] = ["PreToolUse", "PostToolUse", "Stop"];

impl Settings {
    /// The file that set `permissions.defaultMode` last (the one in effect).
    pub fn default_mode_origin(&self) -> Option<&Path> {
        self.layers
            .iter()
            .rev()
            .find(|(_, layer)| layer.permissions.default_mode.is_some())
            .map(|(path, _)| path.as_path())
    }

    /// The file a permission rule came from.
    pub fn rule_origin(&self, rule: &str) -> Option<&Path> {
        self.layers
            .iter()
            .find(|(_, layer)| {
                let permissions = &layer.permissions;
                [&permissions.allow, &permissions.ask, &permissions.deny]
                    .iter()
                    .any(|rules| rules.iter().any(|written| written == rule))
            })
            .map(|(path, _)| path.as_path())
    }

    /// What is questionable but not wrong in these settings: hook events `agent` does not
    /// run, hooks that are not commands. One line each, naming the file.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for (path, layer) in &self.layers {
            for (event, matchers) in &layer.hooks {
                if !HOOK_EVENTS.contains(&event.as_str()) {
                    warnings.push(format!(
                        "{}: hooks.{event}: unknown hook event (known: {}); its hooks never run",
                        path.display(),
                        HOOK_EVENTS.join(", ")
                    ));
                } else if !RUN_HOOK_EVENTS.contains(&event.as_str()) {
                    warnings.push(format!(
                        "{}: hooks.{event}: agent does not run {event} hooks (only {})",
                        path.display(),
                        RUN_HOOK_EVENTS.join(", ")
                    ));
                }
                for hook in matchers.iter().flat_map(|matcher| &matcher.hooks) {
                    if hook.kind != "command" {
                        warnings.push(format!(
                            "{}: hooks.{event}: hook type {:?} is not run (only \"command\")",
                            path.display(),
                            hook.kind
                        ));
                    }
                }
            }
        }
        warnings
    }

    fn merge(&mut self, later: Settings) {
        self.permissions.allow.extend(later.permissions.allow);
        self.permissions.ask.extend(later.permissions.ask);
        self.permissions.deny.extend(later.permissions.deny);
        self.permissions
            .additional_directories
            .extend(later.permissions.additional_directories);
        if later.permissions.default_mode.is_some() {
            self.permissions.default_mode = later.permissions.default_mode;
        }
        for (event, matchers) in later.hooks {
            self.hooks.entry(event).or_default().extend(matchers);
        }
        if later.model.is_some() {
            self.model = later.model;
        }
        self.env.extend(later.env);
        // `sandbox` is read from the user's layer only (see `Settings::user_sandbox`).
    }

    /// The `sandbox` object of the user's own settings file (`~/.config/agent/settings.json`),
    /// with the project files that tried to set one (ignored: a repository cannot loosen the
    /// sandbox).
    pub fn user_sandbox(&self) -> (Option<&SandboxSettings>, Vec<&Path>) {
        let user = user_settings_file();
        let mut found = None;
        let mut ignored = Vec::new();
        for (path, layer) in &self.layers {
            match &layer.sandbox {
                Some(sandbox) if Some(path) == user.as_ref() => found = Some(sandbox),
                Some(_) => ignored.push(path.as_path()),
                None => {}
            }
        }
        (found, ignored)
    }
}

/// Parses one settings file.
///
/// # Errors
///
/// Naming the file, the line and column, and the field when the JSON or a field is wrong.
pub fn parse(path: &Path, text: &str) -> anyhow::Result<Settings> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let settings: Settings =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let field = error.path().to_string();
            let inner = error.inner();
            // serde_json's message ends with " at line L column C" for most errors; the
            // position is already in front, once is enough.
            let message = inner.to_string();
            let message = match message.rfind(" at line ") {
                Some(at) => message[..at].to_owned(),
                None => message,
            };
            let field = if field == "." || field.is_empty() {
                String::new()
            } else {
                format!("{field}: ")
            };
            anyhow::anyhow!(
                "{}:{}:{}: invalid settings: {field}{message}",
                path.display(),
                inner.line(),
                inner.column()
            )
        })?;
    // Trailing characters after the object are an error too.
    deserializer.end().map_err(|error| {
        anyhow::anyhow!(
            "{}:{}:{}: invalid settings: {error}",
            path.display(),
            error.line(),
            error.column()
        )
    })?;
    let invalid = |what: String| anyhow::anyhow!("{}: invalid settings: {what}", path.display());
    for (event, matchers) in &settings.hooks {
        for matcher in matchers {
            if let Err(error) = matcher.pattern() {
                return Err(invalid(format!(
                    "hooks.{event}: matcher {:?} is not a valid regular expression: {error}",
                    matcher.matcher.as_deref().unwrap_or_default()
                )));
            }
            for hook in &matcher.hooks {
                if hook.timeout == Some(0) {
                    return Err(invalid(format!(
                        "hooks.{event}: timeout must be at least 1 second (hook `{}`)",
                        hook.command.as_deref().unwrap_or_default()
                    )));
                }
                if hook.kind == "command"
                    && hook
                        .command
                        .as_deref()
                        .is_none_or(|command| command.trim().is_empty())
                {
                    return Err(invalid(format!(
                        "hooks.{event}: a hook of type \"command\" needs a non-empty \"command\""
                    )));
                }
            }
        }
    }
    for (key, value) in &settings.env {
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err(invalid(format!(
                "env: {key:?} is not a variable name (empty, or holds '=' or a NUL byte)"
            )));
        }
        if value.contains('\0') {
            return Err(invalid(format!("env.{key}: the value holds a NUL byte")));
        }
    }
    Ok(settings)
}

/// The user's own settings file, `~/.config/agent/settings.json`.
pub fn user_settings_file() -> Option<PathBuf> {
    dirs::config_dir().map(|config| config.join("agent").join("settings.json"))
}

/// The settings files that apply to `cwd`, lowest precedence first.
pub fn files(cwd: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    files.extend(user_settings_file());
    files.push(cwd.join(".agent").join("settings.json"));
    files.push(cwd.join(".agent").join("settings.local.json"));
    files
}

/// Loads and merges every settings file that exists.
///
/// # Errors
///
/// As [`parse`], or when a file exists but cannot be read.
pub fn load(cwd: &Path) -> anyhow::Result<Settings> {
    let mut settings = Settings::default();
    for path in files(cwd) {
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let layer = parse(&path, &text)?;
        settings.merge(layer.clone());
        settings.layers.push((path, layer));
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_settings_parse() {
        let text = r#"{
  "permissions": {"allow": ["Bash(git diff:*)"], "deny": ["Read(./secrets/**)"], "defaultMode": "acceptEdits"},
  "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./check.sh", "timeout": 30}]}],
            "PreToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "lint"}]}]},
  "model": "claude-opus-4-8",
  "includeCoAuthoredBy": false
}"#;
        let settings = parse(Path::new("s.json"), text).unwrap();
        assert_eq!(
            settings.permissions.default_mode.as_deref(),
            Some("acceptEdits")
        );
        assert_eq!(settings.hooks["Stop"][0].hooks[0].timeout, Some(30));
        assert!(settings.hooks["PreToolUse"][0].matches("Write"));
        assert!(!settings.hooks["PreToolUse"][0].matches("Read"));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let text = "{\n  \"permissions\": {\n    \"allow\": \"Bash\"\n  }\n}";
        let error = parse(Path::new("/p/.agent/settings.json"), text)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("/p/.agent/settings.json:3:"), "{error}");
        assert!(
            error.contains(
                "invalid settings: permissions.allow: invalid type: string \"Bash\", expected a sequence"
            ),
            "{error}"
        );
        let error = parse(Path::new("x.json"), r#"{"permissions": {"alow": []}}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `alow`"), "{error}");
        // The position once, in front.
        assert!(!error.contains(" at line "), "{error}");
    }

    #[test]
    fn matchers_are_anchored_regular_expressions() {
        let matcher = |pattern: Option<&str>| HookMatcher {
            matcher: pattern.map(str::to_owned),
            hooks: Vec::new(),
        };
        assert!(matcher(None).matches("Bash"));
        assert!(matcher(Some("*")).matches("Bash"));
        assert!(matcher(Some(".*")).matches("Bash"));
        assert!(matcher(Some("Bas.*")).matches("Bash"));
        assert!(matcher(Some("Edit|Write")).matches("Write"));
        assert!(!matcher(Some("Edit|Write")).matches("WriteMore"));
        assert!(
            !matcher(Some("Bash")).matches("BashOutput"),
            "a plain name matches itself only"
        );
        let error = parse(
            Path::new("/p/s.json"),
            r#"{"hooks": {"PreToolUse": [{"matcher": "Bash(", "hooks": []}]}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("/p/s.json: invalid settings: hooks.PreToolUse: matcher \"Bash(\" is not a valid regular expression"),
            "{error}"
        );
    }

    #[test]
    fn other_hook_types_are_kept_and_commands_are_required() {
        let settings = parse(
            Path::new("s.json"),
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "prompt", "prompt": "Is the work done?"}]}]}}"#,
        )
        .unwrap();
        assert_eq!(settings.hooks["Stop"][0].hooks[0].kind, "prompt");
        let error = parse(
            Path::new("s.json"),
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("needs a non-empty \"command\""), "{error}");
    }

    #[test]
    fn env_names_and_values_are_checked() {
        for (text, message) in [
            (r#"{"env": {"": "x"}}"#, "env: \"\" is not a variable name"),
            (
                r#"{"env": {"A=B": "x"}}"#,
                "env: \"A=B\" is not a variable name",
            ),
            (
                r#"{"env": {"A": "x\u0000y"}}"#,
                "env.A: the value holds a NUL byte",
            ),
        ] {
            let error = parse(Path::new("/s.json"), text).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("/s.json: invalid settings: {message}")),
                "{error}"
            );
        }
    }

    #[test]
    fn zero_hook_timeout_is_an_error_naming_the_file() {
        let text = r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}]}}"#;
        let error = parse(Path::new("/p/s.json"), text).unwrap_err().to_string();
        assert!(
            error
                .starts_with("/p/s.json: invalid settings: hooks.Stop: timeout must be at least 1"),
            "{error}"
        );
    }

    #[test]
    fn origins_and_warnings_name_the_file() {
        let user = parse(
            Path::new("/u.json"),
            r#"{"permissions": {"allow": ["Bash(ls:*)"], "defaultMode": "plan"}}"#,
        )
        .unwrap();
        let project = parse(
            Path::new("/p.json"),
            r#"{"permissions": {"deny": ["Bash(rm:*"], "defaultMode": "yolo"},
                "hooks": {"Stopp": [{"hooks": [{"type": "command", "command": "x"}]}],
                          "Notification": [{"hooks": [{"type": "prompt", "command": "y"}]}]}}"#,
        )
        .unwrap();
        let mut settings = Settings::default();
        for (path, layer) in [("/u.json", user), ("/p.json", project)] {
            settings.merge(layer.clone());
            settings.layers.push((PathBuf::from(path), layer));
        }
        assert_eq!(settings.default_mode_origin(), Some(Path::new("/p.json")));
        assert_eq!(
            settings.rule_origin("Bash(rm:*"),
            Some(Path::new("/p.json"))
        );
        assert_eq!(
            settings.rule_origin("Bash(ls:*)"),
            Some(Path::new("/u.json"))
        );
        assert_eq!(settings.rule_origin("Read"), None);
        let warnings = settings.warnings();
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].starts_with("/p.json: hooks.Notification: agent does not run"));
        assert!(warnings[1].starts_with("/p.json: hooks.Notification: hook type \"prompt\""));
        assert!(warnings[2].starts_with("/p.json: hooks.Stopp: unknown hook event"));
    }
}
