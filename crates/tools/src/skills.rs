//! Skills, as Claude Code reads them: a folder holding a `SKILL.md` (frontmatter `name` and
//! `description`, a Markdown body of instructions) and any files beside it (templates,
//! scripts, references).
//!
//! Only names and descriptions go into the context, as one short list; the [`SkillTool`]
//! (`Skill`, Claude Code's name) loads a skill's body when the model asks for it, with the
//! folder's path so the model can read the files beside it.
//!
//! [`discover`] reads the folders a session names (the CLI: `.claude/skills/`,
//! `.agent/skills/`, `~/.claude/skills/`, `~/.config/agent/skills/`). A folder with a
//! boundary ([`SkillFolder::within`], a project's) is read only where each skill folder and
//! its `SKILL.md` resolve inside that boundary: a skill linked to `~/.ssh` is not a skill.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::common::{parse_input, run_cancellable};
use crate::prompt;

/// The largest `SKILL.md` read, in bytes (instructions, not a document: Claude Code's own
/// advice is under 500 lines).
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;

/// The longest description kept, in characters (the Agent Skills format's limit: 1024).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// The longest skill name, in characters (the Agent Skills format's limit: 64).
pub const MAX_NAME_CHARS: usize = 64;

/// The most skills one folder gives; more are skipped with one warning (every skill's name
/// goes into every request).
pub const MAX_SKILLS_PER_FOLDER: usize = 200;

/// One skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// The frontmatter's `name`, else the folder's name.
    pub name: String,
    /// The frontmatter's `description`, else the body's first line that is not a heading,
    /// at most [`MAX_DESCRIPTION_CHARS`].
    pub description: String,
    /// The skill's folder, resolved (symbolic links followed).
    pub dir: PathBuf,
    /// `project` or `user`, from its [`SkillFolder`].
    pub scope: &'static str,
}

impl Skill {
    /// The skill's `SKILL.md`.
    pub fn file(&self) -> PathBuf {
        self.dir.join("SKILL.md")
    }
}

/// A folder of skills (each subfolder with a `SKILL.md` is one).
#[derive(Clone, Debug)]
pub struct SkillFolder {
    /// The folder (`.claude/skills`).
    pub path: PathBuf,
    /// `project` or `user`.
    pub scope: &'static str,
    /// A resolved folder every skill of this one must resolve inside (the project's), or
    /// `None` for the user's own folders.
    pub within: Option<PathBuf>,
}

/// What [`discover`] found.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    /// The skills, by name.
    pub skills: Vec<Skill>,
    /// One line per skill or folder skipped, naming it and why.
    pub warnings: Vec<String>,
}

/// The skills of `folders`, lowest precedence first: a skill of a later folder replaces one
/// of the same name. Folders that do not exist are skipped silently; a skill folder without
/// a `SKILL.md` is not a skill; a `SKILL.md` too large, not UTF-8, with a bad name, or
/// resolving outside its boundary (or outside its own skill folder) is skipped with a
/// warning. Blocking (file system reads): run it off the async threads.
pub fn discover(folders: &[SkillFolder]) -> Discovery {
    let mut found = BTreeMap::new();
    let mut warnings = Vec::new();
    for folder in folders {
        let Ok(entries) = std::fs::read_dir(&folder.path) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        dirs.sort();
        dirs.retain(|dir| dir.join("SKILL.md").symlink_metadata().is_ok());
        if dirs.len() > MAX_SKILLS_PER_FOLDER {
            warnings.push(format!(
                "skills of {}: {} folders, only the first {MAX_SKILLS_PER_FOLDER} are read",
                folder.path.display(),
                dirs.len()
            ));
            dirs.truncate(MAX_SKILLS_PER_FOLDER);
        }
        for dir in dirs {
            match load(&dir, folder) {
                Ok(skill) => {
                    found.insert(skill.name.clone(), skill);
                }
                Err(reason) => warnings.push(format!("skill {}: {reason}", dir.display())),
            }
        }
    }
    Discovery {
        skills: found.into_values().collect(),
        warnings,
    }
}

/// One skill folder.
fn load(dir: &Path, folder: &SkillFolder) -> Result<Skill, String> {
    let real = std::fs::canonicalize(dir).map_err(|error| error.to_string())?;
    if let Some(within) = &folder.within
        && !real.starts_with(within)
    {
        return Err(format!(
            "it leads outside {} (to {})",
            within.display(),
            real.display()
        ));
    }
    let text = read_skill_file(&real)?;
    let (fields, body) = prompt::split_frontmatter(&text);
    let name = fields
        .get("name")
        .filter(|name| !name.is_empty())
        .cloned()
        .unwrap_or_else(|| {
            dir.file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
    {
        return Err(format!(
            "the name {name:?} is not a skill name (1 to {MAX_NAME_CHARS} characters, no spaces, slashes or control characters)"
        ));
    }
    let description = fields
        .get("description")
        .filter(|text| !text.trim().is_empty())
        .map(|text| text.trim().to_owned())
        .or_else(|| {
            body.lines()
                .map(str::trim)
                .find(|line| !line.is_empty() && !line.starts_with('#'))
                .map(str::to_owned)
        })
        .unwrap_or_default()
        .chars()
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    Ok(Skill {
        name,
        description,
        dir: real,
        scope: folder.scope,
    })
}

/// The text of `dir`'s `SKILL.md`, which must resolve inside `dir` (resolved), be a regular
/// file of at most [`MAX_SKILL_BYTES`] and be UTF-8.
///
/// The file is opened without following a final link and without blocking (a FIFO planted
/// as `SKILL.md` must not hang start-up), then checked on the open descriptor: its type, its
/// size, and the path the kernel opened (`/proc/self/fd`), so a file swapped for a link
/// after the check is not read either.
fn read_skill_file(dir: &Path) -> Result<String, String> {
    use std::io::Read as _;
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;

    let file = dir.join("SKILL.md");
    let real = std::fs::canonicalize(&file).map_err(|error| error.to_string())?;
    if !real.starts_with(dir) {
        return Err(format!(
            "its SKILL.md leads outside the skill's folder (to {})",
            real.display()
        ));
    }
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(&real)
        .map_err(|error| error.to_string())?;
    let metadata = opened.metadata().map_err(|error| error.to_string())?;
    if !metadata.is_file() {
        return Err("its SKILL.md is not a regular file".to_owned());
    }
    let size = metadata.len();
    if size > MAX_SKILL_BYTES {
        return Err(format!(
            "its SKILL.md has {size} bytes, more than a skill may have ({MAX_SKILL_BYTES})"
        ));
    }
    let path = std::fs::read_link(format!("/proc/self/fd/{}", opened.as_raw_fd()))
        .map_err(|error| error.to_string())?;
    if !path.starts_with(dir) {
        return Err(format!(
            "its SKILL.md changed while it was read (now {})",
            path.display()
        ));
    }
    let mut bytes = Vec::new();
    opened
        .take(MAX_SKILL_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| error.to_string())?;
    if bytes.len() as u64 > MAX_SKILL_BYTES {
        return Err(format!(
            "its SKILL.md grew past the limit of {MAX_SKILL_BYTES} bytes while it was read"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "its SKILL.md is not UTF-8 text".to_owned())
}

/// The prompt a skill gives when loaded with `arguments` (the Skill tool's `args`, or the
/// words after `/name` when the user types it): the folder's path, a blank line, then the
/// body (frontmatter removed) with `$ARGUMENTS` and `$1` .. `$9` expanded, as Claude Code
/// loads a skill.
///
/// # Errors
///
/// Why the skill's `SKILL.md` can no longer be read (it changed since discovery: removed,
/// grown past the limit, or linked out of its folder).
pub fn load_prompt(skill: &Skill, arguments: &str) -> Result<String, String> {
    let text = read_skill_file(&skill.dir)?;
    let (_, body) = prompt::split_frontmatter(&text);
    Ok(format!(
        "Base directory for this skill: {}\n\n{}",
        skill.dir.display(),
        prompt::expand_arguments(body, arguments)
    ))
}

/// The `Skill` tool: loads one skill's instructions by name. Read-only and concurrency
/// safe; the gate allows it in every mode (it reads files the session found at start-up).
///
/// Input: `{"skill": "pdf", "args": "form.pdf"}` (`args` optional; a leading `/` on the
/// name is ignored). Output: [`load_prompt`]'s text. An unknown name is an invalid input
/// listing the names there are.
pub struct SkillTool {
    skills: Vec<Skill>,
    schema: Value,
}

impl std::fmt::Debug for SkillTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .skills
            .iter()
            .map(|skill| skill.name.as_str())
            .collect();
        f.debug_struct("SkillTool").field("skills", &names).finish()
    }
}

#[derive(Deserialize)]
struct SkillInput {
    skill: String,
    #[serde(default)]
    args: Option<String>,
}

impl SkillTool {
    /// The tool for `skills` (from [`discover`]).
    pub fn new(skills: Vec<Skill>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "description": "The skill's name, as the list of available skills gives it (e.g. \"pdf\")"
                },
                "args": {
                    "type": "string",
                    "description": "Optional arguments for the skill"
                }
            },
            "required": ["skill"],
            "additionalProperties": false
        });
        Self { skills, schema }
    }

    /// The skills it loads.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }
}

impl Tool for SkillTool {
    fn name(&self) -> &str {
        "Skill"
    }

    fn description(&self) -> &str {
        "Load a skill: its instructions and the folder of files that come with it. The \
         available skills are listed in the context with a description of when each \
         applies; when a task matches one, load it before starting the task and follow its \
         instructions. Files the instructions name are relative to the skill's base \
         directory given in the result."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: SkillInput = parse_input("Skill", input)?;
            let name = input.skill.trim().trim_start_matches('/');
            let Some(skill) = self.skills.iter().find(|skill| skill.name == name).cloned() else {
                let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
                return Err(ToolError::InvalidInput(format!(
                    "unknown skill {name:?}; the skills are: {}",
                    names.join(", ")
                )));
            };
            let arguments = input.args.unwrap_or_default();
            let text = run_cancellable(&context.cancel, move |_| {
                load_prompt(&skill, &arguments).map_err(|reason| {
                    ToolError::InvalidInput(format!("skill {}: {reason}", skill.name))
                })
            })
            .await?;
            Ok(ToolOutput::text(text))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn skills_are_found_named_described_and_bounded() {
        let base = std::env::temp_dir().join(format!("tools-skills-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let project = base.join("project");
        let skills = project.join(".claude/skills");
        let user = base.join("home/.claude/skills");
        for dir in [
            skills.join("pdf"),
            skills.join("plain"),
            skills.join("empty"),
            skills.join("bad"),
            user.join("pdf"),
            base.join("outside"),
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(
            skills.join("pdf/SKILL.md"),
            "---\nname: pdf\ndescription: Fill PDF forms\n---\nRun fill.py on $1.\n",
        )
        .unwrap();
        std::fs::write(skills.join("plain/SKILL.md"), "# Plain\n\nSays hello.\n").unwrap();
        std::fs::write(skills.join("bad/SKILL.md"), "---\nname: two words\n---\nx").unwrap();
        std::fs::write(
            user.join("pdf/SKILL.md"),
            "---\ndescription: mine\n---\nMine.",
        )
        .unwrap();
        std::fs::write(base.join("outside/SKILL.md"), "SECRET").unwrap();
        std::os::unix::fs::symlink(base.join("outside"), skills.join("linked")).unwrap();
        std::os::unix::fs::symlink(base.join("outside/SKILL.md"), skills.join("empty/SKILL.md"))
            .unwrap();
        // A FIFO as SKILL.md is skipped at once (reading it would block forever).
        std::fs::create_dir_all(skills.join("fifo")).unwrap();
        nix::unistd::mkfifo(
            &skills.join("fifo/SKILL.md"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let within = std::fs::canonicalize(&project).unwrap();
        let found = discover(&[
            SkillFolder {
                path: skills.clone(),
                scope: "project",
                within: Some(within.clone()),
            },
            SkillFolder {
                path: user.clone(),
                scope: "user",
                within: None,
            },
            SkillFolder {
                path: base.join("missing"),
                scope: "user",
                within: None,
            },
        ]);
        let named: Vec<(&str, &str, &str)> = found
            .skills
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str(), s.scope))
            .collect();
        assert_eq!(
            named,
            [("pdf", "mine", "user"), ("plain", "Says hello.", "project")]
        );
        let warnings = found.warnings.join("\n");
        assert_eq!(found.warnings.len(), 4, "{warnings}");
        assert!(
            warnings.contains("fifo: its SKILL.md is not a regular file"),
            "{warnings}"
        );
        assert!(warnings.contains("linked: it leads outside"), "{warnings}");
        assert!(
            warnings.contains("empty: its SKILL.md leads outside"),
            "{warnings}"
        );
        assert!(
            warnings.contains("\"two words\" is not a skill name"),
            "{warnings}"
        );
        let plain = found.skills.iter().find(|s| s.name == "plain").unwrap();
        assert_eq!(
            load_prompt(plain, "x").unwrap(),
            format!(
                "Base directory for this skill: {}\n\n# Plain\n\nSays hello.\n\nx",
                within.join(".claude/skills/plain").display()
            )
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
