//! Custom slash commands, as Claude Code reads them: Markdown files in `.agent/commands/`,
//! `.claude/commands/` (the project's) and `~/.config/agent/commands/`, `~/.claude/commands/`
//! (the user's). A file's path below its folder names the command, subfolders as
//! namespaces (`frontend/lint.md` is `/frontend:lint`). An optional frontmatter block
//! (`---` lines) gives `description`, `argument-hint`, `allowed-tools` (allow rules while
//! the command's turn runs) and `model` (the model of that turn); the body is the prompt,
//! with `$ARGUMENTS` replaced by everything after the name and `$1` .. `$9` by its words.
//!
//! A command is a prompt the user chooses to send, so a project's commands are offered in
//! an untrusted folder too; nothing in them runs or is allowed by itself there: a project
//! command's `allowed-tools` and `model` apply only in a trusted folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest command file read, in bytes (a prompt, not a document).
const MAX_COMMAND_BYTES: u64 = 256 * 1024;

/// One custom command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// Its name without the slash (`frontend:lint`).
    pub name: String,
    /// The file it comes from.
    pub path: PathBuf,
    /// `project` or `user`.
    pub scope: &'static str,
    /// The frontmatter's `description`, else the body's first line.
    pub description: String,
    /// The frontmatter's `argument-hint` (`[file] [message]`).
    pub argument_hint: Option<String>,
    /// The frontmatter's `allowed-tools`: allow rules while the command's turn runs
    /// (`Bash(git add:*)`, `Read`), as settings write them.
    pub allowed_tools: Vec<String>,
    /// The frontmatter's `model`: the model of the command's turn (an id or an alias).
    pub model: Option<String>,
    /// The prompt, before expansion.
    pub body: String,
}

/// The folders commands are read from, lowest precedence first: a command of a later folder
/// replaces one of the same name. The user's own come last: a cloned repository cannot
/// replace the prompt behind a command the user relies on.
pub fn folders(cwd: &Path) -> Vec<(PathBuf, &'static str)> {
    let mut folders = project_folders(cwd);
    if let Some(claude) = crate::claude_code::user_dir() {
        folders.push((claude.join("commands"), "user"));
    }
    if let Some(config) = dirs::config_dir() {
        folders.push((config.join("agent").join("commands"), "user"));
    }
    folders
}

/// The project's own command folders of `cwd`.
fn project_folders(cwd: &Path) -> Vec<(PathBuf, &'static str)> {
    vec![
        (cwd.join(".claude").join("commands"), "project"),
        (cwd.join(".agent").join("commands"), "project"),
    ]
}

/// Every command of `cwd`, by name. Files that cannot be read, are too large or are not
/// UTF-8 are skipped with a warning naming them.
pub fn discover(cwd: &Path, notices: &crate::Notices) -> Vec<Command> {
    read_folders(cwd, folders(cwd), &mut |warning| {
        notices.say(&format!("warning: {}", render::printable(&warning, false)));
    })
}

/// The project's own commands of `cwd` (`.claude/commands`, `.agent/commands`), read as
/// [`discover`] reads them, without a warning: for what trust records of a folder no
/// session runs in yet.
pub fn project_commands(cwd: &Path) -> Vec<Command> {
    read_folders(cwd, project_folders(cwd), &mut |_| {})
}

/// The commands of `folders`, by name; what is skipped is told to `warn`.
fn read_folders(
    cwd: &Path,
    folders: Vec<(PathBuf, &'static str)>,
    warn: &mut dyn FnMut(String),
) -> Vec<Command> {
    let mut found = BTreeMap::new();
    // A project's commands folder must really be the project's: `.claude/commands` linked to
    // `~/notes` would send the user's notes as a prompt.
    let boundary = std::fs::canonicalize(crate::settings::project_folder(cwd)).ok();
    for (folder, scope) in folders {
        if scope == "project"
            && std::fs::canonicalize(&folder).is_ok_and(|real| {
                boundary
                    .as_ref()
                    .is_none_or(|boundary| !real.starts_with(boundary))
            })
        {
            warn(format!(
                "{} is skipped: it leads outside the project",
                folder.display()
            ));
            continue;
        }
        let mut files = Vec::new();
        collect(&folder, &folder, &mut files, 0);
        files.sort();
        for (name, path) in files {
            match read(&path) {
                Ok(text) => {
                    let command = parse(name.clone(), path, scope, &text);
                    found.insert(name, command);
                }
                Err(error) => warn(format!("command {}: {error}", path.display())),
            }
        }
    }
    found.into_values().collect()
}

/// The Markdown files below `dir`, each with its command name (`a/b.md` is `a:b`); links
/// are not followed, and at most four levels of subfolders are read.
fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < 4 {
            collect(root, &path, out, depth + 1);
        } else if kind.is_file() && path.extension().is_some_and(|ext| ext == "md") {
            let Ok(relative) = path
                .with_extension("")
                .strip_prefix(root)
                .map(Path::to_path_buf)
            else {
                continue;
            };
            let parts: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            let name = parts.join(":");
            if !name.is_empty() && name.chars().all(|c| !c.is_whitespace() && !c.is_control()) {
                out.push((name, path));
            }
        }
    }
}

fn read(path: &Path) -> Result<String, String> {
    let size = std::fs::metadata(path)
        .map_err(|error| error.to_string())?
        .len();
    if size > MAX_COMMAND_BYTES {
        return Err(format!(
            "{size} bytes is more than a command may be ({MAX_COMMAND_BYTES})"
        ));
    }
    let bytes = std::fs::read(path).map_err(|error| error.to_string())?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

/// A command from its file's text: the frontmatter ([`tools::prompt::split_frontmatter`])
/// and the body.
pub fn parse(name: String, path: PathBuf, scope: &'static str, text: &str) -> Command {
    let (fields, body) = tools::prompt::split_frontmatter(text);
    let description = fields
        .get("description")
        .cloned()
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| {
            body.lines()
                .map(str::trim)
                .find(|line| !line.is_empty())
                .unwrap_or_default()
                .chars()
                .take(80)
                .collect()
        });
    Command {
        name,
        path,
        scope,
        description,
        argument_hint: fields.get("argument-hint").cloned(),
        allowed_tools: fields
            .get("allowed-tools")
            .map(|list| tools::prompt::split_tool_list(list))
            .unwrap_or_default(),
        model: fields
            .get("model")
            .cloned()
            .filter(|model| !model.is_empty()),
        body: body.to_owned(),
    }
}

impl Command {
    /// The prompt for `/name ARGUMENTS` ([`tools::prompt::expand_arguments`]).
    pub fn expand(&self, arguments: &str) -> String {
        tools::prompt::expand_arguments(&self.body, arguments)
    }
}

/// `/name arguments` as (name, arguments) when `prompt` starts with a slash and a name.
pub fn invocation(prompt: &str) -> Option<(&str, &str)> {
    let rest = prompt.trim_start().strip_prefix('/')?;
    let (name, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    (!name.is_empty()).then_some((name, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_and_arguments_work_as_in_claude_code() {
        let command = parse(
            "git:fix".into(),
            "/w/.claude/commands/git/fix.md".into(),
            "project",
            "---\ndescription: \"Fix an issue\"\nargument-hint: [issue] [priority]\nallowed-tools: Bash(git:*)\n---\nFix issue #$1 with priority $2.\nAll: $ARGUMENTS; cost $5 stays.\n",
        );
        assert_eq!(command.description, "Fix an issue");
        assert_eq!(command.argument_hint.as_deref(), Some("[issue] [priority]"));
        assert_eq!(command.allowed_tools, ["Bash(git:*)"]);
        assert_eq!(command.model, None);
        assert_eq!(
            command.expand("123 high"),
            "Fix issue #123 with priority high.\nAll: 123 high; cost  stays.\n"
        );
        let plain = parse(
            "review".into(),
            "/r.md".into(),
            "user",
            "Review the diff.\n",
        );
        assert_eq!(plain.description, "Review the diff.");
        assert_eq!(plain.expand(""), "Review the diff.\n");
        assert_eq!(plain.expand("src/"), "Review the diff.\n\nsrc/");
        assert_eq!(
            invocation("/git:fix 123 high"),
            Some(("git:fix", "123 high"))
        );
        assert_eq!(invocation("/review"), Some(("review", "")));
        assert_eq!(invocation("fix /this"), None);
        assert_eq!(invocation("/ spaced"), None);
    }

    #[test]
    fn folders_give_names_and_agent_wins_over_claude() {
        let base = std::env::temp_dir().join(format!("agent-commands-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let cwd = base.join("w");
        std::fs::create_dir_all(cwd.join(".claude/commands/frontend")).ok();
        std::fs::create_dir_all(cwd.join(".agent/commands")).ok();
        std::fs::write(cwd.join(".claude/commands/frontend/lint.md"), "Lint it.").ok();
        std::fs::write(cwd.join(".claude/commands/ship.md"), "From claude.").ok();
        std::fs::write(cwd.join(".agent/commands/ship.md"), "From agent.").ok();
        std::fs::write(cwd.join(".agent/commands/notes.txt"), "not a command").ok();
        let found: Vec<(String, String)> = discover(&cwd, &crate::Notices::default())
            .into_iter()
            .filter(|command| command.scope == "project")
            .map(|command| (command.name, command.body))
            .collect();
        assert_eq!(
            found,
            [
                ("frontend:lint".to_owned(), "Lint it.".to_owned()),
                ("ship".to_owned(), "From agent.".to_owned()),
            ]
        );
        // A commands folder that is a link out of the project is not read.
        let notes = base.join("notes");
        std::fs::create_dir_all(&notes).ok();
        std::fs::write(notes.join("deploy.md"), "NOTES-SECRET").ok();
        let _ = std::fs::remove_dir_all(cwd.join(".claude/commands"));
        std::os::unix::fs::symlink(&notes, cwd.join(".claude/commands")).ok();
        assert!(
            discover(&cwd, &crate::Notices::default())
                .iter()
                .all(|command| command.name != "deploy"),
            "a linked commands folder was read"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
