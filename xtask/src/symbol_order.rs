//! `cargo xtask symbol-order`: writes `crates/cli/symbol-order.txt`, the functions a
//! headless session runs, in the order it first runs them, for the linker to lay out first
//! and together (`crates/cli/build.rs` passes it to lld as `--symbol-ordering-file` in
//! release builds).
//!
//! Why: the binary's code is mapped from the file, and the kernel maps a touched page's
//! neighbours with it (fault-around, 64 KiB), so resident memory follows how scattered the
//! code that runs is, not how much of it runs. A 4-turn session runs about 2,200 functions
//! (3.4 MB of machine code) spread over 22 MB; laid out together they take a few MB.
//!
//! How: the release `agent` runs `--version` and the scripted 4-turn session
//! (`tests/fixtures/four-turn.json` against `testkit serve`, as `bench-cli --ab` runs it)
//! under Valgrind's callgrind (Debian package `valgrind`), which names every function that
//! ran (mangled, as the symbol table has it); the agent binary's are kept, `--version`'s
//! first. Symbols that a later build no longer has (a changed generic, an LTO-renamed local)
//! are skipped by the linker: the file goes stale gracefully, and running this again after
//! larger changes brings the layout back (`bench-cli --ab` shows the peak RSS).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, ensure};

use crate::bench_cli::Serve;

/// Runs `agent ARGS` under callgrind with `envs`, writing its profile to `out`.
fn profile(
    agent: &Path,
    args: &[&std::ffi::OsStr],
    envs: &[(&str, &Path)],
    out: &Path,
) -> Result<()> {
    let mut command = Command::new("valgrind");
    command
        .args(["--tool=callgrind", "--demangle=no", "--compress-strings=no"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(agent)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    for (key, value) in envs {
        command.env(key, value);
    }
    let output = command
        .output()
        .context("running valgrind (Debian package `valgrind`)")?;
    ensure!(
        output.status.success(),
        "valgrind {} failed ({}):\n{}",
        agent.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// The functions of `binary` a callgrind profile names, in order of first appearance, added
/// to `order` (without repeats; `'2`-style recursion marks dropped).
fn functions(
    profile: &str,
    binary: &str,
    order: &mut Vec<String>,
    seen: &mut std::collections::HashSet<String>,
) {
    let mut object_is_binary = false;
    for line in profile.lines() {
        if let Some(object) = line.strip_prefix("ob=") {
            object_is_binary = object.trim() == binary;
        } else if let Some(name) = line.strip_prefix("fn=")
            && object_is_binary
        {
            let name = name.trim();
            let name = match name.rsplit_once('\'') {
                Some((base, mark)) if mark.bytes().all(|b| b.is_ascii_digit()) => base,
                _ => name,
            };
            if seen.insert(name.to_owned()) {
                order.push(name.to_owned());
            }
        }
    }
}

/// `cargo xtask symbol-order`: profiles the release build and writes the order file.
pub fn run(root: &Path, agent: &Path, testkit: &Path) -> Result<()> {
    let scratch = std::env::temp_dir().join(format!("agent-symbol-order-{}", std::process::id()));
    let result = (|| {
        std::fs::create_dir_all(&scratch)?;
        let binary = agent
            .canonicalize()
            .with_context(|| format!("{}", agent.display()))?;
        let version = scratch.join("version.callgrind");
        profile(&binary, &["--version".as_ref()], &[], &version)?;

        let repo = crate::bench_ab::session_repo(&scratch)?;
        let home: PathBuf = scratch.join("home");
        std::fs::create_dir_all(&home)?;
        let script = root.join("tests/fixtures/four-turn.json");
        let server = Serve::start_with(testkit, &script, &[])?;
        let session = scratch.join("session.callgrind");
        let args = crate::bench_ab::session_args(&repo, &server.url);
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|arg| arg.as_os_str()).collect();
        let env = crate::bench_ab::session_env(&home, &home.join("cache"));
        let envs: Vec<(&str, &Path)> = env
            .iter()
            .map(|(key, value)| (*key, value.as_path()))
            .collect();
        profile(&binary, &args, &envs, &session)?;
        drop(server);
        let fixed = std::fs::read_to_string(repo.join("greet.py"))?;
        ensure!(
            fixed.contains("'hello'"),
            "the profiled session did not fix greet.py"
        );

        let name = binary.to_string_lossy().into_owned();
        let (mut order, mut seen) = (Vec::new(), std::collections::HashSet::new());
        for file in [&version, &session] {
            let text = std::fs::read_to_string(file)?;
            functions(&text, &name, &mut order, &mut seen);
        }
        ensure!(
            order.len() > 100,
            "callgrind named only {} functions",
            order.len()
        );
        let out = root.join("crates/cli/symbol-order.txt");
        std::fs::write(&out, order.join("\n") + "\n")
            .with_context(|| format!("writing {}", out.display()))?;
        println!("{}: {} functions", out.display(), order.len());
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_binary_s_functions_in_first_appearance_order() {
        let profile = "ob=/lib/libc.so.6\nfn=memcpy\nob=/bin/agent\nfn=_ZN4main17h1E\nfn=_ZN3foo17h2E'2\nfn=_ZN3foo17h2E\nob=/lib/libc.so.6\nfn=free\nob=/bin/agent\nfn=_ZN3bar17h3E\n";
        let (mut order, mut seen) = (Vec::new(), std::collections::HashSet::new());
        super::functions(profile, "/bin/agent", &mut order, &mut seen);
        assert_eq!(order, ["_ZN4main17h1E", "_ZN3foo17h2E", "_ZN3bar17h3E"]);
    }
}
