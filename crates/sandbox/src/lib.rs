//! Runs a command under an operating-system sandbox, so that what a command may read, write
//! and reach is decided by the kernel, not by reading the command's text.
//!
//! A [`Policy`] says what one command may touch: a [`Profile`] (read-only, or writable
//! workspace roots), the roots, extra readable folders, protected paths that stay read-only
//! inside writable roots (and cannot be created when absent), hidden paths that cannot be
//! read at all, whether the network is reachable, and a private temporary folder.
//! [`Sandbox::command`] turns a program and its arguments into a [`std::process::Command`]
//! that runs them under that policy with one of two [`Backend`]s:
//!
//! - **bubblewrap** (`bwrap`, as Claude Code and Codex use on Linux): a new mount namespace
//!   that shows only the system folders, the toolchain folders, the roots and the temporary
//!   folder; read-only bind mounts over protected paths; an empty file or a read-only tmpfs
//!   over hidden paths; `--unshare-net` and a seccomp filter without network (no unix
//!   socket with a path, whatever the mounts show); `--unshare-pid` so nothing started
//!   by the command outlives it; `--new-session` (no `TIOCSTI` into the user's terminal);
//!   `--die-with-parent`; `--cap-drop ALL` (root keeps no capability to undo the mounts).
//! - **Landlock and seccomp** in a helper process: the program that embeds this crate
//!   re-executes itself with [`HELPER_ARG`] (see [`helper_main`]); the helper unshares a PID
//!   and, without network, a network namespace when the kernel lets it, restricts itself
//!   with Landlock (filesystem, and TCP and abstract unix sockets where the namespace could
//!   not be made), installs a seccomp filter (no `TIOCSTI`; without network and without a
//!   network namespace, no sockets but unix ones), and executes the program. Landlock can
//!   only grant, so a root holding protected or hidden paths is granted entry by entry, and
//!   a new entry directly in such a folder (a new file at the top of the workspace, a new
//!   file in `.git/`) cannot be created under this back end.
//!
//! With neither, [`Backend::detect`] says why, and the caller decides (the agent asks before
//! running anything unsandboxed).
//!
//! A read-only command cannot write its root, whatever it runs (the example runs where
//! bubblewrap works; the Landlock back end needs [`helper_main`] in the program that embeds
//! this crate, which a doctest is not):
//!
//! ```
//! use sandbox::{Backend, Policy, Profile, Sandbox};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let backend = Backend::detect(None);
//! let Backend::Bubblewrap(_) = backend else {
//!     println!("no bubblewrap here: {}", backend.name());
//!     return Ok(());
//! };
//! let root = std::env::temp_dir().join(format!("sandbox-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&root)?;
//! let temp = root.with_extension("tmp");
//! let policy = Policy::new(Profile::ReadOnly, vec![root.clone()], temp.clone());
//! let attack = format!("echo planted > {}/planted", root.display());
//! let mut prepared = Sandbox::new(backend).command(
//!     &policy,
//!     "bash".as_ref(),
//!     &["-c".into(), attack.into()],
//!     &root,
//! )?;
//! let status = prepared.command.status()?;
//! assert!(!status.success(), "the write was refused");
//! assert!(!root.join("planted").exists());
//! # drop(prepared); std::fs::remove_dir_all(&root)?; let _ = std::fs::remove_dir_all(&temp);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod bwrap;
pub mod env;
mod helper;
mod landlock_rules;
mod placeholder;
pub mod probe_cache;
mod seccomp;
mod zygote;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub use helper::{HELPER_ARG, helper_main};
use placeholder::Placeholders;
pub use placeholder::sweep as sweep_placeholders;
pub use zygote::{MAX_MESSAGE, Remote, Spec, Zygote};

/// Environment variable that forces a back end: `bwrap`, `landlock` or `none`. A forced back
/// end that does not work, or another value, is reported as unavailable, never replaced by
/// another back end.
pub const BACKEND_ENV: &str = "AGENT_SANDBOX_BACKEND";

/// Environment variable that turns the persistent sandbox of read-only commands off (`0`):
/// each command then starts a sandbox of its own ([`Zygote`]).
pub const PERSISTENT_ENV: &str = "AGENT_SANDBOX_PERSISTENT";

/// What a sandboxed command may change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Everything visible is read-only; only `/dev/null` and the private temporary folder
    /// are writable.
    #[default]
    ReadOnly,
    /// As [`Profile::ReadOnly`], and the roots are writable except their protected paths.
    WorkspaceWrite,
}

impl Profile {
    /// The profile's name: `read-only` or `workspace-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// System folders readable in every profile (when they exist).
pub const SYSTEM_READABLE: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
];

/// Folders and files under `$HOME` readable in every profile: toolchains and their caches,
/// so compilers, package managers and interpreters installed per user work, and git's
/// configuration (the author's name for commits). The rest of `$HOME` is not visible; so
/// are `.npmrc`, `.netrc`, `.ssh`, `.aws` and every other credential store.
pub const TOOLCHAIN_HOME_READABLE: &[&str] = &[
    ".gitconfig",
    ".config/git",
    ".cargo",
    ".rustup",
    ".npm",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".pyenv",
    ".cache/pip",
    ".cache/uv",
    ".local/share/uv",
    ".local/bin",
    ".local/lib",
    "go",
    ".cache/go-build",
    ".rbenv",
    ".gem",
    ".m2",
    ".gradle",
    ".sdkman",
    ".asdf",
];

/// Environment variables naming a toolchain's own root (readable in every profile, as
/// [`TOOLCHAIN_HOME_READABLE`] is under `$HOME`) for toolchains installed elsewhere: a
/// `PYENV_ROOT=/opt/pyenv` whose shims are on `PATH` needs its root to run.
pub const TOOLCHAIN_ROOT_VARIABLES: &[&str] = &[
    "CARGO_HOME",
    "RUSTUP_HOME",
    "PYENV_ROOT",
    "NVM_DIR",
    "VOLTA_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "GOROOT",
    "GOPATH",
    "RBENV_ROOT",
    "GEM_HOME",
    "SDKMAN_DIR",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "JAVA_HOME",
];

/// Paths relative to each writable root that stay read-only and cannot be created: the
/// agent's and Claude Code's settings, MCP configuration, and the whole git folder (its
/// configuration, hooks, `commondir` and index name programs git runs outside any sandbox
/// later; a gitlink written into the index makes `git status` run a nested repository's
/// configuration), as Codex and Claude Code protect it. `git add` and `git commit` therefore
/// need the user's approval to run outside the sandbox.
pub const PROTECTED_IN_ROOT: &[&str] = &[".agent", ".claude", ".mcp.json", ".git"];

/// Credential files under `$HOME` hidden in every profile although their folders are
/// readable ([`TOOLCHAIN_HOME_READABLE`]).
pub const CREDENTIALS_IN_HOME: &[&str] = &[
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".config/git/credentials",
    ".local/share/uv/credentials",
    ".config/pip/pip.conf",
    ".pypirc",
    // Not in a readable folder, but hidden all the same when a root holds them (a
    // workspace at `$HOME` or above it).
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".ssh",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".terraform.d",
];

/// Configuration files under `$HOME` that toolchains read (so their folders are readable)
/// and that may also hold a credential: hidden when their text does
/// ([`holds_credentials`]): a URL with a user and password or token in it (git's
/// `url.<base>.insteadOf`, a remote with a token), a key named `token`, `password`,
/// `extraheader`, `_auth` or `_authToken`, or a token with a well-known prefix.
pub const CONFIG_WITH_CREDENTIALS: &[&str] = &[
    ".gitconfig",
    ".config/git/config",
    ".cargo/config.toml",
    ".cargo/config",
];

/// Whether configuration `text` (git, cargo, npm, ini or TOML syntax) holds a credential,
/// as [`CONFIG_WITH_CREDENTIALS`] describes. Lines continued with a trailing `\` are read
/// as one; a key counts wherever it stands on a line (`token = ...` in a TOML inline table,
/// `password=` inside git's inline credential helper), quoted or not; git's inline helper
/// (`helper = "!..."`) and cargo's `credential-provider` count too (they print a secret on
/// request). Errs on the side of yes: a false positive only hides a configuration file
/// from sandboxed commands.
pub fn holds_credentials(text: &str) -> bool {
    let joined = text.replace("\\\r\n", "").replace("\\\n", "");
    joined.lines().any(|line| {
        let line = line.trim().to_ascii_lowercase();
        if line.starts_with('#') || line.starts_with(';') {
            return false;
        }
        names_a_credential(&line) || has_userinfo(&line) || has_token_prefix(&line)
    })
}

/// Key names whose value is a secret (the last part of a dotted or `:`-scoped key).
const CREDENTIAL_KEYS: &[&str] = &["token", "password", "extraheader", "_auth", "_authtoken"];

/// Whether a lowercase configuration `line` assigns a credential key anywhere in it, or
/// names a program that prints one (git's `helper = "!..."`, cargo's
/// `credential-provider`).
fn names_a_credential(line: &str) -> bool {
    line.match_indices('=').any(|(at, _)| {
        let before = line[..at].trim_end();
        let key_start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_-.:'\"/".contains(c)))
            .map_or(0, |i| i + 1);
        let key = before[key_start..].trim_matches(['\'', '"']);
        let last = key.rsplit(['.', ':', '/']).next().unwrap_or(key);
        let value = line[at + 1..].trim_start().trim_start_matches(['"', '\'']);
        CREDENTIAL_KEYS.contains(&last)
            || last == "credential-provider"
            || (last == "helper" && value.starts_with('!'))
    })
}

/// Whether a lowercase `line` holds a URL with a user (and password or token) in it.
fn has_userinfo(line: &str) -> bool {
    line.match_indices("://").any(|(at, _)| {
        let rest = &line[at + 3..];
        let authority = rest
            .split(['/', '"', '\'', ' ', '\t', ']'])
            .next()
            .unwrap_or_default();
        authority.contains('@')
    })
}

/// Whether a lowercase `line` holds a token with a well-known prefix (GitHub, GitLab,
/// Slack, AWS, OpenAI and Anthropic keys) of 20 characters or more.
fn has_token_prefix(line: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xoxp-",
        "akia",
        "sk-",
    ];
    PREFIXES.iter().any(|prefix| {
        line.match_indices(prefix).any(|(at, _)| {
            let token_start = line[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_ascii_alphanumeric());
            let long = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .count()
                >= 20;
            token_start && long
        })
    })
}

/// The back end [`BACKEND_ENV`] forces: `Some("bwrap" | "landlock" | "none")`, or `None`
/// when it is unset or empty.
///
/// # Errors
///
/// Any other value, with a message naming the variable and the accepted values.
pub fn forced_backend() -> Result<Option<&'static str>, String> {
    match std::env::var(BACKEND_ENV).unwrap_or_default().as_str() {
        "" => Ok(None),
        "bwrap" => Ok(Some("bwrap")),
        "landlock" => Ok(Some("landlock")),
        "none" => Ok(Some("none")),
        other => Err(format!(
            "{BACKEND_ENV}={other:?} is not bwrap, landlock or none"
        )),
    }
}

/// What one sandboxed command may touch. Paths are absolute and resolved (no symbolic
/// links); a relative path is an error when the command is prepared.
///
/// Serialized, a path is a string when it is UTF-8 and an array of bytes otherwise (a file
/// name need not be text).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Policy {
    /// What may change.
    pub profile: Profile,
    /// The workspace roots (working directory and additional directories): readable, and
    /// writable in [`Profile::WorkspaceWrite`].
    #[serde(with = "path_serde::list")]
    pub roots: Vec<PathBuf>,
    /// Other readable folders or files: the system, toolchains, the agent's tool-results
    /// folder. Missing ones are skipped.
    #[serde(with = "path_serde::list")]
    pub readable: Vec<PathBuf>,
    /// Read-only inside writable roots; those that do not exist cannot be created.
    #[serde(with = "path_serde::list")]
    pub protected: Vec<PathBuf>,
    /// Not readable at all (deny rules): an empty file or an empty read-only folder takes
    /// their place.
    #[serde(with = "path_serde::list")]
    pub hidden: Vec<PathBuf>,
    /// Whether the command may use the network.
    pub network: bool,
    /// A private folder the command may write; `TMPDIR` points to it.
    #[serde(with = "path_serde::one")]
    pub temp_dir: PathBuf,
    /// Paths of [`Policy::readable`] that must be reached without any symbolic link when the
    /// command starts: folders the workspace's own files named ([`linked_git_dirs`]),
    /// checked when the policy was made. A command of another session could swap such a
    /// folder for a link to `/` after the check; both back ends open these paths refusing
    /// every link on the way (`openat2` with `RESOLVE_NO_SYMLINKS`; bubblewrap then binds
    /// the open folder with `--ro-bind-fd`) and leave out what they cannot open so.
    #[serde(default, with = "path_serde::list")]
    pub unlinked: Vec<PathBuf>,
}

impl Policy {
    /// Whether a command under this policy may write `path` (absolute): resolved, inside a
    /// root of a workspace-write policy or in the temporary folder, and neither as written
    /// nor resolved under a protected or hidden path. The answer the sandbox enforces; a guess
    /// only when `path` or its folders change in the meantime.
    pub fn writes(&self, path: &Path) -> bool {
        let Some(resolved) = env::resolved(path) else {
            return false;
        };
        let forms = [path, resolved.as_path()];
        let under = |dirs: &[PathBuf]| {
            forms
                .iter()
                .any(|form| dirs.iter().any(|dir| form.starts_with(dir)))
        };
        if under(&self.protected) || under(&self.hidden) {
            return false;
        }
        let inside = |dir: &PathBuf| resolved.starts_with(dir);
        (self.profile == Profile::WorkspaceWrite && self.roots.iter().any(inside))
            || inside(&self.temp_dir)
    }

    /// The readable paths that are not inside a root. One inside a root is visible through
    /// the root anyway, and a command that may write the root could have made it a link to
    /// somewhere else.
    pub fn readable_outside_roots(&self) -> impl Iterator<Item = &PathBuf> {
        self.readable
            .iter()
            .filter(|path| !self.roots.iter().any(|root| path.starts_with(root)))
    }

    /// A policy for `roots` with the default readable folders ([`SYSTEM_READABLE`],
    /// [`TOOLCHAIN_HOME_READABLE`] under `$HOME`, the folders on `$PATH`, the target folder
    /// of `/etc/resolv.conf`), every root's protected paths ([`protected_paths`]), the
    /// credential files of [`default_hidden`] hidden, and no network.
    pub fn new(profile: Profile, roots: Vec<PathBuf>, temp_dir: PathBuf) -> Self {
        let protected = roots
            .iter()
            .flat_map(|root| protected_paths(root))
            .collect();
        let mut readable = default_readable();
        let linked: Vec<PathBuf> = roots
            .iter()
            .flat_map(|root| linked_git_dirs(root))
            .collect();
        readable.extend(linked.iter().cloned());
        readable.extend(roots.iter().filter_map(|root| enclosing_repository(root)));
        Self {
            profile,
            roots,
            readable,
            protected,
            hidden: default_hidden(),
            network: false,
            temp_dir,
            unlinked: linked,
        }
    }
}

/// Paths as UTF-8 strings when they are, byte arrays when not.
mod path_serde {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Text(String),
        Bytes(Vec<u8>),
    }

    fn to_repr(path: &Path) -> Repr {
        match path.to_str() {
            Some(text) => Repr::Text(text.to_owned()),
            None => Repr::Bytes(path.as_os_str().as_bytes().to_vec()),
        }
    }

    fn from_repr(repr: Repr) -> PathBuf {
        match repr {
            Repr::Text(text) => PathBuf::from(text),
            Repr::Bytes(bytes) => PathBuf::from(OsString::from_vec(bytes)),
        }
    }

    pub(super) mod one {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
            to_repr(path).serialize(s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
            Repr::deserialize(d).map(from_repr)
        }
    }

    pub(super) mod list {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
            paths
                .iter()
                .map(|path| to_repr(path))
                .collect::<Vec<_>>()
                .serialize(s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Vec<PathBuf>, D::Error> {
            Vec::<Repr>::deserialize(d).map(|list| list.into_iter().map(from_repr).collect())
        }
    }
}

/// `$HOME` as written and, when it goes through a symbolic link (`/home` linked to
/// `/usr/home`), as resolved: a comparison with a resolved path must try both. Empty when
/// `HOME` is unset or empty.
pub fn home_dirs() -> Vec<PathBuf> {
    let Some(home) = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
    else {
        return Vec::new();
    };
    let mut dirs = vec![home.clone()];
    if let Ok(resolved) = std::fs::canonicalize(&home)
        && resolved != home
    {
        dirs.push(resolved);
    }
    dirs
}

/// Whether `dir` is a home folder ([`home_dirs`]) or holds one.
pub fn holds_home(dir: &Path) -> bool {
    home_dirs().iter().any(|home| home.starts_with(dir))
}

/// The readable folders every policy starts with.
pub fn default_readable() -> Vec<PathBuf> {
    let mut readable: Vec<PathBuf> = SYSTEM_READABLE.iter().map(PathBuf::from).collect();
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from);
    if let Some(home) = &home {
        readable.extend(TOOLCHAIN_HOME_READABLE.iter().map(|dir| home.join(dir)));
    }
    // Programs the user put on PATH (`~/.local/bin`, `~/bin`, a toolchain's `bin`), and the
    // roots the toolchain variables name, resolved once, when the process started: a command
    // must not be able to turn one into a link to somewhere else for the next command. A
    // version manager's `shims` folder brings its root (the shims run the manager from there).
    static PATH_DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    readable.extend(
        PATH_DIRS
            .get_or_init(|| {
                let path = std::env::var_os("PATH").unwrap_or_default();
                let roots = TOOLCHAIN_ROOT_VARIABLES
                    .iter()
                    .filter_map(std::env::var_os)
                    .flat_map(|value| std::env::split_paths(&value).collect::<Vec<_>>());
                std::env::split_paths(&path)
                    .flat_map(|dir| {
                        let root = (dir.file_name() == Some("shims".as_ref()))
                            .then(|| dir.parent().map(Path::to_path_buf))
                            .flatten();
                        std::iter::once(dir).chain(root)
                    })
                    .chain(roots)
                    .filter(|dir| dir.is_absolute())
                    .filter_map(|dir| std::fs::canonicalize(dir).ok())
                    // Never `$HOME` itself or a folder holding it, nor the filesystem's root:
                    // that would show all of it.
                    .filter(|dir| !holds_home(dir) && dir.parent().is_some())
                    .collect()
            })
            .iter()
            .cloned(),
    );
    // A resolver configuration managed elsewhere (systemd-resolved).
    if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf")
        && !target.starts_with("/etc")
        && let Some(parent) = target.parent()
    {
        readable.push(parent.to_path_buf());
    }
    readable
}

/// Paths relative to each writable root that stay read-only when they exist (absent, they
/// may be created): files other programs run or obey when the user works in the folder
/// later, as Claude Code's sandbox protects them (shell start-up files matter when the
/// workspace is `$HOME`).
pub const PROTECTED_IF_PRESENT: &[&str] = &[
    ".gitmodules",
    ".gitconfig",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".ripgreprc",
    ".vscode",
    ".idea",
];

/// The protected paths of one root: [`PROTECTED_IN_ROOT`] (and `HEAD` when the root has no
/// `.git`: a `HEAD` next to `objects/` and `refs/` would make the root a bare repository
/// whose `config` git obeys), the existing [`PROTECTED_IF_PRESENT`], the `.git` of every
/// submodule `.gitmodules` names, the hooks folder `core.hooksPath` names inside the root,
/// and the git folder a `.git` file points to inside the root (with its `commondir`).
pub fn protected_paths(root: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = PROTECTED_IN_ROOT
        .iter()
        .map(|name| root.join(name))
        .collect();
    let git = root.join(".git");
    if std::fs::symlink_metadata(&git).is_err() {
        paths.push(root.join("HEAD"));
    }
    let exists = |path: &PathBuf| std::fs::symlink_metadata(path).is_ok();
    paths.extend(
        PROTECTED_IF_PRESENT
            .iter()
            .map(|name| root.join(name))
            .filter(exists),
    );
    submodules(root, root, &mut paths, 0);
    for value in git_config_values(&git.join("config"), "hookspath") {
        if let Some(hooks) = inside(root, &root.join(value)) {
            paths.push(hooks);
        }
    }
    // Git obeys what a `.git` file names whether or not anything links back: inside the
    // root it is protected like `.git` itself (outside, it is not writable anyway).
    for dir in named_git_dirs(root) {
        if let Some(dir) = inside(root, &dir) {
            paths.push(dir);
        }
    }
    paths
}

/// What the `.git` file of `root` names (`gitdir:`) and that folder's `commondir`,
/// resolved, unchecked: for protecting, never for showing (see [`linked_git_dirs`]).
fn named_git_dirs(root: &Path) -> Vec<PathBuf> {
    let Some(dir) = named_git_dir(root) else {
        return Vec::new();
    };
    let common = std::fs::read_to_string(dir.join("commondir"))
        .ok()
        .and_then(|common| std::fs::canonicalize(dir.join(common.trim())).ok());
    std::iter::once(dir).chain(common).collect()
}

/// The folder the `gitdir:` line of `root`'s `.git` file names, resolved (relative to
/// `root`), when there is one and it exists.
fn named_git_dir(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(root.join(".git")).ok()?;
    let named = text.lines().find_map(|line| line.strip_prefix("gitdir:"))?;
    std::fs::canonicalize(root.join(named.trim())).ok()
}

/// Whether the file or folder at `path` (followed) belongs to this process's user.
fn owned_by_user(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).is_ok_and(|meta| meta.uid() == nix::unistd::geteuid().as_raw())
}

/// The `.git` (and `.gitmodules`) of every submodule the `.gitmodules` of `repo` names,
/// and of theirs, recursively: `git status` follows them all.
fn submodules(root: &Path, repo: &Path, paths: &mut Vec<PathBuf>, depth: usize) {
    let Ok(modules) = std::fs::read_to_string(repo.join(".gitmodules")) else {
        return;
    };
    for line in modules.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("path") {
            continue;
        }
        let value = value.trim().trim_matches('"');
        let Some(sub) = inside(root, &repo.join(value)) else {
            continue;
        };
        paths.push(sub.join(".git"));
        if std::fs::symlink_metadata(sub.join(".gitmodules")).is_ok() {
            paths.push(sub.join(".gitmodules"));
            if depth < 8 {
                submodules(root, &sub, paths, depth + 1);
            }
        }
    }
}

/// `path` with `.` and `..` applied, when it stays inside `root` (and is not `root`).
fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                clean.pop();
            }
            std::path::Component::CurDir => {}
            other => clean.push(other),
        }
    }
    (clean.starts_with(root) && clean != root).then_some(clean)
}

/// The git folders a worktree or submodule checkout in `root` uses (`.git` is then a file
/// saying `gitdir: PATH`, and that folder may name its `commondir`): readable, so git works
/// in such a checkout.
///
/// A `.git` file is the repository's to write (a tarball, a vendored folder, or a command
/// that could write the workspace may have planted it), so what it names is shown only when
/// the user's own repository layout explains it ([`explained_git_dir`]): a real git
/// folder that links back to `root` (a worktree's `gitdir` file, a submodule's
/// `core.worktree`), never `/`, `$HOME`, a folder holding it, or a folder holding `root`.
/// The `commondir` of a worktree's folder is shown only when the folder is one of its
/// `worktrees/`. Empty when nothing is explained.
pub fn linked_git_dirs(root: &Path) -> Vec<PathBuf> {
    let Some(dir) = explained_git_dir(root) else {
        return Vec::new();
    };
    let mut dirs = vec![dir.clone()];
    if let Ok(common) = std::fs::read_to_string(dir.join("commondir"))
        && let Ok(common) = std::fs::canonicalize(dir.join(common.trim()))
        && dir
            .parent()
            .is_some_and(|parent| parent == common.join("worktrees"))
        && is_git_dir(&common)
        && shown_safely(&common, root)
    {
        dirs.push(common);
    }
    dirs
}

/// The git folder the `.git` file of `root` names, resolved, when it is a real git folder
/// (a `HEAD` file, and an `objects` folder or a `commondir` file) that may be shown (not
/// `/`, not `$HOME` or a folder holding it, not a folder holding `root`, owned by this
/// user) and that names `root` back: a
/// worktree's folder holds a `gitdir` file naming `root/.git`; a submodule's folder (under
/// the superproject's `.git/modules/`) has `core.worktree` naming `root`. `None` when
/// `.git` is not a regular file or any of that fails.
pub fn explained_git_dir(root: &Path) -> Option<PathBuf> {
    let git = root.join(".git");
    if !std::fs::symlink_metadata(&git).is_ok_and(|meta| meta.is_file()) {
        return None;
    }
    let dir = named_git_dir(root)?;
    if !is_git_dir(&dir) || !shown_safely(&dir, root) {
        return None;
    }
    let real_root = std::fs::canonicalize(root).ok()?;
    let same = |path: &Path| std::fs::canonicalize(path).is_ok_and(|path| path == real_root);
    // A worktree: `DIR/gitdir` names the checkout's `.git` file.
    let worktree = std::fs::read_to_string(dir.join("gitdir"))
        .ok()
        .map(|back| dir.join(back.trim()))
        .is_some_and(|back| {
            back.file_name() == Some(".git".as_ref()) && back.parent().is_some_and(same)
        });
    // A submodule: `core.worktree` in `DIR/config` names the checkout.
    let submodule = || {
        git_config_values(&dir.join("config"), "worktree")
            .iter()
            .any(|value| same(&dir.join(value)))
    };
    (worktree || submodule()).then_some(dir)
}

/// Whether `dir` looks like a git folder: a `HEAD` file, and an `objects` folder or a
/// `commondir` file.
fn is_git_dir(dir: &Path) -> bool {
    let file = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_file());
    let folder = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_dir());
    file("HEAD") && (folder("objects") || file("commondir"))
}

/// Whether a folder outside the workspace named by the workspace's own files may be made
/// readable: not the filesystem's root, not `$HOME` nor a folder holding it, not a folder
/// holding `root` (that would show the workspace's neighbours), and owned by this user
/// (as git's `safe.directory` check asks: another user's folder in `/tmp` is theirs to
/// fill).
fn shown_safely(dir: &Path, root: &Path) -> bool {
    let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let owned = owned_by_user(dir);
    dir.parent().is_some() && !holds_home(dir) && !real_root.starts_with(dir) && owned
}

/// The values of `key` (any section, case-insensitive) in the git configuration file at
/// `path`, quotes removed. A small reader: enough for `worktree` and `hooksPath`, whose
/// values are paths.
fn git_config_values(path: &Path, key: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| line.split_once('='))
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case(key))
        .map(|(_, value)| value.trim().trim_matches('"').to_owned())
        .collect()
}

/// The top folder of the git repository `root` lies in, when `root` is below it (a
/// workspace in a subfolder of a repository): readable, so git works there. Only when that
/// folder's `.git` is a real git folder (or a `.git` file [`explained_git_dir`] accepts)
/// owned by this user, and never the filesystem's root, `$HOME` or a folder holding it (a
/// repository of dotfiles would show all of `$HOME`).
pub fn enclosing_repository(root: &Path) -> Option<PathBuf> {
    let top = root
        .ancestors()
        .skip(1)
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())?;
    let git = top.join(".git");
    let real_git_dir = std::fs::symlink_metadata(&git).is_ok_and(|meta| meta.is_dir())
        && is_git_dir(&git)
        && owned_by_user(&git);
    let explained = real_git_dir || explained_git_dir(top).is_some();
    (explained && top.parent().is_some() && !holds_home(top)).then(|| top.to_path_buf())
}

/// The credential files under `$HOME` that exist ([`CREDENTIALS_IN_HOME`]) and, for root,
/// what under `/etc` other users may not read ([`private_system_files`]).
pub fn default_hidden() -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = Vec::new();
    // Under every spelling of `$HOME`: a workspace reached through the resolved path must
    // not see them there.
    for home in home_dirs() {
        hidden.extend(credentials_in_home(&home));
    }
    if let Some(root) = std::env::var_os("CARGO_HOME").map(PathBuf::from) {
        hidden.extend(
            ["config.toml", "config"]
                .iter()
                .map(|file| root.join(file))
                .filter(|path| config_holds_credentials(path)),
        );
    }
    // A toolchain root named by a variable is readable through
    // [`TOOLCHAIN_ROOT_VARIABLES`]; its registry tokens are not.
    for (variable, files) in [
        ("CARGO_HOME", &["credentials", "credentials.toml"][..]),
        ("GEM_HOME", &["credentials"][..]),
    ] {
        if let Some(root) = std::env::var_os(variable).map(PathBuf::from) {
            hidden.extend(
                files
                    .iter()
                    .map(|file| root.join(file))
                    .filter(|path| std::fs::symlink_metadata(path).is_ok()),
            );
        }
    }
    // The readable folders are granted resolved (`~/.cargo` may be a link to elsewhere,
    // `CARGO_HOME` may be written with `..`): each credential file is hidden where it really
    // is too.
    let resolved: Vec<PathBuf> = hidden
        .iter()
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .filter(|real| !hidden.contains(real))
        .collect();
    hidden.extend(resolved);
    if nix::unistd::geteuid().is_root() {
        hidden.extend(private_system_files().iter().cloned());
    }
    hidden
}

/// The credential files and folders that exist in the home folder `home`: those of
/// [`CREDENTIALS_IN_HOME`], and those of [`CONFIG_WITH_CREDENTIALS`] whose text
/// [`holds_credentials`]. [`default_hidden`] takes them for every spelling of `$HOME`.
///
/// Also the files git's `[include]` and `[includeIf]` sections of those configuration files
/// name (recursively, 4 levels) and npm's global configuration in a version manager's
/// folder (`~/.nvm/versions/node/*/etc/npmrc`), when they hold a credential.
pub fn credentials_in_home(home: &Path) -> Vec<PathBuf> {
    let exists = |path: &PathBuf| std::fs::symlink_metadata(path).is_ok();
    let mut found: Vec<PathBuf> = CREDENTIALS_IN_HOME
        .iter()
        .map(|file| home.join(file))
        .filter(exists)
        .collect();
    let mut configs: Vec<PathBuf> = CONFIG_WITH_CREDENTIALS
        .iter()
        .map(|file| home.join(file))
        .collect();
    for config in [".gitconfig", ".config/git/config"] {
        git_includes(&home.join(config), home, 0, &mut configs);
    }
    for manager in [".nvm/versions/node", ".volta/tools/image/node"] {
        if let Ok(versions) = std::fs::read_dir(home.join(manager)) {
            configs.extend(versions.flatten().map(|v| v.path().join("etc/npmrc")));
        }
    }
    found.extend(
        configs
            .into_iter()
            .filter(|path| config_holds_credentials(path)),
    );
    found
}

/// The files the `path` values of `[include]` and `[includeIf ...]` sections of the git
/// configuration file `config` name (relative to its folder, `~/` to `home`), and theirs,
/// up to 4 levels, appended to `found`.
fn git_includes(config: &Path, home: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(text) = std::fs::read_to_string(config) else {
        return;
    };
    let mut in_include = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            let section = line.to_ascii_lowercase();
            in_include = section.starts_with("[include]") || section.starts_with("[includeif");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !in_include || !key.trim().eq_ignore_ascii_case("path") {
            continue;
        }
        let value = value.trim().trim_matches('"');
        let included = match value.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => config.parent().unwrap_or(home).join(value),
        };
        if !found.contains(&included) {
            found.push(included.clone());
            if depth < 4 {
                git_includes(&included, home, depth + 1, found);
            }
        }
    }
}

/// Whether the file at `path` exists and [`holds_credentials`] (read whole up to 1 MiB; a
/// larger or unreadable one counts as holding some).
fn config_holds_credentials(path: &Path) -> bool {
    const LIMIT: u64 = 1 << 20;
    match std::fs::metadata(path) {
        Err(_) => false,
        Ok(meta) if meta.len() > LIMIT => true,
        Ok(_) => std::fs::read(path)
            .map(|bytes| holds_credentials(&String::from_utf8_lossy(&bytes)))
            .unwrap_or(true),
    }
}

/// Files and folders under `/etc` that are not readable by everyone (`/etc/shadow`,
/// `/etc/gshadow`, `/etc/ssl/private`, SSH host keys, `/etc/sudoers`): root could read them
/// as their owner, a sandboxed command must not. Found once per process (a walk of `/etc`,
/// at most 6 levels deep, links not followed).
pub fn private_system_files() -> &'static [PathBuf] {
    static FOUND: OnceLock<Vec<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(|| {
        fn walk(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                use std::os::unix::fs::PermissionsExt;
                let mode = meta.permissions().mode();
                if meta.is_dir() {
                    if mode & 0o005 != 0o005 {
                        found.push(entry.path());
                    } else if depth < 6 {
                        walk(&entry.path(), depth + 1, found);
                    }
                } else if meta.is_file() && mode & 0o004 == 0 {
                    found.push(entry.path());
                }
            }
        }
        let mut found = Vec::new();
        walk(Path::new("/etc"), 0, &mut found);
        found
    })
}

/// What went wrong preparing a sandboxed command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No back end works here.
    #[error("no sandbox is available: {0}")]
    Unavailable(String),
    /// A policy path is not absolute.
    #[error("sandbox policy path {0} is not absolute")]
    RelativePath(PathBuf),
    /// A protected path is a symbolic link: the command could replace the link itself, so
    /// a writable sandbox cannot be built (bubblewrap).
    #[error(
        "cannot protect {0}: it is a symbolic link, which a command could replace; commands that may write the workspace cannot run here under bubblewrap (replace the link by what it points to, or use --sandbox off)"
    )]
    ProtectedLink(PathBuf),
    /// A placeholder for an absent protected path could not be made.
    #[error("could not protect {path}: {source}")]
    Placeholder {
        /// The protected path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The seccomp filter could not be built or handed to bubblewrap.
    #[error("could not prepare the sandbox's seccomp filter: {0}")]
    Seccomp(String),
    /// The policy could not be passed to the helper.
    #[error("could not encode the sandbox policy: {0}")]
    Encode(#[from] serde_json::Error),
    /// The pipe for bubblewrap's status (`--json-status-fd`) could not be made.
    #[error("could not make the sandbox's status pipe: {0}")]
    Status(std::io::Error),
    /// A persistent sandbox ([`Zygote`]) could not be started or could not take a command.
    #[error("persistent sandbox: {0}")]
    Zygote(String),
}

/// The mechanism that enforces a [`Policy`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// bubblewrap, at this path.
    Bubblewrap(PathBuf),
    /// Landlock and seccomp, applied by this helper executable (run with [`HELPER_ARG`]).
    Landlock(PathBuf),
    /// None works; the text says why.
    Unavailable(String),
}

impl Backend {
    /// The back end's short name: `bwrap`, `landlock` or `none`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Bubblewrap(_) => "bwrap",
            Self::Landlock(_) => "landlock",
            Self::Unavailable(_) => "none",
        }
    }

    /// Whether a sandbox is available.
    pub fn is_available(&self) -> bool {
        !matches!(self, Self::Unavailable(_))
    }

    /// Finds a working back end: bubblewrap when `bwrap` is on `PATH` (or in `/usr/bin`) and
    /// can start a sandbox here (checked by running one), else Landlock when `helper` is
    /// given and the kernel enforces Landlock (checked by running the helper), else
    /// [`Backend::Unavailable`] with the reasons. [`BACKEND_ENV`] forces a choice.
    ///
    /// Costs one or two short process starts; the result for a given `helper` is cached for
    /// the life of the process.
    pub fn detect(helper: Option<&Path>) -> Backend {
        Self::detect_with(helper, None)
    }

    /// [`Backend::detect`], with the answer also kept in `record` (a file, made with its
    /// folder if missing) and taken from it while nothing it depends on has changed: see
    /// [`probe_cache`] for what that is, and why a forged record cannot weaken the sandbox.
    /// A start with a fresh record runs no probe at all.
    pub fn detect_cached(helper: Option<&Path>, record: &Path) -> Backend {
        Self::detect_with(helper, Some(record))
    }

    fn detect_with(helper: Option<&Path>, record: Option<&Path>) -> Backend {
        /// Back ends found so far, by helper.
        type Found = std::sync::Mutex<Vec<(Option<PathBuf>, Backend)>>;
        static CACHE: OnceLock<Found> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = helper.map(Path::to_path_buf);
        if let Ok(cached) = cache.lock()
            && let Some((_, backend)) = cached.iter().find(|(k, _)| *k == key)
        {
            return backend.clone();
        }
        let backend = match (record, forced_backend()) {
            (Some(record), Ok(forced)) => {
                probe_cache::remember(record);
                let bwrap = forced
                    .is_none_or(|f| f == "bwrap")
                    .then(|| bwrap::find_on_path("bwrap"))
                    .flatten();
                let helper = helper.filter(|_| forced.is_none_or(|f| f == "landlock"));
                let fingerprint = probe_cache::fingerprint(bwrap.as_deref(), helper, forced);
                probe_cache::load(record, &fingerprint, bwrap.as_deref(), helper).unwrap_or_else(
                    || {
                        let found = Self::detect_uncached(helper);
                        probe_cache::store(record, &fingerprint, &found);
                        found
                    },
                )
            }
            _ => Self::detect_uncached(helper),
        };
        if let Ok(mut cached) = cache.lock() {
            cached.push((key, backend.clone()));
        }
        backend
    }

    fn detect_uncached(helper: Option<&Path>) -> Backend {
        let forced = match forced_backend() {
            Ok(forced) => forced,
            Err(reason) => return Backend::Unavailable(reason),
        };
        let mut reasons = Vec::new();
        if forced.is_none_or(|f| f == "bwrap") {
            match bwrap::probe() {
                Ok(path) => return Backend::Bubblewrap(path),
                Err(reason) => reasons.push(reason),
            }
        }
        if forced.is_none_or(|f| f == "landlock") {
            match helper {
                Some(helper) => match helper::probe(helper) {
                    Ok(()) => return Backend::Landlock(helper.to_path_buf()),
                    Err(reason) => reasons.push(reason),
                },
                None => reasons.push("no Landlock helper executable was given".to_owned()),
            }
        }
        if let Some(forced) = forced {
            reasons.push(format!("{BACKEND_ENV}={forced}"));
        }
        Backend::Unavailable(reasons.join("; "))
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bubblewrap(path) => write!(f, "bubblewrap ({})", path.display()),
            Self::Landlock(_) => f.write_str("Landlock + seccomp"),
            Self::Unavailable(reason) => write!(f, "none ({reason})"),
        }
    }
}

/// A folder only its owner may use (mode 0700) under the system's temporary folder, removed
/// with everything in it on drop: the private `TMPDIR` a [`Policy`] needs. Its name is
/// `agent-PID-N-ATTEMPT`, resolved (no link in it). A process that ends without dropping it
/// (`std::process::exit` on a second Ctrl-C) calls [`remove_private_dirs`] first.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
}

/// The [`PrivateDir`]s alive in this process.
static LIVE_PRIVATE_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn live_private_dirs() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A poisoned list is still a list of paths.
    LIVE_PRIVATE_DIRS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How old a dead process's private folder must be before [`sweep_stale_private_dirs`]
/// removes it: a process in another pid namespace sharing `/tmp` is not visible in our
/// `/proc`, and an hour-old folder of a live agent keeps its mtime fresh only if it writes.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(3_600);

/// Removes the private folders (`agent-PID-N-ATTEMPT` in `base`) that processes killed
/// without cleaning up left behind (SIGKILL runs no destructor): only folders (never a
/// link), owned by this user, whose process is gone from `/proc`, untouched for an hour.
/// Once per process, at its first private folder; errors are ignored (the next process
/// tries again).
pub fn sweep_stale_private_dirs(base: &Path) {
    use std::os::unix::fs::MetadataExt as _;
    let uid = nix::unistd::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = stale_candidate(&name.to_string_lossy()) else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age >= STALE_AFTER);
        if meta.is_dir() && meta.uid() == uid && old {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// The pid in a private folder's name (`agent-PID-N-ATTEMPT`, all numbers), if it is one.
fn stale_candidate(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("agent-")?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    let numbers = parts
        .map(|part| part.parse::<u64>().is_ok())
        .collect::<Vec<_>>();
    (numbers.len() == 2 && numbers.iter().all(|ok| *ok)).then_some(pid)
}

/// Removes every [`PrivateDir`] this process still holds, for a process about to end
/// without running destructors (`std::process::exit`). Their owners must not use them
/// afterwards: the sandboxed commands in them have been killed or are about to be.
pub fn remove_private_dirs() {
    for path in live_private_dirs().drain(..) {
        let _ = std::fs::remove_dir_all(path);
    }
}

impl PrivateDir {
    /// Creates a fresh one.
    ///
    /// # Errors
    ///
    /// When the temporary folder cannot be resolved or the folder created; the message
    /// names the path.
    pub fn create() -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::fs::canonicalize(std::env::temp_dir())?;
        let mut attempt = 0;
        loop {
            let path = base.join(format!(
                "agent-{}-{}-{attempt}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed),
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    live_private_dirs().push(path.clone());
                    static SWEPT: std::sync::Once = std::sync::Once::new();
                    // Off the caller's path: it reads all of the temporary folder (about
                    // 1 ms here, more in a crowded one), and nothing waits for it.
                    SWEPT.call_once(|| {
                        let swept = base.clone();
                        let thread = std::thread::Builder::new()
                            .name("private-dir-sweep".into())
                            .spawn(move || sweep_stale_private_dirs(&swept));
                        if thread.is_err() {
                            sweep_stale_private_dirs(&base);
                        }
                    });
                    return Ok(Self { path });
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => {
                    attempt += 1;
                }
                Err(error) => {
                    return Err(std::io::Error::new(
                        error.kind(),
                        format!("{}: {error}", path.display()),
                    ));
                }
            }
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        live_private_dirs().retain(|path| path != &self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Prepares sandboxed commands with one [`Backend`].
#[derive(Clone, Debug)]
pub struct Sandbox {
    backend: Backend,
    /// A program and its arguments that start the sandbox's own program (bubblewrap, the
    /// Landlock helper) as their last argument: see [`Sandbox::wrapped`].
    wrapper: Vec<OsString>,
}

/// A sandboxed command, ready to spawn. Keep it (or its `guard`) alive until the process has
/// exited: it holds the placeholders of absent protected paths, which are removed when the
/// last command using them is done. Spawn `command` once, as it is: under bubblewrap it
/// carries descriptors (the seccomp filter, the folders of [`Policy::unlinked`]) mapped into
/// the child alone, which a copy of its program and arguments would lack.
#[derive(Debug)]
pub struct Prepared {
    /// The command: `bwrap ...` or the helper. Add environment variables, stdio and a
    /// process group as for any command; its working directory is set inside the sandbox.
    pub command: Command,
    /// Placeholders to remove after the process exits.
    pub guard: PlaceholderGuard,
}

/// Removes the placeholders of one prepared command when dropped (see [`Prepared`]): drop
/// it after the process has exited, through [`PlaceholderGuard::exited`] when its exit
/// status is known.
#[derive(Debug, Default)]
pub struct PlaceholderGuard {
    // Held for its `Drop`, which removes the placeholders.
    _placeholders: Placeholders,
    /// bubblewrap's `--json-status-fd`, read end (non-blocking once first read); `None`
    /// once it closed (or for another back end).
    status: Option<std::io::PipeReader>,
    /// What it said so far.
    said: Vec<u8>,
    /// Whether it closed (bubblewrap exited), so `said` is all it will say.
    closed: bool,
}

impl PlaceholderGuard {
    /// Drops the guard of a command that exited with `status`, and tells whether
    /// bubblewrap ran the command at all: exit status 1 with its status descriptor
    /// (`--json-status-fd`) closed and no `exit-code` in it means the sandbox could not be
    /// set up (a mount refused, the command not found in it), so the recorded back end is
    /// probed again at the next start ([`probe_cache`]). A command of its own exiting 1 has
    /// its `exit-code` reported; bubblewrap killed by a signal (a timeout) is not 1.
    pub fn exited(mut self, status: std::process::ExitStatus) {
        self.read_status();
        if status.code() == Some(1)
            && self.closed
            && !self
                .said
                .windows(11)
                .any(|window| window == b"\"exit-code\"")
        {
            probe_cache::forget();
        }
    }

    /// Kills every process of the sandbox: SIGKILL to bubblewrap's child, PID 1 of the
    /// sandbox's PID namespace, whose death makes the kernel kill the rest of the namespace.
    /// For a command being stopped: stopping its process group reaches bubblewrap, not the
    /// sandbox's processes (bubblewrap's `--new-session` puts them in a session of their
    /// own), which die with bubblewrap only if its `--die-with-parent` was set up before
    /// bubblewrap was killed (a command stopped in its first milliseconds races it). The
    /// process is named by bubblewrap's status (`child-pid`) and checked to be in the
    /// sandbox's mount namespace first, so a reused PID is never hit. Does nothing for
    /// another back end, or before bubblewrap reported its child.
    pub fn kill_sandbox(&mut self) {
        self.read_status();
        let (Some(pid), Some(namespace)) = (
            json_number(&self.said, "child-pid"),
            json_number(&self.said, "mnt-namespace"),
        ) else {
            return;
        };
        let Ok(pid) = i32::try_from(pid) else {
            return;
        };
        if in_mount_namespace(&format!("/proc/{pid}"), namespace) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// Whether [`Self::kill_sandbox`] can reach the sandbox: bubblewrap has named its first
    /// process, or has exited, or this is another back end. bubblewrap names it within
    /// milliseconds of starting; killed before that, it never will, and the sandbox (already
    /// in a session of its own) would outlive it: wait for this before stopping a command.
    pub fn sandbox_known(&mut self) -> bool {
        self.read_status();
        self.status.is_none() || json_number(&self.said, "child-pid").is_some()
    }

    /// Whether dropping the guard may wait: it holds placeholders, bubblewrap has exited,
    /// and a process is still in the sandbox's mount namespace (the kernel still killing
    /// it). `false` when nothing is known (another back end, bubblewrap still running).
    pub fn must_wait(&mut self) -> bool {
        if self._placeholders.is_empty() {
            return false;
        }
        self.read_status();
        self.closed && json_number(&self.said, "mnt-namespace").is_some_and(mount_namespace_in_use)
    }

    /// Reads what bubblewrap's status descriptor holds now, never waiting.
    fn read_status(&mut self) {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        use std::io::Read as _;
        let Some(reader) = self.status.as_mut() else {
            return;
        };
        if fcntl(&*reader, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).is_err() {
            self.status = None;
            return;
        }
        let mut buffer = [0u8; 1024];
        loop {
            match reader.read(&mut buffer) {
                Ok(0) => {
                    self.closed = true;
                    self.status = None;
                    return;
                }
                Ok(count) => self.said.extend_from_slice(&buffer[..count]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

impl Drop for PlaceholderGuard {
    /// The placeholders go only once no process is left in the sandbox's mount namespace:
    /// bubblewrap's own process ends when the command does, while the kernel may still be
    /// killing the sandbox's other processes (seconds, with hundreds of them), and removing
    /// a placeholder detaches its read-only mount in that namespace, where a process still
    /// alive could then create `.claude/settings.json`. Waits at most
    /// 10 s (`NAMESPACE_EMPTY_WAIT`); a namespace still in use then keeps its placeholders
    /// (empty read-only folders, which a later command or [`sweep_placeholders`] removes).
    fn drop(&mut self) {
        if self._placeholders.is_empty() {
            return;
        }
        self.read_status();
        let namespace = json_number(&self.said, "mnt-namespace");
        let Some(namespace) = namespace.filter(|_| self.closed) else {
            // No status (another back end, or bubblewrap still running): as before.
            return;
        };
        let deadline = std::time::Instant::now() + NAMESPACE_EMPTY_WAIT;
        while mount_namespace_in_use(namespace) {
            if std::time::Instant::now() >= deadline {
                tracing::warn!(
                    namespace,
                    "a sandbox's processes outlived it: its placeholders stay"
                );
                self._placeholders.keep();
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// How long a guard waits for its sandbox's last process to be gone (see
/// [`PlaceholderGuard`]'s `Drop`).
const NAMESPACE_EMPTY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The number after `"key":` in bubblewrap's status (`{ "child-pid": N, "mnt-namespace":
/// M, ... }`: the sandbox's first process and its mount namespace's inode).
fn json_number(said: &[u8], key: &str) -> Option<u64> {
    let text = String::from_utf8_lossy(said);
    let quoted = format!("\"{key}\":");
    let rest = &text[text.find(&quoted)? + quoted.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether the process at `proc_dir` (`/proc/N`) is in the mount namespace `inode`.
fn in_mount_namespace(proc_dir: &str, inode: u64) -> bool {
    std::fs::read_link(format!("{proc_dir}/ns/mnt"))
        .is_ok_and(|link| link.as_os_str() == format!("mnt:[{inode}]").as_str())
}

/// Whether a process is in the mount namespace `inode` (`/proc/*/ns/mnt` reads
/// `mnt:[inode]`).
fn mount_namespace_in_use(inode: u64) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
            && in_mount_namespace(&entry.path().to_string_lossy(), inode)
    })
}

impl Sandbox {
    /// A sandbox with `backend`.
    pub fn new(backend: Backend) -> Self {
        Self {
            backend,
            wrapper: Vec::new(),
        }
    }

    /// This sandbox with its commands started through `wrapper` (a program and its first
    /// arguments; the sandbox's own command line follows them), which must pass on its
    /// descriptors and run that command line: a guard that ends the command with the agent
    /// (the agent's `__agent-mcp-guard`). Empty: started directly.
    #[must_use]
    pub fn wrapped(mut self, wrapper: Vec<OsString>) -> Self {
        self.wrapper = wrapper;
        self
    }

    /// A command for `program`: `program` itself, or the wrapper with `program` after its
    /// arguments.
    fn start(&self, program: &OsStr) -> Command {
        match self.wrapper.split_first() {
            None => Command::new(program),
            Some((wrapper, arguments)) => {
                let mut command = Command::new(wrapper);
                command.args(arguments).arg(program);
                command
            }
        }
    }

    /// The back end.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// A persistent sandbox for `policy` ([`Zygote`]), whose commands start in `cwd` unless
    /// told otherwise; `helper` is this program's executable (run inside with [`HELPER_ARG`]
    /// `zygote`). Only bubblewrap, and only the read-only profile (a writable one would keep
    /// its placeholders for absent protected paths for the sandbox's whole life).
    ///
    /// # Errors
    ///
    /// [`Error::Zygote`] for another back end or profile, or when it cannot start; as
    /// [`Sandbox::command`] for the policy.
    pub fn zygote(&self, policy: &Policy, helper: &Path, cwd: &Path) -> Result<Zygote, Error> {
        check_absolute(policy)?;
        let policy = &policy.with_resolved_links();
        let Backend::Bubblewrap(bwrap) = &self.backend else {
            return Err(Error::Zygote(format!(
                "the {} back end starts a sandbox per command",
                self.backend.name()
            )));
        };
        if policy.profile != Profile::ReadOnly {
            return Err(Error::Zygote(
                "only the read-only profile is kept running".into(),
            ));
        }
        let mut placeholders = Placeholders::default();
        let mut fds = bwrap::Descriptors::new(SECCOMP_FD + 1);
        let bwrap_args = bwrap::args(policy, cwd, &mut placeholders, &mut fds)?;
        let mut command = Command::new(bwrap);
        command
            .args(bwrap_args)
            .arg("--ro-bind")
            .arg(helper)
            .arg(zygote::HELPER_IN_SANDBOX)
            // A memory file system of its own for /dev/shm (emptied between commands), and
            // the rest of /dev read-only: its links (`/dev/fd`, `/dev/stderr`) would
            // otherwise stay as one command left them for the next.
            .args(["--tmpfs", "/dev/shm", "--remount-ro", "/dev"])
            // And bubblewrap's own root (the folders it made for the mounts, `$HOME` when
            // only parts of it are shown): as the read-only profile says, nothing but /tmp,
            // /dev/shm and the private temporary folder is writable, so nothing outside what
            // the sweep empties can be left for the next command.
            .args(["--remount-ro", "/"])
            // The zygote is the PID namespace's process 1: no bubblewrap process inside
            // holds its control socket, and no command can stop or kill it.
            .arg("--as-pid-1")
            .arg("--seccomp")
            .arg(SECCOMP_FD.to_string())
            .arg("--")
            .arg(zygote::HELPER_IN_SANDBOX)
            .arg(HELPER_ARG)
            .arg("zygote")
            .arg(&policy.temp_dir);
        pass_descriptors(&mut command, policy, fds, true)?;
        // Nothing of the agent's environment reaches the sandbox's own processes; each
        // command brings its whole environment.
        command.env_clear();
        drop(placeholders);
        Zygote::start(command, policy.clone())
    }

    /// A command running `program` with `args` in `cwd` under `policy`.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] without a back end; [`Error::RelativePath`] for a relative
    /// policy path; [`Error::Placeholder`] when an absent protected path could not be
    /// reserved (bubblewrap, workspace-write).
    pub fn command(
        &self,
        policy: &Policy,
        program: &OsStr,
        args: &[OsString],
        cwd: &Path,
    ) -> Result<Prepared, Error> {
        check_absolute(policy)?;
        let policy = &policy.with_resolved_links();
        match &self.backend {
            Backend::Bubblewrap(bwrap) => {
                let mut placeholders = Placeholders::default();
                let mut fds = bwrap::Descriptors::new(SECCOMP_FD + 1);
                let bwrap_args = bwrap::args(policy, cwd, &mut placeholders, &mut fds)?;
                let (status, status_writer) = std::io::pipe().map_err(Error::Status)?;
                let status_fd = fds.add(status_writer.into());
                let mut command = self.start(bwrap.as_os_str());
                command
                    .args(bwrap_args)
                    .arg("--json-status-fd")
                    .arg(status_fd.to_string())
                    .arg("--seccomp")
                    .arg(SECCOMP_FD.to_string())
                    .arg("--")
                    .arg(program)
                    .args(args);
                pass_descriptors(&mut command, policy, fds, false)?;
                command.env("TMPDIR", &policy.temp_dir);
                Ok(Prepared {
                    command,
                    guard: PlaceholderGuard {
                        _placeholders: placeholders,
                        status: Some(status),
                        said: Vec::new(),
                        closed: false,
                    },
                })
            }
            Backend::Landlock(helper) => {
                let mut command = self.start(helper.as_os_str());
                command
                    .arg(HELPER_ARG)
                    .arg(helper::Mode::Run.as_str())
                    .arg(serde_json::to_string(policy)?)
                    .arg(cwd)
                    .arg(program)
                    .args(args);
                command.env("TMPDIR", &policy.temp_dir);
                Ok(Prepared {
                    command,
                    guard: PlaceholderGuard::default(),
                })
            }
            Backend::Unavailable(reason) => Err(Error::Unavailable(reason.clone())),
        }
    }
}

/// `path` opened as a folder (`O_PATH`) when no component of it is a symbolic link now
/// (`openat2` with `RESOLVE_NO_SYMLINKS`, Linux 5.6): what [`Policy::unlinked`] asks.
pub(crate) fn open_without_links(path: &Path) -> Option<std::os::fd::OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how).ok()
}

/// The descriptor bubblewrap reads the seccomp filter from (`--seccomp FD`).
const SECCOMP_FD: i32 = 3;

/// Maps into bubblewrap's process alone (no other child started meanwhile inherits them)
/// the folders `fds` opened for `--ro-bind-fd`, and a pipe holding the filter of
/// [`seccomp`] for `policy` as [`SECCOMP_FD`]: without network, only IPv4, IPv6 and netlink
/// sockets (in the sandbox's own network namespace) and unix stream socket pairs, so no
/// unix socket with a path is reachable through the mounts.
fn pass_descriptors(
    command: &mut Command,
    policy: &Policy,
    fds: bwrap::Descriptors,
    persistent: bool,
) -> Result<(), Error> {
    use command_fds::{CommandFdExt, FdMapping};
    use std::io::Write;
    let sockets = if policy.network {
        seccomp::Sockets::Any
    } else {
        seccomp::Sockets::OwnNamespace
    };
    // bubblewrap drops every capability and makes PID, IPC and network namespaces: the
    // other rules are the helper's, which has no such namespaces for certain. The kernel
    // keyrings are in none of them (root's user keyring would be the host's); a persistent
    // sandbox's commands share one PID and IPC namespace.
    let program = seccomp::program(seccomp::Rules {
        sockets,
        foreign_processes: persistent,
        keyrings: true,
        root_metadata: false,
        // A persistent sandbox's IPC namespace outlives each command.
        sysv_ipc: persistent,
    })
    .map_err(Error::Seccomp)?;
    let bytes = seccomp::to_bytes(&program);
    let (reader, mut writer) = std::io::pipe().map_err(|e| Error::Seccomp(e.to_string()))?;
    // A few hundred bytes: far below a pipe's capacity (64 KiB), so this cannot block.
    writer
        .write_all(&bytes)
        .map_err(|e| Error::Seccomp(e.to_string()))?;
    drop(writer);
    let mut mappings = vec![FdMapping {
        parent_fd: reader.into(),
        child_fd: SECCOMP_FD,
    }];
    mappings.extend(
        fds.into_mapped()
            .into_iter()
            .map(|(child_fd, parent_fd)| FdMapping {
                parent_fd,
                child_fd,
            }),
    );
    // Called once per command, as the crate asks.
    command
        .fd_mappings(mappings)
        .map_err(|e| Error::Seccomp(e.to_string()))?;
    Ok(())
}

impl Policy {
    /// This policy with each protected and hidden path also named as it resolves, its links
    /// followed. What is kept from commands must be kept however it is reached: a link
    /// (`~/.claude` to a dotfiles checkout in the workspace, a home folder given as
    /// `/home/u` that is `/var/home/u`) would otherwise leave the real folder writable, or
    /// readable, inside a root. A path that does not exist resolves through its nearest
    /// existing folder.
    pub(crate) fn with_resolved_links(&self) -> Policy {
        let mut policy = self.clone();
        for list in [&mut policy.protected, &mut policy.hidden] {
            let resolved: Vec<PathBuf> = list
                .iter()
                .filter_map(|path| env::resolved(path).filter(|real| real != path))
                .collect();
            for path in resolved {
                if !list.contains(&path) {
                    list.push(path);
                }
            }
        }
        policy
    }
}

fn check_absolute(policy: &Policy) -> Result<(), Error> {
    let all = policy
        .roots
        .iter()
        .chain(&policy.readable)
        .chain(&policy.protected)
        .chain(&policy.hidden)
        .chain(std::iter::once(&policy.temp_dir));
    for path in all {
        if !path.is_absolute() {
            return Err(Error::RelativePath(path.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    /// Two commands at once in one workspace (background tasks, parallel calls): the one
    /// that ends first never removes a placeholder the other still mounts (found when three
    /// background commands started together: the last one's bubblewrap could not mount
    /// `.agent`).
    #[test]
    fn a_placeholder_stays_while_any_command_mounts_it() {
        let root = std::env::temp_dir().join(format!("placeholder-share-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let policy = Policy::new(
            Profile::WorkspaceWrite,
            vec![root.clone()],
            root.join("tmp"),
        );
        let sandbox = Sandbox::new(Backend::Bubblewrap(PathBuf::from("/usr/bin/bwrap")));
        let prepare = || {
            sandbox
                .command(&policy, OsStr::new("/bin/true"), &[], &root)
                .unwrap_or_else(|error| panic!("{error}"))
        };
        let first = prepare();
        assert!(root.join(".agent").is_dir());
        let second = prepare();
        drop(first);
        assert!(
            root.join(".agent").is_dir(),
            "removed under the second command"
        );
        drop(second);
        assert!(!root.join(".agent").exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A recorded back end that cannot set a sandbox up has its record removed (the next
    /// process probes again); a command of its own failing leaves the record alone.
    #[test]
    fn a_back_end_that_fails_to_set_up_is_probed_again_next_time() {
        use std::os::unix::fs::PermissionsExt as _;
        let base = std::env::temp_dir().join(format!("reprobe-{}", std::process::id()));
        std::fs::create_dir_all(base.join("tmp")).unwrap();
        let base = std::fs::canonicalize(&base).unwrap();
        let record = base.join("sandbox-backend.json");
        let policy = Policy::new(Profile::ReadOnly, vec![base.clone()], base.join("tmp"));
        let run = |bwrap: &Path, program: &str| {
            std::fs::write(&record, "{}").unwrap();
            probe_cache::remember(&record);
            let prepared = Sandbox::new(Backend::Bubblewrap(bwrap.to_path_buf()))
                .command(&policy, OsStr::new(program), &[], &base)
                .unwrap();
            let mut command = prepared.command;
            let status = command.status().unwrap();
            drop(command);
            prepared.guard.exited(status);
            record.exists()
        };
        // A bubblewrap that cannot mount what it must: exits 1 without starting anything.
        let broken = base.join("bwrap");
        std::fs::write(
            &broken,
            "#!/bin/sh\necho \"bwrap: Can't mount proc on /newroot/proc\" >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(
            !run(&broken, "/bin/true"),
            "the record of a failing back end stays"
        );
        match bwrap::find_on_path("bwrap") {
            Some(real) => {
                assert!(
                    run(&real, "/bin/false"),
                    "a failing command removed the record"
                );
                assert!(run(&real, "/bin/true"));
            }
            None => eprintln!("SKIPPED: no bwrap here for the working half"),
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    /// The sandbox's mount namespace is read from bubblewrap's status, and a namespace is
    /// in use while a process is in it (this test's own is).
    #[test]
    fn a_mount_namespace_is_in_use_while_a_process_is_in_it() {
        let said =
            b"{ \"child-pid\": 16629, \"mnt-namespace\": 4026532174 }\n{ \"exit-code\": 0 }\n";
        assert_eq!(json_number(said, "mnt-namespace"), Some(4_026_532_174));
        assert_eq!(json_number(b"{ \"exit-code\": 0 }", "mnt-namespace"), None);
        let own = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let own: u64 = own
            .to_string_lossy()
            .trim_start_matches("mnt:[")
            .trim_end_matches(']')
            .parse()
            .unwrap();
        assert!(mount_namespace_in_use(own));
        assert!(!mount_namespace_in_use(1));
    }

    #[test]
    fn stale_private_dirs_of_dead_processes_are_swept() {
        let base = std::env::temp_dir().join(format!("sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7_200);
        let make = |name: &str, age: Option<std::time::SystemTime>| {
            let path = base.join(name);
            std::fs::create_dir_all(path.join("inner")).unwrap();
            std::fs::write(path.join("inner/file"), "x").unwrap();
            if let Some(time) = age {
                std::fs::File::open(&path)
                    .unwrap()
                    .set_modified(time)
                    .unwrap();
            }
            path
        };
        // No pid reaches 999,999,999 (the kernel's limit is 4,194,304).
        let dead_old = make("agent-999999999-0-0", Some(old));
        let dead_new = make("agent-999999998-1-0", None);
        let ours = make(&format!("agent-{}-7-0", std::process::id()), Some(old));
        let other = make("agent-notes", Some(old));
        let target = make("target", Some(old));
        let link = base.join("agent-999999997-0-0");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        sweep_stale_private_dirs(&base);
        assert!(!dead_old.exists(), "a dead process's old folder goes");
        assert!(dead_new.exists(), "a recent one stays");
        assert!(ours.exists(), "a live process's stays");
        assert!(
            other.exists(),
            "a name that is not a private folder's stays"
        );
        assert!(link.symlink_metadata().is_ok() && target.join("inner/file").exists());
        assert_eq!(stale_candidate("agent-12-3-4"), Some(12));
        assert_eq!(stale_candidate("agent-12-3"), None);
        assert_eq!(stale_candidate("agent-12-x-4"), None);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_policy_with_a_file_name_that_is_not_text_round_trips() {
        let odd = PathBuf::from(OsString::from_vec(b"/w/secrets/\xff\xfe.key".to_vec()));
        let policy = Policy {
            roots: vec![PathBuf::from("/w")],
            hidden: vec![odd],
            temp_dir: PathBuf::from("/tmp/x"),
            ..Policy::default()
        };
        let json = serde_json::to_string(&policy).unwrap_or_default();
        assert!(json.contains("\"/w\""), "{json}");
        let back: Option<Policy> = serde_json::from_str(&json).ok();
        assert_eq!(back, Some(policy));
    }

    #[test]
    fn private_dirs_are_removed_on_drop_or_before_an_exit() -> std::io::Result<()> {
        let dropped = PrivateDir::create()?;
        std::fs::write(dropped.path().join("f"), "x")?;
        let path = dropped.path().to_path_buf();
        drop(dropped);
        assert!(!path.exists());

        let kept = PrivateDir::create()?;
        std::fs::create_dir(kept.path().join("d"))?;
        assert!(live_private_dirs().contains(&kept.path().to_path_buf()));
        remove_private_dirs();
        assert!(!kept.path().exists());
        assert!(!live_private_dirs().contains(&kept.path().to_path_buf()));
        drop(kept);
        Ok(())
    }

    #[test]
    fn protected_paths_follow_what_git_and_editors_obey() {
        let root = std::env::temp_dir().join(format!("sandbox-protected-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(".git")).ok();
        std::fs::create_dir_all(root.join("libs/a")).ok();
        std::fs::create_dir_all(root.join(".vscode")).ok();
        std::fs::write(
            root.join(".gitmodules"),
            "[submodule \"a\"]\n\tpath = libs/a\n",
        )
        .ok();
        std::fs::write(root.join(".git/config"), "[core]\n\thooksPath = .husky\n").ok();
        let paths = protected_paths(&root);
        for expected in [
            ".git",
            ".agent",
            ".claude",
            ".mcp.json",
            ".gitmodules",
            ".vscode",
            "libs/a/.git",
            ".husky",
        ] {
            assert!(
                paths.contains(&root.join(expected)),
                "{expected}: {paths:?}"
            );
        }
        assert!(
            !paths.contains(&root.join("HEAD")),
            "a repository has no HEAD to protect"
        );
        assert!(
            !paths.contains(&root.join(".idea")),
            "absent: may be created"
        );
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).ok();
        assert!(protected_paths(&root).contains(&root.join("HEAD")));
        let _ = std::fs::remove_dir_all(&root);
    }
}
