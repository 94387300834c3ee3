//! `Glob {pattern, path?}`: file names matching a glob, newest first.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, Workspace};
use globset::GlobBuilder;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, fstatat};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{parse_input, run_cancellable};
use crate::session::Shared;
use crate::walk;

/// Paths listed at most; the rest are counted.
pub(crate) const MAX_RESULTS: usize = 100;

const DESCRIPTION: &str = "Finds files by name with a glob pattern and returns their absolute paths, most recently modified first (at most 100). \
Patterns: `*` matches within one path component, `**` across directories, `?` one character, `[abc]` a class, `{a,b}` alternatives. \
A pattern without `/` matches file names at any depth (`*.rs`); a pattern with `/` matches paths relative to the search directory (`src/**/*.ts`, `**/test_*.py`). \
Searches `path` (default: the working directory), hidden files included (`**/*.yml` finds `.github/workflows/ci.yml`); skips files ignored by .gitignore and `.git`, and says how many matching files that left out. \
Use Grep to search file contents.";

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    pattern: String,
    path: Option<String>,
}

/// The Glob tool.
pub(crate) struct GlobTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl GlobTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "The glob to match, such as `**/*.rs` or `src/**/*.{ts,tsx}`"
                },
                "path": {
                    "type": "string",
                    "description": "The directory to search in. Omit it to search the working directory"
                }
            },
            "required": ["pattern"],
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

crate::common::file_tool!(GlobTool, "Glob", glob);

/// A pattern split into the directory to walk and what to match below it.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    /// The leading components without wildcards (absolute when the pattern is).
    base: String,
    /// The rest, matched below `base`.
    rest: String,
    /// Match `rest` against the path relative to `base` (the pattern had a `/`), or against
    /// the file name at any depth.
    anchored: bool,
}

fn has_meta(component: &str) -> bool {
    component.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

impl Plan {
    fn new(pattern: &str) -> Result<Self, ToolError> {
        if pattern.is_empty() {
            return Err(ToolError::InvalidInput("the pattern is empty".into()));
        }
        if pattern.contains('\0') {
            return Err(crate::Error::NulByte.into());
        }
        let components: Vec<&str> = pattern.split('/').collect();
        let mut literal = 0;
        while literal + 1 < components.len() && !has_meta(components[literal]) {
            literal += 1;
        }
        let base = components[..literal].join("/");
        let base = if base.is_empty() && pattern.starts_with('/') {
            "/".to_owned()
        } else {
            base
        };
        let rest_components = &components[literal..];
        if rest_components.contains(&"..") {
            return Err(ToolError::InvalidInput(
                "`..` after a wildcard is not supported; put the directory in `path` instead"
                    .into(),
            ));
        }
        let rest = rest_components.join("/");
        // `**/NAME` (NAME without `/`) matches NAME at any depth: match file names, which is
        // far cheaper than matching whole relative paths.
        if let Some(name) = rest.strip_prefix("**/").filter(|name| !name.contains('/')) {
            return Ok(Self {
                base,
                rest: name.to_owned(),
                anchored: false,
            });
        }
        Ok(Self {
            base,
            rest,
            anchored: pattern.contains('/'),
        })
    }
}

fn glob(
    shared: &Shared,
    workspace: &Workspace,
    input: &Input,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let started = std::time::Instant::now();
    let root = shared.search_root(workspace, "Glob", input.path.as_deref())?;
    if !root.is_dir() {
        return Err(ToolError::InvalidInput(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    let plan = Plan::new(&input.pattern)?;
    let base = if plan.base.is_empty() {
        root
    } else {
        let joined = root.join(&plan.base);
        shared.confine(workspace, "Glob", &joined.to_string_lossy())?
    };
    if !base.is_dir() {
        return Ok(ToolOutput::text("No files found"));
    }
    let matcher = GlobBuilder::new(&plan.rest)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|error| ToolError::InvalidInput(format!("invalid glob pattern: {error}")))?
        .compile_matcher();
    let hides = shared.rules.hides_anything("Glob");
    let search = |ignored: bool| {
        let builder = walk::walker(&base, ignored);
        walk::collect(&builder, cancel, || {
            let matcher = matcher.clone();
            let base = base.clone();
            let anchored = plan.anchored;
            let mut times = ModifiedTimes::default();
            move |entry: &ignore::DirEntry, found: &mut Vec<(PathBuf, Option<SystemTime>)>| {
                let path = entry.path();
                let candidate: &Path = if anchored {
                    path.strip_prefix(&base).unwrap_or(path)
                } else {
                    Path::new(entry.file_name())
                };
                if !matcher.is_match(candidate) || (hides && shared.rules.hides("Glob", path)) {
                    return;
                }
                // Counting what the ignore rules left out needs no times.
                let modified = if ignored {
                    None
                } else {
                    times
                        .of(path)
                        .or_else(|| entry.metadata().ok().and_then(|meta| meta.modified().ok()))
                };
                found.push((path.to_path_buf(), modified));
            }
        })
    };
    let found = search(false);
    if cancel.is_cancelled() {
        return Err(ToolError::Killed("interrupted while searching".into()));
    }
    if !found.is_empty() {
        let (text, filenames, total) = render(found);
        // Claude Code's `GlobOutput` (sdk-tools.d.ts): what hooks and SDK programs get.
        let structured = json!({
            "durationMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "numFiles": filenames.len(),
            "filenames": filenames,
            "truncated": total > MAX_RESULTS,
            "totalMatches": total,
            "countIsComplete": true,
        });
        return Ok(ToolOutput::text(text).with_structured(structured));
    }
    // Nothing: say whether the ignore rules are why.
    let ignored = search(true).len();
    if cancel.is_cancelled() {
        return Err(ToolError::Killed("interrupted while searching".into()));
    }
    Ok(ToolOutput::text(match ignored {
        0 => "No files found".to_owned(),
        count => format!(
            "No files found ({count} matching file{} ignored by .gitignore or .ignore rules left out; list {} with `find` in Bash if you need {})",
            if count == 1 { " is" } else { "s are" },
            if count == 1 { "it" } else { "them" },
            if count == 1 { "it" } else { "them" },
        ),
    }))
}

/// Reads modification times relative to an open handle on the last directory seen: the
/// walker hands out a directory's files together, and `fstatat` on a name skips the kernel's
/// walk of the whole path that `lstat` repeats for every file (a third of a Glob's time on
/// large trees).
#[derive(Default)]
struct ModifiedTimes {
    directory: Option<(PathBuf, OwnedFd)>,
}

impl ModifiedTimes {
    /// The modification time of `path` (not following a final symbolic link); `None` when
    /// it cannot be read this way.
    fn of(&mut self, path: &Path) -> Option<SystemTime> {
        let (parent, name) = (path.parent()?, path.file_name()?);
        if self
            .directory
            .as_ref()
            .is_none_or(|(directory, _)| directory != parent)
        {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            let handle = nix::fcntl::open(parent, flags, Mode::empty()).ok()?;
            self.directory = Some((parent.to_path_buf(), handle));
        }
        let (_, handle) = self.directory.as_ref()?;
        let stat = fstatat(handle, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        let seconds = u64::try_from(stat.st_mtime).ok()?;
        let nanos = u32::try_from(stat.st_mtime_nsec).ok()?;
        SystemTime::UNIX_EPOCH.checked_add(Duration::new(seconds, nanos))
    }
}

/// Newest first (ties by path), at most [`MAX_RESULTS`], with a note when cut.
/// The text for the model, the files shown (newest first, at most [`MAX_RESULTS`]) and how
/// many were found.
fn render(mut found: Vec<(PathBuf, Option<SystemTime>)>) -> (String, Vec<String>, usize) {
    if found.is_empty() {
        return ("No files found".to_owned(), Vec::new(), 0);
    }
    found.sort_unstable_by(|(a_path, a_time), (b_path, b_time)| {
        b_time.cmp(a_time).then_with(|| a_path.cmp(b_path))
    });
    let total = found.len();
    let files: Vec<String> = found
        .iter()
        .take(MAX_RESULTS)
        .map(|(path, _)| path.display().to_string())
        .collect();
    let mut text = files.join("\n");
    if total > MAX_RESULTS {
        text.push_str(&format!(
            "\n(Results are truncated: showing the {MAX_RESULTS} most recently modified of {total} files. Use a more specific pattern or path.)"
        ));
    }
    (text, files, total)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn plan(pattern: &str) -> Plan {
        Plan::new(pattern).unwrap()
    }

    #[test]
    fn patterns_are_split_into_base_and_rest() {
        let check = |pattern: &str, base: &str, rest: &str, anchored: bool| {
            assert_eq!(
                plan(pattern),
                Plan {
                    base: base.into(),
                    rest: rest.into(),
                    anchored,
                },
                "{pattern}"
            );
        };
        check("*.rs", "", "*.rs", false);
        check("**/*.rs", "", "*.rs", false);
        check("src/**/*.rs", "src", "*.rs", false);
        check("src/**/a/*.rs", "src", "**/a/*.rs", true);
        check("src/lib.rs", "src", "lib.rs", true);
        check("a/b/*.{ts,tsx}", "a/b", "*.{ts,tsx}", true);
        check("/abs/dir/*.rs", "/abs/dir", "*.rs", true);
        check("/*.rs", "/", "*.rs", true);
        check(".github/**/*.yml", ".github", "*.yml", false);
        check("**/.env*", "", ".env*", false);
        check("../x/*.rs", "../x", "*.rs", true);
        assert!(Plan::new("**/../x").is_err());
        assert!(Plan::new("").is_err());
    }

    #[test]
    fn modified_times_match_the_file_system() {
        let dir = crate::testutil::TempDir::new("glob-mtimes");
        let mut times = ModifiedTimes::default();
        for name in ["a", "b"] {
            let path = dir.path().join(name);
            std::fs::write(&path, name).unwrap();
            let expected = std::fs::metadata(&path).unwrap().modified().unwrap();
            assert_eq!(times.of(&path), Some(expected));
        }
        assert_eq!(times.of(&dir.path().join("missing")), None);
    }

    #[test]
    fn rendering_sorts_newest_first_and_caps() {
        let at = |secs| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        let found = vec![
            (PathBuf::from("/w/old"), at(1)),
            (PathBuf::from("/w/new"), at(3)),
            (PathBuf::from("/w/b"), at(2)),
            (PathBuf::from("/w/a"), at(2)),
        ];
        let (text, files, total) = render(found);
        assert_eq!(text, "/w/new\n/w/a\n/w/b\n/w/old");
        assert_eq!((files.len(), total), (4, 4));
        let many = (0..150)
            .map(|i| (PathBuf::from(format!("/w/{i:03}")), at(i)))
            .collect();
        let (text, files, total) = render(many);
        assert_eq!((files.len(), total), (MAX_RESULTS, 150));
        assert_eq!(text.lines().count(), MAX_RESULTS + 1);
        assert!(text.starts_with("/w/149\n"));
        assert!(text.ends_with("showing the 100 most recently modified of 150 files. Use a more specific pattern or path.)"));
    }
}
