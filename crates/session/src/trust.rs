//! Folder trust: whether the project's own settings may run code, move credentials or grant
//! permissions (see `settings::Layer::trust_items`).
//!
//! A folder is keyed by its canonical repository root (the nearest folder at or above the
//! working directory holding `.git`, unless that folder holds the home folder), else by the
//! working directory itself. It is trusted by `--trust`, by `AGENT_TRUST=1`, by an entry of
//! the user setting `trustedFolders` at or above it, by Claude Code's trust dialog accepted
//! for it or a folder above it (`~/.claude.json`, see [`crate::claude_code`]), or by an
//! earlier "yes" to the interactive question, remembered in
//! `~/.config/agent/trusted-folders.json`
//! (`{"trustedFolders": ["/path", ...], "fingerprints": {...}}`, mode 0600). Nothing else
//! can trust a folder: a project's own files cannot, and the agent's tools cannot write the
//! user's config folder.
//!
//! Trust is tied to content. What a session reads that needs trust ([`items`]: the hooks,
//! `env`, allow rules, default mode, additional directories and providers of the settings
//! files of its working directory, its `.mcp.json` servers, its commands' `allowed-tools`)
//! is fingerprinted, one SHA-256 per item, and recorded under the trusted folder, per working
//! directory below it, when the user answers "yes" (only the working directory's, which the
//! question showed) or, for a folder trusted by `trustedFolders` or by an answer an earlier
//! version remembered, the first time a session starts in it (every configured folder below
//! it, as it is then). A record covers everything below its folder: at start, the working
//! directory's items must be among the ones recorded for it ([`standing`]); a change, or
//! configuration in a folder below that had none when it was recorded (a `git pull`, a
//! command that created `sub/.claude/`), asks again, and headless is ignored with one
//! warning. `--trust` and `AGENT_TRUST=1` trust whatever the folder holds, for that run.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use sha2::Digest as _;

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
    /// Claude Code's trust dialog, accepted for this folder (or one above it) as
    /// `~/.claude.json` records it (`projects.<folder>.hasTrustDialogAccepted`).
    ClaudeCode(PathBuf),
}

/// The answer to the folder-trust question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrustAnswer {
    /// Trust the folder and remember it (with its configuration's fingerprint).
    Always,
    /// Trust it for this session.
    Once,
    /// Do not trust it (also end of input).
    No,
}

/// Asks the person at a front end whether to trust a folder: the terminal asks at its
/// prompt (`interactive::TerminalTrust`); a front end with nobody to ask has none, and the
/// folder's configuration is then ignored with one warning.
pub trait TrustAsker {
    /// Asks under `heading` (one line, shown as written), listing `parts` (one line each:
    /// what the folder configures that needs trust, or what changed since it was trusted).
    fn ask(&self, heading: &str, parts: &[String]) -> TrustAnswer;

    /// Asks whether to start the project's `.mcp.json` server `name` (`detail`: what it
    /// runs or where it connects), which no setting approved yet, as Claude Code asks at
    /// start-up. `None`: not asked (a front end that cannot ask); the server does not start.
    fn ask_mcp_server(&self, name: &str, detail: &str) -> Option<crate::approvals::McpjsonAnswer> {
        let _ = (name, detail);
        None
    }
}

/// The heading of the question about a folder not trusted yet.
pub fn untrusted_heading(folder: &Path) -> String {
    format!(
        "{} is not a trusted folder. Its settings configure:",
        render::printable(&folder.to_string_lossy(), false)
    )
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
fn covering(
    entries: &[String],
    folder: &Path,
    origin: &Path,
    notices: &crate::Notices,
) -> Option<PathBuf> {
    entries.iter().find_map(|entry| {
        let Some(path) = expand(entry) else {
            notices.say(&format!(
                "warning: {}: trustedFolders entry {entry:?} is not an absolute path (or ~/...); it is ignored",
                origin.display()
            ));
            return None;
        };
        let resolved = path.canonicalize().unwrap_or(path);
        folder.starts_with(&resolved).then_some(resolved)
    })
}

/// What [`remembered_file`] holds: the folders trusted by an answer, and the fingerprints of
/// trusted folders' configuration, by folder, then by working directory relative to it
/// (`.` for the folder itself), each a set of hex SHA-256 digests of [`Item`]s.
#[derive(Debug, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Store {
    trusted_folders: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    fingerprints: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl Store {
    /// The nearest folder at or above `cwd` with a record, and `cwd` relative to it.
    fn record_for(&self, cwd: &Path) -> Option<(PathBuf, String)> {
        cwd.ancestors()
            .find(|dir| {
                dir.to_str()
                    .is_some_and(|key| self.fingerprints.contains_key(key))
            })
            .map(|dir| (dir.to_path_buf(), relative(cwd, dir)))
    }

    /// The digests recorded for `rel` under `at` (none when nothing was configured there).
    fn recorded(&self, at: &Path, rel: &str) -> BTreeSet<String> {
        at.to_str()
            .and_then(|key| self.fingerprints.get(key))
            .and_then(|record| record.get(rel))
            .cloned()
            .unwrap_or_default()
    }
}

/// `cwd` relative to `at` (an ancestor of it), `.` for `at` itself.
fn relative(cwd: &Path, at: &Path) -> String {
    match cwd.strip_prefix(at) {
        Ok(rest) if rest.as_os_str().is_empty() => ".".to_owned(),
        Ok(rest) => rest.to_string_lossy().into_owned(),
        Err(_) => cwd.to_string_lossy().into_owned(),
    }
}

/// The trust store (none when it does not exist).
///
/// # Errors
///
/// When the file exists but cannot be read or is not `{"trustedFolders": [...]}`.
fn read_store(file: &Path) -> anyhow::Result<Store> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Store::default()),
        Err(error) => return Err(error).with_context(|| format!("reading {}", file.display())),
    };
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected {{\"trustedFolders\": [\"/path\", ...]}}",
            file.display()
        )
    })
}

/// Writes the trust store whole to a temporary file then renames it over `file`, mode 0600
/// in a 0700 folder.
///
/// # Errors
///
/// When the folder cannot be made or the file cannot be written.
fn write_store(file: &Path, store: &Store) -> anyhow::Result<()> {
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
    let text = serde_json::to_string_pretty(store)?;
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
        std::fs::rename(&temporary, file)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(error).with_context(|| format!("writing {}", file.display()));
    }
    Ok(())
}

/// The folders remembered in [`remembered_file`] (none when it does not exist).
///
/// # Errors
///
/// When the file exists but cannot be read or is not `{"trustedFolders": [...]}`.
fn remembered(file: &Path) -> anyhow::Result<Vec<String>> {
    Ok(read_store(file)?.trusted_folders)
}

/// What may trust a folder without a question, besides `AGENT_TRUST` and the remembered
/// answers: `--trust`, the user setting `trustedFolders`, Claude Code's trust dialog.
#[derive(Clone, Copy, Debug)]
pub struct Grants<'a> {
    /// `--trust`.
    pub flag: bool,
    /// The user setting `trustedFolders`.
    pub setting_entries: &'a [String],
    /// The file those entries were read from.
    pub settings_file: &'a Path,
    /// Claude Code's state (`~/.claude.json`), read once at start.
    pub claude: &'a crate::claude_code::State,
}

/// Why `folder` is trusted without asking, if it is: `--trust`, then `AGENT_TRUST`, then
/// the user setting `trustedFolders`, then the remembered answers, then Claude Code's trust
/// dialog (see [`Grants`]).
///
/// # Errors
///
/// When the remembered-answers file exists but does not parse (named in the error).
pub fn trusted_without_asking(
    folder: &Path,
    grants: &Grants<'_>,
    notices: &crate::Notices,
) -> anyhow::Result<Option<Source>> {
    if grants.flag {
        return Ok(Some(Source::Flag));
    }
    if env_trusts() {
        return Ok(Some(Source::Env));
    }
    if let Some(entry) = covering(
        grants.setting_entries,
        folder,
        grants.settings_file,
        notices,
    ) {
        return Ok(Some(Source::Setting(entry)));
    }
    if let Some(file) = remembered_file()
        && let Some(entry) = covering(&remembered(&file)?, folder, &file, notices)
    {
        return Ok(Some(Source::Remembered(entry)));
    }
    // Claude Code's answer counts as ours, except for a folder that would trust every
    // project under it (the home folder, `/`, the temporary folder).
    if let Some(entry) = grants.claude.trusted_folder(folder)
        && recordable(&entry).is_ok()
    {
        return Ok(Some(Source::ClaudeCode(entry)));
    }
    Ok(None)
}

/// Whether `folder` may hold a record or be remembered: not when it holds the home folder,
/// is `/` or is the temporary folder (it would trust every project under it).
///
/// # Errors
///
/// Saying which, naming the folder.
fn recordable(folder: &Path) -> anyhow::Result<()> {
    let shown = render::printable(&folder.to_string_lossy(), false);
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
    Ok(())
}

/// Adds `folder` to [`remembered_file`], keeping what it held, and records `items` (what
/// the session in `cwd` reads, as the question showed it) as the trusted configuration of
/// `cwd`: under the nearest folder at or above `cwd` that has a record, else under
/// `folder`. Written whole to a temporary file then renamed over it, mode 0600 in a 0700
/// folder.
///
/// # Errors
///
/// When `folder` is not UTF-8 (it could not be matched exactly later), holds the home
/// folder or is `/` or the temporary folder (it would trust every project under it), when
/// the config folder is unknown, or the file cannot be read, parsed or written.
pub fn remember(folder: &Path, cwd: &Path, items: &[Item]) -> anyhow::Result<PathBuf> {
    let shown = render::printable(&folder.to_string_lossy(), false);
    let Some(entry) = folder.to_str().map(str::to_owned) else {
        anyhow::bail!("{shown} is not valid UTF-8, so it cannot be remembered exactly");
    };
    recordable(folder)?;
    let file = remembered_file().context("no config folder (neither XDG_CONFIG_HOME nor HOME)")?;
    let mut store = read_store(&file)?;
    if !store.trusted_folders.contains(&entry) {
        store.trusted_folders.push(entry.clone());
    }
    let (at, rel) = store
        .record_for(cwd)
        .unwrap_or_else(|| (folder.to_path_buf(), relative(cwd, folder)));
    let key = at.to_str().map_or(entry, str::to_owned);
    store
        .fingerprints
        .entry(key)
        .or_default()
        .insert(rel, digests(items));
    write_store(&file, &store)?;
    Ok(file)
}

/// What [`adopt`] recorded.
#[derive(Debug)]
pub struct Adopted {
    /// The trust store.
    pub file: PathBuf,
    /// How many configured folders were recorded (the working directory's included).
    pub folders: usize,
    /// Whether every folder below was looked at (false past [`WALK_FOLDERS`] folders or
    /// [`WALK_DEPTH`] levels: a configured folder not looked at asks when a session starts
    /// in it).
    pub complete: bool,
}

/// The most folders [`adopt`] looks at.
pub const WALK_FOLDERS: usize = 20_000;

/// The deepest level below the folder [`adopt`] looks at.
pub const WALK_DEPTH: usize = 16;

/// Records the configuration of `folder` as it is now, trusted without a record so far (by
/// `trustedFolders`, or by an answer an earlier version remembered): `items` for `cwd` (what
/// its session reads) and, for every other folder below holding `.claude`, `.agent` or
/// `.mcp.json`, what a session there would read (links not followed; `.git` and
/// `node_modules` not entered; a folder whose settings do not parse is left out, so it asks).
///
/// # Errors
///
/// When `folder` may not hold a record (see [`remember`]), is not UTF-8, or the trust store
/// cannot be read or written.
pub fn adopt(folder: &Path, cwd: &Path, items: &[Item]) -> anyhow::Result<Adopted> {
    recordable(folder)?;
    let Some(key) = folder.to_str().map(str::to_owned) else {
        anyhow::bail!(
            "{} is not valid UTF-8, so it cannot be recorded exactly",
            render::printable(&folder.to_string_lossy(), false)
        );
    };
    let file = remembered_file().context("no config folder (neither XDG_CONFIG_HOME nor HOME)")?;
    let (configured, complete) = configured_folders(folder);
    let mut record = BTreeMap::new();
    record.insert(relative(cwd, folder), digests(items));
    for dir in configured {
        let rel = relative(&dir, folder);
        if record.contains_key(&rel) {
            continue;
        }
        if let Some(found) = items_of(&dir) {
            record.insert(rel, digests(&found));
        }
    }
    let folders = record.values().filter(|set| !set.is_empty()).count();
    let mut store = read_store(&file)?;
    store.fingerprints.insert(key, record);
    write_store(&file, &store)?;
    Ok(Adopted {
        file,
        folders,
        complete,
    })
}

/// The folders at or below `root` holding `.claude`, `.agent` or `.mcp.json`, and whether
/// every folder was looked at (see [`adopt`]).
fn configured_folders(root: &Path) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let mut queue = VecDeque::from([(root.to_path_buf(), 0usize)]);
    let mut seen = 0usize;
    let mut complete = true;
    while let Some((dir, depth)) = queue.pop_front() {
        seen += 1;
        if seen > WALK_FOLDERS {
            return (found, false);
        }
        if CONFIG_NAMES
            .iter()
            .any(|name| std::fs::symlink_metadata(dir.join(name)).is_ok())
        {
            found.push(dir.clone());
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // Links are not followed: `file_type` is the entry's own.
            if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                continue;
            }
            let name = entry.file_name();
            if [".git", "node_modules", ".claude", ".agent"]
                .iter()
                .any(|skip| name == *skip)
            {
                continue;
            }
            if depth >= WALK_DEPTH {
                complete = false;
                continue;
            }
            queue.push_back((entry.path(), depth + 1));
        }
    }
    (found, complete)
}

/// The names whose presence in a folder means a session there reads project configuration.
const CONFIG_NAMES: [&str; 3] = [".claude", ".agent", ".mcp.json"];

/// One thing the configuration read in a working directory sets that only a trusted folder
/// may apply: what the question and the warnings show, and the digest recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// One line: the file (relative to the working directory) and what it sets
    /// (`.agent/settings.json: hooks.Stop: ./check.sh`).
    pub shown: String,
    /// The hex SHA-256 of the file's name and all of the item; a narrowing item's starts
    /// with [`NARROWING`].
    digest: String,
}

/// The start of a narrowing item's digest in the record (a deny or ask rule: see `Item::narrowing`).
const NARROWING: &str = "n:";

impl Item {
    /// An item that widens what the session may do (a hook, an allow rule, a server).
    pub(crate) fn new(file: &str, shown: &str, exact: &str) -> Self {
        Self {
            shown: format!("{file}: {shown}"),
            digest: digest(file, exact),
        }
    }

    /// An item that narrows it (a deny or ask rule of a project that also widens): it needs
    /// no trust, but a recorded one that is gone is a change, since taking it out widens
    /// what the trusted rest allows.
    pub(crate) fn narrowing(file: &str, shown: &str, exact: &str) -> Self {
        Self {
            shown: format!("{file}: {shown}"),
            digest: format!("{NARROWING}{}", digest(file, exact)),
        }
    }

    /// Whether it narrows (a deny or ask rule: see `Item::narrowing`).
    pub fn narrows(&self) -> bool {
        self.digest.starts_with(NARROWING)
    }
}

/// The hex SHA-256 of `file` and `exact`.
fn digest(file: &str, exact: &str) -> String {
    sha2::Sha256::digest(format!("{file}\n{exact}").as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The digests of `items`.
fn digests(items: &[Item]) -> BTreeSet<String> {
    items.iter().map(|item| item.digest.clone()).collect()
}

/// What a session in `cwd` reads that needs trust: each project settings file's
/// [`crate::settings::Layer::trust_items`], each project command's `allowed-tools` and
/// `model` (`commands`, as discovered; the user's own are left out), each project agent file, and each server of
/// `cwd/.mcp.json` (the programs it would start, their arguments, environment and URLs).
pub fn items(
    cwd: &Path,
    layers: &[crate::settings::Layer],
    commands: &[crate::commands::Command],
) -> Vec<Item> {
    let mut items: Vec<Item> = layers
        .iter()
        .flat_map(|layer| layer_items(cwd, layer))
        .collect();
    for command in commands.iter().filter(|command| command.scope == "project") {
        let file = command.path.strip_prefix(cwd).unwrap_or(&command.path);
        if !command.allowed_tools.is_empty() {
            items.push(Item::new(
                &file.to_string_lossy(),
                &format!("allowed-tools: {}", command.allowed_tools.join(", ")),
                &crate::settings::canonical_json(&serde_json::json!({
                    "command": command.name,
                    "allowed-tools": command.allowed_tools,
                })),
            ));
        }
        // A command's model may name another provider: where the conversation goes.
        if let Some(model) = &command.model {
            items.push(Item::new(
                &file.to_string_lossy(),
                &format!("model: {model}"),
                &crate::settings::canonical_json(&serde_json::json!({
                    "command": command.name,
                    "model": model,
                })),
            ));
        }
    }
    // A project's agents: prompts, tools and models a trusted folder's Task tool runs.
    for folder in [".claude/agents", ".agent/agents"] {
        let Ok(entries) = std::fs::read_dir(cwd.join(folder)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .collect();
        files.sort();
        for path in files {
            let file = path.strip_prefix(cwd).unwrap_or(&path).to_string_lossy();
            let text =
                bounded_text(&path, crate::settings::MAX_AGENT_BYTES).unwrap_or_else(|why| why);
            items.push(Item::new(&file, "agent definition", &text));
        }
    }
    // A project's MCP servers are programs it would start.
    let file = ".mcp.json";
    let mcp_json = cwd.join(file);
    match bounded_text(&mcp_json, MCP_JSON_LIMIT) {
        Err(_) if std::fs::symlink_metadata(&mcp_json).is_err() => {}
        Err(why) => items.push(Item::new(file, &format!("({why})"), &why)),
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Err(_) => items.push(Item::new(file, "(not valid JSON)", &text)),
            Ok(document) => match document.get("mcpServers") {
                None => {}
                Some(serde_json::Value::Object(servers)) => {
                    for (name, server) in servers {
                        items.push(mcp_item(name, server));
                    }
                }
                Some(other) => items.push(Item::new(
                    file,
                    "mcpServers (not an object)",
                    &crate::settings::canonical_json(other),
                )),
            },
        },
    }
    items
}

/// The most of `.mcp.json` read for its fingerprint, in bytes (4 MiB); a larger one is not
/// loaded either.
pub(crate) const MCP_JSON_LIMIT: u64 = 4 << 20;

/// The text of the regular file at `path` (links followed, as the loaders do) when it holds
/// at most `limit` bytes; otherwise why not, in a few words (a FIFO, a device or a huge file
/// is never read: a committed `.mcp.json -> /dev/zero` must not stall or exhaust start-up).
fn bounded_text(path: &Path, limit: u64) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|error| format!("cannot be read: {error}"))?;
    if !meta.is_file() {
        return Err("not a regular file".to_owned());
    }
    if meta.len() > limit {
        return Err(format!("{} bytes, more than {limit}", meta.len()));
    }
    let bytes = std::fs::read(path).map_err(|error| format!("cannot be read: {error}"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The items of one settings file of a session in `cwd`.
///
/// Its deny and ask rules are narrowing items (see `Item::narrowing`) of a project file.
fn layer_items(cwd: &Path, layer: &crate::settings::Layer) -> Vec<Item> {
    let file = layer.path.strip_prefix(cwd).unwrap_or(&layer.path);
    let file = file.to_string_lossy();
    let mut items: Vec<Item> = layer
        .trust_items()
        .into_iter()
        .map(|part| Item::new(&file, &part.shown, &part.exact))
        .collect();
    if layer.scope != crate::settings::Scope::User {
        let permissions = &layer.settings.permissions;
        for (key, rules) in [("deny", &permissions.deny), ("ask", &permissions.ask)] {
            for rule in rules {
                items.push(Item::narrowing(
                    &file,
                    &format!("permissions.{key}: {rule}"),
                    &crate::settings::canonical_json(
                        &serde_json::json!({ format!("permissions.{key}"): rule }),
                    ),
                ));
            }
        }
    }
    items
}

/// The item of the `.mcp.json` server `name`.
fn mcp_item(name: &str, server: &serde_json::Value) -> Item {
    Item::new(
        ".mcp.json",
        &format!("mcpServers.{name}: {}", mcp_summary(server)),
        &crate::settings::canonical_json(
            &serde_json::json!({"mcpServers": name, "server": server}),
        ),
    )
}

/// Adds the `.mcp.json` server `name` of `cwd`, as the user's own `agent mcp add --scope
/// project` wrote it, to the record covering `cwd`, if one does (as the user's own change).
///
/// # Errors
///
/// When the trust store cannot be read or written.
pub fn record_mcp_server(
    cwd: &Path,
    name: &str,
    server: &serde_json::Value,
) -> anyhow::Result<bool> {
    record_own(cwd, &[mcp_item(name, server)])
}

/// Adds the allow rule `rule`, as the user's own "also allow in later sessions" saved it in
/// the project settings file `file` (`<cwd>/.agent/settings.local.json`), to the record
/// covering that folder, if one does (as the user's own change). Nothing for a file outside a
/// project's `.agent/` or `.claude/`.
///
/// # Errors
///
/// When the trust store cannot be read or written.
pub fn record_allow_rule(file: &Path, rule: &str) -> anyhow::Result<bool> {
    let Some(dot) = file.parent() else {
        return Ok(false);
    };
    let Some(cwd) = dot.parent() else {
        return Ok(false);
    };
    if !dot
        .file_name()
        .is_some_and(|name| name == ".agent" || name == ".claude")
    {
        return Ok(false);
    }
    let layer = crate::settings::Layer {
        path: file.to_path_buf(),
        scope: crate::settings::Scope::Project,
        settings: crate::settings::Settings {
            permissions: crate::settings::PermissionSettings {
                allow: vec![rule.to_owned()],
                ..Default::default()
            },
            ..Default::default()
        },
    };
    record_own(cwd, &layer_items(cwd, &layer))
}

/// Adds `items`, written by the user's own command in `cwd`, to the record covering `cwd`, if
/// one does: the user's own change is no change to ask about, and nothing else of the folder
/// is approved by it. Whether a record was there to add to.
///
/// # Errors
///
/// When the trust store cannot be read or written.
fn record_own(cwd: &Path, items: &[Item]) -> anyhow::Result<bool> {
    let Some(file) = remembered_file() else {
        return Ok(false);
    };
    let mut store = read_store(&file)?;
    let Some((at, rel)) = store.record_for(cwd) else {
        return Ok(false);
    };
    let Some(record) = at.to_str().and_then(|key| store.fingerprints.get_mut(key)) else {
        return Ok(false);
    };
    record.entry(rel).or_default().extend(digests(items));
    write_store(&file, &store)?;
    Ok(true)
}

/// Adds the deny and ask rules among `items` (the configuration of a session in `cwd`, which
/// [`standing`] found trusted) that the record covering `cwd` lacks: a record written before
/// they were fingerprinted, or a rule added since, then protects them too (taking one out
/// is a change). Writes only when there is something to add; `Ok(false)` when nothing was.
///
/// # Errors
///
/// When the trust store cannot be read or written.
pub fn record_narrowing(cwd: &Path, items: &[Item]) -> anyhow::Result<bool> {
    let Some(file) = remembered_file() else {
        return Ok(false);
    };
    let store = read_store(&file)?;
    let Some((at, rel)) = store.record_for(cwd) else {
        return Ok(false);
    };
    let recorded = store.recorded(&at, &rel);
    let missing: Vec<Item> = items
        .iter()
        .filter(|item| item.narrows() && !recorded.contains(&item.digest))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    record_own(cwd, &missing)
}

/// An MCP server in one line: its URL, else its command and arguments.
fn mcp_summary(server: &serde_json::Value) -> String {
    let text = |key: &str| {
        server
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    // What it is given beside its command or URL: environment and headers, each with its
    // value (a `${VARIABLE}` there carries that variable to the server).
    let given = |key: &str| -> Vec<String> {
        server
            .get(key)
            .and_then(serde_json::Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, value)| format!("{name}={}", value.as_str().unwrap_or_default()))
            .collect()
    };
    let mut shown = if server.get("url").is_some() {
        text("url")
    } else {
        let args = server
            .get("args")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|arg| arg.as_str().map(str::to_owned));
        std::iter::once(text("command"))
            .chain(args)
            .collect::<Vec<_>>()
            .join(" ")
    };
    for (label, pairs) in [("env", given("env")), ("headers", given("headers"))] {
        if !pairs.is_empty() {
            shown.push_str(&format!(" ({label}: {})", pairs.join(", ")));
        }
    }
    shown
}

/// [`items`] of a folder no session runs in yet, read from disk without a warning; `None`
/// when its settings do not parse.
fn items_of(dir: &Path) -> Option<Vec<Item>> {
    let layers = crate::settings::load(dir).ok()?;
    Some(items(dir, &layers, &crate::commands::project_commands(dir)))
}

/// Where a session's folder stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Trusted: by `--trust` or `AGENT_TRUST`, or with the configuration that was recorded.
    Trusted(Source),
    /// Trusted by `trustedFolders` or by an answer remembered by an earlier version, with no
    /// record of its configuration yet (see [`adopt`]).
    Unrecorded(Source),
    /// Trusted, but what the working directory configures is not what was recorded.
    Changed(Change),
    /// Not trusted.
    Untrusted,
}

/// How the configuration of a trusted folder differs from its record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Why the folder is trusted.
    pub source: Source,
    /// The folder whose record it is.
    pub recorded_at: PathBuf,
    /// The items new or changed since, as [`Item::shown`].
    pub added: Vec<String>,
    /// How many recorded items are no longer there (or changed).
    pub removed: usize,
    /// How many of those were deny or ask rules (see `Item::narrowing`).
    pub narrowing_removed: usize,
    /// Whether nothing was recorded for the working directory: its configuration is new
    /// (`sub/.claude/` made after the folder was trusted).
    pub new_folder: bool,
}

/// Where the session in `cwd` (canonical) stands, `folder` being [`crate::settings::project_folder`] of it: not
/// trusted, trusted without a record, or trusted and then with `items` (its configuration,
/// [`items`]) all recorded (a change that only takes items out asks nothing) or with new
/// ones. `--trust` and `AGENT_TRUST` trust without a look at the record.
///
/// # Errors
///
/// When the trust store exists but does not parse (named in the error).
pub fn standing(
    folder: &Path,
    cwd: &Path,
    grants: &Grants<'_>,
    items: &[Item],
    notices: &crate::Notices,
) -> anyhow::Result<Standing> {
    let Some(source) = trusted_without_asking(folder, grants, notices)? else {
        return Ok(Standing::Untrusted);
    };
    if matches!(source, Source::Flag | Source::Env) {
        return Ok(Standing::Trusted(source));
    }
    let store = match remembered_file() {
        Some(file) => read_store(&file)?,
        None => Store::default(),
    };
    let Some((at, rel)) = store.record_for(cwd) else {
        return Ok(Standing::Unrecorded(source));
    };
    let recorded = store.recorded(&at, &rel);
    let current = digests(items);
    let widening = items.iter().filter(|item| !item.narrows());
    let narrowing_removed = recorded
        .iter()
        .filter(|digest| digest.starts_with(NARROWING) && !current.contains(*digest))
        .count();
    // Nothing new that widens, and no deny or ask rule gone: what was taken out (a hook, an
    // allow rule) cannot do more than was trusted.
    if widening.clone().all(|item| recorded.contains(&item.digest)) && narrowing_removed == 0 {
        return Ok(Standing::Trusted(source));
    }
    let mut added: Vec<String> = Vec::new();
    for item in widening {
        if !recorded.contains(&item.digest) && !added.contains(&item.shown) {
            added.push(item.shown.clone());
        }
    }
    Ok(Standing::Changed(Change {
        source,
        recorded_at: at,
        added,
        removed: recorded.difference(&current).count(),
        narrowing_removed,
        new_folder: recorded.is_empty(),
    }))
}

/// The one warning of a run in an untrusted folder: the folder, what is ignored, and how to
/// trust it.
pub fn untrusted_warning(folder: &Path, ignored: &[String]) -> String {
    let mut text = format!(
        "{} is not a trusted folder: these project settings are ignored (deny and ask rules still apply):",
        render::printable(&folder.to_string_lossy(), false)
    );
    for part in ignored {
        text.push_str("\n  ");
        text.push_str(&render::printable(&shorten(part), false));
    }
    text.push_str(
        "\nTrust it with --trust, AGENT_TRUST=1, or \"trustedFolders\" in ~/.config/agent/settings.json.",
    );
    text
}

/// The one warning of a run whose trusted folder's configuration is not the one recorded:
/// which folder, that its project settings are ignored, what is new or changed, and how to
/// trust it again.
pub fn changed_warning(folder: &Path, cwd: &Path, change: &Change) -> String {
    let mut text = format!(
        "{}: these project settings are ignored (deny and ask rules still apply):",
        changed_heading(folder, cwd, change)
    );
    for line in change_lines(change) {
        text.push_str("\n  ");
        text.push_str(&render::printable(&shorten(&line), false));
    }
    text.push_str(
        "\nTrust it again by answering yes when `agent` asks in a terminal there, or for one run with --trust or AGENT_TRUST=1.",
    );
    text
}

/// The first words of the question and the warning about a changed configuration: whose
/// configuration (the working directory's), since when, and whether it is new there.
pub fn changed_heading(folder: &Path, cwd: &Path, change: &Change) -> String {
    let shown = |path: &Path| render::printable(&path.to_string_lossy(), false);
    let since = if cwd == folder {
        "it".to_owned()
    } else {
        shown(folder)
    };
    format!(
        "the configuration of {} changed since {since} was trusted{} (hooks, MCP servers, env, allow rules)",
        shown(cwd),
        if change.new_folder {
            ": it was not there then"
        } else {
            ""
        }
    )
}

/// What changed, one line each: the new or changed items (in full), then how many recorded
/// ones are gone.
pub fn change_lines(change: &Change) -> Vec<String> {
    let mut lines: Vec<String> = change
        .added
        .iter()
        .map(|line| format!("new or changed: {line}"))
        .collect();
    if change.removed > 0 {
        lines.push(format!(
            "{} recorded item{} no longer there or changed",
            change.removed,
            if change.removed == 1 { "" } else { "s" }
        ));
    }
    if change.narrowing_removed > 0 {
        lines.push(format!(
            "among them {} deny or ask rule{}: taking one out allows more",
            change.narrowing_removed,
            if change.narrowing_removed == 1 {
                ""
            } else {
                "s"
            }
        ));
    }
    lines
}

/// Why a folder is trusted, in a few words (`trustedFolders entry /srv` ...).
pub fn describe(source: &Source) -> String {
    match source {
        Source::Flag => "--trust".to_owned(),
        Source::Env => "AGENT_TRUST".to_owned(),
        Source::Setting(entry) => format!(
            "trustedFolders entry {}",
            render::printable(&entry.to_string_lossy(), false)
        ),
        Source::Remembered(entry) => format!(
            "an earlier answer, remembered for {}",
            render::printable(&entry.to_string_lossy(), false)
        ),
        Source::ClaudeCode(entry) => format!(
            "Claude Code's trust dialog, accepted for {}",
            render::printable(&entry.to_string_lossy(), false)
        ),
    }
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
        assert_eq!(crate::settings::project_folder(&sub), repo);
        assert_eq!(crate::settings::project_folder(&repo), repo);
        let plain = base.join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(crate::settings::project_folder(&plain), plain);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_walk_finds_configured_folders_below_without_following_links() {
        let base = std::env::temp_dir().join(format!("agent-trust-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("repo");
        for dir in [
            ".claude",
            "a/b/.agent",
            "c",
            ".git/x/.claude",
            "node_modules/p/.claude",
            "a/.claude/nested/.claude",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("c/.mcp.json"), "{}").unwrap();
        let outside = base.join("outside");
        std::fs::create_dir_all(outside.join(".claude")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let (mut found, complete) = configured_folders(&root);
        found.sort();
        assert!(complete);
        assert_eq!(
            found,
            [
                root.clone(),
                root.join("a"),
                root.join("a/b"),
                root.join("c")
            ]
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn agent_definitions_and_deny_rules_are_items() {
        let base = std::env::temp_dir().join(format!("agent-trust-items-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join(".claude/agents")).unwrap();
        std::fs::write(
            base.join(".claude/agents/rev.md"),
            "---\nname: rev\n---\nReview.",
        )
        .unwrap();
        std::fs::write(
            base.join(".claude/settings.json"),
            r#"{"permissions": {"allow": ["Bash"], "deny": ["Bash(rm:*)"]}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(base.join(".claude/commands")).unwrap();
        std::fs::write(
            base.join(".claude/commands/ship.md"),
            "---\nmodel: openai/gpt-5\n---\nShip it.",
        )
        .unwrap();
        let first = items_of(&base).unwrap();
        let shown = |items: &[Item]| items.iter().map(|i| i.shown.clone()).collect::<Vec<_>>();
        assert!(
            shown(&first).contains(&".claude/commands/ship.md: model: openai/gpt-5".to_owned()),
            "{:?}",
            shown(&first)
        );
        assert!(shown(&first).contains(&".claude/agents/rev.md: agent definition".to_owned()));
        let deny: Vec<&Item> = first.iter().filter(|item| item.narrows()).collect();
        assert_eq!(deny.len(), 1, "{:?}", shown(&first));
        assert!(deny[0].shown.ends_with("permissions.deny: Bash(rm:*)"));
        // A changed prompt is another item.
        std::fs::write(
            base.join(".claude/agents/rev.md"),
            "---\nname: rev\nmodel: opus\n---\nReview.",
        )
        .unwrap();
        let second = items_of(&base).unwrap();
        assert_ne!(digests(&first), digests(&second));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn devices_and_huge_files_are_not_read_for_the_fingerprint() {
        let base = std::env::temp_dir().join(format!("agent-trust-dev-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join(".claude/agents")).unwrap();
        // Read whole, either would never end (or exhaust memory) at start-up.
        std::os::unix::fs::symlink("/dev/zero", base.join(".mcp.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", base.join(".claude/agents/zero.md")).unwrap();
        let big = std::fs::File::create(base.join(".claude/agents/big.md")).unwrap();
        big.set_len(crate::settings::MAX_AGENT_BYTES + 1).unwrap();
        let found = items_of(&base).unwrap();
        let shown: Vec<String> = found.iter().map(|item| item.shown.clone()).collect();
        assert!(
            shown.contains(&".mcp.json: (not a regular file)".to_owned()),
            "{shown:?}"
        );
        assert_eq!(
            shown
                .iter()
                .filter(|line| line.ends_with("agent definition"))
                .count(),
            2,
            "{shown:?}"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_record_covers_the_folders_below_it() {
        let mut store = Store::default();
        store.fingerprints.insert(
            "/srv/repo".into(),
            BTreeMap::from([(".".into(), BTreeSet::from(["d1".to_owned()]))]),
        );
        assert_eq!(
            store.record_for(Path::new("/srv/repo/a/b")),
            Some((PathBuf::from("/srv/repo"), "a/b".to_owned()))
        );
        assert_eq!(
            store.record_for(Path::new("/srv/repo")),
            Some((PathBuf::from("/srv/repo"), ".".to_owned()))
        );
        assert_eq!(store.record_for(Path::new("/srv/repository")), None);
        assert_eq!(
            store.recorded(Path::new("/srv/repo"), "."),
            BTreeSet::from(["d1".to_owned()])
        );
        // A folder below with nothing recorded is recorded as configuring nothing.
        assert!(store.recorded(Path::new("/srv/repo"), "a").is_empty());
        // The same item in another file is another item.
        assert_ne!(
            Item::new(".claude/settings.json", "x", "{}").digest,
            Item::new(".agent/settings.json", "x", "{}").digest
        );
        // A store written by an earlier version reads, with no record.
        let old: Store = serde_json::from_str(r#"{"trustedFolders": ["/srv/repo"]}"#).unwrap();
        assert!(old.fingerprints.is_empty());
    }

    #[test]
    fn entries_cover_their_folder_and_below_only() {
        let origin = Path::new("/u.json");
        let entries = vec!["relative/path".to_owned(), "/srv/work".to_owned()];
        assert_eq!(
            covering(
                &entries,
                Path::new("/srv/work/repo"),
                origin,
                &crate::Notices::default()
            ),
            Some(PathBuf::from("/srv/work"))
        );
        assert_eq!(
            covering(
                &entries,
                Path::new("/srv/work"),
                origin,
                &crate::Notices::default()
            ),
            Some(PathBuf::from("/srv/work"))
        );
        // A sibling sharing a prefix is not covered.
        assert_eq!(
            covering(
                &entries,
                Path::new("/srv/workshop"),
                origin,
                &crate::Notices::default()
            ),
            None
        );
        assert_eq!(
            covering(
                &entries,
                Path::new("/srv"),
                origin,
                &crate::Notices::default()
            ),
            None
        );
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
            let error = remember(&folder, &folder, &[]).unwrap_err().to_string();
            assert!(
                error.contains("would trust every project under it"),
                "{error}"
            );
        }
        for home in tools::sandbox::home_dirs() {
            let error = remember(&home, &home, &[]).unwrap_err().to_string();
            assert!(error.contains("holds your home folder"), "{error}");
        }
        use std::os::unix::ffi::OsStrExt as _;
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"/srv/repo\xff"));
        let error = remember(odd, odd, &[]).unwrap_err().to_string();
        assert!(error.contains("is not valid UTF-8"), "{error}");
    }
}
