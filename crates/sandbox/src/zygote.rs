//! A persistent bubblewrap sandbox that starts commands on request (a "zygote"), so a
//! command pays a process start instead of a sandbox's set-up (namespaces, mounts, `/proc`:
//! about 6 ms a call on the machine of docs/benchmarks.md).
//!
//! [`Zygote::start`] builds the sandbox of one [`Policy`] exactly as [`crate::Sandbox::command`]
//! builds it for one command (the same mounts, namespaces, dropped capabilities and seccomp
//! filter) and runs the helper inside it in `zygote` mode ([`zygote_main`]). Its standard input
//! is the agent's end of a `SOCK_SEQPACKET` socket pair; each command is one message on it:
//! the command ([`Spec`], encoded by [`encode`]) with four descriptors, a socket for the
//! command's answer and the command's standard input, output and error. The zygote starts the
//! command as its child in a process group of its own, with the environment and folder given,
//! and answers on the command's socket with the wait status once it ended.
//!
//! What keeps one command from leaving anything to the next, as a sandbox per command does:
//! when a command ends its process group is killed (background jobs); when no command is
//! running any more, every other process in the sandbox's PID namespace is killed (a daemon
//! that left the group with `setsid`), and `/tmp` and `/dev/shm`, which are the sandbox's own
//! memory file systems, are emptied (the private temporary folder mounted in `/tmp` stays, as
//! it does between commands today). System V IPC is refused by the seccomp filter in this
//! mode (its objects would outlive a command in the shared IPC namespace). Commands that run
//! at the same time share the PID namespace (they can see and signal each other, as two
//! processes of one command can); they are the same model's commands under the same policy.
//!
//! The agent's end: [`Zygote::run`] sends a command and returns a [`Remote`], whose
//! [`Remote::wait`] blocks until the status comes and [`Remote::signal`] asks for `SIGTERM`
//! or `SIGKILL` to its process group; dropping it (closing its socket) kills the group too.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use crate::{Error, Policy};

/// The largest command message (the kernel's default socket buffer is 208 KiB): a longer
/// command is started the usual way, in a sandbox of its own.
pub const MAX_MESSAGE: usize = 192 * 1024;

/// Where the helper executable is mounted inside the sandbox (in its own `/tmp`).
pub(crate) const HELPER_IN_SANDBOX: &str = "/tmp/.agent-zygote";

/// One command: what [`Zygote::run`] asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The program (an absolute path: nothing is looked up in the sandbox's `PATH`).
    pub program: PathBuf,
    /// Its arguments, after the program.
    pub args: Vec<OsString>,
    /// Its working folder (visible in the sandbox).
    pub cwd: PathBuf,
    /// Its whole environment (nothing else is passed).
    pub env: Vec<(OsString, OsString)>,
}

/// `spec` as one message: length-prefixed byte strings (big-endian `u32` lengths): the
/// program, the folder, the number of arguments then each, the number of variables then
/// each name and value.
pub(crate) fn encode(spec: &Spec) -> Vec<u8> {
    fn put(out: &mut Vec<u8>, bytes: &[u8]) {
        // Lengths are bounded by MAX_MESSAGE (checked by the caller), far below u32::MAX.
        out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(bytes);
    }
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes();
    let mut out = Vec::new();
    put(&mut out, spec.program.as_os_str().as_bytes());
    put(&mut out, spec.cwd.as_os_str().as_bytes());
    out.extend_from_slice(&count(spec.args.len()));
    for arg in &spec.args {
        put(&mut out, arg.as_bytes());
    }
    out.extend_from_slice(&count(spec.env.len()));
    for (name, value) in &spec.env {
        put(&mut out, name.as_bytes());
        put(&mut out, value.as_bytes());
    }
    out
}

/// The [`Spec`] `bytes` encode, `None` when they are cut or malformed.
pub(crate) fn decode(bytes: &[u8]) -> Option<Spec> {
    struct Reader<'a>(&'a [u8]);
    impl Reader<'_> {
        fn number(&mut self) -> Option<usize> {
            let (head, rest) = self.0.split_first_chunk::<4>()?;
            self.0 = rest;
            usize::try_from(u32::from_be_bytes(*head)).ok()
        }
        fn bytes(&mut self) -> Option<OsString> {
            let length = self.number()?;
            let (head, rest) = self.0.split_at_checked(length)?;
            self.0 = rest;
            Some(OsString::from_vec(head.to_vec()))
        }
    }
    let mut reader = Reader(bytes);
    let program = PathBuf::from(reader.bytes()?);
    let cwd = PathBuf::from(reader.bytes()?);
    let args = (0..reader.number()?)
        .map(|_| reader.bytes())
        .collect::<Option<Vec<_>>>()?;
    let env = (0..reader.number()?)
        .map(|_| Some((reader.bytes()?, reader.bytes()?)))
        .collect::<Option<Vec<_>>>()?;
    reader.0.is_empty().then_some(Spec {
        program,
        args,
        cwd,
        env,
    })
}

/// A persistent sandbox: see the module docs.
#[derive(Debug)]
pub struct Zygote {
    /// The agent's end of the zygote's standard input.
    control: OwnedFd,
    /// Set when the sandbox's process exited (a dead zygote is replaced).
    ended: Arc<AtomicBool>,
    /// The policy it enforces, its links resolved.
    policy: Policy,
}

impl Zygote {
    /// Starts the sandbox `command` describes (bubblewrap with the policy's arguments, up to
    /// and including `--`, then the helper in `zygote` mode) from a thread of its own that
    /// lives as long as the sandbox: bubblewrap's `--die-with-parent` follows the thread that
    /// started it, not the process.
    ///
    /// # Errors
    ///
    /// [`Error::Zygote`] when the socket pair or the process cannot be made.
    pub(crate) fn start(mut command: Command, policy: Policy) -> Result<Self, Error> {
        let (control, theirs) = seqpacket_pair()?;
        command
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let ended = Arc::new(AtomicBool::new(false));
        let (started, result) = std::sync::mpsc::channel();
        let flag = Arc::clone(&ended);
        std::thread::Builder::new()
            .name("sandbox-zygote".into())
            .spawn(move || {
                let child = command.spawn();
                // Our copy of the zygote's end goes with the command.
                drop(command);
                match child {
                    Ok(mut child) => {
                        let _ = started.send(Ok(()));
                        let _ = child.wait();
                    }
                    Err(error) => {
                        let _ = started.send(Err(error));
                    }
                }
                flag.store(true, Ordering::SeqCst);
            })
            .map_err(|error| Error::Zygote(format!("could not start its thread: {error}")))?;
        result
            .recv()
            .map_err(|_| Error::Zygote("its thread ended".into()))?
            .map_err(|error| Error::Zygote(format!("bubblewrap could not start: {error}")))?;
        Ok(Self {
            control,
            ended,
            policy,
        })
    }

    /// Whether the sandbox is still running.
    pub fn is_alive(&self) -> bool {
        !self.ended.load(Ordering::SeqCst)
    }

    /// Whether it is running and enforces `policy` exactly (its links resolved as they are
    /// now): a policy that changed (a new file a deny rule hides) needs a new sandbox.
    pub fn serves(&self, policy: &Policy) -> bool {
        self.is_alive() && self.policy == policy.with_resolved_links()
    }

    /// Starts `spec` in the sandbox with `stdio` (standard input, output and error).
    ///
    /// # Errors
    ///
    /// [`Error::Zygote`] when the command is longer than [`MAX_MESSAGE`] or the sandbox is
    /// gone (the caller then starts the command in a sandbox of its own).
    pub fn run(&self, spec: &Spec, stdio: [OwnedFd; 3]) -> Result<Remote, Error> {
        if !self.is_alive() {
            return Err(Error::Zygote("the sandbox has ended".into()));
        }
        let message = encode(spec);
        if message.len() > MAX_MESSAGE {
            return Err(Error::Zygote(format!(
                "the command is {} bytes, over the {MAX_MESSAGE} a message holds",
                message.len()
            )));
        }
        let (ours, theirs) = seqpacket_pair()?;
        let fds = [
            theirs.as_fd(),
            stdio[0].as_fd(),
            stdio[1].as_fd(),
            stdio[2].as_fd(),
        ];
        send_with_fds(&self.control, &message, &fds)
            .map_err(|error| Error::Zygote(format!("the sandbox did not take it: {error}")))?;
        Ok(Remote {
            socket: Arc::new(ours),
        })
    }
}

impl Drop for Zygote {
    /// Closes its control socket, so the zygote exits (and with it every process of the
    /// sandbox), and waits for that up to 200 ms: a program that drops it leaves nothing of
    /// it running.
    fn drop(&mut self) {
        let _ = rustix::net::shutdown(&self.control, rustix::net::Shutdown::Both);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while self.is_alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

/// A command running in a [`Zygote`].
#[derive(Clone, Debug)]
pub struct Remote {
    socket: Arc<OwnedFd>,
}

impl Remote {
    /// Blocks until the command ended; its wait status.
    ///
    /// # Errors
    ///
    /// The zygote could not start it (the message says why), or ended before answering.
    pub fn wait(&self) -> std::io::Result<ExitStatus> {
        let mut buffer = vec![0u8; 4096];
        let (_, received) = rustix::net::recv(&*self.socket, &mut buffer[..], RecvFlags::empty())?;
        let answer = &buffer[..received.min(buffer.len())];
        match answer.split_first() {
            Some((b'S', raw)) => {
                let raw = raw
                    .first_chunk::<4>()
                    .map(|raw| i32::from_be_bytes(*raw))
                    .ok_or_else(|| std::io::Error::other("a cut answer from the sandbox"))?;
                Ok(ExitStatus::from_raw(raw))
            }
            Some((b'E', message)) => Err(std::io::Error::other(
                String::from_utf8_lossy(message).into_owned(),
            )),
            _ => Err(std::io::Error::other(
                "the sandbox ended before the command did",
            )),
        }
    }

    /// Sends `signal` (`SIGTERM` or `SIGKILL`; anything else is taken as `SIGKILL`) to the
    /// command's process group.
    pub fn signal(&self, signal: Signal) {
        let word: &[u8] = if signal == Signal::SIGTERM {
            b"TERM"
        } else {
            b"KILL"
        };
        let _ = rustix::net::send(&*self.socket, word, SendFlags::NOSIGNAL);
    }
}

fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), Error> {
    rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|error| Error::Zygote(format!("could not make a socket pair: {error}")))
}

fn send_with_fds(socket: &OwnedFd, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other("too many descriptors"));
    }
    rustix::net::sendmsg(
        socket,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
}

/// One message and the descriptors that came with it; `None` at the end of the stream.
fn receive_with_fds(socket: &OwnedFd) -> std::io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut buffer = vec![0u8; MAX_MESSAGE];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut buffer)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if received.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    buffer.truncate(received.bytes.min(MAX_MESSAGE));
    Ok(Some((buffer, fds)))
}

/// What the zygote's threads share: the commands running, and the wait statuses the reaper
/// collected for them.
#[derive(Default)]
struct Shared {
    /// Held to start a command and to sweep: no command starts while the sandbox is
    /// swept. (Not the state's lock: the reaper must go on reaping during a sweep.)
    gate: Mutex<()>,
    state: Mutex<State>,
    /// The folders bubblewrap made in `/tmp` on the way to its mounts, and the mounts, as
    /// they were at the start ([`layout`]).
    layout: Vec<(PathBuf, (u64, u64))>,
    /// Signalled when a status is collected, a command starts, or the last one ends.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Process ids of the commands started and not yet answered.
    commands: HashSet<i32>,
    /// Wait statuses the reaper collected for them.
    ended: HashMap<i32, i32>,
    /// Commands started so far (the reaper waits for one when it has no child).
    started: u64,
}

impl Shared {
    fn gate(&self) -> std::sync::MutexGuard<'_, ()> {
        self.gate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The zygote: reads commands from its standard input until it closes (see the module
/// docs). It runs as the PID namespace's process 1 (bubblewrap's `--as-pid-1`): the kernel
/// drops every signal a command sends it that it has no handler for (`SIGSTOP`, `SIGKILL`
/// included), orphans come to it, and it reaps every process ([`reap`]). `temp_dir` is the
/// private temporary folder, kept when `/tmp` is emptied.
pub(crate) fn zygote_main(temp_dir: &Path) -> Result<Infallible, String> {
    // Commands may not read this process's memory or descriptors through /proc.
    nix::sys::prctl::set_dumpable(false).map_err(|error| format!("prctl: {error}"))?;
    let control = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|error| format!("its control socket: {error}"))?;
    let shared = Arc::new(Shared {
        layout: layout(Path::new("/tmp")),
        ..Shared::default()
    });
    let reaper = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("reaper".into())
        .spawn(move || reap(&reaper))
        .map_err(|error| format!("its reaper: {error}"))?;
    loop {
        let Some((message, fds)) =
            receive_with_fds(&control).map_err(|error| format!("reading a command: {error}"))?
        else {
            std::process::exit(0);
        };
        let Ok([reply, stdin, stdout, stderr]) = <[OwnedFd; 4]>::try_from(fds) else {
            continue; // not a command: nothing to answer on
        };
        let shared = Arc::clone(&shared);
        let temp_dir = temp_dir.to_path_buf();
        let _ = std::thread::Builder::new()
            .name("command".into())
            .spawn(move || serve(&message, reply, [stdin, stdout, stderr], &shared, &temp_dir));
    }
}

/// Reaps every child (commands and the orphans that come to process 1), keeping the status
/// of each command; with no child at all, waits for the next command to start.
fn reap(shared: &Shared) {
    use nix::sys::wait::{WaitStatus, waitpid};
    loop {
        let seen = shared.lock().started;
        match waitpid(None, None) {
            Ok(status) => {
                let (pid, raw) = match status {
                    WaitStatus::Exited(pid, code) => (pid, (code & 0xff) << 8),
                    WaitStatus::Signaled(pid, signal, core) => {
                        (pid, signal as i32 | if core { 0x80 } else { 0 })
                    }
                    _ => continue,
                };
                let mut state = shared.lock();
                if state.commands.contains(&pid.as_raw()) {
                    state.ended.insert(pid.as_raw(), raw);
                    shared.changed.notify_all();
                }
            }
            Err(nix::errno::Errno::ECHILD) => {
                let mut state = shared.lock();
                while state.started == seen {
                    state = shared
                        .changed
                        .wait(state)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            }
            Err(_) => {}
        }
    }
}

/// Runs one command and answers on `reply`.
fn serve(
    message: &[u8],
    reply: OwnedFd,
    [stdin, stdout, stderr]: [OwnedFd; 3],
    shared: &Shared,
    temp_dir: &Path,
) {
    let answer_error = |reply: &OwnedFd, text: String| {
        let mut bytes = b"E".to_vec();
        bytes.extend_from_slice(text.as_bytes());
        let _ = rustix::net::send(reply, &bytes, SendFlags::NOSIGNAL);
    };
    let Some(spec) = decode(message) else {
        answer_error(&reply, "a malformed command".into());
        return;
    };
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    // Started and counted under the lock: the reaper cannot collect its status before it
    // is known to be a command's.
    let pid = {
        let _gate = shared.gate();
        let mut state = shared.lock();
        let child = command.spawn();
        // The reaper collects its status; the handle is not waited on.
        let pid = child.map(|child| i32::try_from(child.id()).unwrap_or(i32::MAX));
        if let Ok(pid) = pid {
            state.commands.insert(pid);
        }
        state.started += 1;
        shared.changed.notify_all();
        pid
    };
    let status = match pid {
        Ok(pid) => Ok(watch(pid, &reply, shared)),
        Err(error) => Err(format!(
            "could not start {}: {error}",
            spec.program.display()
        )),
    };
    let gate = shared.gate();
    if shared.lock().commands.is_empty() {
        sweep(temp_dir);
        // A folder leading to a mount renamed (a workspace under /tmp moved away and a
        // made-up one put in its place) cannot be put back: the sandbox ends, and the
        // agent starts a new one for the next command.
        if layout(Path::new("/tmp")) != shared.layout {
            std::process::exit(0);
        }
    }
    drop(gate);
    match status {
        Ok(status) => {
            let mut bytes = b"S".to_vec();
            bytes.extend_from_slice(&status.to_be_bytes());
            let _ = rustix::net::send(&reply, &bytes, SendFlags::NOSIGNAL);
        }
        Err(text) => answer_error(&reply, text),
    }
}

/// Waits for command `pid`, passing the agent's signals (or its hang-up) to its process
/// group, and `SIGKILL` to the command's own process too (it may have left its group); kills
/// what is left in the group once it ended. Its raw wait status.
fn watch(pid: i32, reply: &OwnedFd, shared: &Shared) -> i32 {
    let group = Pid::from_raw(pid);
    let ended = Arc::new(AtomicBool::new(false));
    if let Ok(listener) = reply.try_clone() {
        let done = Arc::clone(&ended);
        let _ = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let mut word = [0u8; 8];
                loop {
                    let received = rustix::net::recv(&listener, &mut word[..], RecvFlags::empty());
                    let signal = match received {
                        Ok((_, 4)) if &word[..4] == b"TERM" => Signal::SIGTERM,
                        // KILL, the agent's end closed, or a failure.
                        _ => Signal::SIGKILL,
                    };
                    if !done.load(Ordering::SeqCst) {
                        let _ = killpg(group, signal);
                        if signal == Signal::SIGKILL {
                            let _ = kill(group, Signal::SIGKILL);
                        }
                    }
                    if signal == Signal::SIGKILL {
                        return;
                    }
                }
            });
    }
    let mut state = shared.lock();
    let status = loop {
        if let Some(status) = state.ended.remove(&pid) {
            break status;
        }
        state = shared
            .changed
            .wait(state)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    };
    state.commands.remove(&pid);
    ended.store(true, Ordering::SeqCst);
    drop(state);
    // Background jobs still in its group.
    let _ = killpg(group, Signal::SIGKILL);
    status
}

/// Kills every other process of the sandbox (`kill(-1)` from process 1: threads of a
/// process whose main thread ended included) until none is left (one may fork while the
/// others die; the reaper collects them), then empties `/tmp` (keeping `temp_dir` and the
/// helper's mount) and `/dev/shm`.
fn sweep(temp_dir: &Path) {
    for _ in 0..100 {
        // First, whatever the scan would say: a chain of processes each living a moment is
        // never seen alive by a scan.
        let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
        std::thread::sleep(std::time::Duration::from_millis(1));
        let others = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .any(|pid| pid != std::process::id() && alive(pid));
        if !others {
            break;
        }
    }
    let keep = [temp_dir, Path::new(HELPER_IN_SANDBOX)];
    empty(Path::new("/tmp"), &keep);
    empty(Path::new("/dev/shm"), &[]);
}

/// Every folder on `dir`'s own file system that leads to a mount, and every mount point
/// in it, with its device and inode: what bubblewrap built in `/tmp`, which a command could
/// rename (the folders are on the writable memory file system).
fn layout(dir: &Path) -> Vec<(PathBuf, (u64, u64))> {
    use std::os::unix::fs::MetadataExt;
    let Ok(device) = std::fs::symlink_metadata(dir).map(|meta| meta.dev()) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .collect();
    entries.sort();
    for path in entries {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.dev() != device {
            found.push((path, (meta.dev(), meta.ino())));
        } else if meta.is_dir() {
            let below = layout(&path);
            if !below.is_empty() {
                found.push((path, (meta.dev(), meta.ino())));
                found.extend(below);
            }
        }
    }
    found
}

/// Whether any thread of process `pid` still runs: a process whose main thread ended shows
/// as a zombie while its other threads go on.
fn alive(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|task| {
            std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
        })
}

/// Removes everything in `dir` but the paths of `keep` (and the folders leading to them),
/// staying on `dir`'s own file system: what is mounted inside it (the workspace, when it is
/// under `/tmp`, the private temporary folder) is not descended into.
fn empty(dir: &Path, keep: &[&Path]) {
    use std::os::unix::fs::MetadataExt;
    let Ok(device) = std::fs::symlink_metadata(dir).map(|meta| meta.dev()) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if keep.iter().any(|kept| *kept == path) || meta.dev() != device {
            continue; // kept, or a mount point
        }
        if meta.is_dir() {
            // A command may have taken its own write permission away: ours again.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700));
            empty(&path, keep);
            // Fails while it holds something kept or mounted: then it stays.
            let _ = std::fs::remove_dir(&path);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip_and_cut_ones_are_refused() {
        let spec = Spec {
            program: "/bin/bash".into(),
            args: vec!["-c".into(), OsString::from_vec(b"echo \xff\n".to_vec())],
            cwd: "/w".into(),
            env: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("EMPTY".into(), "".into()),
            ],
        };
        let bytes = encode(&spec);
        assert_eq!(decode(&bytes), Some(spec));
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer), None);
    }
}
