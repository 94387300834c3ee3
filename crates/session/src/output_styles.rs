//! Output styles as Claude Code has them: `outputStyle` in settings names one, and its text
//! goes into the system prompt as a section of its own (`# Output Style: NAME`), in place of
//! the built-in prompt's coding instructions unless its `keep-coding-instructions` is true
//! (Claude Code 2.1.197 builds its prompt the same way).
//!
//! Styles are the built-in `default` (the prompt as it is), `Explanatory` and `Learning`
//! (ours, for what Claude Code's built-ins of those names are for), then Markdown files in
//! `~/.claude/output-styles/` and then a project's `.claude/output-styles/` (a later one of
//! the same name wins). A file's frontmatter may give `name` (else the file's name without
//! `.md`), `description` and `keep-coding-instructions`; its body is the style's text. A
//! project's file must resolve inside the project and be at most [`MAX_BYTES`].

use std::path::{Path, PathBuf};

/// The largest style file read: 64 KiB.
pub const MAX_BYTES: u64 = 64 * 1024;

/// The most style files read from one folder (in name order): 100.
pub const MAX_FILES: usize = 100;

/// The style used when `outputStyle` is not set.
pub const DEFAULT: &str = "default";

/// One output style.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputStyle {
    /// Its name (what `outputStyle` says).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its text for the system prompt; empty for `default`.
    pub prompt: String,
    /// Whether the built-in prompt's coding instructions stay beside it.
    pub keep_coding_instructions: bool,
    /// The file it came from; `None` for a built-in one.
    pub path: Option<PathBuf>,
}

/// The built-in styles.
fn built_in() -> Vec<OutputStyle> {
    let style = |name: &str, description: &str, prompt: &str| OutputStyle {
        name: name.to_owned(),
        description: description.to_owned(),
        prompt: prompt.to_owned(),
        keep_coding_instructions: true,
        path: None,
    };
    vec![
        style(
            DEFAULT,
            "Completes coding tasks efficiently and concisely",
            "",
        ),
        style(
            "Explanatory",
            "Explains the choices it makes and the codebase's patterns as it works",
            "The user wants to understand the code as well as have the task done. While you work, add short insights where they help: why you chose an approach over another, what a pattern in this codebase is for, what a subtle line does. Mark each as a separate short block starting with `Insight:`, two or three points at most, about this code rather than general programming. Keep doing the task at the same pace: the insights go beside the work, never instead of it.",
        ),
        style(
            "Learning",
            "Works with the user, who writes meaningful parts of the code themselves",
            "The user wants to learn by doing. Do the routine parts of the task yourself, but where a piece of logic is worth writing by hand (a design decision, an algorithm's core, error handling that shapes behaviour; 2 to 10 lines), prepare the surrounding code, leave a `TODO(human)` at that spot with what it must do, and ask the user to write it, explaining the trade-offs they face. Wait for them before going on. Also add short `Insight:` notes on why the code is shaped as it is.",
        ),
    ]
}

/// Every style available in `cwd`: the built-in ones, the user's, the project's (`top` is
/// the project folder a project's file must resolve inside). Unreadable, oversized or
/// escaping files are skipped with a line to `notices`.
pub fn discover(cwd: &Path, top: &Path, notices: &crate::Notices) -> Vec<OutputStyle> {
    let mut styles = built_in();
    let mut add = |style: OutputStyle| {
        styles.retain(|known| !known.name.eq_ignore_ascii_case(&style.name));
        styles.push(style);
    };
    if let Some(claude) = crate::claude_code::user_dir() {
        for style in read_dir(&claude.join("output-styles"), None, notices) {
            add(style);
        }
    }
    let boundary = std::fs::canonicalize(top).unwrap_or_else(|_| top.to_path_buf());
    for style in read_dir(&cwd.join(".claude/output-styles"), Some(&boundary), notices) {
        add(style);
    }
    styles
}

/// The styles of the `.md` files of `dir`, in name order; each must resolve inside
/// `boundary` when one is given.
fn read_dir(dir: &Path, boundary: Option<&Path>, notices: &crate::Notices) -> Vec<OutputStyle> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    paths.sort();
    if paths.len() > MAX_FILES {
        notices.say(&format!(
            "warning: {} holds {} output styles; the first {MAX_FILES} are read",
            render::printable(&dir.to_string_lossy(), false),
            paths.len()
        ));
        paths.truncate(MAX_FILES);
    }
    paths
        .into_iter()
        .filter_map(|path| match read(&path, boundary) {
            Ok(style) => Some(style),
            Err(problem) => {
                notices.say(&format!(
                    "warning: output style {} is skipped: {}",
                    render::printable(&path.to_string_lossy(), false),
                    render::printable(&problem, false)
                ));
                None
            }
        })
        .collect()
}

/// The style in `path`.
fn read(path: &Path, boundary: Option<&Path>) -> Result<OutputStyle, String> {
    let real = std::fs::canonicalize(path).map_err(|error| error.to_string())?;
    if let Some(boundary) = boundary
        && !real.starts_with(boundary)
    {
        return Err(format!("it leads outside {}", boundary.display()));
    }
    let meta = std::fs::metadata(&real).map_err(|error| error.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_owned());
    }
    if meta.len() > MAX_BYTES {
        return Err(format!("{} bytes, more than {MAX_BYTES}", meta.len()));
    }
    let text = std::fs::read_to_string(&real).map_err(|error| error.to_string())?;
    let (fields, body) = tools::prompt::split_frontmatter(&text);
    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(OutputStyle {
        name: fields
            .get("name")
            .filter(|name| !name.trim().is_empty())
            .cloned()
            .unwrap_or(stem),
        description: fields.get("description").cloned().unwrap_or_default(),
        prompt: body.trim().to_owned(),
        keep_coding_instructions: fields
            .get("keep-coding-instructions")
            .is_some_and(|value| value.trim() == "true"),
        path: Some(path.to_path_buf()),
    })
}

/// The style named `name` (case does not matter) among `styles`.
pub fn find<'a>(styles: &'a [OutputStyle], name: &str) -> Option<&'a OutputStyle> {
    styles
        .iter()
        .find(|style| style.name.eq_ignore_ascii_case(name.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_come_from_files_and_override_by_name() {
        let base = std::env::temp_dir().join(format!("agent-output-styles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let styles_dir = base.join(".claude/output-styles");
        std::fs::create_dir_all(&styles_dir).unwrap();
        std::fs::write(
            styles_dir.join("terse.md"),
            "---\ndescription: Few words\nkeep-coding-instructions: true\n---\nAnswer in one line.\n",
        )
        .unwrap();
        std::fs::write(
            styles_dir.join("teach.md"),
            "---\nname: Explanatory\n---\nTeach as you go.",
        )
        .unwrap();
        std::fs::write(styles_dir.join("notes.txt"), "not a style").unwrap();
        // A project's style that leads out of the project is skipped.
        let outside =
            std::env::temp_dir().join(format!("agent-style-outside-{}.md", std::process::id()));
        std::fs::write(&outside, "secret").unwrap();
        std::os::unix::fs::symlink(&outside, styles_dir.join("leak.md")).unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&lines);
        let notices = crate::Notices::new(move |line| kept.lock().unwrap().push(line.to_owned()));
        let styles = discover(&base, &base, &notices);
        let terse = find(&styles, "TERSE").unwrap();
        assert_eq!(terse.prompt, "Answer in one line.");
        assert_eq!(terse.description, "Few words");
        assert!(terse.keep_coding_instructions);
        let explanatory = find(&styles, "explanatory").unwrap();
        assert_eq!(explanatory.prompt, "Teach as you go.");
        assert!(!explanatory.keep_coding_instructions);
        assert!(find(&styles, "Learning").unwrap().path.is_none());
        assert!(find(&styles, "leak").is_none());
        assert!(
            lines.lock().unwrap()[0].contains("leak.md is skipped: it leads outside"),
            "{lines:?}"
        );
        let _ = std::fs::remove_dir_all(&base);
        let _ = std::fs::remove_file(&outside);
    }
}
