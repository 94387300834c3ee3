//! Folder trust: whether the project's own settings may run code, move credentials or grant
//! permissions (see `settings::Layer::needs_trust`).
//!
//! A folder is keyed by its canonical repository root (the nearest folder at or above the
//! working directory holding `.git`, unless that folder holds the home folder), else by the
//! working directory itself. It is trusted by `--trust`, by `AGENT_TRUST=1`, by an entry of
//! the user setting `trustedFolders` at or above it, or by an earlier "yes" to the
//! interactive question, remembered in `~/.config/agent/trusted-folders.json`
//! (`{"trustedFolders": ["/path", ...]}`, mode 0600). Nothing else can trust a folder: a
//! project's own files cannot, and the agent's tools cannot write the user's config folder.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Why a folder is trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--trust`.
    Flag,
    /// `AGENT_TRUST=1`.
    Env,
    /// An entry of `trustedFolders` in the user's settings.
    Setting(PathBuf),
    /// A "yes" remembered in [`remembered_file`].
    Remembered(PathBuf),
}

/// The folder trust is decided for: the canonical repository root enclosing `cwd` (a
/// canonical path), else `cwd`. A repository holding the home folder (a dotfiles repository)
/// does not count: trusting it would trust every project of the user.
pub fn folder(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
        .filter(|top| !tools::sandbox::holds_home(top))
        .unwrap_or(cwd)
        .to_path_buf()
}

/// Whether `AGENT_TRUST` says yes (`1`, `true` or `yes`).
pub fn env_trusts() -> bool {
    std::env::var("AGENT_TRUST").is_ok_and(|value| {
        matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes"
        )
    })
}

/// The file remembering the folders the user trusted interactively.
pub fn remembered_file() -> Option<PathBuf> {
    dirs::config_dir().map(|config| config.join("agent").join("trusted-folders.json"))
}

/// `entry` (absolute, or `~/...`) made absolute; `None` for a relative path.
fn expand(entry: &str) -> Option<PathBuf> {
    let path = match entry.strip_prefix("~/") {
        Some(rest) => dirs::home_dir()?.join(rest),
        None if entry == "~" => dirs::home_dir()?,
        None => PathBuf::from(entry),
    };
    path.is_absolute().then_some(path)
}

/// The first of `entries` at or above `folder`: compared resolved (an entry that does not
/// exist is compared as written). Relative entries are skipped with a warning naming
/// `origin`.
fn covering(entries: &[String], folder: &Path, origin: &Path) -> Option<PathBuf> {
    entries.iter().find_map(|entry| {
        let Some(path) = expand(entry) else {
            eprintln!(
                "agent: warning: {}: trustedFolders entry {entry:?} is not an absolute path (or ~/...); it is ignored",
                origin.display()
            );
            return None;
        };
        let resolved = path.canonicalize().unwrap_or(path);
        folder.starts_with(&resolved).then_some(resolved)
    })
}

/// The folders remembered in [`remembered_file`] (none when it does not exist).
///
/// # Errors
///
/// When the file exists but cannot be read or is not `{"trustedFolders": [...]}`.
fn remembered(file: &Path) -> anyhow::Result<Vec<String>> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Remembered {
        trusted_folders: Vec<String>,
    }
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("reading {}", file.display())),
    };
    let parsed: Remembered = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected {{\"trustedFolders\": [\"/path\", ...]}}",
            file.display()
        )
    })?;
    Ok(parsed.trusted_folders)
}

/// Why `folder` is trusted without asking, if it is: `flag` (`--trust`), then
/// `AGENT_TRUST`, then the user setting `trustedFolders` (`setting_entries`, read from
/// `settings_file`), then the remembered answers.
///
/// # Errors
///
/// When the remembered-answers file exists but does not parse (named in the error).
pub fn trusted_without_asking(
    folder: &Path,
    flag: bool,
    setting_entries: &[String],
    settings_file: &Path,
) -> anyhow::Result<Option<Source>> {
    if flag {
        return Ok(Some(Source::Flag));
    }
    if env_trusts() {
        return Ok(Some(Source::Env));
    }
    if let Some(entry) = covering(setting_entries, folder, settings_file) {
        return Ok(Some(Source::Setting(entry)));
    }
    if let Some(file) = remembered_file()
        && let Some(entry) = covering(&remembered(&file)?, folder, &file)
    {
        return Ok(Some(Source::Remembered(entry)));
    }
    Ok(None)
}

/// Adds `folder` to [`remembered_file`], keeping what it held; written whole to a
/// temporary file then renamed over it, mode 0600 in a 0700 folder.
///
/// # Errors
///
/// When `folder` is not UTF-8 (it could not be matched exactly later), holds the home
/// folder or is `/` or the temporary folder (it would trust every project under it), when
/// the config folder is unknown, or the file cannot be read, parsed or written.
pub fn remember(folder: &Path) -> anyhow::Result<PathBuf> {
    let shown = crate::output::printable(&folder.to_string_lossy(), false);
    let Some(entry) = folder.to_str().map(str::to_owned) else {
        anyhow::bail!("{shown} is not valid UTF-8, so it cannot be remembered exactly");
    };
    if tools::sandbox::holds_home(folder)
        || folder.parent().is_none()
        || std::env::temp_dir()
            .canonicalize()
            .is_ok_and(|temp| temp == folder)
    {
        anyhow::bail!(
            "{shown} holds your home folder, or is / or the temporary folder: remembering it would trust every project under it (use --trust for one run, or list chosen folders in trustedFolders)"
        );
    }
    let file = remembered_file().context("no config folder (neither XDG_CONFIG_HOME nor HOME)")?;
    let mut entries = remembered(&file)?;
    if !entries.contains(&entry) {
        entries.push(entry);
    }
    let dir = file
        .parent()
        .context("the trusted-folders file has no folder")?;
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&serde_json::json!({ "trustedFolders": entries }))?;
    let temporary = dir.join(format!(".trusted-folders.{}.tmp", std::process::id()));
    let written = (|| {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
        out.sync_all()?;
        std::fs::rename(&temporary, &file)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(error).with_context(|| format!("writing {}", file.display()));
    }
    Ok(file)
}

/// The one warning of a run in an untrusted folder: the folder, what is ignored, and how to
/// trust it.
pub fn untrusted_warning(folder: &Path, ignored: &[String]) -> String {
    let mut text = format!(
        "{} is not a trusted folder: these project settings are ignored (deny and ask rules still apply):",
        crate::output::printable(&folder.to_string_lossy(), false)
    );
    for part in ignored {
        text.push_str("\n  ");
        text.push_str(&crate::output::printable(&shorten(part), false));
    }
    text.push_str(
        "\nTrust it with --trust, AGENT_TRUST=1, or \"trustedFolders\" in ~/.config/agent/settings.json.",
    );
    text
}

/// `part`, cut to 200 characters (a long hook command or value).
pub fn shorten(part: &str) -> String {
    const LIMIT: usize = 200;
    match part.char_indices().nth(LIMIT) {
        Some((at, _)) => format!("{}…", &part[..at]),
        None => part.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_is_the_repository_root_unless_it_holds_home() {
        let base = std::env::temp_dir().join(format!("agent-trust-{}", std::process::id()));
        let repo = base.join("repo");
        let sub = repo.join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        assert_eq!(folder(&sub), repo);
        assert_eq!(folder(&repo), repo);
        let plain = base.join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(folder(&plain), plain);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn entries_cover_their_folder_and_below_only() {
        let origin = Path::new("/u.json");
        let entries = vec!["relative/path".to_owned(), "/srv/work".to_owned()];
        assert_eq!(
            covering(&entries, Path::new("/srv/work/repo"), origin),
            Some(PathBuf::from("/srv/work"))
        );
        assert_eq!(
            covering(&entries, Path::new("/srv/work"), origin),
            Some(PathBuf::from("/srv/work"))
        );
        // A sibling sharing a prefix is not covered.
        assert_eq!(covering(&entries, Path::new("/srv/workshop"), origin), None);
        assert_eq!(covering(&entries, Path::new("/srv"), origin), None);
    }

    #[test]
    fn warnings_neutralise_control_characters_and_shorten() {
        let long = format!("hooks.Stop: {}", "x".repeat(500));
        let text = untrusted_warning(
            Path::new("/r\x1b]0;pwned\x07"),
            &["env: A=\x1b[2J".to_owned(), long],
        );
        assert!(!text.contains('\x1b'), "{text:?}");
        assert!(!text.contains('\x07'), "{text:?}");
        assert!(text.lines().nth(2).unwrap().chars().count() < 210);
    }

    #[test]
    fn folders_holding_every_project_are_not_remembered() {
        for folder in ["/".into(), std::env::temp_dir().canonicalize().unwrap()] {
            let error = remember(&folder).unwrap_err().to_string();
            assert!(
                error.contains("would trust every project under it"),
                "{error}"
            );
        }
        for home in tools::sandbox::home_dirs() {
            let error = remember(&home).unwrap_err().to_string();
            assert!(error.contains("holds your home folder"), "{error}");
        }
        use std::os::unix::ffi::OsStrExt as _;
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"/srv/repo\xff"));
        let error = remember(odd).unwrap_err().to_string();
        assert!(error.contains("is not valid UTF-8"), "{error}");
    }
}
