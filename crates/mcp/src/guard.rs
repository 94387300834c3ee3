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

use std::ffi::OsString;
use std::time::Duration;

/// The first argument that makes the embedding program run [`guard_main`]:
/// `PROGRAM __agent-mcp-guard PARENT_PID COMMAND [ARGS...]`.
pub const GUARD_ARG: &str = "__agent-mcp-guard";

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
/// its pipes open or outlive it).
pub fn guard_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().skip(2).collect();
    std::process::exit(guard(&args))
}

fn guard(args: &[OsString]) -> i32 {
    let [parent, program, rest @ ..] = args else {
        eprintln!("agent-mcp-guard: expected PARENT_PID COMMAND [ARGS...]");
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
                // process is the group's leader, so the group is ours).
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
    // SIGKILL reaches this process as well, so the exit code is written by the signal.
    let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), nix::sys::signal::Signal::SIGKILL);
    code
}
