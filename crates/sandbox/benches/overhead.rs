//! What a sandbox adds to one shell command: `bash -c true` started and waited for plainly,
// A bench: a failed setup is a failed run.
#![allow(clippy::expect_used)]
//! under bubblewrap (read-only profile) and under the Landlock helper. The difference of the
//! medians is the per-call overhead the Bash tool pays (target: under 10 ms). A back end that
//! does not work on the machine is skipped with a note.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};
use sandbox::{Backend, Policy, Profile, Sandbox};

fn run(command: &mut Command) {
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        status.is_ok_and(|status| status.success()),
        "the command failed"
    );
}

fn overhead(c: &mut Criterion) {
    let base = std::env::temp_dir().join(format!("sandbox-bench-{}", std::process::id()));
    let workspace = base.join("ws");
    let temp = base.join("tmp");
    for dir in [&workspace, &temp] {
        std::fs::create_dir_all(dir).expect("scratch folders");
    }
    let workspace = workspace.canonicalize().expect("canonical");
    let temp = temp.canonicalize().expect("canonical");
    let policy = Policy::new(Profile::ReadOnly, vec![workspace.clone()], temp);
    let args = ["-c".into(), "true".into()];

    let mut group = c.benchmark_group("sandbox");
    group.sample_size(30);
    group.bench_function("bash_true_plain", |b| {
        b.iter(|| run(Command::new("bash").args(&args).current_dir(&workspace)));
    });
    let backends = [
        Backend::detect(None),
        Backend::Landlock(PathBuf::from(env!("CARGO_BIN_EXE_agent-sandbox"))),
    ];
    for backend in backends {
        let name = backend.name();
        let sandbox = Sandbox::new(backend);
        let Ok(mut probe) = sandbox.command(&policy, "bash".as_ref(), &args, &workspace) else {
            eprintln!("NOTE: {name}: no sandbox here, skipped");
            continue;
        };
        if !probe.command.status().is_ok_and(|status| status.success()) {
            eprintln!("NOTE: {name}: does not work here, skipped");
            continue;
        }
        group.bench_function(format!("bash_true_{name}"), |b| {
            b.iter(|| {
                let mut prepared = sandbox
                    .command(&policy, "bash".as_ref(), &args, &workspace)
                    .expect("prepared");
                run(&mut prepared.command);
            });
        });
    }
    // The persistent sandbox: one bubblewrap sandbox for every call, each command sent to it
    // with its descriptors and waited for (what the Bash tool does for read-only commands).
    let bwrap = Backend::detect(None);
    match Sandbox::new(bwrap).zygote(
        &policy,
        std::path::Path::new(env!("CARGO_BIN_EXE_agent-sandbox")),
        &workspace,
    ) {
        Ok(zygote) => {
            let spec = sandbox::Spec {
                program: sandbox::env::resolve_program("bash").expect("bash"),
                args: args.to_vec(),
                cwd: workspace.clone(),
                env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            };
            group.bench_function("bash_true_bwrap_persistent", |b| {
                b.iter(|| {
                    let null = || {
                        std::os::fd::OwnedFd::from(
                            std::fs::File::options()
                                .read(true)
                                .write(true)
                                .open("/dev/null")
                                .expect("/dev/null"),
                        )
                    };
                    let remote = zygote
                        .run(&spec, [null(), null(), null()])
                        .expect("the sandbox takes it");
                    assert!(remote.wait().expect("a status").success());
                });
            });
        }
        Err(error) => eprintln!("NOTE: persistent sandbox: {error}, skipped"),
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&base);
}

criterion_group!(benches, overhead);
criterion_main!(benches);
