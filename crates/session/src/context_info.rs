//! The system prompt and the user context (memory files, environment facts).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The version of [`SYSTEM_PROMPT`]: the date its text last changed.
pub const PROMPT_VERSION: &str = "2026-12-06";

/// The most tokens [`SYSTEM_PROMPT`] may take, estimated as the context crate estimates
/// text: a system prompt is paid on every request (from the cache, mostly), so it stays
/// small. Checked by a test.
pub const PROMPT_TOKEN_BUDGET: u64 = 1_500;

macro_rules! coding_instructions {
    () => {
        concat!(
            include_str!("prompt/doing_tasks.md"),
            "\n",
            include_str!("prompt/verification.md"),
            "\n",
            include_str!("prompt/git.md"),
            "\n",
        )
    };
}

/// The static system prompt, one file per section in `src/prompt/` (who it is; doing tasks;
/// checking the work; git; using the tools; answers): byte-stable across runs and sessions so
/// it stays in the prompt cache. What changes (the folder, the date, the platform, the
/// model) is in the user context instead.
pub const SYSTEM_PROMPT: &str = concat!(
    include_str!("prompt/intro.md"),
    "\n",
    coding_instructions!(),
    include_str!("prompt/tools.md"),
    "\n",
    include_str!("prompt/tone.md"),
);

/// The sections of [`SYSTEM_PROMPT`] about how to do coding work (doing tasks, checking
/// the work, git), each followed by a blank line: an output style without
/// `keep-coding-instructions` replaces them (as in Claude Code).
pub const CODING_INSTRUCTIONS: &str = coding_instructions!();

/// [`SYSTEM_PROMPT`] with `style` applied: its text as a section of its own at the end
/// (`# Output Style: NAME`), and without [`CODING_INSTRUCTIONS`] unless the style keeps
/// them. The `default` style changes nothing.
pub fn system_prompt_with(style: Option<&crate::output_styles::OutputStyle>) -> String {
    let Some(style) = style.filter(|style| !style.prompt.is_empty()) else {
        return SYSTEM_PROMPT.to_owned();
    };
    let base = if style.keep_coding_instructions {
        SYSTEM_PROMPT.to_owned()
    } else {
        SYSTEM_PROMPT.replacen(CODING_INSTRUCTIONS, "", 1)
    };
    format!(
        "{}\n\n# Output Style: {}\n{}",
        base.trim_end(),
        style.name,
        style.prompt
    )
}

/// A folder's memory files, in the order they are read: the shared ones, Claude Code's,
/// then the user's private `CLAUDE.local.md` (not committed).
pub const PROJECT_MEMORY: [&str; 4] = [
    "AGENTS.md",
    "CLAUDE.md",
    ".claude/CLAUDE.md",
    "CLAUDE.local.md",
];

/// Most bytes of memory files put in the user context.
pub const MEMORY_CAP_BYTES: usize = 40_000;

/// Memory files, in Claude Code's order: the user's own first (`~/.claude/CLAUDE.md`,
/// `$XDG_CONFIG_HOME/agent/AGENTS.md`), then each folder's from the repository root down to
/// `cwd`, each folder's in the order of [`PROJECT_MEMORY`] (`AGENTS.md`, `CLAUDE.md`,
/// `.claude/CLAUDE.md`, `CLAUDE.local.md`): the more specific later.
///
/// A project's memory file must resolve inside the folder that holds the search (the
/// repository root, or `cwd` outside a repository or in one that holds the home folder): a committed `CLAUDE.md` that is a link to
/// `~/.ssh/id_rsa` would otherwise be sent to the API. The user's own files may be links.
pub fn memory_files(cwd: &Path, notices: &crate::Notices) -> Vec<PathBuf> {
    // The folder folder trust is keyed by: the repository root, else `cwd` (a repository
    // holding the home folder, a dotfiles one, does not count: its memory files and what
    // they link to are the user's, not the project's).
    let top = crate::settings::project_folder(cwd);
    // One group per folder, `cwd` first; reversed below so the root comes first.
    let mut groups: Vec<Vec<PathBuf>> = Vec::new();
    for dir in cwd.ancestors() {
        groups.push(
            PROJECT_MEMORY
                .iter()
                .map(|name| dir.join(name))
                .filter(|path| path.is_file())
                .collect(),
        );
        if dir == top {
            break;
        }
    }
    groups.reverse();
    let mut project: Vec<PathBuf> = groups.concat();
    let boundary = std::fs::canonicalize(&top).unwrap_or(top);
    project.retain(|path| {
        let inside = std::fs::canonicalize(path).is_ok_and(|real| real.starts_with(&boundary));
        if !inside {
            notices.say(&format!(
                "warning: {} is skipped: it leads outside {}",
                path.display(),
                boundary.display()
            ));
        }
        inside
    });
    let mut files = Vec::new();
    if let Some(claude) = crate::claude_code::user_dir() {
        let path = claude.join("CLAUDE.md");
        if path.is_file() {
            files.push(path);
        }
    }
    if let Some(config) = dirs::config_dir() {
        let path = config.join("agent").join("AGENTS.md");
        if path.is_file() {
            files.push(path);
        }
    }
    files.extend(project);
    files
}

/// `git status --short` of `cwd`, or `None` outside a repository (bounded to 2 s). The
/// repository's configuration may name programs (`core.fsmonitor`, hooks, clean filters), so
/// git runs with `core.fsmonitor` and hooks off, and in the read-only sandbox when there is
/// one; without a sandbox, only in a `trusted` folder (a filter runs whatever it names).
/// `git` is the one found outside the workspace, and gets the allow-listed environment.
async fn git_status(cwd: &Path, sandbox: &tools::SandboxConfig, trusted: bool) -> Option<String> {
    let args: Vec<std::ffi::OsString> = [
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
        "status",
        "--short",
        "--branch",
    ]
    .iter()
    .map(Into::into)
    .collect();
    tracing::debug!(target: "timeline", "git status: preparing");
    // Found once outside the workspace: never the repository's own `git`.
    let git = tools::sandbox::env::resolve_program("git").ok()?;
    let temp = tools::sandbox::PrivateDir::create().ok()?;
    // `placeholders` lives until git is done (the sandbox's placeholders).
    let (mut command, placeholders) = match sandbox.backend.as_ref().filter(|b| b.is_available()) {
        Some(backend) => {
            let policy = tools::sandbox::Policy::new(
                tools::sandbox::Profile::ReadOnly,
                vec![tools::real_path(cwd).ok()?],
                temp.path().to_path_buf(),
            );
            let prepared = tools::sandbox::Sandbox::new(backend.clone())
                .command(&policy, git.as_os_str(), &args, cwd)
                .ok()?;
            (prepared.command, Some(prepared.guard))
        }
        None if !trusted => return None,
        None => {
            let mut command = std::process::Command::new(&git);
            command.args(&args).current_dir(cwd);
            (command, None)
        }
    };
    let confinement = if placeholders.is_some() {
        tools::sandbox::env::Confinement::Sandboxed
    } else {
        tools::sandbox::env::Confinement::Unsandboxed
    };
    tools::sandbox::env::reset(&mut command, confinement, &[]);
    tracing::debug!(target: "timeline", "git status: starting");
    let output = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::process::Command::from(command)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await;
    let Ok(Ok(output)) = output else {
        // Timed out (bubblewrap is killed on drop) or failed: nothing left in its sandbox.
        if let Some(mut guard) = placeholders {
            guard.kill_sandbox();
            tools::release_sandbox(Some(guard), None);
        }
        return None;
    };
    tracing::debug!(target: "timeline", "git status: done");
    if let Some(guard) = placeholders {
        guard.exited(output.status);
    }
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_owned()
    })
}

/// `context`'s working-directory line ([`facts`]) for `from` made to say `to` (a worktree the
/// agent moved into); a context without that line stays as it is.
pub(crate) fn move_working_directory(context: &mut String, from: &Path, to: &str) {
    *context = context.replace(
        &format!("Working directory: {}\n", from.display()),
        &format!("Working directory: {to}\n"),
    );
}

/// The environment facts of the user context: the working directory and the date.
///
/// `Working directory`, the `Additional directories` when there are some, whether the folder
/// is in a git repository, the platform and the user's shell, the model and its knowledge
/// cutoff (when [`context::knowledge_cutoff`] knows it), and today's date:
/// the environment block, in the user context rather than the system prompt so that the
/// prompt stays the same for every session (and in the cache).
pub fn facts(cwd: &Path, additional_dirs: &[PathBuf], model: &str, date: &str) -> String {
    let mut facts = format!("Working directory: {}\n", cwd.display());
    if !additional_dirs.is_empty() {
        let dirs: Vec<String> = additional_dirs
            .iter()
            .map(|dir| dir.display().to_string())
            .collect();
        facts.push_str(&format!("Additional directories: {}\n", dirs.join(", ")));
    }
    let git = cwd
        .ancestors()
        .any(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok());
    facts.push_str(&format!(
        "Git repository: {}\n",
        if git { "yes" } else { "no" }
    ));
    let shell = std::env::var("SHELL")
        .ok()
        .and_then(|shell| {
            Path::new(&shell)
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "sh".to_owned());
    facts.push_str(&format!(
        "Platform: {} ({}); the user's shell: {shell} (Bash runs bash)\nModel: {model}\n",
        std::env::consts::OS,
        std::env::consts::ARCH,
    ));
    if let Some(cutoff) = context::knowledge_cutoff(model) {
        facts.push_str(&format!("Knowledge cutoff: {cutoff}\n"));
    }
    facts.push_str(&format!("Today's date: {date}\n"));
    facts
}

/// `git status` as the user context shows it (at most 40 lines), or `None` outside a
/// repository or when it cannot run (see [`git_status`]).
pub async fn git_status_section(
    cwd: &Path,
    sandbox: &tools::SandboxConfig,
    trusted: bool,
) -> Option<String> {
    let status = git_status(cwd, sandbox, trusted).await?;
    let status: String = status.lines().take(40).collect::<Vec<_>>().join("\n");
    Some(format!("Git status:\n{status}\n"))
}

/// What a memory file is, as Claude Code labels it for the model: the user's own files
/// (`~/.claude/CLAUDE.md`, `~/.config/agent/AGENTS.md`) apply to every project, a
/// `CLAUDE.local.md` is the user's and not checked in, the rest is the project's.
fn memory_label(path: &Path) -> &'static str {
    let users = [
        crate::claude_code::user_dir().map(|claude| claude.join("CLAUDE.md")),
        dirs::config_dir().map(|config| config.join("agent").join("AGENTS.md")),
    ];
    if users.iter().flatten().any(|user| user == path) {
        "the user's private global instructions for all projects"
    } else if path
        .file_name()
        .is_some_and(|name| name == "CLAUDE.local.md")
    {
        "the user's private instructions for this project, not checked in"
    } else {
        "instructions for this project, checked into the codebase"
    }
}

/// The memory files' part of the user context (see [`memory_files`]), capped at
/// [`MEMORY_CAP_BYTES`], and the files it holds (whole or cut). Blocking: run it off the
/// async threads.
pub fn memory_section(cwd: &Path, notices: &crate::Notices) -> (String, Vec<PathBuf>) {
    let mut text = String::new();
    let mut loaded = Vec::new();
    let mut used = 0;
    for path in memory_files(cwd, notices) {
        let room = MEMORY_CAP_BYTES.saturating_sub(used);
        if room == 0 {
            text.push_str(&format!(
                "\n(memory file {} skipped: the memory budget is used up)\n",
                path.display()
            ));
            continue;
        }
        // Only what fits is read (a huge memory file costs no memory), as UTF-8 text.
        let Some((content, total)) = read_prefix(&path, room) else {
            continue;
        };
        let cut = content.len();
        text.push_str(&format!(
            "\nContents of {} ({}):\n{content}\n",
            path.display(),
            memory_label(&path),
        ));
        if (cut as u64) < total {
            text.push_str(&format!("(cut: {cut} of {total} bytes shown)\n"));
        }
        used += cut;
        loaded.push(path);
    }
    (text, loaded)
}

/// Claude Code's `memory_type` of the memory file at `path` (InstructionsLoaded hooks):
/// `User` for the user's own (`~/.claude/CLAUDE.md`, `~/.config/agent/AGENTS.md`), `Local`
/// for `CLAUDE.local.md`, `Project` for the others.
pub fn memory_type(path: &Path) -> &'static str {
    let user = [
        crate::claude_code::user_dir().map(|dir| dir.join("CLAUDE.md")),
        dirs::config_dir().map(|dir| dir.join("agent").join("AGENTS.md")),
    ];
    if user.iter().flatten().any(|file| file == path) {
        "User"
    } else if path
        .file_name()
        .is_some_and(|name| name == "CLAUDE.local.md")
    {
        "Local"
    } else {
        "Project"
    }
}

/// The first `room` bytes of the file at `path` (cut back to a whole character) and its
/// size; `None` when it cannot be read or is not UTF-8 text.
fn read_prefix(path: &Path, room: usize) -> Option<(String, u64)> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    let total = file.metadata().ok()?.len();
    let mut bytes = Vec::new();
    file.take(room as u64).read_to_end(&mut bytes).ok()?;
    match String::from_utf8(bytes) {
        Ok(text) => Some((text, total)),
        // Cut inside a character at the end of what was read: keep the whole ones.
        Err(error) if error.utf8_error().error_len().is_none() && (room as u64) < total => {
            let valid = error.utf8_error().valid_up_to();
            let mut bytes = error.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).ok().map(|text| (text, total))
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod memory_tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn memory_files_are_labelled_as_claude_code_labels_them() {
        if let Some(home) = dirs::home_dir() {
            assert_eq!(
                memory_label(&home.join(".claude/CLAUDE.md")),
                "the user's private global instructions for all projects"
            );
        }
        assert_eq!(
            memory_label(Path::new("/w/CLAUDE.local.md")),
            "the user's private instructions for this project, not checked in"
        );
        assert_eq!(
            memory_label(Path::new("/w/AGENTS.md")),
            "instructions for this project, checked into the codebase"
        );
    }

    use super::*;

    #[test]
    fn memory_files_are_read_only_as_far_as_the_budget_goes() {
        let dir = std::env::temp_dir().join(format!("agent-memory-prefix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let accents = dir.join("accents.md");
        std::fs::write(&accents, "é".repeat(10)).unwrap();
        // 20 bytes of two-byte characters, 5 of room: two whole characters.
        assert_eq!(read_prefix(&accents, 5), Some(("éé".to_owned(), 20)));
        assert_eq!(read_prefix(&accents, 100), Some(("é".repeat(10), 20)));
        let binary = dir.join("binary.md");
        std::fs::write(&binary, b"ab\xffcd").unwrap();
        assert_eq!(read_prefix(&binary, 100), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_project_memory_file_that_leads_outside_is_skipped() {
        let base = std::env::temp_dir().join(format!("agent-memory-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let repo = base.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        std::fs::write(base.join("secret"), "id_rsa").unwrap();
        std::fs::write(repo.join("AGENTS.md"), "be kind").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), repo.join("sub/CLAUDE.md")).unwrap();
        std::os::unix::fs::symlink("AGENTS.md", repo.join("CLAUDE.md")).unwrap();
        let files = memory_files(&repo.join("sub"), &crate::Notices::default());
        assert!(files.contains(&repo.join("AGENTS.md")));
        assert!(
            files.contains(&repo.join("CLAUDE.md")),
            "a link inside is fine"
        );
        assert!(!files.contains(&repo.join("sub/CLAUDE.md")), "{files:?}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn claude_codes_memory_files_are_read_root_first_local_last() {
        let base = std::env::temp_dir().join(format!("agent-memory-order-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let repo = base.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join(".claude")).unwrap();
        std::fs::create_dir_all(repo.join("app/.claude")).unwrap();
        for file in [
            "CLAUDE.md",
            ".claude/CLAUDE.md",
            "CLAUDE.local.md",
            "AGENTS.md",
            "app/CLAUDE.local.md",
            "app/.claude/CLAUDE.md",
        ] {
            std::fs::write(repo.join(file), file).unwrap();
        }
        let files: Vec<PathBuf> = memory_files(&repo.join("app"), &crate::Notices::default())
            .into_iter()
            .filter(|path| path.starts_with(&repo))
            .collect();
        let names: Vec<String> = files
            .iter()
            .map(|path| path.strip_prefix(&repo).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "AGENTS.md",
                "CLAUDE.md",
                ".claude/CLAUDE.md",
                "CLAUDE.local.md",
                "app/.claude/CLAUDE.md",
                "app/CLAUDE.local.md",
            ]
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}

#[cfg(test)]
mod prompt_tests {
    use context::TokenEstimator as _;

    use super::*;

    #[test]
    fn the_system_prompt_stays_within_its_budget_and_matches_its_snapshot() {
        let tokens = context::BytesEstimator::default().text(SYSTEM_PROMPT).0;
        assert!(
            tokens <= PROMPT_TOKEN_BUDGET,
            "{tokens} tokens (budget {PROMPT_TOKEN_BUDGET})"
        );
        // A change of the prompt is a change of this file too (and of PROMPT_VERSION): the
        // diff of a review shows what the model is told.
        let snapshot = include_str!("../tests/snapshots/system_prompt.txt");
        assert_eq!(
            SYSTEM_PROMPT, snapshot,
            "update tests/snapshots/system_prompt.txt and PROMPT_VERSION"
        );
        for heading in [
            "# Doing tasks",
            "# Checking your work",
            "# Git",
            "# Using the tools",
            "# Answers",
        ] {
            assert_eq!(SYSTEM_PROMPT.matches(heading).count(), 1, "{heading}");
        }
        assert!(SYSTEM_PROMPT.starts_with("You are agent, a coding agent."));
        assert!(!SYSTEM_PROMPT.contains("\n\n\n"));
    }

    #[test]
    fn an_output_style_replaces_the_coding_sections_unless_it_keeps_them() {
        let style = |keep| crate::output_styles::OutputStyle {
            name: "Teacher".into(),
            prompt: "Explain as you go.".into(),
            description: String::new(),
            keep_coding_instructions: keep,
            path: None,
        };
        let without = system_prompt_with(Some(&style(false)));
        assert!(!without.contains("# Doing tasks") && !without.contains("# Git"));
        assert!(without.contains("# Using the tools"));
        assert!(without.ends_with("\n\n# Output Style: Teacher\nExplain as you go."));
        let with = system_prompt_with(Some(&style(true)));
        assert!(with.contains("# Doing tasks") && with.starts_with(SYSTEM_PROMPT.trim_end()));
        assert_eq!(system_prompt_with(None), SYSTEM_PROMPT);
    }

    #[test]
    fn the_environment_block_names_the_folder_platform_model_cutoff_and_date() {
        let dir = std::env::temp_dir().join(format!("agent-facts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let facts = facts(
            &dir,
            &[PathBuf::from("/data/shared")],
            "claude-opus-4-8",
            "2026-12-06",
        );
        let lines: Vec<&str> = facts.lines().collect();
        assert_eq!(lines[0], format!("Working directory: {}", dir.display()));
        assert_eq!(lines[1], "Additional directories: /data/shared");
        assert_eq!(lines[2], "Git repository: no");
        assert!(lines[3].starts_with(&format!("Platform: {} (", std::env::consts::OS)));
        assert_eq!(lines[4], "Model: claude-opus-4-8");
        assert_eq!(lines[5], "Knowledge cutoff: January 2026");
        assert_eq!(lines[6], "Today's date: 2026-12-06");
        std::fs::create_dir_all(dir.join(".git")).unwrap_or_default();
        // A model without a known cutoff is told none.
        let other = super::facts(&dir, &[], "gpt-5", "d");
        assert!(other.contains("Git repository: yes\n"));
        assert!(other.contains("Model: gpt-5\nToday's date: d\n"), "{other}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
