//! Writing files safely: read-before-write checks and atomic replacement.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

use executor::ToolError;

use crate::common::io_error;
use crate::session::{FileStamp, Shared};

/// An editor's view of the files (the Agent Client Protocol's `fs/read_text_file` and
/// `fs/write_text_file`): the text it holds, unsaved changes included, and writes that land
/// in its buffers. When a tool set has one ([`crate::ToolSetConfig::editor`]), Read reads a
/// text file's lines from it, and Write and Edit read and write through it; every path
/// check (confinement, protected folders, the read-before-write stamp) is made first, as
/// for the disk. Binary files, images, PDFs and notebooks are read from the disk.
///
/// Called from the tools' blocking worker threads, never from an async task.
pub trait EditorFiles: Send + Sync + std::fmt::Debug + 'static {
    /// The text of `path` (absolute, resolved) as the editor holds it.
    ///
    /// # Errors
    ///
    /// Why the editor could not give it, in words for the model.
    fn read_text(&self, path: &Path) -> Result<String, String>;

    /// Replaces the text of `path` (absolute, resolved; it may not exist yet) in the
    /// editor, which saves it.
    ///
    /// # Errors
    ///
    /// Why the editor could not take it, in words for the model.
    fn write_text(&self, path: &Path, text: &str) -> Result<(), String>;
}

/// The editor the files of `shared` go through now, if any: none while the session's
/// background tasks run. The editor opens a path by its name a round trip after our
/// checks, following links; a command running beside the call (a background task) could
/// swap the checked file for a link in that time, to write or read outside the workspace.
/// The disk path does not follow links (`O_NOFOLLOW`, an atomic rename over the name).
pub(crate) fn editor(shared: &Shared) -> Option<&dyn EditorFiles> {
    let editor = shared.editor.as_deref()?;
    (shared.background.running() == 0).then_some(editor)
}

/// The text of `path` as `editor` holds it, as bytes; refused unless `path` was the same
/// regular file, reached through no link, before and after the editor read it.
///
/// # Errors
///
/// [`ToolError::CouldNotRun`] when the editor could not read it or the file was replaced
/// (by a link, say) around the read: the text is then not used.
pub(crate) fn editor_read(editor: &dyn EditorFiles, path: &Path) -> Result<Vec<u8>, ToolError> {
    let before = identity(path)?;
    let text = editor.read_text(path).map_err(|reason| {
        ToolError::CouldNotRun(format!(
            "could not read {} through the editor: {reason}",
            path.display()
        ))
    })?;
    if before.is_none() || identity(path)? != before {
        return Err(replaced(path, "read"));
    }
    Ok(text.into_bytes())
}

/// Replaces the text of `path` in `editor`, checked as [`editor_read`] checks a read: the
/// path a regular file or nothing, reached through no link, before; the same file after.
///
/// # Errors
///
/// [`ToolError::CouldNotRun`] when the editor refused, or the file was replaced around the
/// write (the model is told the write may have gone elsewhere).
fn editor_write(editor: &dyn EditorFiles, path: &Path, text: &str) -> Result<(), ToolError> {
    let before = identity(path)?;
    editor.write_text(path, text).map_err(|reason| {
        ToolError::CouldNotRun(format!(
            "could not write {} through the editor: {reason}",
            path.display()
        ))
    })?;
    match (before, identity(path)?) {
        (Some(before), Some(after)) if before == after => Ok(()),
        (None, Some(_)) => Ok(()),
        _ => Err(replaced(path, "wrote")),
    }
}

/// A regular file's device and inode (`None`: nothing there), for a path that resolves to
/// itself (no link on the way).
///
/// # Errors
///
/// [`ToolError::CouldNotRun`] for a link on the way or anything but a regular file.
fn identity(path: &Path) -> Result<Option<(u64, u64)>, ToolError> {
    use std::os::unix::fs::MetadataExt as _;
    if crate::paths::real_path(path).ok().as_deref() != Some(path) {
        return Err(replaced(path, "reached"));
    }
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_file() => {
            Ok(Some((metadata.dev(), metadata.ino())))
        }
        Ok(_) => Err(replaced(path, "reached")),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io_error("inspect", path, &error)),
    }
}

fn replaced(path: &Path, what: &str) -> ToolError {
    ToolError::CouldNotRun(format!(
        "{} was replaced (by a link or another file) while the editor {what} it; nothing was taken from it. A command may be changing it",
        path.display()
    ))
}

/// The current content of an existing file, checked against what this session last read of
/// it; `None` when there is no file (a new file needs no read).
///
/// # Errors
///
/// [`ToolError::InvalidInput`] when the path is a directory, the file was never read in this
/// session, or it changed on disk since; I/O errors as [`io_error`] maps them.
pub(crate) fn current_content(shared: &Shared, path: &Path) -> Result<Option<Vec<u8>>, ToolError> {
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error("inspect", path, &error)),
    };
    if metadata.is_dir() {
        return Err(ToolError::InvalidInput(format!(
            "{} is a directory, not a file",
            path.display()
        )));
    }
    if !metadata.is_file() {
        // A FIFO, socket or device would block or never end.
        return Err(ToolError::InvalidInput(format!(
            "{} is not a regular file (a pipe, socket or device); it was not changed",
            path.display()
        )));
    }
    let stamp = shared.read_state.get(path).map(|entry| *entry.value());
    if stamp.is_none() {
        // Refuse before reading: a file never Read in this session is not changed at all.
        return Err(ToolError::InvalidInput(format!(
            "{} exists but has not been read in this session. Read it first, then change it (so that nothing written by someone else is overwritten unseen)",
            path.display()
        )));
    }
    let content = match editor(shared) {
        Some(editor) => editor_read(editor, path)?,
        None => fs::read(path).map_err(|error| io_error("read", path, &error))?,
    };
    match stamp {
        None => Err(ToolError::InvalidInput(format!(
            "{} exists but has not been read in this session. Read it first, then change it (so that nothing written by someone else is overwritten unseen)",
            path.display()
        ))),
        Some(stamp) if !stamp.same_content(&content) => Err(ToolError::InvalidInput(format!(
            "{} has changed on disk since it was last read (by the user, a formatter or a command). Read it again before changing it",
            path.display()
        ))),
        Some(_) => Ok(Some(content)),
    }
}

/// A write worked out and checked, not yet done: the file, its bytes now (`None`: it does
/// not exist), its bytes after, and the result to give once they are written. What a
/// writing tool's `prepare` returns, so its validation and its call share every check.
pub(crate) struct PreparedWrite {
    pub(crate) path: std::path::PathBuf,
    pub(crate) previous: Option<Vec<u8>>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) output: executor::ToolOutput,
}

impl PreparedWrite {
    /// Writes it ([`write_and_record`]) and returns the call's result.
    pub(crate) fn commit(self, shared: &Shared) -> Result<executor::ToolOutput, ToolError> {
        write_and_record(shared, &self.path, self.previous.as_deref(), &self.bytes)?;
        Ok(self.output)
    }
}

/// Writes `bytes` to `path` ([`replace_file`]: never torn, keeping the file's mode, owner,
/// group and hard links), creating missing parent directories, and records the new content
/// as read. `previous` is the content being replaced (`None`: no file):
/// the session's [`crate::WriteJournal`] keeps it before anything changes.
///
/// # Errors
///
/// I/O errors as [`io_error`] maps them; [`ToolError::CouldNotRun`] when the journal could not
/// keep the previous content (the file is then left as it was).
pub(crate) fn write_and_record(
    shared: &Shared,
    path: &Path,
    previous: Option<&[u8]>,
    bytes: &[u8],
) -> Result<(), ToolError> {
    if let Some(journal) = &shared.journal {
        journal.before_write(path, previous).map_err(|reason| {
            ToolError::CouldNotRun(format!(
                "{} was not changed: its checkpoint could not be saved ({reason})",
                path.display()
            ))
        })?;
    }
    // The folder as the checks saw it, opened from `/` with no link followed (missing
    // folders made there): a folder swapped for a link since cannot take the write elsewhere.
    let (folder, name) = open_parent(Path::new("/"), path, true)
        .map_err(|error| io_error("open the folder of", path, &error))?;
    match (editor(shared), std::str::from_utf8(bytes)) {
        (Some(editor), Ok(text)) => editor_write(editor, path, text)?,
        _ => replace_file_at(&folder, &name, bytes)
            .map_err(|error| io_error("write", path, &error))?,
    }
    if let Some(journal) = &shared.journal {
        journal.after_write(path, bytes);
    }
    let modified = fs::metadata(path).and_then(|m| m.modified()).ok();
    if bytes.len() as u64 <= crate::watch::SNAPSHOT_BYTES {
        shared.snapshots.insert(path.to_path_buf(), bytes.into());
    } else {
        shared.snapshots.remove(path);
    }
    shared
        .read_state
        .insert(path.to_path_buf(), FileStamp::of(bytes, modified));
    Ok(())
}

/// Replaces the file at `path` (absolute and resolved: no link anywhere on it) with `bytes`
/// ([`replace_file_at`] in its folder as [`open_parent`] opens it from `/`, making missing
/// folders): a link that appeared on the way fails the write instead of taking it
/// elsewhere.
///
/// # Errors
///
/// I/O errors, as [`open_parent`] and [`replace_file_at`].
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (folder, name) = open_parent(Path::new("/"), path, true)?;
    replace_file_at(&folder, &name, bytes)
}

/// The folder holding `path`, opened by walking down from `root` (an ancestor of `path`)
/// one name at a time, none of them followed if it is a link (`O_NOFOLLOW`), missing ones
/// made when `create`; with the file's name. What is then done through the folder stays in
/// it, whatever is renamed or linked in the workspace meanwhile: a folder swapped for a
/// link to elsewhere after a check cannot take a write there.
///
/// # Errors
///
/// `path` not under `root`; a link or a non-folder on the way (`ELOOP`, `ENOTDIR`); I/O
/// errors.
pub fn open_parent(root: &Path, path: &Path, create: bool) -> io::Result<(OwnedFd, OsString)> {
    let relative = path.strip_prefix(root).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not under {}", path.display(), root.display()),
        )
    })?;
    let mut parts: Vec<&OsStr> = Vec::new();
    for part in relative.components() {
        match part {
            std::path::Component::Normal(name) => parts.push(name),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: not a plain path under its root", path.display()),
                ));
            }
        }
    }
    let Some(name) = parts.pop() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file",
        ));
    };
    let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let mut folder = nix::fcntl::open(root, flags, Mode::empty()).map_err(io::Error::from)?;
    for part in parts {
        let next = nix::fcntl::openat(&folder, part, flags | OFlag::O_NOFOLLOW, Mode::empty());
        folder = match next {
            Ok(next) => next,
            Err(nix::errno::Errno::ENOENT) if create => {
                match nix::sys::stat::mkdirat(&folder, part, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                    Err(error) => return Err(error.into()),
                }
                nix::fcntl::openat(&folder, part, flags | OFlag::O_NOFOLLOW, Mode::empty())
                    .map_err(io::Error::from)?
            }
            Err(error) => return Err(error.into()),
        };
    }
    Ok((folder, name.to_owned()))
}

/// Opens the regular file `name` of `folder` for reading (or, with `write`, for writing
/// without truncating it), never through a link and never blocking: a FIFO, a device or a
/// folder put there is refused, after opening, by what the open file is.
///
/// # Errors
///
/// Not a regular file; I/O errors.
pub fn open_regular_at(folder: &OwnedFd, name: &OsStr, write: bool) -> io::Result<fs::File> {
    let access = if write {
        OFlag::O_WRONLY
    } else {
        OFlag::O_RDONLY
    };
    let fd = nix::fcntl::openat(
        folder,
        name,
        access | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    let stat = nix::sys::stat::fstat(&fd).map_err(io::Error::from)?;
    if stat.st_mode & libc_mode::S_IFMT != libc_mode::S_IFREG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(fs::File::from(fd))
}

/// Removes the file `name` of `folder` (never a folder, never through a link: a link there
/// is removed itself). A file already gone is no error.
///
/// # Errors
///
/// I/O errors.
pub fn remove_file_at(folder: &OwnedFd, name: &OsStr) -> io::Result<()> {
    match nix::unistd::unlinkat(folder, name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Replaces the file `name` of `folder` with `bytes`, keeping what makes it the same file:
/// its mode, owner and group, and its other names (hard links). Every step is relative to
/// `folder` and never follows a link at `name`.
///
/// Both this and a crash never leaving a torn file hold at once this way: the new content
/// is first written whole to a temporary file in the same folder and synced. A file with
/// one name whose owner and group the temporary file can take (always as root; as a user,
/// for their own files in a group of theirs) is then replaced by a rename: readers and a
/// crash see the old or the new content. A file with other names (or an owner the
/// temporary file cannot take) must keep its inode, so the new content is copied over it in
/// place by `cat` (and `truncate` when it is shorter) in a process group of its own, given
/// both files already open (the temporary one's name is removed before it starts): a kill
/// of the agent at any point leaves the old content (before the copy starts) or the new (the
/// copy runs to its end without the agent), and Ctrl-C at the terminal does not reach it.
/// Only a power cut during that copy can leave it torn; the session's checkpoint of the old
/// content (taken before any write) brings it back.
///
/// # Errors
///
/// I/O errors; a copy that failed (the file is then as the copy left it).
pub fn replace_file_at(folder: &OwnedFd, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let existing = match nix::sys::stat::fstatat(folder, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) if stat.st_mode & libc_mode::S_IFMT == libc_mode::S_IFLNK => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the file is now a link: not written through",
            ));
        }
        Ok(stat) => Some(stat),
        Err(nix::errno::Errno::ENOENT) => None,
        Err(error) => return Err(error.into()),
    };
    // A short name of its own (a long file name plus a suffix could pass the limit).
    let (temporary, file) = loop {
        let temporary = OsString::from(format!(
            ".agent-write-{}-{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match nix::fcntl::openat(
            folder,
            temporary.as_os_str(),
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(fd) => break (temporary, fs::File::from(fd)),
            Err(nix::errno::Errno::EEXIST) => {}
            Err(error) => return Err(error.into()),
        }
    };
    let result = write_then_swap(folder, name, &temporary, file, existing.as_ref(), bytes);
    if result.is_err() {
        let _ = nix::unistd::unlinkat(
            folder,
            temporary.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    result
}

/// The file types of `st_mode` (as `<sys/stat.h>` defines them).
mod libc_mode {
    pub(super) const S_IFMT: u32 = 0o170_000;
    pub(super) const S_IFLNK: u32 = 0o120_000;
    pub(super) const S_IFREG: u32 = 0o100_000;
}

/// [`replace_file_at`]'s steps once the temporary file is open.
fn write_then_swap(
    folder: &OwnedFd,
    name: &OsStr,
    temporary: &OsStr,
    mut file: fs::File,
    existing: Option<&nix::sys::stat::FileStat>,
    bytes: &[u8],
) -> io::Result<()> {
    file.write_all(bytes)?;
    let mut in_place = false;
    if let Some(existing) = existing {
        // Owner and group first: taking them clears set-id bits the mode puts back.
        let (uid, gid) = (
            nix::unistd::Uid::from_raw(existing.st_uid),
            nix::unistd::Gid::from_raw(existing.st_gid),
        );
        let created = nix::sys::stat::fstat(&file).map_err(io::Error::from)?;
        if (created.st_uid, created.st_gid) != (existing.st_uid, existing.st_gid)
            && nix::unistd::fchown(&file, Some(uid), Some(gid)).is_err()
        {
            in_place = true;
        }
        nix::sys::stat::fchmod(&file, Mode::from_bits_truncate(existing.st_mode & 0o7777))
            .map_err(io::Error::from)?;
        in_place |= existing.st_nlink > 1;
    }
    file.sync_all()?;
    if !in_place {
        drop(file);
        return nix::fcntl::renameat(folder, temporary, folder, name).map_err(io::Error::from);
    }
    // The file checked above, still a regular file and the same one.
    let target = open_regular_at(folder, name, true)?;
    let opened = nix::sys::stat::fstat(&target).map_err(io::Error::from)?;
    if let Some(existing) = existing
        && (opened.st_dev, opened.st_ino) != (existing.st_dev, existing.st_ino)
    {
        return Err(io::Error::other(
            "the file was replaced meanwhile: not written",
        ));
    }
    // Nothing is left behind by name: the copy has both files open.
    nix::unistd::unlinkat(folder, temporary, nix::unistd::UnlinkatFlags::NoRemoveDir)
        .map_err(io::Error::from)?;
    std::io::Seek::seek(&mut file, io::SeekFrom::Start(0))?;
    copy_in_place(file, target, bytes.len())
}

/// Copies `source` over `target` from its start and cuts it at `len`, in a process of its
/// own group that outlives the agent (see [`replace_file_at`]).
fn copy_in_place(source: fs::File, target: fs::File, len: usize) -> io::Result<()> {
    use std::os::unix::process::CommandExt as _;
    let program = |name: &str| {
        sandbox::env::resolve_program(name).map_err(|error| io::Error::other(error.to_string()))
    };
    let output = std::process::Command::new(program("sh")?)
        .arg("-c")
        .arg(r#""$1" && exec "$2" -s "$3" /proc/self/fd/1"#)
        .arg("agent-write")
        .arg(program("cat")?)
        .arg(program("truncate")?)
        .arg(len.to_string())
        .stdin(source)
        .stdout(target)
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "copying the new content over the file in place: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::testutil::TempDir;

    /// A file with another name stays one file with two names; its mode, owner and group
    /// stay (a file of another owner: as root, the tests' usual user here; as another user
    /// the rename path keeps their own files' owner and the in-place copy the rest).
    #[test]
    fn a_replaced_file_keeps_its_links_mode_and_owner() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = TempDir::new("files-identity");
        let path = dir.path().join("notes.txt");
        let other = dir.path().join("other-name.txt");
        fs::write(&path, "old contents, longer than the new\n").unwrap();
        fs::hard_link(&path, &other).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let running_as_root = fs::metadata(dir.path()).unwrap().uid() == 0;
        if running_as_root {
            std::os::unix::fs::chown(&path, Some(4242), Some(4343)).unwrap();
        }
        let before = fs::metadata(&path).unwrap();
        replace_file(&path, b"new\n").unwrap();
        let after = fs::metadata(&path).unwrap();
        assert_eq!(fs::read_to_string(&other).unwrap(), "new\n", "still linked");
        assert_eq!(after.ino(), before.ino());
        assert_eq!(after.nlink(), 2);
        assert_eq!(after.permissions().mode() & 0o7777, 0o640);
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        // One name, another owner (as root): replaced by a rename, owner and mode kept.
        fs::remove_file(&other).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o4755)).unwrap();
        replace_file(&path, b"newer\n").unwrap();
        let renamed = fs::metadata(&path).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "newer\n");
        assert_eq!((renamed.uid(), renamed.gid()), (before.uid(), before.gid()));
        assert_eq!(renamed.permissions().mode() & 0o7777, 0o4755);
        // No temporary file is left either way.
        let entries: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }

    /// From an attack: a folder of a checked path swapped for a link to elsewhere before
    /// the write (a background command racing Write) makes the write fail; nothing is made
    /// or replaced where the link points.
    #[test]
    fn a_write_never_goes_through_a_folder_swapped_for_a_link() {
        let dir = TempDir::new("files-swapped");
        let outside = dir.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join(".bashrc"), "theirs").unwrap();
        let workspace = dir.path().join("ws");
        fs::create_dir_all(&workspace).unwrap();
        std::os::unix::fs::symlink(&outside, workspace.join("d")).unwrap();
        assert!(replace_file(&workspace.join("d/.bashrc"), b"echo PWNED").is_err());
        assert!(replace_file(&workspace.join("d/new.txt"), b"x").is_err());
        assert!(replace_file(&workspace.join("d/sub/new.txt"), b"x").is_err());
        assert_eq!(
            fs::read_to_string(outside.join(".bashrc")).unwrap(),
            "theirs"
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
    }

    #[test]
    fn atomic_write_keeps_permissions_and_leaves_no_temporary() {
        let dir = TempDir::new("files-atomic");
        let path = dir.path().join("script.sh");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o750)).unwrap();
        replace_file(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o750
        );
        let entries: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }
}
