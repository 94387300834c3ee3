//! The Landlock back end's helper: a process that restricts itself, then executes the
//! command.
//!
//! Landlock and seccomp restrict the process that applies them and its descendants, so they
//! cannot be applied in the agent (that would restrict the agent) nor between `fork` and
//! `exec` without `unsafe`. The program embedding this crate therefore re-executes itself:
//! when its first argument is [`HELPER_ARG`] it calls [`helper_main`] before anything else.
//!
//! `run` (what [`crate::Sandbox::command`] starts):
//!
//! 1. asks for SIGKILL when its parent (the agent) dies;
//! 2. unshares user, PID, UTS, IPC and, without network, network namespaces; the
//!    user namespace maps the caller to itself, or root to user 65534, so that root holds
//!    no capability once the next program starts; root refuses to go on without it, another
//!    user goes on without namespaces (step 4 directly, with a warning in the docs);
//! 3. starts itself again as `init`, process 1 of the new PID namespace: SIGKILL when `run`
//!    dies, a session of its own, not dumpable (so not traceable), then
//!    step 4, then it starts the program as its child and reaps until it ends. When `init`
//!    ends, the kernel kills everything left in the namespace, `setsid` daemons included,
//!    and the program cannot undo that;
//! 4. restricts itself with Landlock (the rules of [`crate::landlock_rules`]; TCP and
//!    abstract unix sockets too when the network is off and no network namespace was
//!    made; signals to processes outside the sandbox) and the seccomp filter of
//!    [`crate::seccomp`]: no `TIOCSTI` or `TIOCLINUX`, no `ptrace`, `process_vm_*` or
//!    keyring calls; without network only IPv4, IPv6 and netlink sockets in the network
//!    namespace of its own (none without one), unix socket pairs as streams, no io_uring;
//!    without namespaces, no System V IPC; for root, no `chmod`, `utimensat` or extended
//!    attributes, which Landlock does not cover.
//!
//! Exit status: the program's, or 125 when the helper itself failed (with a message on
//! stderr starting `agent-sandbox:`).

use std::convert::Infallible;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};
use nix::sched::CloneFlags;
use nix::sys::signal::Signal;

use crate::Policy;
use crate::landlock_rules::{self, Access as Grant};
use crate::seccomp::{self, Rules, Sockets};

/// The first argument that makes a program run [`helper_main`].
pub const HELPER_ARG: &str = "__agent-sandbox";

/// Exit status when the helper itself fails.
const HELPER_FAILED: i32 = 125;

/// The newest Landlock ABI this helper asks for (best effort: older kernels enforce less,
/// a kernel without Landlock is an error).
const LANDLOCK_ABI: ABI = ABI::V6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Check that Landlock is enforced.
    Probe,
    /// Start commands on request inside a bubblewrap sandbox ([`crate::zygote`]).
    Zygote,
    /// Isolate, then run (directly or through `Init`).
    Run,
    /// Process 1 of the PID namespace: restricts itself, starts the program as its child,
    /// reaps, and exits with the program's status (the namespace dies with it).
    Init {
        /// A network namespace of its own was made.
        net_isolated: bool,
        /// The helper was started by root (now user 65534 in the namespace).
        root: bool,
    },
}

impl Mode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Probe => "probe",
            Self::Zygote => "zygote",
            Self::Run => "run",
            Self::Init {
                net_isolated: false,
                root: false,
            } => "init",
            Self::Init {
                net_isolated: true,
                root: false,
            } => "init-nonet",
            Self::Init {
                net_isolated: false,
                root: true,
            } => "init-root",
            Self::Init {
                net_isolated: true,
                root: true,
            } => "init-nonet-root",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        let modes = [
            Self::Probe,
            Self::Zygote,
            Self::Run,
            Self::Init {
                net_isolated: false,
                root: false,
            },
            Self::Init {
                net_isolated: true,
                root: false,
            },
            Self::Init {
                net_isolated: false,
                root: true,
            },
            Self::Init {
                net_isolated: true,
                root: true,
            },
        ];
        modes.into_iter().find(|mode| mode.as_str() == text)
    }
}

/// Runs the helper with this process's arguments (`PROGRAM __agent-sandbox MODE ...`) and
/// exits. Call it first thing in `main` when the first argument is [`HELPER_ARG`].
pub fn helper_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().skip(2).collect();
    match helper(&args) {
        Ok(never) => match never {},
        Err(message) => {
            eprintln!("agent-sandbox: {message}");
            std::process::exit(HELPER_FAILED)
        }
    }
}

/// Checks, with `helper`, that Landlock is enforced on this kernel.
pub(crate) fn probe(helper: &Path) -> Result<(), String> {
    let output = Command::new(helper)
        .arg(HELPER_ARG)
        .arg(Mode::Probe.as_str())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|error| format!("the helper {} could not run: {error}", helper.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr)
            .trim()
            .trim_start_matches("agent-sandbox: ")
            .to_owned())
    }
}

fn helper(args: &[OsString]) -> Result<Infallible, String> {
    let mode = args
        .first()
        .and_then(|mode| mode.to_str())
        .and_then(Mode::parse)
        .ok_or("expected a mode: probe, run or init")?;
    if mode == Mode::Probe {
        return probe_here();
    }
    if mode == Mode::Zygote {
        let [temp_dir] = &args[1..] else {
            return Err("expected: zygote TEMP_DIR".to_owned());
        };
        return crate::zygote::zygote_main(Path::new(temp_dir));
    }
    let [policy_json, cwd, program, rest @ ..] = &args[1..] else {
        return Err("expected: MODE POLICY CWD PROGRAM [ARGS...]".to_owned());
    };
    let policy: Policy = serde_json::from_slice(policy_json.as_bytes())
        .map_err(|error| format!("bad policy: {error}"))?;
    let cwd = PathBuf::from(cwd);
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|error| format!("could not set the parent-death signal: {error}"))?;
    let root = nix::unistd::geteuid().is_root();
    match mode {
        Mode::Run => {
            let (pid_ns, net_ns) = isolate(&policy)?;
            if !pid_ns {
                return exec_restricted(&policy, net_ns, root, &cwd, program, rest);
            }
            let init = Mode::Init {
                net_isolated: net_ns,
                root,
            };
            let exe = std::env::current_exe()
                .map_err(|error| format!("could not find the helper itself: {error}"))?;
            let status = Command::new(exe)
                .env(PARENT_ENV, process_identity("self")?)
                .arg(HELPER_ARG)
                .arg(init.as_str())
                .arg(policy_json)
                .arg(&cwd)
                .arg(program)
                .args(rest)
                .status()
                .map_err(|error| format!("could not start the sandbox: {error}"))?;
            exit_like(status)
        }
        Mode::Init { net_isolated, root } => init(&policy, net_isolated, root, &cwd, program, rest),
        Mode::Probe => probe_here(),
        // Taken before the policy is read.
        Mode::Zygote => Err("zygote takes only TEMP_DIR".to_owned()),
    }
}

/// Process 1 of the namespaces: no controlling terminal, not traceable, restricted; then
/// the program as its child. The program cannot clear the
/// parent-death signal that ties this process to the agent, and when this process exits,
/// the kernel kills everything left in the PID namespace.
fn init(
    policy: &Policy,
    net_isolated: bool,
    was_root: bool,
    cwd: &Path,
    program: &OsString,
    args: &[OsString],
) -> Result<Infallible, String> {
    use nix::sys::wait::{WaitStatus, wait};
    // The parent-death signal is set (in `helper`), but `run` may have died before that,
    // stopped in its first milliseconds: then nothing would ever kill this process and the
    // program. `run` said who it is; if that process is gone, so are we (and, process 1 of
    // the namespace, everything in it).
    let parent = std::env::var(PARENT_ENV).unwrap_or_default();
    let (pid, _) = parent.split_once(':').unwrap_or_default();
    if process_identity(pid).ok().as_deref() != Some(parent.as_str()) {
        std::process::exit(128 + Signal::SIGKILL as i32);
    }
    // A session of our own: no controlling terminal to inject keys into.
    let _ = nix::unistd::setsid();
    // Not traceable by the command (same user): it could otherwise clear our death signal.
    nix::sys::prctl::set_dumpable(false)
        .map_err(|error| format!("could not protect the sandbox's init: {error}"))?;
    restrict(policy, true, net_isolated, was_root)?;
    let child = Command::new(program)
        .args(args)
        .env_remove(PARENT_ENV)
        .current_dir(cwd)
        .spawn()
        .map_err(|error| format!("could not run {}: {error}", program.to_string_lossy()))?;
    let child = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    loop {
        match wait() {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => std::process::exit(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                std::process::exit(128 + signal as i32)
            }
            Ok(_) => {} // an orphan reaped
            Err(error) => return Err(format!("waiting for the command: {error}")),
        }
    }
}

/// The variable by which `run` tells `init` who its parent is (`PID:STARTTIME`).
const PARENT_ENV: &str = "AGENT_SANDBOX_PARENT";

/// `PID:STARTTIME` of the live process `pid` (`self`, or a number) from `/proc/PID/stat`:
/// the start time (field 22, clock ticks since boot) tells a live process from a later one
/// that took its PID. A process that has exited and waits to be reaped (state `Z` or `X`)
/// is gone: its death signal to its children has already been sent.
fn process_identity(pid: &str) -> Result<String, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|error| format!("could not read /proc/{pid}/stat: {error}"))?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let (own_pid, rest) = stat
        .split_once(" (")
        .zip(stat.rfind(") "))
        .map(|((own_pid, _), close)| (own_pid, &stat[close + 2..]))
        .ok_or_else(|| format!("/proc/{pid}/stat: unexpected format"))?;
    let mut fields = rest.split_whitespace();
    if matches!(fields.next(), Some("Z" | "X" | "x")) {
        return Err(format!("process {pid} has exited"));
    }
    let start = fields
        .nth(18)
        .ok_or_else(|| format!("/proc/{pid}/stat: no start time"))?;
    Ok(format!("{own_pid}:{start}"))
}

/// Restricts this (throwaway) process with an empty ruleset and reports whether the kernel
/// enforced it.
fn probe_here() -> Result<Infallible, String> {
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| ruleset.restrict_self())
        .map_err(|error| format!("Landlock is not available: {error}"))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("Landlock is not enforced by this kernel".to_owned());
    }
    std::process::exit(0)
}

/// Unshares a user namespace with PID, UTS, IPC and (without network) network namespaces;
/// returns whether it could, and whether the network namespace was made.
///
/// The user namespace maps the caller's user to itself, except for root, which becomes
/// user 65534 inside (still the owner of its files outside): a process whose user is not 0
/// loses every capability at its next `execve`, so root in the sandbox cannot use
/// capabilities (`chown`, `mknod`, `hostname`, reading other processes' memory) that
/// Landlock does not cover.
///
/// # Errors
///
/// When the namespaces cannot be made for root: its capabilities could not be dropped, so
/// the command does not run.
fn isolate(policy: &Policy) -> Result<(bool, bool), String> {
    let mut flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWIPC;
    if !policy.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    let root = nix::unistd::geteuid().is_root();
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    if let Err(error) = nix::sched::unshare(flags) {
        if root {
            return Err(format!(
                "cannot drop root's privileges: user namespaces are unavailable ({error}); install bubblewrap or run as a normal user"
            ));
        }
        return Ok((false, false));
    }
    let (inside_uid, inside_gid) = if root {
        (ROOT_INSIDE.to_string(), ROOT_INSIDE.to_string())
    } else {
        (uid.to_string(), gid.to_string())
    };
    let mapped = std::fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{inside_uid} {uid} 1")))
        .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{inside_gid} {gid} 1")));
    if let Err(error) = mapped {
        return Err(format!("could not map the user namespace: {error}"));
    }
    Ok((true, !policy.network))
}

/// The user root becomes inside the sandbox (`nobody`): any user but 0 loses its
/// capabilities at `execve`.
const ROOT_INSIDE: u32 = 65534;

/// Landlock and seccomp for this process and everything it starts.
///
/// `namespaced`: the namespaces of [`isolate`] were made (so System V IPC is the sandbox's
/// own); `net_isolated`: a network namespace of its own among them.
fn restrict(
    policy: &Policy,
    namespaced: bool,
    net_isolated: bool,
    was_root: bool,
) -> Result<(), String> {
    let network_blocked_here = !policy.network && !net_isolated;
    restrict_filesystem(policy, network_blocked_here)?;
    let sockets = if policy.network {
        Sockets::Any
    } else if net_isolated {
        Sockets::OwnNamespace
    } else {
        Sockets::PairsOnly
    };
    seccomp::apply(Rules {
        sockets,
        foreign_processes: true,
        keyrings: true,
        root_metadata: was_root,
        sysv_ipc: !namespaced,
    })
}

fn exec_restricted(
    policy: &Policy,
    net_isolated: bool,
    was_root: bool,
    cwd: &Path,
    program: &OsString,
    args: &[OsString],
) -> Result<Infallible, String> {
    restrict(policy, false, net_isolated, was_root)?;
    std::env::set_current_dir(cwd)
        .map_err(|error| format!("could not enter {}: {error}", cwd.display()))?;
    let to_c = |text: &OsString| {
        CString::new(text.as_bytes()).map_err(|_| "an argument contains a NUL byte".to_owned())
    };
    let program_c = to_c(program)?;
    let mut argv = vec![program_c.clone()];
    for arg in args {
        argv.push(to_c(arg)?);
    }
    match nix::unistd::execvp(&program_c, &argv) {
        Ok(never) => match never {},
        Err(error) => {
            eprintln!(
                "agent-sandbox: could not run {}: {error}",
                program.to_string_lossy()
            );
            std::process::exit(127)
        }
    }
}

fn restrict_filesystem(policy: &Policy, block_network: bool) -> Result<(), String> {
    let abi = LANDLOCK_ABI;
    let fail = |error: landlock::RulesetError| format!("Landlock: {error}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?
        .scope(Scope::Signal)
        .map_err(fail)?;
    if block_network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(fail)?
            .scope(Scope::AbstractUnixSocket)
            .map_err(fail)?;
    }
    let mut created = ruleset.create().map_err(fail)?;
    for (path, grant, follow) in landlock_rules::rules(policy) {
        let opened = if policy.unlinked.contains(&path) {
            // Granted as it is now, reached without a link, or not at all.
            crate::open_without_links(&path).map(|fd| (fd, true))
        } else {
            open_path(&path, follow)
        };
        let Some((fd, is_dir)) = opened else {
            continue;
        };
        let access = match grant {
            Grant::Read => AccessFs::from_read(abi),
            Grant::ListOnly => AccessFs::ReadDir.into(),
            Grant::Write => AccessFs::from_all(abi),
        };
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        if access.is_empty() {
            continue;
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(fail)?;
    }
    let status = created.restrict_self().map_err(fail)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("Landlock is not enforced by this kernel".to_owned());
    }
    Ok(())
}

/// An `O_PATH` descriptor of `path` and whether it is a folder, following a symbolic link
/// only when `follow`; otherwise `None` for a link (so that a folder swapped for a link while
/// the rules are built is never granted through it).
fn open_path(path: &Path, follow: bool) -> Option<(std::os::fd::OwnedFd, bool)> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::SFlag;
    let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    if !follow {
        flags |= OFlag::O_NOFOLLOW;
    }
    let fd = nix::fcntl::open(path, flags, nix::sys::stat::Mode::empty()).ok()?;
    let stat = nix::sys::stat::fstat(&fd).ok()?;
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFLNK {
        return None;
    }
    Some((fd, kind == SFlag::S_IFDIR))
}

/// Exits as `status` did: the same code, or the same signal.
fn exit_like(status: ExitStatus) -> ! {
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    if let Some(signal) = status.signal() {
        if let Ok(signal) = Signal::try_from(signal) {
            let _ = nix::sys::signal::raise(signal);
        }
        std::process::exit(128 + signal);
    }
    std::process::exit(HELPER_FAILED)
}
