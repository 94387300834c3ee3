//! The persistent sandbox ([`sandbox::Zygote`]): each test is an attack (or a promise) that
//! a sandbox per command keeps, checked against commands started in one long-lived sandbox.
//! In CI (`CI=true`) missing bubblewrap fails the run; elsewhere the tests are skipped with a
//! note.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use sandbox::{Backend, Policy, Profile, Remote, Sandbox, Spec, Zygote};

const HELPER: &str = env!("CARGO_BIN_EXE_agent-sandbox");

/// The helper run inside: [`HELPER`], or the copy `SANDBOX_TEST_HELPER` names (`.ci/run`
/// runs this suite again as a normal user from copies it can reach).
fn helper() -> PathBuf {
    std::env::var_os("SANDBOX_TEST_HELPER").map_or_else(|| PathBuf::from(HELPER), PathBuf::from)
}

/// bubblewrap, or `None` (skipped outside CI).
fn bwrap() -> Option<Backend> {
    match Backend::detect(None) {
        found @ Backend::Bubblewrap(_) => Some(found),
        other if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI needs bubblewrap for the sandbox tests: {other}")
        }
        other => {
            eprintln!("NOTE: persistent sandbox tests skipped: {other}");
            None
        }
    }
}

/// A workspace `ws` with a file, a folder `outside` with a secret, a private temporary
/// folder `tmp`, and a persistent read-only sandbox over `ws`.
struct Setup {
    base: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
    temp: PathBuf,
    zygote: Zygote,
}

impl Setup {
    fn new(name: &str) -> Option<Self> {
        let backend = bwrap()?;
        let base = std::env::temp_dir().join(format!("zygote-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["ws/src", "outside", "tmp"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        let base = base.canonicalize().unwrap();
        std::fs::write(base.join("ws/src/main.txt"), "hello\n").unwrap();
        std::fs::write(base.join("outside/secret.txt"), "top secret\n").unwrap();
        let (ws, outside, temp) = (base.join("ws"), base.join("outside"), base.join("tmp"));
        let policy = Policy::new(Profile::ReadOnly, vec![ws.clone()], temp.clone());
        let zygote = Sandbox::new(backend)
            .zygote(&policy, &helper(), &ws)
            .expect("the persistent sandbox starts");
        Some(Self {
            base,
            ws,
            outside,
            temp,
            zygote,
        })
    }

    fn spec(&self, script: &str) -> Spec {
        Spec {
            program: sandbox::env::resolve_program("bash").unwrap(),
            args: vec!["-c".into(), script.into()],
            cwd: self.ws.clone(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("TMPDIR".into(), self.temp.clone().into()),
            ],
        }
    }

    /// Starts `script`; the reader of its merged output.
    fn start(&self, script: &str) -> (Remote, std::io::PipeReader) {
        let (reader, writer) = std::io::pipe().unwrap();
        let stdin = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        let stderr = OwnedFd::from(writer.try_clone().unwrap());
        let remote = self
            .zygote
            .run(&self.spec(script), [stdin, OwnedFd::from(writer), stderr])
            .expect("the sandbox takes the command");
        (remote, reader)
    }

    /// Runs `script` to its end: its status and output.
    fn run(&self, script: &str) -> (ExitStatus, String) {
        let (remote, mut reader) = self.start(script);
        let mut output = String::new();
        reader.read_to_string(&mut output).unwrap();
        (remote.wait().unwrap(), output)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// That what writes `beat` ran (it grew) and is gone (it grows no more): `lives_on` is the
/// failure's message.
fn assert_stopped(beat: &Path, lives_on: &str) {
    std::thread::sleep(Duration::from_millis(100));
    let beats = size(beat);
    assert!(beats > 0, "it ran");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(size(beat), beats, "{lives_on}");
}

/// How many bytes `path` holds, 0 when it does not exist.
fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |meta| meta.len())
}

#[test]
fn commands_run_with_their_own_status_folder_and_environment() {
    let Some(setup) = Setup::new("basic") else {
        return;
    };
    let (status, output) = setup.run("pwd; echo \"$TMPDIR\"; env | wc -l; exit 3");
    assert_eq!(status.code(), Some(3), "{output}");
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines[0], setup.ws.display().to_string());
    assert_eq!(lines[1], setup.temp.display().to_string());
    // PATH, TMPDIR, and what bash itself sets (PWD, SHLVL, _).
    assert!(lines[2].trim().parse::<u32>().unwrap() <= 5, "{output}");
    // Many commands, one sandbox.
    for n in 0..20 {
        let (status, output) = setup.run(&format!("echo {n}"));
        assert!(status.success());
        assert_eq!(output, format!("{n}\n"));
    }
}

#[test]
fn nothing_is_written_and_nothing_outside_is_read() {
    let Some(setup) = Setup::new("readonly") else {
        return;
    };
    let (status, output) = setup.run(&format!(
        "echo x > src/new.txt; echo x >> src/main.txt; rm -f src/main.txt; \
         echo x > {outside}/planted; cat {outside}/secret.txt; echo ok > \"$TMPDIR/ok\"",
        outside = setup.outside.display()
    ));
    assert!(status.success(), "{output}");
    assert!(!setup.ws.join("src/new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(setup.ws.join("src/main.txt")).unwrap(),
        "hello\n"
    );
    assert!(!setup.outside.join("planted").exists());
    assert!(!output.contains("top secret"), "{output}");
    assert_eq!(
        std::fs::read_to_string(setup.temp.join("ok")).unwrap(),
        "ok\n"
    );
}

/// A daemon that left the command's process group (`setsid`) does not outlive the command,
/// nor does a background job.
#[test]
fn what_a_command_started_ends_with_it() {
    let Some(setup) = Setup::new("daemon") else {
        return;
    };
    let beat = setup.temp.join("beat");
    let job = setup.temp.join("job");
    let (status, output) = setup.run(&format!(
        "setsid bash -c 'while :; do echo . >> {beat}; sleep 0.02; done' </dev/null >/dev/null 2>&1 & \
         (while :; do echo . >> {job}; sleep 0.02; done) </dev/null >/dev/null 2>&1 & \
         sleep 0.2",
        beat = beat.display(),
        job = job.display()
    ));
    assert!(status.success(), "{output}");
    std::thread::sleep(Duration::from_millis(100));
    let (beats, jobs) = (size(&beat), size(&job));
    assert!(beats > 0 && jobs > 0, "both ran: {beats} {jobs}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(size(&beat), beats, "the setsid daemon lives on");
    assert_eq!(size(&job), jobs, "the background job lives on");
}

/// The sandbox's own `/tmp` and `/dev/shm` start empty for each command (as a sandbox per
/// command's do); the private temporary folder is kept.
#[test]
fn one_commands_tmp_and_shm_are_gone_for_the_next() {
    let Some(setup) = Setup::new("tmp") else {
        return;
    };
    let (status, output) = setup.run(
        "echo left > /tmp/left; mkdir -p /tmp/dir/sub; echo x > /dev/shm/seg; \
         echo kept > \"$TMPDIR/kept\"",
    );
    assert!(status.success(), "{output}");
    let (status, output) = setup.run(
        "ls -A /tmp; ls -A /dev/shm; cat \"$TMPDIR/kept\"; test ! -e /tmp/left && test ! -e /dev/shm/seg",
    );
    assert!(status.success(), "{output}");
    assert!(
        !output.contains("left") && !output.contains("seg"),
        "{output}"
    );
    assert!(output.contains("kept"), "{output}");
}

/// System V IPC would outlive a command in the sandbox's IPC namespace: refused.
#[test]
fn system_v_ipc_is_refused() {
    let Some(setup) = Setup::new("ipc") else {
        return;
    };
    let (status, output) = setup.run(
        "python3 -c 'import ctypes; l = ctypes.CDLL(None); r = l.shmget(0, 4096, 0o1600); \
         print(\"shmget\", r, ctypes.get_errno())' 2>&1 || true",
    );
    assert!(status.success(), "{output}");
    if output.contains("No module") || output.contains("not found") {
        eprintln!("NOTE: python3 missing, IPC test skipped: {output}");
        return;
    }
    assert!(output.starts_with("shmget -1"), "{output}");
}

/// The agent's environment (its keys) is nowhere in the sandbox: neither in bubblewrap's
/// nor in the zygote's process, and the zygote's memory is not readable.
#[test]
fn the_sandboxs_own_processes_hold_nothing_of_the_agent() {
    let Some(setup) = Setup::new("environ") else {
        return;
    };
    // The test process has HOME (the commands' environment has only PATH and TMPDIR); the
    // agent's keys would travel the same way.
    assert!(std::env::var_os("HOME").is_some());
    let (status, output) = setup.run(
        "for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null | tr '\\0' '\\n'; \
         head -c 16 $p/mem 2>/dev/null && echo MEM-READ; done; echo done",
    );
    assert!(status.success(), "{output}");
    assert!(!output.contains("HOME="), "{output}");
    assert!(!output.contains("MEM-READ"), "{output}");
}

/// A command asked to stop ends (`SIGTERM` to its group); a command whose handle is
/// dropped (the agent stopped waiting) is killed.
#[test]
fn signals_and_a_dropped_handle_stop_a_command() {
    let Some(setup) = Setup::new("signals") else {
        return;
    };
    let started = Instant::now();
    let (remote, _reader) = setup.start("sleep 30");
    std::thread::sleep(Duration::from_millis(50));
    remote.signal(nix::sys::signal::Signal::SIGTERM);
    let status = remote.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15)
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let beat = setup.temp.join("beat");
    let (remote, reader) = setup.start(&format!(
        "while :; do echo . >> {}; sleep 0.02; done",
        beat.display()
    ));
    std::thread::sleep(Duration::from_millis(100));
    drop(remote);
    drop(reader);
    assert_stopped(&beat, "the command lives on");
    // The sandbox still serves.
    assert_eq!(setup.run("echo again").1, "again\n");
}

/// Commands at the same time each get their own result; one ending does not end the other.
#[test]
fn commands_at_the_same_time_do_not_disturb_each_other() {
    let Some(setup) = Setup::new("parallel") else {
        return;
    };
    let slow = setup.start("sleep 0.3; echo slow");
    let (status, output) = setup.run("echo fast");
    assert!(status.success());
    assert_eq!(output, "fast\n");
    let (remote, mut reader) = slow;
    let mut output = String::new();
    reader.read_to_string(&mut output).unwrap();
    assert!(remote.wait().unwrap().success());
    assert_eq!(output, "slow\n");
}

/// A command too long for one message is refused (the caller starts it the usual way).
#[test]
fn a_command_over_the_message_size_is_refused() {
    let Some(setup) = Setup::new("long") else {
        return;
    };
    let long = format!("echo {}", "x".repeat(sandbox::MAX_MESSAGE));
    let (_, writer) = std::io::pipe().unwrap();
    let stdio = [
        OwnedFd::from(std::fs::File::open("/dev/null").unwrap()),
        OwnedFd::from(writer.try_clone().unwrap()),
        OwnedFd::from(writer),
    ];
    let refused = setup.zygote.run(&setup.spec(&long), stdio).unwrap_err();
    assert!(refused.to_string().contains("bytes"), "{refused}");
}

/// The zygote is the namespace's process 1: a command cannot stop or kill it, read its
/// descriptors (its control socket) or take them with `pidfd_getfd`, and the next command
/// runs as usual.
#[test]
fn a_command_cannot_stop_kill_or_rob_the_zygote() {
    let Some(setup) = Setup::new("pid1") else {
        return;
    };
    let (status, output) = setup.run(
        "echo parent $PPID; kill -STOP 1; kill -KILL 1; kill -STOP $PPID; \
         ls -l /proc/1/fd/ 2>&1 | head -3; \
         python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); \
         p = os.pidfd_open(1); r = l.syscall(438, p, 0, 0); print(\"pidfd_getfd\", r, ctypes.get_errno())'",
    );
    assert!(status.success(), "{output}");
    assert!(output.contains("parent 1"), "{output}");
    assert!(
        output.contains("pidfd_getfd -1 1"),
        "refused with EPERM: {output}"
    );
    assert!(!output.contains("socket:"), "{output}");
    let started = Instant::now();
    assert_eq!(setup.run("echo next").1, "next\n");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(setup.zygote.is_alive());
}

/// A process whose main thread ended while another thread runs (it shows as a zombie) is
/// killed like any other once no command runs.
#[test]
fn a_process_with_only_side_threads_left_ends_with_the_command() {
    let Some(setup) = Setup::new("threads") else {
        return;
    };
    let beat = setup.temp.join("beat");
    let (status, output) = setup.run(&format!(
        "setsid python3 -c 'import ctypes, threading, time\n\
def beat():\n    while True:\n        open(\"{beat}\", \"a\").write(\".\"); time.sleep(0.02)\n\
threading.Thread(target=beat).start()\n\
ctypes.CDLL(None).pthread_exit(None)' </dev/null >/dev/null 2>&1 & sleep 0.2",
        beat = beat.display()
    ));
    assert!(status.success(), "{output}");
    assert_stopped(&beat, "its thread lives on");
}

/// `/dev` is read-only (its links stay what they are), and folders a command made
/// unwritable in `/tmp` or `/dev/shm` are emptied all the same.
#[test]
fn dev_links_and_locked_folders_do_not_carry_over() {
    let Some(setup) = Setup::new("devtmp") else {
        return;
    };
    let (status, output) = setup.run(
        "rm -f /dev/fd 2>&1; ln -sf /tmp /dev/stderr 2>&1; touch /dev/planted 2>&1; \
         mkdir -p /tmp/d/e; echo persisted > /tmp/d/e/f; chmod 500 /tmp/d/e /tmp/d; \
         mkdir /dev/shm/q; echo x > /dev/shm/q/y; chmod 500 /dev/shm/q; echo done",
    );
    assert!(status.success(), "{output}");
    assert!(output.contains("Read-only file system"), "{output}");
    let (status, output) = setup.run(
        "readlink /dev/fd; test -e /dev/planted && echo PLANTED; \
         cat /tmp/d/e/f /dev/shm/q/y 2>/dev/null; echo end",
    );
    assert!(status.success(), "{output}");
    assert_eq!(output, "/proc/self/fd\nend\n");
}

/// The kernel keyrings are no namespace's here (root's user keyring is the host's): refused.
#[test]
fn the_kernel_keyrings_are_refused() {
    let Some(setup) = Setup::new("keys") else {
        return;
    };
    let (status, output) = setup.run(
        "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
         r = l.syscall(248, b\"user\", b\"agent-test\", b\"x\", 1, -4); print(\"add_key\", r, ctypes.get_errno())'",
    );
    assert!(status.success(), "{output}");
    assert_eq!(output, "add_key -1 1\n", "refused with EPERM");
}

/// A command that leaves its process group (here: joins a child's) is still killed when the
/// agent asks (its own process gets `SIGKILL`), and what it started goes with it.
#[test]
fn a_command_that_left_its_group_is_still_killed() {
    let Some(setup) = Setup::new("escape-group") else {
        return;
    };
    let beat = setup.temp.join("beat");
    let (remote, _reader) = setup.start(&format!(
        "exec python3 -c 'import os, time\n\
q = os.fork()\n\
if q == 0:\n    os.setpgid(0, 0); time.sleep(60)\n\
time.sleep(0.1); os.setpgid(0, q)\n\
while True:\n    open(\"{beat}\", \"a\").write(\".\"); time.sleep(0.02)'",
        beat = beat.display()
    ));
    std::thread::sleep(Duration::from_millis(400));
    remote.signal(nix::sys::signal::Signal::SIGTERM);
    remote.signal(nix::sys::signal::Signal::SIGKILL);
    let started = Instant::now();
    let status = remote.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "{status:?}");
    assert_stopped(&beat, "it lives on");
    let (_, output) = setup.run("ps -e -o args= | grep -c '[t]ime.sleep(60)' || true");
    assert_eq!(output.trim(), "0", "its child lives on: {output}");
}

/// A chain of processes each forking and ending at once (never seen alive by a scan of
/// /proc) is killed all the same.
#[test]
fn a_fork_chain_ends_with_the_command() {
    let Some(setup) = Setup::new("chain") else {
        return;
    };
    let beat = setup.temp.join("beat");
    let (status, output) = setup.run(&format!(
        "setsid python3 -c 'import os\n\
n = 0\n\
while True:\n    n += 1\n    if n % 50 == 0:\n        open(\"{beat}\", \"a\").write(\".\")\n    if os.fork():\n        os._exit(0)' </dev/null >/dev/null 2>&1 & sleep 0.3",
        beat = beat.display()
    ));
    assert!(status.success(), "{output}");
    assert_stopped(&beat, "the chain lives on");
}

/// Nothing outside /tmp, /dev/shm and the private temporary folder is writable, bubblewrap's
/// own root included (it would keep what one command wrote for the next).
#[test]
fn the_sandboxs_root_is_read_only() {
    let Some(setup) = Setup::new("root") else {
        return;
    };
    let (status, output) = setup.run("touch /planted 2>&1; mkdir /made 2>&1; echo end");
    assert!(status.success(), "{output}");
    assert_eq!(
        output.matches("Read-only file system").count(),
        2,
        "{output}"
    );
}

/// A workspace under /tmp sits in folders bubblewrap made on the sandbox's writable /tmp: a
/// command that renames them away (and makes up a workspace in their place) ends the
/// sandbox, so no later command runs in the made-up one.
#[test]
fn a_renamed_way_to_the_workspace_ends_the_sandbox() {
    let Some(setup) = Setup::new("rename") else {
        return;
    };
    // The layout's top folder in /tmp, as the sandbox shows it.
    let top = setup
        .ws
        .ancestors()
        .find(|dir| dir.parent() == Some(Path::new("/tmp")))
        .unwrap()
        .to_path_buf();
    let (remote, mut reader) = setup.start(&format!(
        "mv {top} /tmp/moved && mkdir -p {ws} && echo forged > {ws}/README && echo moved",
        top = top.display(),
        ws = setup.ws.display()
    ));
    let mut output = String::new();
    reader.read_to_string(&mut output).unwrap();
    assert!(output.contains("moved"), "{output}");
    // Its own status is lost with the sandbox.
    assert!(remote.wait().is_err());
    let ended = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        !setup.zygote.is_alive()
    });
    assert!(ended, "the sandbox goes on in a made-up layout");
    assert!(
        !setup.ws.join("README").exists(),
        "nothing reached the host"
    );
}
