//! Stdio servers that end with the agent, however it ends.
//!
//! A server runs in its own process group, so a Ctrl-C at the terminal does not reach it and
//! the agent can kill it with everything it started. But a process group outlives a
//! SIGKILLed agent. The guard closes that gap without `unsafe` (no `pre_exec`): the program
//! embedding this crate re-executes itself with [`GUARD_ARG`] (see [`guard_main`], and
//! [`crate::Options::guard`]); the guard leads the server's process group, starts the server
//! as its child, and kills the whole group the moment its own parent (the agent) is gone.
//! A parent-death signal is not used: it fires when the *thread* that spawned the process
//! ends, and a tokio worker thread can become a blocking thread that ends later.
//!
//! With [`NEW_SESSION_FLAG`] first (how the agent starts its hooks) the guard also leaves the
//! agent's session: it calls `setsid`, so the program and everything it starts run in a
//! session and process group of their own (the guard's pid), with no controlling terminal.
//! The caller then must not start the guard in a process group of its own (`setsid` refuses
//! a group leader); to stop it early it kills the guard's pid and then the group, which
//! reaches everything whether or not the guard had left the session yet.

use std::ffi::OsString;
use std::time::Duration;

/// The first argument that makes the embedding program run [`guard_main`]:
/// `PROGRAM __agent-mcp-guard [--new-session] PARENT_PID COMMAND [ARGS...]`.
pub const GUARD_ARG: &str = "__agent-mcp-guard";

/// The optional argument after [`GUARD_ARG`] that makes the guard start a session of its own
/// (`setsid`) before it starts the program.
pub const NEW_SESSION_FLAG: &str = "--new-session";

/// The guard's exit code when the server could not be started (as a shell's 127).
pub const SPAWN_FAILED: i32 = 127;

/// The start of the line the guard writes to stderr (the server's log) when the server could
/// not be started; the rest of the line is the reason.
pub const SPAWN_FAILED_PREFIX: &str = "agent-mcp-guard: could not start: ";

/// How often the guard checks that its parent is alive.
const POLL: Duration = Duration::from_millis(100);

/// The guard's entry point; call it first thing in `main` when the first argument is
/// [`GUARD_ARG`]. Never returns: exits with [`SPAWN_FAILED`] when it could not start the
/// server; otherwise, when the server ends or the parent is gone, it kills the whole process
/// group, itself included (what the server left running in the background must not hold
/// its pipes open or outlive it). With [`NEW_SESSION_FLAG`], when the program ends the guard
/// kills the rest of the group and exits with the program's exit code (128 + the signal
/// when a signal ended it), so a hook's answer gets through.
pub fn guard_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().skip(2).collect();
    std::process::exit(guard(&args))
}

fn guard(args: &[OsString]) -> i32 {
    let (new_session, args) = match args {
        [flag, rest @ ..] if flag == NEW_SESSION_FLAG => (true, rest),
        _ => (false, args),
    };
    let [parent, program, rest @ ..] = args else {
        eprintln!("agent-mcp-guard: expected [{NEW_SESSION_FLAG}] PARENT_PID COMMAND [ARGS...]");
        return 2;
    };
    let Some(parent) = parent.to_str().and_then(|pid| pid.parse::<i32>().ok()) else {
        eprintln!("agent-mcp-guard: {parent:?} is not a process id");
        return 2;
    };
    // The parent may already be gone (killed between spawning this and now).
    if nix::unistd::getppid().as_raw() != parent {
        return 137;
    }
    // Its own session (and process group, led by this process), before anything starts.
    if new_session && let Err(error) = nix::unistd::setsid() {
        eprintln!("{SPAWN_FAILED_PREFIX}could not start a new session: {error}");
        return SPAWN_FAILED;
    }
    // A hook's (short-lived) guard: what the program starts and then leaves (a daemon that
    // `setsid`s out of the group and whose parent exits) comes back to this process instead
    // of init, so it is still found and killed below. Not for a long-lived server's guard,
    // which would collect the zombies of its orphans (nothing here reaps them). Without it
    // (an old kernel) the group alone is killed.
    if new_session {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
    let mut child = match std::process::Command::new(program).args(rest).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("{SPAWN_FAILED_PREFIX}{error}");
            return SPAWN_FAILED;
        }
    };
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(POLL);
            if nix::unistd::getppid().as_raw() != parent {
                // The agent is gone: the server and everything it started go too (this
                // process is the group's leader, so the group is ours; what left it is
                // among this process's descendants).
                kill_rest_of_group();
                let _ = nix::sys::signal::killpg(
                    nix::unistd::getpgrp(),
                    nix::sys::signal::Signal::SIGKILL,
                );
                std::process::exit(137);
            }
        }
    });
    let code = match child.wait() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt as _;
            status
                .code()
                .or_else(|| status.signal().map(|signal| 128 + signal))
                .unwrap_or(1)
        }
        Err(error) => {
            eprintln!("agent-mcp-guard: waiting for the server: {error}");
            1
        }
    };
    // The server is gone (a killed agent closed its stdin, or it crashed): what it started
    // in the background goes too, or it would keep the pipes open and outlive everything.
    if new_session {
        // A hook's exit code is its answer: everything else of the group goes, this
        // process exits with the code.
        kill_rest_of_group();
        return code;
    }
    // SIGKILL reaches this process as well, so the exit code is written by the signal.
    kill_rest_of_group();
    let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), nix::sys::signal::Signal::SIGKILL);
    code
}

/// SIGKILLs every live process of this process's group and every descendant of this
/// process (one that left the group with `setsid` is still a descendant: this process is
/// their subreaper), but this one, until none is left (a process forking while it is killed
/// cannot complete the fork, so rounds end; at most 100).
fn kill_rest_of_group() {
    let me = nix::unistd::getpid().as_raw();
    let group = nix::unistd::getpgrp().as_raw();
    for _ in 0..100 {
        let processes = processes();
        let mut others: Vec<i32> = processes
            .iter()
            .filter(|process| process.group == group && process.pid != me)
            .map(|process| process.pid)
            .collect();
        let mut parents = vec![me];
        while let Some(parent) = parents.pop() {
            for child in processes.iter().filter(|process| process.parent == parent) {
                if !others.contains(&child.pid) {
                    others.push(child.pid);
                }
                parents.push(child.pid);
            }
        }
        if others.is_empty() {
            return;
        }
        for pid in others {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A live process, as `/proc/PID/stat` gives it.
struct Process {
    pid: i32,
    parent: i32,
    group: i32,
}

/// The live (not zombie) processes, from `/proc`.
fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
            let (_, after) = stat.rsplit_once(')')?;
            let mut fields = after.split_whitespace();
            let state = fields.next()?;
            let parent = fields.next()?.parse::<i32>().ok()?;
            let group = fields.next()?.parse::<i32>().ok()?;
            (state != "Z" && state != "X").then_some(Process { pid, parent, group })
        })
        .collect()
}
