//! Where a session finds skills ([`tools::skills`]) and how they are listed in the context.
//!
//! Folders, lowest precedence first (a later skill of the same name wins, as Claude Code
//! ranks personal skills above project ones): `.claude/skills/`, `.agent/skills/` (the
//! project's, each skill resolving inside the project), then `~/.claude/skills/`,
//! `~/.config/agent/skills/` (the user's). A skill is instructions the model loads when a
//! task matches its description, so a project's skills are offered in an untrusted folder
//! too, like its memory files: nothing in them runs or is allowed by itself.

use std::path::{Path, PathBuf};

use tools::skills::{Skill, SkillFolder};

/// The largest skill list put in the context, in bytes; skills past it are named in one
/// line (each description is at most 1,024 characters, so a few dozen skills fit).
const LIST_CAP_BYTES: usize = 16 * 1024;

/// The longest list of skills named without a description, in bytes.
const NAMES_CAP_BYTES: usize = 2 * 1024;

/// What Read, Grep and Glob may read of the user's skills from any project: the user's skill
/// folders and each skill folder in them as it resolves (a skill linked from elsewhere, such
/// as a dotfiles repository, is read where it lives). At most
/// [`tools::skills::MAX_SKILLS_PER_FOLDER`] per folder.
pub fn readable() -> Vec<PathBuf> {
    let mut readable = Vec::new();
    for folder in user_folders() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        readable.push(folder);
        readable.extend(
            entries
                .flatten()
                .take(tools::skills::MAX_SKILLS_PER_FOLDER)
                .filter(|entry| entry.path().join("SKILL.md").is_file())
                .filter_map(|entry| std::fs::canonicalize(entry.path()).ok()),
        );
    }
    readable
}

/// The user's skill folders (`~/.claude/skills`, `~/.config/agent/skills`).
pub fn user_folders() -> Vec<PathBuf> {
    let mut folders = Vec::new();
    if let Some(claude) = crate::claude_code::user_dir() {
        folders.push(claude.join("skills"));
    }
    if let Some(config) = dirs::config_dir() {
        folders.push(config.join("agent").join("skills"));
    }
    folders
}

/// Every skill folder of a session in `cwd`, lowest precedence first.
pub fn folders(cwd: &Path) -> Vec<SkillFolder> {
    let mut folders = Vec::new();
    // Without a resolvable project folder, nothing of the project's is read.
    if let Ok(within) = std::fs::canonicalize(crate::settings::project_folder(cwd)) {
        for dot in [".claude", ".agent"] {
            folders.push(SkillFolder {
                path: cwd.join(dot).join("skills"),
                scope: "project",
                within: Some(within.clone()),
            });
        }
    }
    folders.extend(user_folders().into_iter().map(|path| SkillFolder {
        path,
        scope: "user",
        within: None,
    }));
    folders
}

/// The skills of `cwd`, with one warning for each one skipped. Blocking.
pub fn discover(cwd: &Path, notices: &crate::Notices) -> Vec<Skill> {
    let found = tools::skills::discover(&folders(cwd));
    for warning in &found.warnings {
        notices.say(&format!("warning: {}", render::printable(warning, false)));
    }
    found.skills
}

/// The part of the user context that lists the skills (empty without any): one line per
/// skill, `- name: description`, at most [`LIST_CAP_BYTES`].
pub fn context_list(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "\nSkills (load one with the Skill tool when the task matches its description):\n",
    );
    let mut left_out = Vec::new();
    for skill in skills {
        // One line each: a description's own line breaks would read as more entries.
        let description = skill
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let line = format!("- {}: {description}\n", skill.name);
        if text.len() + line.len() > LIST_CAP_BYTES {
            left_out.push(skill.name.as_str());
        } else {
            text.push_str(&line);
        }
    }
    if !left_out.is_empty() {
        // The names too are bounded: each is up to 64 characters.
        let mut names = String::new();
        let mut shown = 0;
        for name in &left_out {
            if names.len() + name.len() + 2 > NAMES_CAP_BYTES {
                break;
            }
            if shown > 0 {
                names.push_str(", ");
            }
            names.push_str(name);
            shown += 1;
        }
        if shown < left_out.len() {
            names.push_str(&format!(" and {} more", left_out.len() - shown));
        }
        text.push_str(&format!("- (no room to describe: {names})\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_one_line_per_skill_and_bounded() {
        let skill = |name: &str, description: &str| Skill {
            name: name.to_owned(),
            description: description.to_owned(),
            dir: PathBuf::from("/s").join(name),
            scope: "project",
        };
        assert_eq!(context_list(&[]), "");
        assert_eq!(
            context_list(&[skill("pdf", "Fill\nPDF   forms.")]),
            "\nSkills (load one with the Skill tool when the task matches its description):\n- pdf: Fill PDF forms.\n"
        );
        let many: Vec<Skill> = (0..40)
            .map(|i| skill(&format!("s{i}"), &"d".repeat(1000)))
            .collect();
        let text = context_list(&many);
        assert!(text.len() <= LIST_CAP_BYTES + 200, "{}", text.len());
        // The header (81 bytes) and 16 lines of 1,008 bytes fit in 16 KiB; the rest are named.
        assert!(text.contains("- s15: ddd"), "{text}");
        assert!(!text.contains("- s16: "), "{text}");
        let left_out: Vec<String> = (16..40).map(|i| format!("s{i}")).collect();
        assert!(
            text.ends_with(&format!(
                "- (no room to describe: {})\n",
                left_out.join(", ")
            )),
            "{text}"
        );
        // So are the names of those left out.
        let long: Vec<Skill> = (0..3_000)
            .map(|i| skill(&format!("{i:0>63}"), "x"))
            .collect();
        let text = context_list(&long);
        assert!(
            text.len() <= LIST_CAP_BYTES + NAMES_CAP_BYTES + 100,
            "{}",
            text.len()
        );
        assert!(
            text.trim_end().ends_with(" more)"),
            "{}",
            &text[text.len() - 80..]
        );
    }
}
