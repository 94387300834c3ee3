//! Link options of the `agent` binary, for release builds on Linux with glibc
//! (docs/benchmarks.md, "Memory"; debug builds, which the tests use, keep the defaults):
//!
//! - `-z pack-relative-relocs` (DT_RELR; lld, or GNU ld 2.38; glibc 2.36 at run time): the
//!   binary's 64,000-odd relative relocations (vtables, panic locations) shrink from a
//!   1.5 MB table, which the loader reads whole at every start, to a few kilobytes.
//! - `--symbol-ordering-file=symbol-order.txt` (lld, the linker Rust uses by default on
//!   x86_64 Linux since 1.90): the functions a headless session runs are laid out first and
//!   together, so the pages of code it touches are few (`cargo xtask symbol-order` writes the
//!   file). Symbols the file names that the build no longer has are skipped. Set
//!   `AGENT_NO_SYMBOL_ORDER=1` when linking with another linker.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=symbol-order.txt");
    println!("cargo::rerun-if-env-changed=AGENT_NO_SYMBOL_ORDER");
    let var = |key: &str| std::env::var(key).unwrap_or_default();
    let release = var("PROFILE") == "release";
    if !release || var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    let order = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("symbol-order.txt");
    let lld_by_default = var("CARGO_CFG_TARGET_ARCH") == "x86_64";
    if lld_by_default && var("AGENT_NO_SYMBOL_ORDER") != "1" && order.exists() {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
