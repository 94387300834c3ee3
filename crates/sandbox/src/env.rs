//! What every process the agent starts receives from it: its environment, and the program
//! itself.
//!
//! **Environment.** A command (the Bash tool, `!command`, `git status` at start-up), a hook or
//! an MCP server never inherits the agent's whole environment, which holds the model
//! provider's key, cloud credentials (`AWS_SECRET_ACCESS_KEY`, ...) and tokens
//! (`GITHUB_TOKEN`, ...). [`reset`] gives a command the variables of [`PASSED_VARIABLES`]
//! (and those starting with one of [`PASSED_PREFIXES`]) that the agent has, then what the
//! caller set on the command, then the user's settings' `env` (which wins), and removes
//! [`AGENT_CREDENTIALS`] in any case. A stdio MCP server gets less: only
//! [`MCP_SERVER_VARIABLES`] and what its configuration's `env` names ([`mcp_server_env`]),
//! as Claude Code starts them.
//!
//! **Programs.** A program the agent runs itself (the shell, git, bubblewrap, the shell of a
//! hook) is found by [`resolve_program`]: only in absolute `PATH` folders that are not inside
//! a workspace root, so a repository holding `./bash` or `node_modules/.bin/git` cannot have
//! its own file run outside the sandbox because `PATH` has an empty, `.` or relative entry.
//! The folders are fixed once per process ([`fix_program_folders`]) and every answer is
//! kept, so later changes to `PATH` folders' contents by a command cannot redirect them.
//! For the same reason a command that runs outside the sandbox gets a `PATH` without
//! empty or relative entries ([`Confinement::Unsandboxed`]); a sandboxed command keeps the
//! agent's `PATH` as it is (what it finds there runs in the sandbox).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Variables of the agent's environment that commands and hooks receive.
///
/// Chosen for what a daily user of a shell, git, cargo, go, npm, python, ruby or a JVM build
/// needs, and nothing that authenticates anyone: the basics every POSIX shell session has
/// (the MCP SDK's `getDefaultEnvironment` set: `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`,
/// `USER`), locale and time zone, the temporary folder, colour preferences, the XDG base
/// folders, the toolchains' own non-secret settings (the toolchain roots the sandbox makes
/// readable, [`crate::TOOLCHAIN_ROOT_VARIABLES`], pass too: [`is_passed`]),
/// certificate bundles and proxies (the proxy URL is passed as set: a password written into
/// it reaches commands too), and the git author identity.
///
/// Left out on purpose: every key, token and password (`*_API_KEY`, `*_TOKEN`, `AWS_*`,
/// `GOOGLE_*`, `AZURE_*`, `NPM_TOKEN`, `CARGO_REGISTRY_TOKEN`, ...), and variables that hand
/// over a capability rather than a setting: `SSH_AUTH_SOCK` (the SSH agent signs as the user
/// anywhere), `GPG_AGENT_INFO`, `DBUS_SESSION_BUS_ADDRESS` (the desktop's secret store),
/// `DISPLAY` / `WAYLAND_DISPLAY` (the user's screen and keyboard), `DOCKER_HOST` (root on the
/// machine), `KUBECONFIG`, and `LD_PRELOAD` / `LD_LIBRARY_PATH` (code loaded into every
/// program, bubblewrap included). Settings' `env` adds any of them back.
pub const PASSED_VARIABLES: &[&str] = &[
    // The session.
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TERMINFO",
    "TERMINFO_DIRS",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "LANG",
    "LANGUAGE",
    "LOCALE_ARCHIVE",
    "TZ",
    "TMPDIR",
    "EDITOR",
    "VISUAL",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_DIRS",
    // Rust.
    "RUSTUP_TOOLCHAIN",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC_WRAPPER",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "CARGO_TARGET_DIR",
    "CARGO_INCREMENTAL",
    "CARGO_BUILD_JOBS",
    // Go.
    "GOBIN",
    "GOCACHE",
    "GOMODCACHE",
    "GOFLAGS",
    "GOPROXY",
    "GOPRIVATE",
    "GONOPROXY",
    "GONOSUMDB",
    "GOTOOLCHAIN",
    "GO111MODULE",
    // Node.
    "NODE_PATH",
    "NODE_OPTIONS",
    "NODE_EXTRA_CA_CERTS",
    "NVM_BIN",
    "NVM_INC",
    "PNPM_HOME",
    // Python.
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYENV_VERSION",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CONDA_EXE",
    "PIPX_HOME",
    "PIPX_BIN_DIR",
    // Ruby, JVM, Android.
    "GEM_PATH",
    "RBENV_VERSION",
    "GRADLE_USER_HOME",
    "M2_HOME",
    "MAVEN_HOME",
    "ANDROID_HOME",
    "ANDROID_SDK_ROOT",
    // C and C++ builds.
    "CC",
    "CXX",
    "PKG_CONFIG_PATH",
    // Nix and Homebrew.
    "NIX_PATH",
    "NIX_PROFILES",
    "NIX_SSL_CERT_FILE",
    "HOMEBREW_PREFIX",
    // Certificates and proxies.
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    // git: who commits, and its configuration files.
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_NOSYSTEM",
    "GNUPGHOME",
];

/// Prefixes of passed variables: the locale's categories (`LC_ALL`, `LC_CTYPE`, ...).
pub const PASSED_PREFIXES: &[&str] = &["LC_"];

/// The agent's own credentials, never passed to a command or hook even when settings' `env`
/// names them (settings' `env` also configures the agent's API client): the Anthropic API's
/// key and token, and the OpenAI-compatible providers' default key variable. The embedding
/// program withholds the variables its other providers read their keys from itself.
pub const AGENT_CREDENTIALS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
];

/// What a stdio MCP server receives from the agent's environment before its configuration's
/// `env`: the MCP TypeScript SDK's `DEFAULT_INHERITED_ENV_VARS` on unix (its
/// `getDefaultEnvironment()`, which Claude Code uses), values that are shell functions
/// (starting with `()`) left out as the SDK does.
pub const MCP_SERVER_VARIABLES: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Folders searched for a program when `PATH` lacks them (as bubblewrap's former look-up).
const FALLBACK_FOLDERS: &[&str] = &["/usr/bin", "/bin"];

/// Where a command runs, which decides the `PATH` it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confinement {
    /// In the OS sandbox: `PATH` as the agent has it (empty and relative entries included;
    /// whatever they find runs sandboxed).
    Sandboxed,
    /// Outside any sandbox (a hook, an approved `dangerouslyDisableSandbox` call, a command
    /// run with the sandbox off): `PATH` without empty or relative entries, so the
    /// repository's own files are not found by name ([`absolute_path_entries`]).
    Unsandboxed,
}

/// Whether the agent's variable `name` is passed to commands and hooks: listed in
/// [`PASSED_VARIABLES`] or starting with one of [`PASSED_PREFIXES`].
pub fn is_passed(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    PASSED_VARIABLES.contains(&name)
        || crate::TOOLCHAIN_ROOT_VARIABLES.contains(&name)
        || PASSED_PREFIXES
            .iter()
            .any(|prefix| name.len() > prefix.len() && name.starts_with(prefix))
}

/// `path` (a `PATH` value) without its empty and relative entries, which name folders of
/// whatever the current directory is (the workspace, usually), and without the folders
/// inside the workspace roots [`fix_program_folders`] fixed (a command could put programs
/// there that a hook or server outside the sandbox would then run): inside as written or
/// where it resolves now, or not resolvable at all (a `..` after a part that does not
/// exist yet). Before the roots are fixed, the current directory stands for them.
pub fn absolute_path_entries(path: &OsStr) -> OsString {
    let unfixed;
    let excluded = match FOLDERS.get() {
        Some(folders) => folders.excluded.as_slice(),
        None => {
            unfixed = folders(&[]).excluded;
            unfixed.as_slice()
        }
    };
    let kept: Vec<PathBuf> = std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .filter(|dir| {
            !inside(dir, excluded) && resolved(dir).is_some_and(|real| !inside(&real, excluded))
        })
        .collect();
    // `join_paths` fails only on an entry holding `:`, and split entries hold none.
    std::env::join_paths(kept).unwrap_or_default()
}

/// The variables of `from` (an environment, such as [`std::env::vars_os`]) a command
/// receives under `confinement`: the passed ones ([`is_passed`]), `PATH` cleaned for an
/// unsandboxed command.
pub fn passed_from<I>(from: I, confinement: Confinement) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    from.into_iter()
        .filter(|(name, _)| is_passed(name))
        .map(|(name, value)| {
            if confinement == Confinement::Unsandboxed && name == "PATH" {
                let value = absolute_path_entries(&value);
                (name, value)
            } else {
                (name, value)
            }
        })
        .collect()
}

/// Gives `command` its environment in place of the agent's: the passed variables of the
/// agent's environment ([`passed_from`]), then the variables already set on `command` (a
/// sandbox's `TMPDIR`), then `settings` (settings' `env`, which wins), without
/// [`AGENT_CREDENTIALS`]. Nothing else of the agent's environment is inherited. Outside a
/// sandbox a `PATH` from `settings` keeps only its absolute entries outside the workspace,
/// as the agent's own does ([`absolute_path_entries`]): a program the sandboxed model
/// wrote into `node_modules/.bin` must not be what an unsandboxed hook runs.
pub fn reset(command: &mut Command, confinement: Confinement, settings: &[(String, String)]) {
    let explicit: Vec<(OsString, OsString)> = command
        .get_envs()
        .filter_map(|(name, value)| Some((name.to_owned(), value?.to_owned())))
        .collect();
    command
        .env_clear()
        .envs(passed_from(std::env::vars_os(), confinement))
        .envs(explicit)
        .envs(settings.iter().map(|(name, value)| {
            let value = if confinement == Confinement::Unsandboxed && name == "PATH" {
                absolute_path_entries(OsStr::new(value))
            } else {
                OsString::from(value)
            };
            (OsString::from(name), value)
        }));
    for name in AGENT_CREDENTIALS {
        command.env_remove(name);
    }
}

/// Gives `command` the environment of the user's own shell (a command the user typed): the
/// agent's whole environment, then `settings` (settings' `env`, which wins), without
/// [`AGENT_CREDENTIALS`] and the `withheld` variables (the names of other keys the agent
/// reads).
pub fn user_shell(command: &mut Command, settings: &[(String, String)], withheld: &[String]) {
    command.envs(settings.iter().map(|(name, value)| (name, value)));
    for name in AGENT_CREDENTIALS {
        command.env_remove(name);
    }
    for name in withheld {
        command.env_remove(name);
    }
}

/// The environment of a stdio MCP server: [`MCP_SERVER_VARIABLES`] from `from` (an
/// environment, such as [`std::env::vars_os`]; `PATH` without empty or relative entries, as
/// the server runs outside any sandbox), then `configured` (its configuration's `env`, which
/// wins).
pub fn mcp_server_env<'a, I>(
    from: I,
    configured: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut env: Vec<(OsString, OsString)> = from
        .into_iter()
        .filter(|(name, value)| {
            name.to_str()
                .is_some_and(|name| MCP_SERVER_VARIABLES.contains(&name))
                && !value.as_encoded_bytes().starts_with(b"()")
        })
        .map(|(name, value)| {
            if name == "PATH" {
                let value = absolute_path_entries(&value);
                (name, value)
            } else {
                (name, value)
            }
        })
        .collect();
    for (name, value) in configured {
        env.retain(|(known, _)| known.as_os_str() != OsStr::new(name));
        env.push((name.into(), value.into()));
    }
    env
}

/// Why a program could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProgramError {
    /// No absolute `PATH` folder outside the workspace roots (nor `/usr/bin`, `/bin`) holds
    /// an executable file of that name.
    #[error(
        "`{0}` was not found in an absolute PATH folder outside the workspace (empty and relative PATH entries, and folders inside the workspace, are not searched for programs the agent runs itself)"
    )]
    NotFound(String),
    /// The name holds a `/` or is empty: only bare names are looked up.
    #[error("`{0}` is not a program name")]
    NotAName(String),
}

/// The folders programs are looked up in, once fixed.
struct Folders {
    /// Searched in order: `PATH`'s absolute entries (resolved), then `/usr/bin` and `/bin`,
    /// none inside `excluded`.
    search: Vec<PathBuf>,
    /// The workspace roots (resolved).
    excluded: Vec<PathBuf>,
}

static FOLDERS: OnceLock<Folders> = OnceLock::new();

/// Fixes where [`resolve_program`] looks, once per process: the absolute entries of the
/// agent's `PATH`, then `/usr/bin` and `/bin`, leaving out every folder inside one of
/// `workspace_roots` (inside the current directory when there are none). Call it at start-up, as soon as the
/// roots are known; returns `false` when the folders were already fixed (by an earlier call,
/// or by a look-up, which fixes them with the current directory as the only root).
pub fn fix_program_folders(workspace_roots: &[PathBuf]) -> bool {
    let mut fixed = false;
    FOLDERS.get_or_init(|| {
        fixed = true;
        folders(workspace_roots)
    });
    fixed
}

fn folders(workspace_roots: &[PathBuf]) -> Folders {
    // Before the roots are known, the current directory stands for them; once they are, it
    // does not: a session started from `/` or the home folder with `-C repo` must not lose
    // every `PATH` entry.
    let current = workspace_roots
        .is_empty()
        .then(|| std::env::current_dir().ok())
        .flatten();
    let excluded: Vec<PathBuf> = workspace_roots
        .iter()
        .cloned()
        .chain(current)
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .collect();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut search: Vec<PathBuf> = Vec::new();
    let entries = std::env::split_paths(&path).chain(FALLBACK_FOLDERS.iter().map(PathBuf::from));
    for dir in entries.filter(|dir| dir.is_absolute()) {
        let Ok(dir) = std::fs::canonicalize(&dir) else {
            continue;
        };
        if !inside(&dir, &excluded) && !search.contains(&dir) {
            search.push(dir);
        }
    }
    Folders { search, excluded }
}

/// `dir` resolved as far as it exists, the rest appended: where a folder that does not
/// exist yet (a command may make it) would be, whatever links its existing part goes
/// through. `None` when the missing part holds `..` (where it leads depends on what is
/// made later) or nothing of it exists.
pub(crate) fn resolved(dir: &Path) -> Option<PathBuf> {
    let mut missing = Vec::new();
    let mut existing = dir;
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return Some(
                missing
                    .iter()
                    .rev()
                    .fold(real, |path, part| path.join(part)),
            );
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            _ => return None,
        }
    }
}

fn inside(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// The absolute path of program `name` (a bare name: `bash`, `git`, `bwrap`), found once
/// per process and kept: the first executable file `name` in the folders
/// [`fix_program_folders`] fixed (the folder resolved, the file as named there, so a
/// multi-call binary still sees its name), and never a file that resolves inside a workspace
/// root.
///
/// # Errors
///
/// [`ProgramError::NotAName`] for an empty name or one holding `/`;
/// [`ProgramError::NotFound`] when no such folder holds it.
pub fn resolve_program(name: &str) -> Result<PathBuf, ProgramError> {
    if name.is_empty() || name.contains('/') {
        return Err(ProgramError::NotAName(name.to_owned()));
    }
    type Found = Mutex<Vec<(String, Option<PathBuf>)>>;
    static FOUND: OnceLock<Found> = OnceLock::new();
    let found = FOUND.get_or_init(Found::default);
    // A poisoned lock only means a thread panicked while it held the list, which is
    // complete after each push.
    let mut found = found.lock().unwrap_or_else(PoisonError::into_inner);
    let path = match found.iter().find(|(known, _)| known == name) {
        Some((_, path)) => path.clone(),
        None => {
            let folders = FOLDERS.get_or_init(|| folders(&[]));
            let path = search(name, folders);
            found.push((name.to_owned(), path.clone()));
            path
        }
    };
    path.ok_or_else(|| ProgramError::NotFound(name.to_owned()))
}

fn search(name: &str, folders: &Folders) -> Option<PathBuf> {
    folders
        .search
        .iter()
        .map(|dir| dir.join(name))
        .find(|candidate| {
            let executable = std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
            executable
                && std::fs::canonicalize(candidate)
                    .is_ok_and(|real| !inside(&real, &folders.excluded))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_not_made_yet_is_placed_where_its_existing_part_really_is() {
        let base = std::env::temp_dir().join(format!("env-resolved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("ws")).ok();
        std::os::unix::fs::symlink(base.join("ws"), base.join("link")).ok();
        let real = std::fs::canonicalize(base.join("ws")).unwrap_or_default();
        // `link/bin/tools` does not exist: it would be `ws/bin/tools`, inside the workspace.
        assert_eq!(
            resolved(&base.join("link/bin/tools")),
            Some(real.join("bin/tools"))
        );
        let roots = std::slice::from_ref(&real);
        assert!(resolved(&base.join("link/bin")).is_some_and(|dir| inside(&dir, roots)));
        // A `..` after a missing part cannot be placed: such an entry is dropped.
        assert_eq!(resolved(&base.join("link/m/../bin")), None);
        // Inside as written, though a link in the workspace leads elsewhere now.
        std::os::unix::fs::symlink("/usr", real.join("tools")).ok();
        assert!(inside(&real.join("tools/bin"), roots));
        assert!(resolved(&real.join("tools/bin")).is_some_and(|dir| !inside(&dir, roots)));
        let _ = std::fs::remove_dir_all(&base);
    }

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).into(), (*value).into()))
            .collect()
    }

    #[test]
    fn only_listed_variables_pass() {
        let agent = os(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C.UTF-8"),
            ("LC_", "odd"),
            ("OPENAI_API_KEY", "sk-1"),
            ("GITHUB_TOKEN", "ghp"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("SSH_AUTH_SOCK", "/tmp/ssh"),
            ("CARGO_HOME", "/opt/cargo"),
        ]);
        let passed = passed_from(agent, Confinement::Sandboxed);
        let names: Vec<&str> = passed
            .iter()
            .map(|(name, _)| name.to_str().unwrap())
            .collect();
        assert_eq!(names, ["PATH", "HOME", "LC_ALL", "CARGO_HOME"]);
    }

    #[test]
    fn unsandboxed_path_loses_empty_and_relative_entries() {
        let agent = os(&[("PATH", ":.:node_modules/.bin:/usr/local/bin::/usr/bin:./x")]);
        let sandboxed = passed_from(agent.clone(), Confinement::Sandboxed);
        assert_eq!(
            sandboxed[0].1,
            OsString::from(":.:node_modules/.bin:/usr/local/bin::/usr/bin:./x")
        );
        let unsandboxed = passed_from(agent, Confinement::Unsandboxed);
        assert_eq!(unsandboxed[0].1, OsString::from("/usr/local/bin:/usr/bin"));
    }

    /// A settings `PATH` is cleaned as the agent's own is outside a sandbox: a folder the
    /// sandboxed model can write (`node_modules/.bin`) never leads an unsandboxed hook.
    #[test]
    fn a_settings_path_outside_the_sandbox_loses_relative_entries() {
        let path_of = |confinement| {
            let mut command = Command::new("true");
            reset(
                &mut command,
                confinement,
                &[("PATH".into(), "node_modules/.bin:/usr/bin::./x".into())],
            );
            command
                .get_envs()
                .find(|(name, _)| *name == "PATH")
                .and_then(|(_, value)| value.map(OsStr::to_owned))
        };
        assert_eq!(
            path_of(Confinement::Unsandboxed),
            Some(OsString::from("/usr/bin"))
        );
        assert_eq!(
            path_of(Confinement::Sandboxed),
            Some(OsString::from("node_modules/.bin:/usr/bin::./x"))
        );
    }

    #[test]
    fn reset_keeps_explicit_variables_and_settings_win() {
        let mut command = Command::new("true");
        command.env("TMPDIR", "/private/tmp-1").env("ONLY_SET", "x");
        reset(
            &mut command,
            Confinement::Sandboxed,
            &[
                ("LINT".into(), "strict".into()),
                ("ONLY_SET".into(), "y".into()),
                ("ANTHROPIC_API_KEY".into(), "sk-ant".into()),
                ("OPENAI_API_KEY".into(), "sk-oa".into()),
            ],
        );
        let envs: Vec<(String, Option<String>)> = command
            .get_envs()
            .map(|(name, value)| {
                (
                    name.to_string_lossy().into_owned(),
                    value.map(|value| value.to_string_lossy().into_owned()),
                )
            })
            .collect();
        let value = |name: &str| {
            envs.iter()
                .find(|(known, _)| known == name)
                .and_then(|(_, value)| value.clone())
        };
        assert_eq!(value("TMPDIR").as_deref(), Some("/private/tmp-1"));
        assert_eq!(value("ONLY_SET").as_deref(), Some("y"));
        assert_eq!(value("LINT").as_deref(), Some("strict"));
        assert_eq!(value("ANTHROPIC_API_KEY"), None);
        assert_eq!(value("OPENAI_API_KEY"), None);
    }

    #[test]
    fn mcp_servers_get_the_sdk_defaults_and_their_configuration() {
        let agent = os(&[
            ("PATH", ".:/usr/bin"),
            ("HOME", "/home/u"),
            ("SHELL", "() { evil; }"),
            ("LANG", "C"),
            ("GITHUB_TOKEN", "ghp"),
        ]);
        let configured: std::collections::BTreeMap<String, String> = [
            ("LEVEL".to_owned(), "info".to_owned()),
            ("HOME".to_owned(), "/srv".to_owned()),
        ]
        .into();
        let env = mcp_server_env(agent, &configured);
        assert_eq!(
            env,
            os(&[("PATH", "/usr/bin"), ("HOME", "/srv"), ("LEVEL", "info")])
        );
    }

    #[test]
    fn programs_are_found_outside_the_workspace_only() {
        let base =
            std::env::temp_dir().join(format!("sandbox-env-programs-{}", std::process::id()));
        let workspace = base.join("ws");
        let outside = base.join("bin");
        for dir in [&workspace, &outside] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let script = |path: &Path| {
            std::fs::write(path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        script(&workspace.join("tool"));
        script(&outside.join("tool"));
        std::fs::write(outside.join("plain"), "not executable").unwrap();
        let folders = Folders {
            search: vec![
                std::fs::canonicalize(&workspace).unwrap(),
                std::fs::canonicalize(&outside).unwrap(),
            ],
            excluded: vec![std::fs::canonicalize(&workspace).unwrap()],
        };
        assert_eq!(
            search("tool", &folders),
            Some(std::fs::canonicalize(&outside).unwrap().join("tool"))
        );
        assert_eq!(search("plain", &folders), None);
        // A link outside the workspace to a file inside it is refused too.
        std::os::unix::fs::symlink(workspace.join("tool"), outside.join("linked")).unwrap();
        assert_eq!(search("linked", &folders), None);
        assert_eq!(
            resolve_program("a/b"),
            Err(ProgramError::NotAName("a/b".into()))
        );
        assert!(resolve_program("sh").unwrap().is_absolute());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
