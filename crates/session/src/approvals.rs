//! Where an "always" answer to a permission question is kept for later sessions.
//!
//! The permission gate decides what "always" grants for the rest of the session
//! ([`tools::Always`]: every edit, a command prefix such as `Bash(npm test:*)`, an MCP tool)
//! and grants it; a front end may also offer to keep its rule ([`tools::Always::rule`]) in a
//! settings file, as Claude Code saves them: [`rule_files`] names the files it may offer,
//! [`keep_rule`] writes one. Any front end uses these, so a rule kept from one means the
//! same in every other.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Whose settings file a kept rule goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleScope {
    /// The project's local settings: this folder only, not committed.
    Project,
    /// The user's settings: every folder.
    User,
}

/// A settings file an "always" rule may be kept in ([`rule_files`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleFile {
    /// Whose it is.
    pub scope: RuleScope,
    /// The file (it may not exist yet).
    pub path: PathBuf,
}

/// The settings files an "always" rule may be kept in, project first: the project's local
/// settings of `cwd` when its folder is `trusted` (an untrusted project's allow rules do not
/// apply): `.claude/settings.local.json` when the project has a `.claude/` folder, else
/// `.agent/settings.local.json`; then the user's: `~/.claude/settings.json` when `~/.claude/`
/// exists, else `~/.config/agent/settings.json` (where `dirs::config_dir` puts it).
pub fn rule_files(cwd: &Path, trusted: bool) -> Vec<RuleFile> {
    let mut files = Vec::new();
    if trusted {
        let folder = if cwd.join(".claude").is_dir() {
            ".claude"
        } else {
            ".agent"
        };
        files.push(RuleFile {
            scope: RuleScope::Project,
            path: cwd.join(folder).join("settings.local.json"),
        });
    }
    let claude = crate::claude_code::user_dir();
    let user = match claude {
        Some(claude) if claude.is_dir() => Some(claude.join("settings.json")),
        _ => dirs::config_dir().map(|config| config.join("agent").join("settings.json")),
    };
    files.extend(user.map(|path| RuleFile {
        scope: RuleScope::User,
        path,
    }));
    files
}

/// Keeps `rule` for later sessions in `file`: adds it to `permissions.allow` (see
/// [`save_allow_rule`]) and, for a project file, records it in the folder's trust record
/// (the user's own rule is no change for folder trust to ask about). A project file is
/// written only where the project cannot redirect the write: its folder must be a real
/// folder and the file a regular file (or absent), not links a repository could ship
/// (`.agent/settings.local.json -> ~/.config/agent/settings.json`). Returns a line for the
/// user saying what was saved where, and what could not be recorded.
///
/// # Errors
///
/// When the rule does not parse, a project file or its folder is a link or not a regular
/// file, or the file is not a JSON object or cannot be written.
pub fn keep_rule(file: &RuleFile, rule: &str) -> anyhow::Result<String> {
    let path = &file.path;
    tools::PermissionGate::check_rule(rule, path.parent().unwrap_or(path))
        .with_context(|| format!("the rule {rule} was not saved"))?;
    if file.scope == RuleScope::Project {
        refuse_links(path)?;
    }
    save_allow_rule(path, rule)?;
    let unrecorded = if file.scope == RuleScope::Project {
        crate::trust::record_allow_rule(path, rule)
            .err()
            .map_or_else(String::new, |error| {
                format!(
                    " (not recorded as trusted, so the next session may ask about it: {error:#})"
                )
            })
    } else {
        String::new()
    };
    Ok(format!("Saved: {rule} in {}{unrecorded}", path.display()))
}

/// Refuses a project settings file that is, or lies in a folder that is, a link (or not a
/// regular file): the write would land wherever the repository pointed it.
fn refuse_links(path: &Path) -> anyhow::Result<()> {
    let check = |path: &Path, folder: bool| -> anyhow::Result<()> {
        match std::fs::symlink_metadata(path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error).with_context(|| format!("inspecting {}", path.display())),
            Ok(meta) if meta.file_type().is_symlink() => anyhow::bail!(
                "{} is a link; nothing was written there (a repository's link could send the write anywhere)",
                path.display()
            ),
            Ok(meta) if folder && !meta.is_dir() => {
                anyhow::bail!("{} is not a folder; nothing was written", path.display())
            }
            Ok(meta) if !folder && !meta.is_file() => anyhow::bail!(
                "{} is not a regular file; nothing was written",
                path.display()
            ),
            Ok(_) => Ok(()),
        }
    };
    if let Some(folder) = path.parent() {
        check(folder, true)?;
    }
    check(path, false)
}

/// Adds `rule` to `permissions.allow` of the settings file at `path` (made, with its folder,
/// when missing), keeping everything else in it; written as [`edit_settings`] writes.
///
/// # Errors
///
/// When the file is not a JSON object (it is then left as it was), or cannot be written.
pub fn save_allow_rule(path: &Path, rule: &str) -> anyhow::Result<()> {
    edit_settings(path, |object| {
        let permissions = object
            .entry("permissions")
            .or_insert_with(|| serde_json::json!({}))
            .as_object_mut()
            .with_context(|| format!("{}: permissions is not an object", path.display()))?;
        add_to_list(permissions, "allow", rule)
            .with_context(|| format!("{}: permissions.allow is not a list", path.display()))
    })
}

/// The answer to the question whether to start a project's `.mcp.json` server that no
/// setting approved yet, as Claude Code asks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpjsonAnswer {
    /// Start it, and from now on (`enabledMcpjsonServers`).
    Yes,
    /// Start it and every server of the project's `.mcp.json` (`enableAllProjectMcpServers`
    /// too).
    YesAll,
    /// Do not start it, and do not ask again (`disabledMcpjsonServers`).
    No,
}

/// Keeps `answer` about the `.mcp.json` server `name` in the settings file at `path` (the
/// project's `.claude/settings.local.json`, where Claude Code keeps it), as
/// [`edit_settings`] writes.
///
/// # Errors
///
/// When the file or its folder is a link, the file is not a JSON object (it is then left as
/// it was), or it cannot be written.
pub fn save_mcpjson_answer(path: &Path, name: &str, answer: McpjsonAnswer) -> anyhow::Result<()> {
    refuse_links(path)?;
    edit_settings(path, |object| {
        let list = match answer {
            McpjsonAnswer::Yes | McpjsonAnswer::YesAll => "enabledMcpjsonServers",
            McpjsonAnswer::No => "disabledMcpjsonServers",
        };
        add_to_list(object, list, name)
            .with_context(|| format!("{}: {list} is not a list", path.display()))?;
        if answer == McpjsonAnswer::YesAll {
            object.insert(
                "enableAllProjectMcpServers".to_owned(),
                serde_json::Value::Bool(true),
            );
        }
        Ok(())
    })
}

/// The settings file a Claude Code `PermissionUpdate`'s `destination` names for a session in
/// `cwd`, and whether it is the project's: `userSettings` (the agent's own,
/// `~/.config/agent/settings.json`: Claude Code's user file is read, never written),
/// `projectSettings` (`.claude/settings.json`), `localSettings`
/// (`.claude/settings.local.json`, in the project's folder); `None` for `session` and
/// `cliArg`, which no file holds.
pub fn update_destination(destination: &str, cwd: &Path) -> Option<(PathBuf, bool)> {
    let project = || crate::settings::project_folder(cwd).join(".claude");
    match destination {
        // The agent's own user file: a grant to this agent must not change Claude Code's.
        "userSettings" => Some((crate::settings::user_settings_file()?, false)),
        "projectSettings" => Some((project().join("settings.json"), true)),
        "localSettings" => Some((project().join("settings.local.json"), true)),
        _ => None,
    }
}

/// Writes one Claude Code `PermissionUpdate` (`sdk.d.ts`: `addRules`, `replaceRules`,
/// `removeRules` with `rules` of `toolName`/`ruleContent` and `behavior` `allow`, `deny` or
/// `ask`; `setMode`; `addDirectories`, `removeDirectories`) into the settings file at `path`
/// (`permissions.allow`/`deny`/`ask`, `permissions.defaultMode`,
/// `permissions.additionalDirectories`), as [`edit_settings`] writes. A project's file must
/// not be a link. What it adds to a project's file is not recorded as trusted: the next
/// session in the folder asks about it.
///
/// # Errors
///
/// An update of an unknown type or shape, a rule that does not parse, the mode
/// `bypassPermissions` (a hook never grants it), a link, or a file that is not a JSON object
/// or cannot be written.
pub fn write_permission_update(
    path: &Path,
    project: bool,
    update: &serde_json::Value,
) -> anyhow::Result<()> {
    let kind = update["type"].as_str().unwrap_or_default();
    let base = path.parent().and_then(Path::parent).unwrap_or(path);
    let texts = |key: &str| -> anyhow::Result<Vec<String>> {
        update[key]
            .as_array()
            .with_context(|| format!("{kind}: {key} is not a list"))?
            .iter()
            .map(|item| match (item.as_str(), key) {
                (Some(text), "directories") => Ok(text.to_owned()),
                (_, "rules") => {
                    let tool = item["toolName"]
                        .as_str()
                        .with_context(|| format!("{kind}: a rule has no toolName"))?;
                    let rule = match item["ruleContent"].as_str() {
                        Some(content) => format!("{tool}({content})"),
                        None => tool.to_owned(),
                    };
                    tools::PermissionGate::check_rule(&rule, base)?;
                    Ok(rule)
                }
                _ => anyhow::bail!("{kind}: {key} holds something that is not text"),
            })
            .collect()
    };
    let (list, values, how) = match kind {
        "addRules" | "replaceRules" | "removeRules" => {
            let behavior = update["behavior"].as_str().unwrap_or_default();
            anyhow::ensure!(
                matches!(behavior, "allow" | "deny" | "ask"),
                "{kind}: behavior {behavior:?} is not allow, deny or ask"
            );
            (behavior, texts("rules")?, kind)
        }
        "addDirectories" => ("additionalDirectories", texts("directories")?, "addRules"),
        "removeDirectories" => (
            "additionalDirectories",
            texts("directories")?,
            "removeRules",
        ),
        "setMode" => {
            let mode = update["mode"].as_str().unwrap_or_default();
            let known = mode.parse::<tools::PermissionMode>().ok();
            anyhow::ensure!(
                known.is_some_and(|mode| mode != tools::PermissionMode::BypassPermissions),
                "setMode: {mode:?} is not a mode a hook may set"
            );
            ("defaultMode", vec![mode.to_owned()], kind)
        }
        other => anyhow::bail!("{other:?} is not a permission update"),
    };
    if project {
        refuse_links(path)?;
    }
    edit_settings(path, |object| {
        let permissions = object
            .entry("permissions")
            .or_insert_with(|| serde_json::json!({}))
            .as_object_mut()
            .with_context(|| format!("{}: permissions is not an object", path.display()))?;
        if how == "setMode" {
            permissions.insert(list.to_owned(), serde_json::Value::from(values[0].clone()));
            return Ok(());
        }
        if how == "replaceRules" {
            permissions.insert(list.to_owned(), serde_json::json!(values));
            return Ok(());
        }
        for value in &values {
            if how == "removeRules" {
                if let Some(held) = permissions
                    .get_mut(list)
                    .and_then(|held| held.as_array_mut())
                {
                    held.retain(|known| known.as_str() != Some(value));
                }
            } else {
                add_to_list(permissions, list, value).with_context(|| {
                    format!("{}: permissions.{list} is not a list", path.display())
                })?;
            }
        }
        Ok(())
    })
}

/// Adds `value` to the list `key` of `object` (made when missing) unless it holds it;
/// `None` when `key` is not a list.
fn add_to_list(
    object: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    value: &str,
) -> Option<()> {
    let list = object
        .entry(key)
        .or_insert_with(|| serde_json::json!([]))
        .as_array_mut()?;
    if !list.iter().any(|known| known.as_str() == Some(value)) {
        list.push(serde_json::Value::from(value));
    }
    Some(())
}

/// Changes the settings file at `path` with `change` (made, with its folder, when
/// missing), keeping everything else in it; written whole to a new file of a name no one
/// could have guessed (made with `O_EXCL`, so never through a link planted in its place),
/// then renamed over the old. (A project's file is checked with `refuse_links` first by
/// its caller: the user's own may be a link, a dotfiles manager's.)
///
/// # Errors
///
/// When the file is not a JSON object, `change` fails (the file is then left as it was), or
/// it cannot be written.
pub fn edit_settings(
    path: &Path,
    change: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut settings: serde_json::Value = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| {
            format!("{} is not valid JSON; it was left as it is", path.display())
        })?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let object = settings.as_object_mut().with_context(|| {
        format!(
            "{} is not a JSON object; it was left as it is",
            path.display()
        )
    })?;
    change(object)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut text = serde_json::to_string_pretty(&settings)?;
    text.push('\n');
    let staging = path.with_extension(format!("json.{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(&staging)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&staging, path)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&staging);
        return Err(error).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder of its own for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("agent-approvals-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_project_file_is_claude_codes_when_the_project_has_a_claude_folder() {
        let dir = scratch("files");
        let files = rule_files(&dir, true);
        assert_eq!(files[0].scope, RuleScope::Project);
        assert_eq!(files[0].path, dir.join(".agent/settings.local.json"));
        std::fs::create_dir(dir.join(".claude")).unwrap();
        let files = rule_files(&dir, true);
        assert_eq!(files[0].path, dir.join(".claude/settings.local.json"));
        // Untrusted: the project's allow rules would not apply, so none is offered.
        let files = rule_files(&dir, false);
        assert!(files.iter().all(|file| file.scope == RuleScope::User));
    }

    #[test]
    fn a_kept_rule_joins_the_others_and_a_broken_file_is_left_alone() {
        let dir = scratch("keep");
        let file = dir.join(".agent/settings.local.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            r#"{"model": "m", "permissions": {"allow": ["Read"]}}"#,
        )
        .unwrap();
        save_allow_rule(&file, "Bash(npm test:*)").unwrap();
        save_allow_rule(&file, "Bash(npm test:*)").unwrap();
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(saved["model"], "m");
        assert_eq!(
            saved["permissions"]["allow"],
            serde_json::json!(["Read", "Bash(npm test:*)"])
        );
        std::fs::write(&file, "{not json").unwrap();
        let error = save_allow_rule(&file, "Edit").unwrap_err();
        assert!(format!("{error:#}").contains("not valid JSON"), "{error:#}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{not json");
        let project = RuleFile {
            scope: RuleScope::Project,
            path: file.clone(),
        };
        assert!(keep_rule(&project, "Bash(rm:*").is_err());
    }

    /// Attack: a repository ships its local settings file (or the folder) as a link to the
    /// user's settings, or the old fixed staging name as one; "keep for this project" must
    /// not write through any of them.
    #[test]
    fn a_kept_project_rule_never_writes_through_a_planted_link() {
        let dir = scratch("links");
        let user = dir.join("user-settings.json");
        std::fs::write(&user, r#"{"permissions": {"deny": ["Bash(curl:*)"]}}"#).unwrap();
        let project = dir.join("repo/.agent");
        std::fs::create_dir_all(&project).unwrap();
        let file = project.join("settings.local.json");
        std::os::unix::fs::symlink(&user, project.join("settings.local.json.tmp")).unwrap();
        let keep = |path: &Path| {
            keep_rule(
                &RuleFile {
                    scope: RuleScope::Project,
                    path: path.to_path_buf(),
                },
                "Edit",
            )
        };
        keep(&file).unwrap();
        let saved = std::fs::read_to_string(&file).unwrap();
        assert!(saved.contains("\"Edit\""), "{saved}");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&user, &file).unwrap();
        let refused = keep(&file).unwrap_err();
        assert!(format!("{refused:#}").contains("is a link"), "{refused:#}");
        let linked = dir.join("repo2/.agent");
        std::fs::create_dir_all(dir.join("repo2")).unwrap();
        std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &linked).unwrap();
        assert!(keep(&linked.join("settings.local.json")).is_err());
        assert!(!dir.join("elsewhere/settings.local.json").exists());
        assert_eq!(
            std::fs::read_to_string(&user).unwrap(),
            r#"{"permissions": {"deny": ["Bash(curl:*)"]}}"#,
            "the user's settings were written"
        );
    }

    #[test]
    fn permission_updates_are_written_as_claude_code_keeps_them() {
        let dir = scratch("updates");
        let file = dir.join(".claude/settings.local.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            r#"{"model": "opus", "permissions": {"allow": ["Read"]}}"#,
        )
        .unwrap();
        let update = |value: serde_json::Value| write_permission_update(&file, true, &value);
        update(serde_json::json!({"type": "addRules", "behavior": "deny",
            "rules": [{"toolName": "Bash", "ruleContent": "rm:*"}, {"toolName": "WebFetch"}]}))
        .unwrap();
        update(serde_json::json!({"type": "addRules", "behavior": "allow",
            "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}]}))
        .unwrap();
        update(
            serde_json::json!({"type": "removeRules", "behavior": "allow",
            "rules": [{"toolName": "Read"}]}),
        )
        .unwrap();
        update(
            serde_json::json!({"type": "replaceRules", "behavior": "ask",
            "rules": [{"toolName": "Edit"}]}),
        )
        .unwrap();
        update(serde_json::json!({"type": "setMode", "mode": "acceptEdits"})).unwrap();
        update(serde_json::json!({"type": "addDirectories", "directories": ["../lib", "/opt/x"]}))
            .unwrap();
        update(serde_json::json!({"type": "removeDirectories", "directories": ["/opt/x"]}))
            .unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"model": "opus", "permissions": {
                "allow": ["Bash(npm test:*)"],
                "deny": ["Bash(rm:*)", "WebFetch"],
                "ask": ["Edit"],
                "defaultMode": "acceptEdits",
                "additionalDirectories": ["../lib"],
            }})
        );
        // Refused, and the file left as it was.
        for bad in [
            serde_json::json!({"type": "setMode", "mode": "bypassPermissions"}),
            serde_json::json!({"type": "addRules", "behavior": "maybe", "rules": []}),
            serde_json::json!({"type": "addRules", "behavior": "allow", "rules": [{"ruleContent": "x"}]}),
            serde_json::json!({"type": "addRules", "behavior": "allow", "rules": [{"toolName": "Bash", "ruleContent": ""}]}),
            serde_json::json!({"type": "grantEverything"}),
        ] {
            assert!(update(bad.clone()).is_err(), "{bad}");
        }
        let after: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(after, written);
        // A project's file that is a link is never written through.
        let elsewhere = dir.join("elsewhere.json");
        std::fs::write(&elsewhere, "{}").unwrap();
        let link = dir.join(".claude/settings.json");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let error = write_permission_update(
            &link,
            true,
            &serde_json::json!({"type": "setMode", "mode": "plan"}),
        )
        .unwrap_err();
        assert!(error.to_string().contains("is a link"), "{error}");
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "{}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
