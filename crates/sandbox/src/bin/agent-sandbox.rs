//! The sandbox helper on its own: `agent-sandbox __agent-sandbox MODE ...` (see
//! [`sandbox::helper_main`]). The `agent` binary embeds the same helper; this one lets the
//! crate's tests and other programs use the Landlock back end without it.

fn main() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == sandbox::HELPER_ARG)
    {
        sandbox::helper_main();
    }
    eprintln!("agent-sandbox: this program is a helper; see the sandbox crate's documentation");
    std::process::exit(2);
}
