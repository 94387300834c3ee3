//! The back end [`Backend::detect`] found, kept on disk so that a process start does not pay
//! for a probe sandbox (a bubblewrap start, some 5 to 10 ms) when nothing that decides the
//! answer has changed since the last one.
//!
//! A record holds a fingerprint of everything the probe's answer depends on and the back end
//! that worked: the kernel (`/proc/sys/kernel/osrelease` and `version`), the settings that
//! allow or forbid unprivileged user namespaces (`kernel.unprivileged_userns_clone`,
//! `user.max_user_namespaces`, `kernel.apparmor_restrict_unprivileged_userns`), the
//! effective user, [`BACKEND_ENV`](crate::BACKEND_ENV), and the identity of each program
//! the probe would run (path, device, inode, size, modification time, mode): bubblewrap as
//! `PATH` finds it now, and the Landlock helper. Any difference, a record older than
//! [`MAX_AGE`], or an unreadable record means a new probe. Only a back end that worked is
//! recorded; an unavailable sandbox is probed again at every start.
//!
//! Trust: the record sits in the user's own cache folder (`agent/` in it is a protected
//! folder: no tool and no sandboxed command may write it, even in a session started in the
//! home folder), and is read only when it is a regular file of this user's that no one else
//! may write, opened without following a link and without blocking (a FIFO in its place is
//! no record). A forged record still could not run a command unsandboxed: it can only name
//! a back end for the very programs resolved now, and a back end that does not work fails
//! closed (bubblewrap refuses to start the command; the helper refuses to run it without
//! Landlock enforced).
//!
//! A recorded back end that stops working (bubblewrap exits without starting its command:
//! a security module's new rule, a mount bubblewrap can no longer make) has its record
//! removed (`forget`, called by [`crate::PlaceholderGuard::exited`]), so the next process
//! probes again; the running one keeps failing closed.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::Backend;

/// How long a record is trusted before the back end is probed again even if nothing in
/// the fingerprint changed (a security module's policy can change without a sign we read):
/// a day.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3_600);

/// The record's largest size read, bytes (it is a few hundred).
const MAX_RECORD_BYTES: u64 = 16 * 1024;

/// The record this process's back end was read from or written to, for [`forget`].
static RECORD: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// Remembers `record` as the one [`forget`] removes.
pub(crate) fn remember(record: &Path) {
    *RECORD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(record.into());
}

/// Removes the record this process used (nothing when it used none): its back end failed
/// to start a command, so the next process probes again.
pub(crate) fn forget() {
    let record = RECORD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    if let Some(record) = record
        && std::fs::remove_file(&record).is_ok()
    {
        tracing::warn!(
            record = %record.display(),
            "the sandbox failed to start a command: its back end is probed again at the next start"
        );
    }
}

/// What a probe's answer depends on, as one text.
pub(crate) fn fingerprint(
    bwrap: Option<&Path>,
    helper: Option<&Path>,
    forced: Option<&str>,
) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    for file in [
        "/proc/sys/kernel/osrelease",
        "/proc/sys/kernel/version",
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    ] {
        let value = std::fs::read_to_string(file).unwrap_or_else(|_| "-".to_owned());
        let _ = writeln!(text, "{file}={}", value.trim());
    }
    let _ = writeln!(text, "euid={}", nix::unistd::geteuid());
    let _ = writeln!(text, "forced={}", forced.unwrap_or("-"));
    for (name, program) in [("bwrap", bwrap), ("helper", helper)] {
        let _ = writeln!(text, "{name}={}", program.map_or("-".to_owned(), identity));
    }
    text
}

/// A program's path and what changes when it is replaced or upgraded.
fn identity(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::metadata(path) {
        Ok(meta) => format!(
            "{} dev={} ino={} size={} mtime={}.{} mode={:o}",
            path.display(),
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.mode()
        ),
        Err(error) => format!("{} unreadable: {error}", path.display()),
    }
}

/// The record on disk.
#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    fingerprint: String,
    /// `bwrap` or `landlock`.
    backend: String,
    /// When it was probed, seconds since the Unix epoch.
    probed_unix: u64,
}

/// The back end `file` records for `fingerprint`, if it is fresh; `bwrap` and `helper` are
/// the programs the fingerprint was made of.
pub(crate) fn load(
    file: &Path,
    fingerprint: &str,
    bwrap: Option<&Path>,
    helper: Option<&Path>,
) -> Option<Backend> {
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    // Not through a link, never blocking on a FIFO put in its place; a regular file of this
    // user's that no one else may write.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file)
        .ok()?;
    let meta = opened.metadata().ok()?;
    let owner = nix::unistd::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != owner || meta.mode() & 0o022 != 0 {
        return None;
    }
    let mut text = String::new();
    opened
        .take(MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let record: Record = serde_json::from_str(&text).ok()?;
    let probed = SystemTime::UNIX_EPOCH + Duration::from_secs(record.probed_unix);
    let age = SystemTime::now().duration_since(probed).ok()?;
    if record.fingerprint != fingerprint || age > MAX_AGE {
        return None;
    }
    match record.backend.as_str() {
        "bwrap" => bwrap.map(|path| Backend::Bubblewrap(path.to_path_buf())),
        "landlock" => helper.map(|path| Backend::Landlock(path.to_path_buf())),
        _ => None,
    }
}

/// Records `backend` (one that works) for `fingerprint` in `file`: written beside it and
/// renamed over it, its folder made (0700) if missing. Errors are ignored: the next start
/// probes again.
pub(crate) fn store(file: &Path, fingerprint: &str, backend: &Backend) {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let name = match backend {
        Backend::Bubblewrap(_) => "bwrap",
        Backend::Landlock(_) => "landlock",
        Backend::Unavailable(_) => return,
    };
    let Some(dir) = file.parent() else { return };
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    let record = Record {
        fingerprint: fingerprint.to_owned(),
        backend: name.to_owned(),
        probed_unix: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs()),
    };
    let Ok(text) = serde_json::to_string(&record) else {
        return;
    };
    let partial: PathBuf = dir.join(format!(
        ".{}.{}",
        file.file_name()
            .map_or("sandbox".into(), |name| name.to_string_lossy()),
        std::process::id()
    ));
    // Mode 0600 whatever the umask: `load` refuses a record others may write (a umask of
    // 002 would make it group-writable).
    let _ = std::fs::remove_file(&partial);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&partial)
        .and_then(|mut out| std::io::Write::write_all(&mut out, text.as_bytes()));
    if written.is_err() || std::fs::rename(&partial, file).is_err() {
        let _ = std::fs::remove_file(&partial);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_answers_only_its_own_fingerprint_while_fresh() {
        let dir = std::env::temp_dir().join(format!("probe-cache-{}", std::process::id()));
        let file = dir.join("nested/sandbox-backend.json");
        let bwrap = Path::new("/usr/bin/bwrap");
        let here = fingerprint(Some(bwrap), None, None);
        // A program's identity is part of it; so is the forced back end.
        assert!(here.contains("bwrap=/usr/bin/bwrap"), "{here}");
        assert_ne!(here, fingerprint(Some(bwrap), None, Some("landlock")));
        assert_ne!(here, fingerprint(Some(Path::new("/bin/true")), None, None));

        assert_eq!(load(&file, &here, Some(bwrap), None), None, "no record yet");
        store(&file, &here, &Backend::Bubblewrap(bwrap.to_path_buf()));
        assert_eq!(
            load(&file, &here, Some(bwrap), None),
            Some(Backend::Bubblewrap(bwrap.to_path_buf()))
        );
        assert_eq!(load(&file, "another kernel", Some(bwrap), None), None);
        let mode = std::fs::metadata(&file)
            .map(|meta| std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777);
        assert_eq!(mode.ok(), Some(0o600), "written for its owner alone");
        // A record naming a back end whose program is not resolved now answers nothing.
        assert_eq!(load(&file, &here, None, None), None);

        // Too old: probed again.
        let stale = Record {
            fingerprint: here.clone(),
            backend: "bwrap".to_owned(),
            probed_unix: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()
                - MAX_AGE.as_secs()
                - 60,
        };
        std::fs::write(&file, serde_json::to_string(&stale).unwrap_or_default())
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(load(&file, &here, Some(bwrap), None), None);
        // Garbage is no record.
        std::fs::write(&file, "{not json").unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(load(&file, &here, Some(bwrap), None), None);
        // A record others may write, a link to a record, or a FIFO is no record (and never
        // blocks the start).
        store(&file, &here, &Backend::Bubblewrap(bwrap.to_path_buf()));
        let mode = |bits| {
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(bits))
                .unwrap_or_else(|error| panic!("{error}"));
        };
        mode(0o666);
        assert_eq!(
            load(&file, &here, Some(bwrap), None),
            None,
            "others may write it"
        );
        mode(0o644);
        let link = dir.join("nested/link.json");
        std::os::unix::fs::symlink(&file, &link).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(load(&link, &here, Some(bwrap), None), None, "a link");
        let fifo = dir.join("nested/fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU)
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(load(&fifo, &here, Some(bwrap), None), None, "a FIFO");
        // An unavailable sandbox is never recorded.
        std::fs::remove_file(&file).unwrap_or_else(|error| panic!("{error}"));
        store(&file, &here, &Backend::Unavailable("no".into()));
        assert!(!file.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
