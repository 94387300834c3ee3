//! The escape matrix: every test is an attack that must fail, run under each back end that
//! works here (bubblewrap, and Landlock through the `agent-sandbox` helper). In CI
//! (`CI=true`) a missing back end fails the run; elsewhere it is skipped with a note.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sandbox::{Backend, Policy, Profile, Sandbox};

const HELPER: &str = env!("CARGO_BIN_EXE_agent-sandbox");

/// The Landlock helper: [`HELPER`], or the copy `SANDBOX_TEST_HELPER` names (`.ci/run`
/// runs this suite again as a normal user from copies it can reach).
fn helper() -> PathBuf {
    std::env::var_os("SANDBOX_TEST_HELPER").map_or_else(|| PathBuf::from(HELPER), PathBuf::from)
}

/// The back ends to test.
fn backends() -> Vec<Backend> {
    let mut found = Vec::new();
    let bwrap = Backend::detect(None);
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    match bwrap {
        Backend::Bubblewrap(_) => found.push(bwrap),
        other if in_ci => panic!("CI needs bubblewrap for the sandbox tests: {other}"),
        other => eprintln!("NOTE: bubblewrap tests skipped: {other}"),
    }
    // Force the Landlock helper, whatever bwrap says.
    let landlock = Backend::Landlock(helper());
    let probe = Command::new(helper())
        .args([sandbox::HELPER_ARG, "probe"])
        .output()
        .expect("the helper runs");
    if probe.status.success() {
        found.push(landlock);
    } else if in_ci {
        panic!(
            "CI needs Landlock for the sandbox tests: {}",
            String::from_utf8_lossy(&probe.stderr)
        );
    } else {
        eprintln!(
            "NOTE: Landlock tests skipped: {}",
            String::from_utf8_lossy(&probe.stderr)
        );
    }
    found
}

/// A scratch layout: `ws` (a git-like workspace with `src/`), `outside/`, `tmp/` (the
/// private temporary folder).
struct Layout {
    base: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
    temp: PathBuf,
}

impl Layout {
    fn new(name: &str) -> Self {
        let base = std::env::temp_dir().join(format!(
            "sandbox-escape-{name}-{}-{}",
            std::process::id(),
            fastrand_suffix()
        ));
        let ws = base.join("ws");
        let outside = base.join("outside");
        let temp = base.join("tmp");
        for dir in [&ws.join("src"), &ws.join(".git/hooks"), &outside, &temp] {
            std::fs::create_dir_all(dir).expect("scratch folders");
        }
        std::fs::write(ws.join(".git/config"), "[core]\n").expect("config");
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(ws.join(".git/index"), "DIRC").expect("index");
        std::fs::write(ws.join("src/main.txt"), "hello\n").expect("file");
        std::fs::write(outside.join("secret.txt"), "top secret\n").expect("secret");
        let canon = |p: &Path| p.canonicalize().expect("canonical");
        Self {
            ws: canon(&ws),
            outside: canon(&outside),
            temp: canon(&temp),
            base: canon(&base),
        }
    }

    fn policy(&self, profile: Profile) -> Policy {
        Policy::new(profile, vec![self.ws.clone()], self.temp.clone())
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn fastrand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(Instant::now().elapsed().as_nanos() as u64);
    hasher.finish() % 1_000_000
}

fn run(backend: &Backend, policy: &Policy, script: &str) -> Output {
    let sandbox = Sandbox::new(backend.clone());
    let cwd = policy.roots[0].clone();
    let mut prepared = sandbox
        .command(policy, "bash".as_ref(), &["-c".into(), script.into()], &cwd)
        .expect("prepared");
    let output = prepared
        .command
        .stdin(Stdio::null())
        .output()
        .expect("the sandbox runs");
    drop(prepared.guard);
    output
}

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn read_only_profile_writes_nothing_but_its_temp_folder() {
    for backend in backends() {
        let layout = Layout::new("ro");
        let policy = layout.policy(Profile::ReadOnly);
        let host_tmp =
            std::env::temp_dir().join(format!("sandbox-host-tmp-{}", std::process::id()));
        let script = format!(
            "cat src/main.txt; echo pwned > src/new.txt; echo pwned >> src/main.txt; \
             echo pwned > {outside}/new.txt; echo pwned > {host_tmp}; \
             echo ok > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\"; echo done > /dev/null && echo devnull-ok",
            outside = layout.outside.display(),
            host_tmp = host_tmp.display(),
        );
        let output = run(&backend, &policy, &script);
        let out = text(&output);
        assert!(
            out.contains("hello"),
            "{backend}: workspace readable\n{out}"
        );
        assert!(
            out.contains("ok\n"),
            "{backend}: temp folder writable\n{out}"
        );
        assert!(
            out.contains("devnull-ok"),
            "{backend}: /dev/null writable\n{out}"
        );
        assert!(!layout.ws.join("src/new.txt").exists(), "{backend}\n{out}");
        assert_eq!(
            std::fs::read_to_string(layout.ws.join("src/main.txt")).expect("read"),
            "hello\n",
            "{backend}"
        );
        assert!(!layout.outside.join("new.txt").exists(), "{backend}\n{out}");
        assert!(!host_tmp.exists(), "{backend}: host /tmp written\n{out}");
    }
}

#[test]
fn workspace_write_profile_keeps_outside_and_protected_paths() {
    for backend in backends() {
        let layout = Layout::new("ww");
        let policy = layout.policy(Profile::WorkspaceWrite);
        let outside = layout.outside.display();
        let home_file = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/root"))
            .join(format!(".sandbox-escape-{}", std::process::id()));
        let host_tmp = std::env::temp_dir().join(format!("sandbox-ww-tmp-{}", std::process::id()));
        let script = format!(
            "echo built > src/out.txt && echo wrote-src; \
             echo pwned > {outside}/new.txt; \
             echo '[core] fsmonitor = touch {outside}/fsmonitor' >> .git/config; \
             echo pwned > .git/hooks/pre-commit; \
             mkdir .claude; echo '{{}}' > .claude/settings.json; \
             mkdir -p .agent; echo '{{}}' > .agent/settings.json; \
             echo '{{}}' > .mcp.json; \
             ln -s {outside} src/link; echo pwned > src/link/via-link.txt; \
             ln .git/config src/hardlink; echo pwned >> src/hardlink; \
             ln {outside}/secret.txt src/hard-outside; echo pwned >> src/hard-outside; \
             mv .git/config src/moved-config; \
             mv .git .git-moved; mkdir -p .git/hooks; echo pwned > .git/hooks/pre-commit; \
             echo evil > .git/commondir; echo gitlink >> .git/index; \
             mknod src/devnull c 1 3; chown 12345 src/main.txt {outside}/secret.txt; \
             echo pwned > {home}; echo pwned > {tmp}; echo pwned > ~/.bashrc-sandbox-test; \
             true",
            home = home_file.display(),
            tmp = host_tmp.display(),
        );
        let output = run(&backend, &policy, &script);
        let out = text(&output);
        assert!(
            out.contains("wrote-src"),
            "{backend}: workspace writable\n{out}"
        );
        assert_eq!(
            std::fs::read_to_string(layout.ws.join("src/out.txt")).expect("written"),
            "built\n"
        );
        assert!(!layout.outside.join("new.txt").exists(), "{backend}\n{out}");
        assert!(
            !layout.outside.join("via-link.txt").exists(),
            "{backend}\n{out}"
        );
        assert_eq!(
            std::fs::read_to_string(layout.outside.join("secret.txt")).expect("secret"),
            "top secret\n",
            "{backend}\n{out}"
        );
        assert_eq!(
            std::fs::read_to_string(layout.ws.join(".git/config")).expect("config"),
            "[core]\n",
            "{backend}\n{out}"
        );
        assert!(
            !layout.ws.join(".git/hooks/pre-commit").exists(),
            "{backend}\n{out}"
        );
        for absent in [".claude", ".agent", ".mcp.json"] {
            assert!(
                std::fs::symlink_metadata(layout.ws.join(absent)).is_err(),
                "{backend}: {absent} appeared (or its placeholder stayed)\n{out}"
            );
        }
    }
}

#[test]
fn hidden_paths_and_home_are_not_readable() {
    for backend in backends() {
        let layout = Layout::new("hidden");
        std::fs::create_dir_all(layout.ws.join("secrets")).expect("secrets");
        std::fs::write(layout.ws.join("secrets/key"), "sk-hidden\n").expect("key");
        std::fs::write(layout.ws.join(".env"), "TOKEN=hidden-env\n").expect("env");
        std::fs::create_dir_all(layout.ws.join("nested/secrets")).expect("nested");
        std::fs::write(layout.ws.join("nested/secrets/key"), "sk-nested\n").expect("key");
        let mut policy = layout.policy(Profile::WorkspaceWrite);
        policy.hidden = vec![
            layout.ws.join("secrets"),
            layout.ws.join(".env"),
            layout.ws.join("nested/secrets"),
        ];
        // A file in the real home folder, outside the toolchain folders.
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let home_secret = home
            .as_ref()
            .map(|home| home.join(format!(".sandbox-test-secret-{}", std::process::id())));
        let wrote_home = home_secret
            .as_ref()
            .is_some_and(|path| std::fs::write(path, "home-secret\n").is_ok());
        let script = format!(
            "cat secrets/key; cat .env; cat {outside}/secret.txt; {home} \
             echo overwrite > secrets/key; cat nested/secrets/key; \
             mv nested renamed; mv secrets renamed-secrets; echo visible-check",
            outside = layout.outside.display(),
            home = match (&home_secret, wrote_home) {
                (Some(path), true) => format!("cat {};", path.display()),
                _ => String::new(),
            },
        );
        let output = run(&backend, &policy, &script);
        if let Some(path) = &home_secret {
            let _ = std::fs::remove_file(path);
        }
        let out = text(&output);
        assert!(out.contains("visible-check"), "{backend}\n{out}");
        // Renaming the folder that holds a hidden path would unhide it for the next command.
        assert!(
            layout.ws.join("nested/secrets/key").exists(),
            "{backend}\n{out}"
        );
        assert!(!layout.ws.join("renamed").exists(), "{backend}\n{out}");
        assert!(
            !layout.ws.join("renamed-secrets").exists(),
            "{backend}\n{out}"
        );
        for secret in [
            "sk-hidden",
            "hidden-env",
            "top secret",
            "home-secret",
            "sk-nested",
        ] {
            assert!(!out.contains(secret), "{backend}: read {secret}\n{out}");
        }
        assert_eq!(
            std::fs::read_to_string(layout.ws.join("secrets/key")).expect("key"),
            "sk-hidden\n"
        );
    }
}

#[test]
fn no_network_profile_reaches_nothing() {
    let tcp = TcpListener::bind("127.0.0.1:0").expect("tcp listener");
    tcp.set_nonblocking(true).expect("nonblocking");
    let tcp_port = tcp.local_addr().expect("addr").port();
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp socket");
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let udp_port = udp.local_addr().expect("addr").port();
    let name = format!("agent-sandbox-test-{}", std::process::id());
    let unix = {
        use std::os::linux::net::SocketAddrExt;
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract");
        std::os::unix::net::UnixListener::bind_addr(&addr).expect("abstract listener")
    };
    unix.set_nonblocking(true).expect("nonblocking");
    let socket_dir = std::env::temp_dir().join(format!("sandbox-sock-{}", std::process::id()));
    std::fs::create_dir_all(&socket_dir).expect("socket folder");
    let socket_path = socket_dir.join("listen.sock");
    let _ = std::fs::remove_file(&socket_path);
    let path_listener =
        std::os::unix::net::UnixListener::bind(&socket_path).expect("path listener");
    path_listener.set_nonblocking(true).expect("nonblocking");
    let _cleanup = RemoveOnDrop(socket_dir.clone());
    for backend in backends() {
        let layout = Layout::new("net");
        for network in [false, true] {
            let mut policy = layout.policy(Profile::ReadOnly);
            policy.network = network;
            let script = format!(
                "(exec 3<>/dev/tcp/127.0.0.1/{tcp_port}) 2>/dev/null && echo tcp-connected; \
                 echo datagram > /dev/udp/127.0.0.1/{udp_port}; \
                 /usr/bin/python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0{name}'); print('unix-connected')\" 2>/dev/null; \
                 /usr/bin/python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{path}'); print('path-connected')\" 2>/dev/null; \
                 echo finished",
                path = socket_path.display()
            );
            let output = run(&backend, &policy, &script);
            let out = text(&output);
            assert!(out.contains("finished"), "{backend}\n{out}");
            let accepted_tcp = tcp.accept().is_ok();
            let mut buffer = [0u8; 64];
            let got_udp = udp.recv(&mut buffer).is_ok();
            let accepted_unix = unix.accept().is_ok();
            let accepted_path = path_listener.accept().is_ok();
            if network {
                // The check can fail: with the network on, all three get through.
                assert!(
                    out.contains("tcp-connected") && accepted_tcp,
                    "{backend}\n{out}"
                );
                assert!(got_udp, "{backend}: no datagram with the network on\n{out}");
                assert!(
                    accepted_unix,
                    "{backend}: no unix connection with the network on\n{out}"
                );
            } else {
                assert!(
                    !out.contains("tcp-connected") && !accepted_tcp,
                    "{backend}\n{out}"
                );
                assert!(!got_udp, "{backend}: a datagram got out\n{out}");
                assert!(
                    !out.contains("unix-connected") && !accepted_unix,
                    "{backend}: abstract unix socket reached\n{out}"
                );
                assert!(
                    !out.contains("path-connected") && !accepted_path,
                    "{backend}: a unix socket outside the sandbox reached\n{out}"
                );
            }
        }
    }
}

#[test]
fn no_capabilities_no_host_namespaces_no_other_process_secrets() {
    let own_ns = |kind: &str| std::fs::read_link(format!("/proc/self/ns/{kind}")).ok();
    let hostname_before = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    for backend in backends() {
        let layout = Layout::new("caps");
        let policy = layout.policy(Profile::WorkspaceWrite);
        let script = format!(
            "grep CapEff /proc/self/status; echo ipc=$(readlink /proc/self/ns/ipc) uts=$(readlink /proc/self/ns/uts); \
             hostname sandbox-was-here 2>/dev/null; mount -o remount,bind,rw /usr 2>/dev/null && echo remounted; \
             tr '\\0' '\\n' < /proc/{test_pid}/environ 2>/dev/null | grep -c CARGO_MANIFEST_DIR; \
             cat /dev/pts/0 </dev/null 2>&1 | head -c 0; \
             cat /proc/sys/kernel/core_pattern > \"$TMPDIR/cp\"; cat \"$TMPDIR/cp\" > /proc/sys/kernel/core_pattern 2>/dev/null && echo SYSCTL-WRITTEN; \
             cat /etc/shadow /etc/gshadow 2>/dev/null | grep -c '^root:'; \
             chmod 0600 {outside}/secret.txt 2>/dev/null; touch -d 2001-01-01 {outside}/secret.txt 2>/dev/null; \
             echo done",
            test_pid = std::process::id(),
            outside = layout.outside.display(),
        );
        let mode_before = std::fs::metadata(layout.outside.join("secret.txt")).expect("secret");
        let mut prepared = Sandbox::new(backend.clone())
            .command(
                &policy,
                "bash".as_ref(),
                &["-c".into(), script.into()],
                &layout.ws,
            )
            .expect("prepared");
        // Only what the command needs: the test's own variables must not be inherited.
        let output = prepared
            .command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("TMPDIR", &policy.temp_dir)
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        let out = text(&output);
        if let Some(before) = &hostname_before {
            let after = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            assert_eq!(&after, before, "{backend}: the host's name changed\n{out}");
        }
        assert!(
            out.contains("CapEff:\t0000000000000000"),
            "{backend}: capabilities\n{out}"
        );
        assert!(!out.contains("remounted"), "{backend}\n{out}");
        assert!(
            !out.contains("SYSCTL-WRITTEN"),
            "{backend}: wrote a sysctl\n{out}"
        );
        // Landlock has no right for a file's mode or times: for root the seccomp filter
        // refuses those calls; a normal user's command under Landlock can still change the
        // mode and times (not the contents) of that user's own files outside the workspace
        // (docs/security.md, "Out of scope"). bubblewrap's read-only mounts refuse it for all.
        let metadata_enforced =
            matches!(backend, Backend::Bubblewrap(_)) || nix::unistd::geteuid().is_root();
        if metadata_enforced {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            let after = std::fs::metadata(layout.outside.join("secret.txt")).expect("secret");
            assert_eq!(
                after.permissions().mode(),
                mode_before.permissions().mode(),
                "{backend}: chmod outside\n{out}"
            );
            assert_eq!(
                after.mtime(),
                mode_before.mtime(),
                "{backend}: touch outside\n{out}"
            );
        }
        assert!(out.contains("done"), "{backend}\n{out}");
        // The parent's environment (it holds CARGO_MANIFEST_DIR; the command does not).
        let counted = String::from_utf8_lossy(&output.stdout)
            .lines()
            .any(|line| line.trim() != "0" && line.trim().parse::<u32>().is_ok());
        assert!(
            !counted,
            "{backend}: read the parent's environment or /etc/shadow\n{out}"
        );
        for kind in ["ipc", "uts"] {
            if let Some(own) = own_ns(kind) {
                let own = format!("{kind}={}", own.display());
                assert!(
                    !out.contains(&own),
                    "{backend}: shares the host's {kind} namespace\n{out}"
                );
            }
        }
    }
}

#[test]
fn a_setsid_daemon_dies_with_the_parent() {
    // The "agent" is this test binary run again with PARENT_ENV set: it starts the
    // sandboxed command as the agent does (the prepared command as it is, with the
    // descriptor bubblewrap reads its seccomp filter from) and is then killed with SIGKILL.
    if let Ok(spec) = std::env::var(PARENT_ENV) {
        return be_the_parent(&spec);
    }
    for backend in backends() {
        let layout = Layout::new("daemon");
        let marker = format!("{}.{}", 4000 + std::process::id() % 1000, fastrand_suffix());
        let mut parent = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "a_setsid_daemon_dies_with_the_parent",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                PARENT_ENV,
                format!(
                    "{} {marker} {} {}",
                    backend.name(),
                    layout.ws.display(),
                    layout.temp.display()
                ),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("parent");
        let mut stdout = parent.stdout.take().expect("stdout");
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !String::from_utf8_lossy(&seen).contains("started") {
            stdout.read_exact(&mut byte).expect("started");
            seen.push(byte[0]);
        }
        let markers = [marker.clone(), format!("{marker}b"), format!("{marker}c")];
        assert!(
            wait_for(
                || markers.iter().all(|m| process_with(m)),
                Duration::from_secs(5)
            ),
            "{backend}: the daemons never started: {:?}",
            markers.iter().map(|m| process_with(m)).collect::<Vec<_>>()
        );
        parent.kill().expect("SIGKILL");
        let _ = parent.wait();
        assert!(
            wait_for(
                || markers.iter().all(|m| !process_with(m)),
                Duration::from_secs(2)
            ),
            "{backend}: a daemon outlived its parent by 2 s"
        );
    }
}

/// Set in the environment of the "agent" process of [`a_setsid_daemon_dies_with_the_parent`]:
/// `BACKEND MARKER WORKSPACE TEMP` (paths without spaces: [`Layout`]'s).
const PARENT_ENV: &str = "SANDBOX_ESCAPE_TEST_PARENT";

/// The "agent": starts the daemons in the sandbox and waits until it is killed.
fn be_the_parent(spec: &str) {
    let [name, marker, ws, temp] = spec.split(' ').collect::<Vec<_>>()[..] else {
        panic!("{PARENT_ENV}={spec:?} is not BACKEND MARKER WORKSPACE TEMP");
    };
    let backend = backends()
        .into_iter()
        .find(|backend| backend.name() == name)
        .expect("the back end");
    let ws = PathBuf::from(ws);
    let policy = Policy::new(Profile::ReadOnly, vec![ws.clone()], PathBuf::from(temp));
    let sandbox = Sandbox::new(backend);
    let mut prepared = sandbox
        .command(
            &policy,
            "bash".as_ref(),
            &[
                "-c".into(),
                format!(
                    "setsid sleep {marker} </dev/null >/dev/null 2>&1 & \
                     /usr/bin/python3 -c 'import ctypes,time; ctypes.CDLL(None).prctl(1,0,0,0,0); time.sleep(600)' {marker}b </dev/null >/dev/null 2>&1 & \
                     echo started; exec /usr/bin/python3 -c 'import ctypes,time; ctypes.CDLL(None).prctl(1,0,0,0,0); time.sleep(600)' {marker}c"
                )
                .into(),
            ],
            &ws,
        )
        .expect("prepared");
    let _ = prepared.command.stdin(Stdio::null()).status();
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn wait_for(mut condition: impl FnMut() -> bool, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    condition()
}

/// Whether a live (not zombie) process has `marker` in its command line.
fn process_with(marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        !zombie
            && String::from_utf8_lossy(&cmdline)
                .split('\0')
                .any(|arg| arg == marker)
    })
}

/// Issue 44, class 1: a `.git` file is the repository's to write, so what it names must not
/// decide what the sandbox shows. Before the fix, every folder a `.git` file (and its
/// `commondir`) named was made readable: `/`, `$HOME`, any folder.
#[test]
fn a_git_file_cannot_make_outside_folders_readable() {
    for backend in backends() {
        let layout = Layout::new("gitfile");
        std::fs::remove_dir_all(layout.ws.join(".git")).expect("no .git folder");
        // A folder that looks like a git folder but does not link back to the workspace,
        // whose `commondir` names the filesystem's root.
        let fake = layout.outside.join("fake-git");
        std::fs::create_dir_all(fake.join("objects")).expect("fake objects");
        std::fs::write(fake.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(fake.join("commondir"), "/\n").expect("commondir");
        std::fs::write(fake.join("gitdir"), "/somewhere/else/.git\n").expect("gitdir");
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        for named in [
            "/".to_owned(),
            home.clone(),
            layout.outside.display().to_string(),
            fake.display().to_string(),
            "..".to_owned(),
        ] {
            std::fs::write(layout.ws.join(".git"), format!("gitdir: {named}\n")).expect(".git");
            let policy = layout.policy(Profile::ReadOnly);
            for shown in &policy.readable {
                assert!(
                    !layout.ws.starts_with(shown) && !layout.outside.starts_with(shown),
                    "gitdir: {named} made {} readable",
                    shown.display()
                );
            }
            let script = format!(
                "cat {outside}/secret.txt; ls -a {home} | grep -c . ; echo finished",
                outside = layout.outside.display(),
            );
            let out = text(&run(&backend, &policy, &script));
            assert!(out.contains("finished"), "{backend}\n{out}");
            assert!(
                !out.contains("top secret"),
                "{backend}: gitdir: {named} showed the outside folder\n{out}"
            );
        }
    }
}

/// The layouts git really makes still work: a worktree's folder and its `commondir` are
/// readable, and `git status` runs in the sandbox.
#[test]
fn a_real_worktree_keeps_its_git_folders_readable() {
    let layout = Layout::new("worktree");
    let main = layout.outside.join("main");
    let git = |args: &[&str], cwd: &Path| {
        let output = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(cwd)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {}", text(&output));
    };
    std::fs::create_dir_all(&main).expect("main");
    git(&["init", "-q"], &main);
    std::fs::write(main.join("file.txt"), "one\n").expect("file");
    git(&["add", "file.txt"], &main);
    git(&["commit", "-qm", "one"], &main);
    let worktree = layout.base.join("wt");
    git(
        &[
            "worktree",
            "add",
            "-q",
            worktree.to_str().expect("utf-8"),
            "-b",
            "wt",
        ],
        &main,
    );
    let worktree = worktree.canonicalize().expect("worktree");
    let dirs = sandbox::linked_git_dirs(&worktree);
    let common = main.join(".git").canonicalize().expect("common");
    assert_eq!(dirs, vec![common.join("worktrees/wt"), common.clone()]);
    for backend in backends() {
        let policy = Policy::new(
            Profile::ReadOnly,
            vec![worktree.clone()],
            layout.temp.clone(),
        );
        let sandbox = Sandbox::new(backend.clone());
        let mut prepared = sandbox
            .command(
                &policy,
                "git".as_ref(),
                &["status".into(), "--porcelain=v1".into(), "--branch".into()],
                &worktree,
            )
            .expect("prepared");
        let output = prepared
            .command
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        let out = text(&output);
        assert!(output.status.success(), "{backend}\n{out}");
        assert!(out.contains("## wt"), "{backend}\n{out}");
    }
}

/// Issue 44, class 2: without network no unix socket with a path is reachable, wherever it
/// is (the workspace, a readable folder), under both back ends; what stays inside the
/// sandbox keeps working (loopback TCP in its own network namespace, stream socket pairs).
/// Before the fix, bubblewrap let a read-only command connect to a socket in the workspace.
#[test]
fn unix_sockets_with_a_path_are_unreachable_without_network() {
    for backend in backends() {
        let layout = Layout::new("unixpath");
        let in_ws = layout.ws.join("app.sock");
        let in_readable = layout.outside.join("daemon.sock");
        let listeners: Vec<_> = [&in_ws, &in_readable]
            .iter()
            .map(|path| {
                let listener = std::os::unix::net::UnixListener::bind(path).expect("listener");
                listener.set_nonblocking(true).expect("nonblocking");
                listener
            })
            .collect();
        for network in [false, true] {
            let mut policy = layout.policy(Profile::WorkspaceWrite);
            policy.readable.push(layout.outside.clone());
            policy.network = network;
            let script = format!(
                r#"/usr/bin/python3 - <<'PY'
import socket
for path in ["{ws}", "{readable}"]:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        print("connected", path)
    except OSError as e:
        print("refused", path, e.errno)
try:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"x", "{ws}")
    print("datagram-sent")
except OSError as e:
    print("datagram-refused", e.errno)
a, b = socket.socketpair()
a.sendall(b"pair-ok")
print(b.recv(16).decode())
try:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    conn, _ = server.accept()
    client.sendall(b"loopback-ok")
    print(conn.recv(16).decode())
except OSError as e:
    print("no-loopback", e.errno)
PY
echo finished"#,
                ws = in_ws.display(),
                readable = in_readable.display(),
            );
            let out = text(&run(&backend, &policy, &script));
            assert!(out.contains("finished"), "{backend}\n{out}");
            let accepted = listeners.iter().filter(|l| l.accept().is_ok()).count();
            if network {
                // The check can fail: with the network on, both are reachable.
                assert_eq!(accepted, 2, "{backend}\n{out}");
                assert!(out.contains("connected"), "{backend}\n{out}");
            } else {
                assert_eq!(accepted, 0, "{backend}: a unix socket was reached\n{out}");
                assert!(!out.contains("connected /"), "{backend}\n{out}");
                assert!(!out.contains("datagram-sent"), "{backend}\n{out}");
                assert!(out.contains("pair-ok"), "{backend}\n{out}");
                // bubblewrap brings the namespace's loopback up; the Landlock helper's
                // namespace has it down (no network at all, as before).
                if matches!(backend, Backend::Bubblewrap(_)) {
                    assert!(out.contains("loopback-ok"), "{backend}\n{out}");
                }
            }
        }
    }
}

/// Issue 44, class 3: credentials inside configuration that toolchains read (so its folder
/// is readable) are not shown; the same configuration without a credential still is.
#[test]
fn credentials_inside_readable_configuration_are_hidden() {
    for backend in backends() {
        let layout = Layout::new("creds");
        let home = layout.outside.join("home");
        std::fs::create_dir_all(home.join(".cargo")).expect("cargo");
        std::fs::create_dir_all(home.join(".config/git")).expect("git config");
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Ada\n[url \"https://x-access-token:ghs_secret1234567890@github.com/\"]\n\tinsteadOf = https://github.com/\n",
        )
        .expect("gitconfig");
        std::fs::write(
            home.join(".cargo/config.toml"),
            "[registries.corp]\nindex = \"sparse+https://corp/\"\ntoken = \"cargo-secret\"\n",
        )
        .expect("cargo config");
        std::fs::write(
            home.join(".config/git/config"),
            "[user]\n\temail = ada@example.com\n",
        )
        .expect("clean git config");
        std::fs::write(home.join(".npmrc"), "//registry/:_authToken=npm-secret\n").expect("npmrc");
        let mut policy = layout.policy(Profile::ReadOnly);
        policy.readable.extend([
            home.join(".gitconfig"),
            home.join(".cargo"),
            home.join(".config/git"),
        ]);
        // The workspace holding the home folder: `.npmrc` is hidden there too.
        policy.readable.push(home.clone());
        policy.hidden.extend(sandbox::credentials_in_home(&home));
        let script = format!(
            "cat {home}/.gitconfig {home}/.cargo/config.toml {home}/.npmrc {home}/.config/git/config; echo finished",
            home = home.display()
        );
        let out = text(&run(&backend, &policy, &script));
        assert!(out.contains("finished"), "{backend}\n{out}");
        for secret in ["ghs_secret", "cargo-secret", "npm-secret"] {
            assert!(!out.contains(secret), "{backend}: read {secret}\n{out}");
        }
        assert!(
            out.contains("ada@example.com"),
            "{backend}: clean config hidden\n{out}"
        );
    }
}

/// Attack (issue 44 review): `socketpair(AF_UNIX, SOCK_RAW)` is a *datagram* pair (the
/// kernel turns `SOCK_RAW` into `SOCK_DGRAM` for unix sockets, `af_unix.c: unix_create`),
/// but the filter only refuses a type of `SOCK_DGRAM`. A datagram socket may be addressed
/// (`sendto`, or `connect` again) to any unix datagram socket with a path: syslog's
/// `/dev/log`, journald's socket, `sd_notify`, a daemon's socket in the workspace.
#[test]
fn a_raw_unix_socketpair_cannot_reach_a_datagram_socket_with_a_path() {
    for backend in backends() {
        let layout = Layout::new("rawpair");
        let in_ws = layout.ws.join("log.sock");
        let in_readable = layout.outside.join("journal.sock");
        // Not shown to the command at all (Landlock does not govern reaching a socket).
        let private = layout.base.join("private");
        std::fs::create_dir_all(&private).expect("private");
        let in_private = private.join("notify.sock");
        let receivers: Vec<_> = [&in_ws, &in_readable, &in_private]
            .iter()
            .map(|path| {
                let socket = std::os::unix::net::UnixDatagram::bind(path).expect("bind");
                socket.set_nonblocking(true).expect("nonblocking");
                socket
            })
            .collect();
        let mut policy = layout.policy(Profile::ReadOnly);
        policy.readable.push(layout.outside.clone());
        let script = format!(
            r#"/usr/bin/python3 - <<'PY'
import socket
for kind, name in [(socket.SOCK_RAW, "raw"), (socket.SOCK_RAW | socket.SOCK_CLOEXEC, "raw-cloexec")]:
    for path in ["{ws}", "{readable}", "{private}"]:
        try:
            a, b = socket.socketpair(socket.AF_UNIX, kind)
            a.sendto(b"injected " + name.encode(), path)
            print("sent", name, path)
        except OSError as e:
            print("refused", name, path, e.errno)
PY
echo finished"#,
            ws = in_ws.display(),
            readable = in_readable.display(),
            private = in_private.display(),
        );
        let out = text(&run(&backend, &policy, &script));
        assert!(out.contains("finished"), "{backend}\n{out}");
        let mut buffer = [0u8; 64];
        let received = receivers
            .iter()
            .filter(|socket| socket.recv(&mut buffer).is_ok())
            .count();
        assert_eq!(
            received, 0,
            "{backend}: a unix datagram socket with a path was reached\n{out}"
        );
        assert!(!out.contains("sent "), "{backend}\n{out}");
    }
}

/// Attack (issue 44 review): spellings of a credential in `~/.gitconfig` and
/// `~/.cargo/config.toml` that [`sandbox::holds_credentials`] misses, so the file stays
/// readable: git's documented inline credential helper (`password=` inside the value), a
/// TOML inline table or a literal-string key holding a cargo registry token, cargo's
/// `token-from-stdout` provider with the token on its command line, a git value continued
/// on the next line with `\`.
#[test]
fn credentials_in_other_spellings_are_hidden_too() {
    let missed: Vec<&str> = [
        "[credential]\n\thelper = \"!f() { echo username=ada; echo password=s3cret-app-password; }; f\"\n",
        "[registries]\ncorp = { index = \"sparse+https://corp/\", token = \"cio-secret-0123\" }\n",
        "[registries.corp]\n'token' = \"cio-secret-0123\"\n",
        "[registries.corp]\nindex = \"sparse+https://corp/\"\ncredential-provider = \"cargo:token-from-stdout echo cio-secret-0123\"\n",
        "[remote \"origin\"]\n\turl = https://ada:\\\ns3cret-app-password@git.example.com/repo.git\n",
    ]
    .into_iter()
    .filter(|config| !sandbox::holds_credentials(config))
    .collect();
    assert!(missed.is_empty(), "credentials not found in: {missed:#?}");
}

/// The same, end to end: a `~/.gitconfig` with git's documented inline credential helper is
/// readable in the sandbox.
#[test]
fn an_inline_credential_helper_in_gitconfig_is_hidden() {
    for backend in backends() {
        let layout = Layout::new("credhelper");
        let home = layout.outside.join("home");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Ada\n[credential \"https://git.example.com\"]\n\thelper = \"!f() { echo username=ada; echo password=s3cret-app-password; }; f\"\n",
        )
        .expect("gitconfig");
        let mut policy = layout.policy(Profile::ReadOnly);
        policy.readable.push(home.join(".gitconfig"));
        policy.hidden.extend(sandbox::credentials_in_home(&home));
        let script = format!("cat {}/.gitconfig; echo finished", home.display());
        let out = text(&run(&backend, &policy, &script));
        assert!(out.contains("finished"), "{backend}\n{out}");
        assert!(
            !out.contains("s3cret-app-password"),
            "{backend}: read the password\n{out}"
        );
    }
}

/// Attack (issue 44 review): credentials in other files of the readable toolchain folders.
/// Only `config` and `credentials` of `~/.config/git` are looked at, but git reads what
/// `[include] path` names (`~/.config/git/work.inc` with an `extraHeader` token); npm's
/// global configuration lives in the version manager's folder
/// (`~/.nvm/versions/node/V/etc/npmrc`, what `npm config set --global` writes).
#[test]
fn credentials_in_included_or_global_configuration_are_hidden() {
    for backend in backends() {
        let layout = Layout::new("included");
        let home = layout.outside.join("home");
        let git = home.join(".config/git");
        let npm_etc = home.join(".nvm/versions/node/v20.0.0/etc");
        std::fs::create_dir_all(&git).expect("git");
        std::fs::create_dir_all(&npm_etc).expect("nvm");
        std::fs::write(
            git.join("config"),
            "[user]\n\tname = Ada\n[include]\n\tpath = work.inc\n",
        )
        .expect("config");
        std::fs::write(
            git.join("work.inc"),
            "[http \"https://git.example.com/\"]\n\textraHeader = Authorization: Bearer included-secret\n",
        )
        .expect("included");
        std::fs::write(
            npm_etc.join("npmrc"),
            "//registry.example.com/:_authToken=npm-global-secret\n",
        )
        .expect("npmrc");
        let mut policy = layout.policy(Profile::ReadOnly);
        policy.readable.extend([git.clone(), home.join(".nvm")]);
        policy.hidden.extend(sandbox::credentials_in_home(&home));
        let script = format!(
            "cat {git}/work.inc {npm}/npmrc; echo finished",
            git = git.display(),
            npm = npm_etc.display()
        );
        let out = text(&run(&backend, &policy, &script));
        assert!(out.contains("finished"), "{backend}\n{out}");
        for secret in ["included-secret", "npm-global-secret"] {
            assert!(!out.contains(secret), "{backend}: read {secret}\n{out}");
        }
    }
}

/// Attack (issue 44 review, class 1 and TOCTOU): a `.git` file naming a folder in the
/// private `TMPDIR` of another session (a parallel `Task` subagent has its own, owned by the
/// same user, outside this workspace), reached through a link in the workspace that
/// subagent's command made (`t -> its $TMPDIR`), and filled by it as a worktree's git
/// folder that links back. The check passes and the folder is shown, by its path; the
/// subagent's command, still running, then swaps that folder for a link to `/` (a loop of
/// `renameat2(RENAME_EXCHANGE)`). bubblewrap binds what the path then names, and the
/// Landlock helper opens each readable path following links: either shows the whole
/// filesystem (hidden paths are excluded by name, at their own paths only).
///
/// Here the swap is made between computing the policy and starting the command, as the
/// concurrent command does when its swap lands in that window (about 1 try in 40 here
/// with a `renameat2` loop in Python: the model just runs the command again).
#[test]
fn a_checked_git_folder_swapped_for_a_link_shows_nothing_more() {
    for backend in backends() {
        let layout = Layout::new("swap");
        let other_tmp = layout.base.join("other-session-tmp");
        std::fs::create_dir_all(&other_tmp).expect("other TMPDIR");
        std::fs::remove_dir_all(layout.ws.join(".git")).expect("no .git folder");
        std::os::unix::fs::symlink(&other_tmp, layout.ws.join("t")).expect("link to TMPDIR");
        std::fs::write(layout.ws.join(".git"), "gitdir: t/worktrees/x\n").expect(".git");
        let fake = other_tmp.join("worktrees/x");
        std::fs::create_dir_all(fake.join("objects")).expect("fake");
        std::fs::write(fake.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(
            fake.join("gitdir"),
            format!("{}\n", layout.ws.join(".git").display()),
        )
        .expect("gitdir");
        let policy = layout.policy(Profile::ReadOnly);
        assert!(policy.readable.contains(&fake), "{:?}", policy.readable);
        // The concurrent command's swap.
        std::fs::rename(&fake, other_tmp.join("worktrees/x-real")).expect("move");
        std::os::unix::fs::symlink("/", &fake).expect("link to /");
        let script = format!(
            "cat {outside}/secret.txt {fake}{outside}/secret.txt; echo finished",
            outside = layout.outside.display(),
            fake = fake.display(),
        );
        let out = text(&run(&backend, &policy, &script));
        assert!(out.contains("finished"), "{backend}\n{out}");
        assert!(
            !out.contains("top secret"),
            "{backend}: a swapped git folder showed the whole filesystem\n{out}"
        );
    }
}

/// Set in the environment of the process [`system_v_ipc_is_refused_without_user_namespaces`]
/// starts to be "a machine without user namespaces": `KEY` of the host's segment.
const NO_USERNS_ENV: &str = "SANDBOX_ESCAPE_TEST_NO_USERNS";

/// A host process's System V shared memory segment, holding `ipc-secret`, until dropped.
struct HostSegment {
    child: std::process::Child,
}

impl HostSegment {
    fn create(key: u32) -> Self {
        let script = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget(int(sys.argv[1]), 4096, 0o1600)
addr = libc.shmat(shmid, None, 0)
ctypes.memmove(addr, b"ipc-secret\0", 11)
print("ready", flush=True)
sys.stdin.read()
libc.shmctl(shmid, 0, None)
"#;
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", script, &key.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("host python");
        let mut ready = [0u8; 6];
        child
            .stdout
            .as_mut()
            .expect("stdout")
            .read_exact(&mut ready)
            .expect("the segment is made");
        Self { child }
    }
}

impl Drop for HostSegment {
    fn drop(&mut self) {
        drop(self.child.stdin.take()); // the host removes its segment and exits
        let _ = self.child.wait();
    }
}

/// Issue 44, class 7: on a machine without user namespaces a normal user's Landlock helper
/// runs the command with no IPC namespace of its own, so the user's System V IPC objects
/// (shared memory of a database, a browser, an X server) were reachable from a read-only
/// command. The seccomp filter refuses those calls there.
///
/// "Without user namespaces" is made for the helper alone: this test binary runs again
/// with [`NO_USERNS_ENV`], refuses itself `unshare` with a seccomp filter, and starts the
/// sandbox from there. Root never runs without namespaces (the helper refuses), so as root
/// the test says so and checks only that refusal; CI runs it again as a normal user.
#[test]
fn system_v_ipc_is_refused_without_user_namespaces() {
    if let Ok(key) = std::env::var(NO_USERNS_ENV) {
        return read_host_segment_without_user_namespaces(&key);
    }
    let key = 0x5a00_0000 + std::process::id() % 0xffff;
    let _segment = HostSegment::create(key);
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "system_v_ipc_is_refused_without_user_namespaces",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(NO_USERNS_ENV, key.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("the inner test runs");
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    assert!(
        !out.contains("ipc-secret"),
        "read the host's segment\n{out}"
    );
    if nix::unistd::geteuid().is_root() {
        eprintln!(
            "NOTE: as root the helper refuses to run without user namespaces; the IPC check runs in CI's normal-user pass"
        );
        assert!(out.contains("helper-refused"), "{out}");
    } else {
        assert!(out.contains("shmget-refused"), "{out}");
    }
}

/// The inner half: no `unshare` for this process and what it starts, then the Landlock
/// helper runs a command that attaches the host's segment `key`.
fn read_host_segment_without_user_namespaces(key: &str) {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let filter = SeccompFilter::new(
        [(libc::SYS_unshare, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TargetArch::try_from(std::env::consts::ARCH).expect("architecture"),
    )
    .expect("filter");
    let program: seccompiler::BpfProgram = filter.try_into().expect("compiled");
    seccompiler::apply_filter(&program).expect("applied");
    let layout = Layout::new("sysv");
    let policy = layout.policy(Profile::ReadOnly);
    let script = format!(
        r#"/usr/bin/python3 - <<'PY'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget({key}, 0, 0)
if shmid < 0:
    print("shmget-refused", ctypes.get_errno())
else:
    print("attached", ctypes.string_at(libc.shmat(shmid, None, 0)).decode())
PY"#
    );
    let output = run(&Backend::Landlock(helper()), &policy, &script);
    let out = text(&output);
    if out.contains("cannot drop root's privileges") {
        println!("helper-refused");
    }
    println!("{out}");
}

/// The kernel keyrings belong to no namespace a sandbox makes here (root's user keyring is
/// the host's): a command can neither add a key nor read one.
#[test]
fn the_kernel_keyrings_are_refused() {
    for backend in backends() {
        let layout = Layout::new("keys");
        let output = run(
            &backend,
            &layout.policy(Profile::ReadOnly),
            "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
             r = l.syscall(248, b\"user\", b\"agent-test\", b\"x\", 1, -4); \
             k = l.syscall(250, 0, -4, 0, 0, 0); \
             print(\"add_key\", r, ctypes.get_errno(), \"keyctl\", k)'",
        );
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "add_key -1 1 keyctl -1\n",
            "{backend}: {}",
            text(&output)
        );
    }
}
