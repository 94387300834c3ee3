//! Session transcripts: one JSON entry per line, written and fsynced as each message completes,
//! in the shape Claude Code uses (`{"type":"user"|"assistant","message":…,"session_id",
//! "uuid","timestamp","cwd"}`), so both kinds of transcript load the same way.

use std::fs::{File, OpenOptions};
use std::io::{Seek as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use context::Repair;
use loop_core::HistoryEvent;
use protocol::{MessageParam, Role};
use serde_json::{Value, json};

/// `subtype` of the entry that begins a user turn.
pub const TURN_SUBTYPE: &str = "agent_turn";

/// Longest readable part of a project folder's name, in bytes (the hash and a dash follow).
const SLUG_BYTES: usize = 180;

/// `~/.local/share/agent/projects/<slug>-<hash>/` for the working directory `cwd`: the slug
/// is the path with every `/` replaced by `-` (Claude Code's rule), cut to 180 bytes, and
/// the hash is the first 16 hex digits of the SHA-256 of the path's bytes. So `/a/b-c` and
/// `/a/b/c` get folders of their own, and a working directory longer than a file name can
/// be still gets one (at most 197 bytes).
pub fn project_dir(cwd: &Path) -> anyhow::Result<PathBuf> {
    use sha2::Digest as _;
    use std::os::unix::ffi::OsStrExt as _;
    let mut slug = cwd.to_string_lossy().replace(['/', '\\'], "-");
    let mut cut = slug.len().min(SLUG_BYTES);
    while !slug.is_char_boundary(cut) {
        cut -= 1;
    }
    slug.truncate(cut);
    let digest = sha2::Sha256::digest(cwd.as_os_str().as_bytes());
    let hash: String = digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    Ok(projects_dir()?.join(format!("{slug}-{hash}")))
}

/// The folder earlier versions used for `cwd` (the slug alone), where `--continue` and
/// `--resume ID` also look; `None` when that name cannot be a file name.
pub fn legacy_project_dir(cwd: &Path) -> anyhow::Result<Option<PathBuf>> {
    let slug = cwd.to_string_lossy().replace(['/', '\\'], "-");
    (slug.len() <= 255)
        .then(|| projects_dir().map(|dir| dir.join(slug)))
        .transpose()
}

fn projects_dir() -> anyhow::Result<PathBuf> {
    let base = dirs::data_dir().context("no data directory (set HOME or XDG_DATA_HOME)")?;
    Ok(base.join("agent").join("projects"))
}

/// RFC 3339 UTC timestamp with milliseconds.
pub fn timestamp(now: SystemTime) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Parses a UTC timestamp as [`timestamp`] writes it (and Claude Code does):
/// `YYYY-MM-DDTHH:MM:SS[.fraction]Z`. `None` for anything else.
pub fn parse_timestamp(text: &str) -> Option<SystemTime> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut clock = clock.splitn(3, ':').map(str::parse::<u64>);
    let (hour, minute, second) = (
        clock.next()?.ok()?,
        clock.next()?.ok()?,
        clock.next()?.ok()?,
    );
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let millis: u64 = if fraction.is_empty() {
        0
    } else {
        if !fraction.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        format!("{fraction:0<3}")[..3].parse().ok()?
    };
    if !(0..=9999).contains(&year) {
        return None;
    }
    // Days since 1970-01-01 from the civil date (Howard Hinnant's algorithm); the year is
    // bounded above, so nothing here overflows.
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let shifted = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * shifted + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second;
    UNIX_EPOCH.checked_add(std::time::Duration::from_millis(seconds * 1_000 + millis))
}

/// Appends entries to a session file, fsyncing each. Clones share the file (the session and
/// its checkpoint journal write through one), and each entry is written whole under a lock.
#[derive(Clone, Debug)]
pub struct Transcript {
    inner: Arc<Mutex<Writer>>,
}

/// The open session file.
#[derive(Debug)]
struct Writer {
    file: Arc<syncer::Durable>,
    path: PathBuf,
    session_id: String,
    cwd: String,
    /// `cli` (interactive) or `sdk-cli` (headless), on every entry once set.
    entrypoint: Option<&'static str>,
    /// Held while this process writes the session (released when it exits, however).
    _lock: SessionLock,
}

/// The lock of one session file (`PATH.lock` beside it, holding the holder's pid): one
/// writer per session, or two agents resuming it would interleave their turns. The lock
/// file is removed on drop, while still locked.
#[derive(Debug)]
struct SessionLock {
    path: PathBuf,
    _file: nix::fcntl::Flock<File>,
}

impl SessionLock {
    /// Takes the lock of the session file `session`.
    ///
    /// A holder removes the lock file before it lets go, so a lock taken on a file that is
    /// no longer the one at the path (opened just before a holder removed it) is not the
    /// lock: it is taken again on the new file.
    ///
    /// # Errors
    ///
    /// When another process holds it (naming its pid), or the lock file cannot be made.
    fn take(session: &Path) -> anyhow::Result<Self> {
        use std::io::{Read as _, Write as _};
        use std::os::unix::fs::MetadataExt as _;
        let path = session.with_extension("jsonl.lock");
        for _ in 0..16 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(mut lock) => {
                    let held = lock.metadata().ok().map(|meta| (meta.dev(), meta.ino()));
                    let current = std::fs::symlink_metadata(&path)
                        .ok()
                        .map(|meta| (meta.dev(), meta.ino()));
                    if held.is_none() || held != current {
                        continue;
                    }
                    let _ = lock.set_len(0);
                    let _ = write!(*lock, "{}", std::process::id());
                    return Ok(Self { path, _file: lock });
                }
                Err((mut file, _)) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    bail!(
                        "the session {} is in use by another agent (process {}); wait for it to end, or start a new session",
                        session.display(),
                        if holder.is_empty() { "unknown" } else { holder }
                    )
                }
            }
        }
        bail!(
            "{}: the lock file kept changing while it was taken; try again",
            path.display()
        )
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Still locked here (the field drops after this): whoever opens the path next
        // makes a new file, and whoever opened the old one sees it is gone.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Creates `dir` and its missing parents readable by the user only (mode 0700); a `dir` that
/// exists is narrowed to 0700 when it is more open.
///
/// # Errors
///
/// When a folder cannot be created or its mode set.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Narrows an open file to its owner (mode 0600) when it is more open (a file created by an
/// older version, or under a loose umask).
///
/// # Errors
///
/// When the mode cannot be read or set.
pub fn private_file(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

impl Transcript {
    /// Opens (or creates) `path` for appending: the file readable by the user only (0600),
    /// in folders that are too (0700). Transcripts hold everything the session saw.
    ///
    /// # Errors
    ///
    /// When the directory or file cannot be created.
    pub fn open(path: PathBuf, session_id: String, cwd: &Path) -> anyhow::Result<Self> {
        if let Some(parent) = path.parent() {
            private_dir(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let lock = SessionLock::take(&path)?;
        // A crash can leave a half-written last line: drop it (it is the message that was in
        // flight) so new entries start on a line of their own.
        // A whole entry that only lacks its newline (an edited file) keeps its entry: the
        // newline is added instead.
        if let Ok(bytes) = std::fs::read(&path)
            && bytes.last().is_some_and(|last| *last != b'\n')
        {
            let keep = bytes
                .iter()
                .rposition(|byte| *byte == b'\n')
                .map_or(0, |at| at + 1);
            let mut file = OpenOptions::new()
                .write(true)
                .open(&path)
                .with_context(|| format!("repairing transcript {}", path.display()))?;
            if serde_json::from_slice::<Value>(&bytes[keep..]).is_ok() {
                file.seek(std::io::SeekFrom::End(0))
                    .and_then(|_| file.write_all(b"\n"))
                    .with_context(|| format!("repairing transcript {}", path.display()))?;
            } else {
                file.set_len(keep as u64)
                    .with_context(|| format!("repairing transcript {}", path.display()))?;
            }
        }
        drop_incomplete_compaction(&path)
            .with_context(|| format!("repairing transcript {}", path.display()))?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("opening transcript {}", path.display()))?;
        private_file(&file).with_context(|| format!("protecting transcript {}", path.display()))?;
        Ok(Self {
            inner: Arc::new(Mutex::new(Writer {
                file: Arc::new(syncer::Durable::new(file)),
                path,
                session_id,
                cwd: cwd.to_string_lossy().into_owned(),
                entrypoint: None,
                _lock: lock,
            })),
        })
    }

    /// The writer, whoever held it last (a panic while writing leaves at worst a cut last
    /// line, which loading drops).
    fn writer(&self) -> MutexGuard<'_, Writer> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session file.
    pub fn path(&self) -> PathBuf {
        self.writer().path.clone()
    }

    /// Marks every entry written from now on with Claude Code's `entrypoint`: `cli` for an
    /// interactive session, `sdk-cli` for a headless one (`agent sessions` and `--continue`
    /// read it).
    pub fn set_entrypoint(&self, entrypoint: &'static str) {
        self.writer().entrypoint = Some(entrypoint);
    }

    /// Appends one entry (`kind` is its `type`, `fields` the rest) with the session id, a
    /// new uuid, the time and the working directory, and has it synced ([`syncer`]).
    ///
    /// # Errors
    ///
    /// When writing or syncing fails (the caller reports it; the run goes on).
    pub(crate) fn append_entry(&self, kind: &str, fields: Value) -> anyhow::Result<()> {
        let mut writer = self.writer();
        writer.write_entry(kind, fields)?;
        writer.sync()
    }
}

impl Writer {
    /// Writes one entry without syncing (the caller syncs once for a batch).
    fn write_entry(&mut self, kind: &str, fields: Value) -> anyhow::Result<()> {
        let mut entry = json!({
            "type": kind,
            "session_id": self.session_id,
            "uuid": uuid::Uuid::new_v4().to_string(),
            "timestamp": timestamp(SystemTime::now()),
            "cwd": self.cwd,
        });
        if let Some(entrypoint) = self.entrypoint {
            entry["entrypoint"] = json!(entrypoint);
        }
        if let (Some(entry), Value::Object(fields)) = (entry.as_object_mut(), fields) {
            entry.extend(fields);
        }
        let mut line = serde_json::to_vec(&entry)?;
        line.push(b'\n');
        (&self.file.file)
            .write_all(&line)
            .with_context(|| format!("writing {}", self.path.display()))
    }

    /// Has what was written synced: by the background syncer, or here when there is none.
    ///
    /// # Errors
    ///
    /// A sync that failed since the last call (the background's) or now (inline).
    fn sync(&mut self) -> anyhow::Result<()> {
        self.file
            .sync()
            .with_context(|| format!("syncing {}", self.path.display()))
    }
}

impl Drop for Writer {
    /// The last sync inline: what this session wrote is on disk when it closes.
    fn drop(&mut self) {
        let _ = self.file.file.sync_data();
    }
}

/// Durability off a turn's critical path. Each entry is written at once (a process that
/// crashes loses nothing: the kernel has it); its `fdatasync` (the machine crashing) is
/// asked of one background thread, which serves every transcript of the process and
/// coalesces the requests that pile up while it syncs. A sync that fails is reported by
/// the next append; the last one is made inline when the transcript closes. Without the
/// thread (it could not be started) each append syncs inline, as before.
///
/// Measured: an `fdatasync` of a transcript costs 0.1 to 0.5 ms here (KVM guest, ext4),
/// paid two to four times before each request of a turn (docs/benchmarks.md, issue 47).
mod syncer {
    use std::fs::File;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{Receiver, Sender, channel};
    use std::sync::{Arc, Mutex, OnceLock, PoisonError};

    /// A transcript's file, with what its background syncs left.
    #[derive(Debug)]
    pub(super) struct Durable {
        pub(super) file: File,
        /// A request is queued and not yet taken by the thread.
        queued: AtomicBool,
        /// The error of a background sync no append has reported yet.
        failed: Mutex<Option<std::io::Error>>,
    }

    impl Durable {
        pub(super) fn new(file: File) -> Self {
            Self {
                file,
                queued: AtomicBool::new(false),
                failed: Mutex::new(None),
            }
        }

        /// Asks for a sync (inline when there is no thread); returns a background sync's
        /// error that nothing reported yet.
        pub(super) fn sync(self: &Arc<Self>) -> std::io::Result<()> {
            let failed = self
                .failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(error) = failed {
                return Err(error);
            }
            match queue() {
                Some(queue) => {
                    if !self.queued.swap(true, Ordering::AcqRel)
                        && queue.send(Arc::clone(self)).is_err()
                    {
                        self.queued.store(false, Ordering::Release);
                        return self.file.sync_data();
                    }
                    Ok(())
                }
                None => self.file.sync_data(),
            }
        }
    }

    /// The thread's queue, started at the first request; `None` when it cannot start.
    fn queue() -> Option<&'static Sender<Arc<Durable>>> {
        static QUEUE: OnceLock<Option<Sender<Arc<Durable>>>> = OnceLock::new();
        QUEUE
            .get_or_init(|| {
                let (send, receive) = channel();
                std::thread::Builder::new()
                    .name("transcript-sync".into())
                    .spawn(move || serve(&receive))
                    .ok()
                    .map(|_| send)
            })
            .as_ref()
    }

    /// Syncs what is asked until every sender is gone (never, in practice: the queue is a
    /// static; the thread ends with the process).
    fn serve(receive: &Receiver<Arc<Durable>>) {
        while let Ok(first) = receive.recv() {
            let mut batch = vec![first];
            batch.extend(receive.try_iter());
            for durable in batch {
                // Cleared before syncing: a write after this point asks again.
                durable.queued.store(false, Ordering::Release);
                if let Err(error) = durable.file.sync_data() {
                    *durable
                        .failed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(error);
                }
            }
        }
    }
}

impl Transcript {
    /// Appends a whole history at once (a transcript copied from another tool), syncing
    /// once at the end.
    ///
    /// # Errors
    ///
    /// When writing or syncing fails (the caller reports it; the run goes on).
    pub fn append_history(&self, messages: &[MessageParam]) -> anyhow::Result<()> {
        let mut writer = self.writer();
        for message in messages {
            writer.write_entry(role_name(message.role), json!({ "message": message }))?;
        }
        writer.sync()
    }

    /// Appends one message entry (`message` as the API shapes it) and fsyncs.
    ///
    /// # Errors
    ///
    /// When writing or syncing fails (the caller reports it; the run goes on).
    pub fn append(&self, role: Role, message: &Value) -> anyhow::Result<()> {
        self.append_entry(role_name(role), json!({ "message": message }))
    }

    /// Appends a history message.
    ///
    /// # Errors
    ///
    /// When writing or syncing fails (the caller reports it; the run goes on).
    pub fn append_param(&self, message: &MessageParam) -> anyhow::Result<()> {
        self.append(message.role, &serde_json::to_value(message)?)
    }

    /// Persists one change of the loop's history (the only way a run writes messages).
    ///
    /// # Errors
    ///
    /// When writing or syncing fails (the caller reports it; the run goes on).
    pub fn record(&self, change: &HistoryEvent) -> anyhow::Result<()> {
        self.record_priced(change, None)
    }

    /// [`Transcript::record`], a response's entry carrying `cost` (USD, as the session
    /// priced it: the settings' prices first) in `costUSD`, the field Claude Code's
    /// transcripts once carried and readers such as the session list take over pricing the
    /// usage again with the built-in table.
    ///
    /// # Errors
    ///
    /// When writing or syncing fails (the caller reports it; the run goes on).
    pub fn record_priced(&self, change: &HistoryEvent, cost: Option<f64>) -> anyhow::Result<()> {
        match change {
            HistoryEvent::Response(message) => {
                let mut fields = json!({ "message": message });
                if let Some(cost) = cost {
                    fields[COST_FIELD] = json!(cost);
                }
                self.append_entry("assistant", fields)
            }
            HistoryEvent::Appended(message) => self.append_param(message),
            HistoryEvent::Rewritten(results) => self.append_entry(
                "system",
                json!({
                    "subtype": REWRITTEN_SUBTYPE,
                    "results": results
                        .iter()
                        .map(|(id, content)| json!({"tool_use_id": id, "content": content}))
                        .collect::<Vec<_>>(),
                }),
            ),
            HistoryEvent::Compacted {
                trigger,
                pre_tokens,
                messages,
            } => self.append_compaction(trigger.as_str(), *pre_tokens, messages),
            HistoryEvent::Rewound { turn, messages } => {
                let mut writer = self.writer();
                writer.write_entry(
                    "system",
                    json!({
                        "subtype": REWOUND_SUBTYPE,
                        "turn": turn,
                        HISTORY_MESSAGES: messages.len(),
                    }),
                )?;
                for message in messages {
                    writer.write_entry(role_name(message.role), json!({ "message": message }))?;
                }
                writer.sync()
            }
        }
    }

    /// A conversation rewind as a pointer (ours): a `system` entry with subtype
    /// [`REWOUND_SUBTYPE`], `turn` (the user turn whose end the history is back at) and
    /// `to_offset`, the byte offset in this file (the start of an entry) whose history the
    /// session goes back to; nothing is copied, so a rewind costs one line however long the
    /// history. A loader takes the history as the file had it at that offset.
    ///
    /// # Errors
    ///
    /// When writing or syncing fails.
    pub fn append_rewind(&self, turn: u64, to_offset: usize) -> anyhow::Result<()> {
        self.append_entry(
            "system",
            json!({"subtype": REWOUND_SUBTYPE, "turn": turn, REWIND_OFFSET: to_offset}),
        )
    }

    /// A compaction, in Claude Code's shapes: a `system` entry with subtype
    /// `compact_boundary` and `compact_metadata` (`trigger`, `pre_tokens`), then the
    /// compacted history, its first (summary) message marked `isCompactSummary`. A loader
    /// starts the history again at the last boundary.
    ///
    /// # Errors
    ///
    /// When writing or syncing fails (the caller reports it; the run goes on).
    pub fn append_compaction(
        &self,
        trigger: &str,
        pre_tokens: u64,
        messages: &[MessageParam],
    ) -> anyhow::Result<()> {
        let mut writer = self.writer();
        writer.write_entry(
            "system",
            json!({
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "compact_metadata": {"trigger": trigger, "pre_tokens": pre_tokens},
                // Ours: how many message entries follow, so a compaction cut short by a
                // crash is recognised and the history before it kept.
                HISTORY_MESSAGES: messages.len(),
            }),
        )?;
        for (index, message) in messages.iter().enumerate() {
            let mut fields = json!({ "message": message });
            if index == 0 {
                fields["isCompactSummary"] = Value::Bool(true);
            }
            writer.write_entry(role_name(message.role), fields)?;
        }
        writer.sync()
    }

    /// The user context (environment facts, memory files) as the session sends it, so a
    /// resumed session sends the same instead of gathering it again.
    ///
    /// # Errors
    ///
    /// When writing or syncing fails (the caller reports it; the run goes on).
    pub fn append_user_context(&self, text: &str) -> anyhow::Result<()> {
        self.append_entry(
            "system",
            json!({ "subtype": USER_CONTEXT_SUBTYPE, "content": text }),
        )
    }
}

/// The entry `type` of a message of `role`.
fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// The field of an assistant entry holding what its response cost in USD (see
/// [`Transcript::record_priced`]).
pub const COST_FIELD: &str = "costUSD";

/// The `subtype` of the `system` entry giving earlier tool results new content (context
/// management's L1 and L2; ours, Claude Code's loaders skip it).
pub const REWRITTEN_SUBTYPE: &str = "agent_results_rewritten";

/// The `subtype` of the `system` entry that starts the history again after a rewind (ours):
/// `turn` (the user turn whose end the history is back at) and either `to_offset` (the
/// history is the file's at that byte offset: [`Transcript::append_rewind`]) or, as
/// earlier versions wrote it, `history_messages`, the count of message entries that follow
/// and are the whole history from then on.
pub const REWOUND_SUBTYPE: &str = "agent_history_rewound";

/// The field of a rewind entry naming the byte offset whose history it goes back to.
const REWIND_OFFSET: &str = "to_offset";

/// Whether a `system` entry's `subtype` starts the history again with the messages that
/// follow it (a compaction or a rewind).
fn is_boundary(subtype: Option<&str>) -> bool {
    matches!(subtype, Some("compact_boundary" | REWOUND_SUBTYPE))
}

/// The largest transcript loaded (a bigger file is refused, naming its size): 256 MiB.
pub(crate) const MAX_TRANSCRIPT_BYTES: u64 = 256 << 20;

/// The field of our `compact_boundary` entries counting the message entries that follow.
const HISTORY_MESSAGES: &str = "history_messages";

/// The `subtype` of the `system` entry holding the user context (ours; Claude Code's loaders
/// skip unknown entries).
pub const USER_CONTEXT_SUBTYPE: &str = "agent_user_context";

/// Cuts a compaction a crash left incomplete (fewer message entries after its boundary than
/// it announced) off the end of `path`, so entries appended now follow the history a load
/// gives (the one before that compaction).
///
/// # Errors
///
/// When the file exists but cannot be read or cut.
fn drop_incomplete_compaction(path: &Path) -> std::io::Result<()> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    let mut start = 0;
    let mut boundary: Option<(usize, usize)> = None;
    let mut after = 0;
    for line in bytes.split_inclusive(|byte| *byte == b'\n') {
        if let Ok(entry) = serde_json::from_slice::<Value>(line) {
            if is_boundary(entry.get("subtype").and_then(Value::as_str)) {
                let announced = entry
                    .get(HISTORY_MESSAGES)
                    .and_then(Value::as_u64)
                    .and_then(|count| usize::try_from(count).ok())
                    .unwrap_or(0);
                boundary = Some((start, announced));
                after = 0;
            } else if matches!(
                entry.get("type").and_then(Value::as_str),
                Some("user" | "assistant")
            ) {
                after += 1;
            }
        }
        start += line.len();
    }
    match boundary {
        Some((at, announced)) if after < announced => OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(at as u64),
        _ => Ok(()),
    }
}

/// A loaded history and what was repaired on the way.
#[derive(Debug)]
pub struct Loaded {
    /// The history, valid for a request.
    pub messages: Vec<MessageParam>,
    /// Repairs made (merged entries, interrupted tool results, dropped orphans).
    pub repairs: Vec<Repair>,
    /// Damaged lines skipped (1-based): not JSON, or a message that does not parse.
    pub skipped: Vec<usize>,
    /// The user context the session sent, when the file holds it (ours).
    pub user_context: Option<String>,
    /// The time of the last message entry (about when the session's last request was
    /// answered), when it has one.
    pub last_activity: Option<SystemTime>,
    /// The user turns the file has begun (its `agent_turn` entries; 0 for a transcript
    /// written before they were, or by Claude Code).
    pub turns: u64,
}

/// Loads a transcript (ours or Claude Code's): user and assistant entries in order, starting
/// again after the last `compact_boundary` entry (the compacted history follows it), other
/// entries skipped; then normalized, so a dangling tool_use at the end gets an "interrupted"
/// result. A damaged line is skipped (listed in [`Loaded::skipped`]); a last line cut by a
/// crash is dropped silently.
///
/// # Errors
///
/// Naming the file when no line is a JSON entry (naming the first line), or when the file
/// holds no user or assistant message at all (it is not a transcript).
pub fn load(path: &Path) -> anyhow::Result<Loaded> {
    let metadata =
        std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !metadata.is_file() {
        bail!(
            "{}: not a regular file (a transcript is a .jsonl file)",
            path.display()
        );
    }
    if metadata.len() > MAX_TRANSCRIPT_BYTES {
        bail!(
            "{}: {} bytes, more than a transcript can be ({MAX_TRANSCRIPT_BYTES}); start a new session",
            path.display(),
            metadata.len()
        );
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let (loaded, emptied) = parse(path, &bytes)?;
    if loaded.messages.is_empty() && !emptied {
        bail!(
            "{}: no user or assistant messages: not a transcript",
            path.display()
        );
    }
    Ok(loaded)
}

/// The history of a transcript's bytes (all of a file, or the part of it written before some
/// point: a rewind loads the history as it was there), and whether a rewind left it empty on
/// purpose. `path` names the file in errors.
///
/// # Errors
///
/// When no line is a JSON entry (naming the first line).
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> anyhow::Result<(Loaded, bool)> {
    // A crash can leave the last line half-written (no newline after it, perhaps in the
    // middle of a character): that message is lost, the rest stands.
    let cut_last_line = !bytes.is_empty() && !bytes.ends_with(b"\n");
    let line_count = bytes.split(|byte| *byte == b'\n').count() - usize::from(!cut_last_line);
    let mut replay = Replay {
        rewind_targets: rewind_targets(bytes),
        ..Replay::default()
    };
    let mut offset = 0;
    for (number, line) in bytes.split(|byte| *byte == b'\n').enumerate() {
        let at = offset;
        offset += line.len() + 1;
        if replay.rewind_targets.contains_key(&at) {
            let settled = replay.settled();
            if let Some(target) = replay.rewind_targets.get_mut(&at) {
                target.history = Some(settled);
            }
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(entry) => replay.entry(number + 1, &entry),
            Err(_) if cut_last_line && number + 1 == line_count => break,
            Err(_) => replay.skipped.push(number + 1),
        }
    }
    replay.finish(path)
}

/// The offsets the file's rewind entries go back to, each with the line (from 1) of the
/// last entry going back there (its history is dropped after it) and its history once read.
fn rewind_targets(bytes: &[u8]) -> std::collections::HashMap<usize, RewindTarget> {
    let needle = REWOUND_SUBTYPE.as_bytes();
    let mut targets = std::collections::HashMap::new();
    for (number, line) in bytes.split(|byte| *byte == b'\n').enumerate() {
        if !line.windows(needle.len()).any(|window| window == needle) {
            continue;
        }
        let Some(offset) = serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|entry| entry.get(REWIND_OFFSET)?.as_u64())
            .and_then(|offset| usize::try_from(offset).ok())
        else {
            continue;
        };
        let target = targets.entry(offset).or_insert(RewindTarget {
            last_line: 0,
            history: None,
        });
        target.last_line = number + 1;
    }
    targets
}

/// A point of the file a rewind entry goes back to.
struct RewindTarget {
    /// The line of the last entry going back there.
    last_line: usize,
    /// The history there, once the replay passed it.
    history: Option<Vec<MessageParam>>,
}

/// A transcript read entry by entry: each entry that changes the history is decoded into the
/// [`loop_core::HistoryEvent`] that wrote it and applied as the session applies it (one
/// replay: [`loop_core::HistoryEvent::apply`]); the rest is what the file says beside.
#[derive(Default)]
struct Replay {
    history: Vec<MessageParam>,
    /// The history before the last boundary, in case nothing was written after it.
    before_boundary: Vec<MessageParam>,
    user_context: Option<String>,
    last_activity: Option<SystemTime>,
    /// Lines that are not entries, or entries that do not read (1-based).
    skipped: Vec<usize>,
    entries: usize,
    /// Message entries the last boundary announced (ours; 0 for Claude Code's), and those
    /// seen after it (counted as `drop_incomplete_compaction` counts them: every user or
    /// assistant entry, whatever its content).
    awaited: usize,
    after_boundary: usize,
    /// The last boundary was a rewind to an empty history.
    emptied: bool,
    turns: u64,
    /// The offsets rewind entries go back to, with the history there once it was read.
    rewind_targets: std::collections::HashMap<usize, RewindTarget>,
}

impl Replay {
    /// Takes the entry of line `number`.
    fn entry(&mut self, number: usize, entry: &Value) {
        self.entries += 1;
        let kind = entry
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match (kind, entry.get("subtype").and_then(Value::as_str)) {
            ("system", subtype) => self.system(number, subtype, entry),
            ("user" | "assistant", _) => {
                self.after_boundary += 1;
                self.message(number, kind, entry);
            }
            _ => {}
        }
    }

    /// A `system` entry: a boundary (compaction, rewind), rewritten tool results, a turn's
    /// start, the user context; others are not the history's.
    fn system(&mut self, number: usize, subtype: Option<&str>, entry: &Value) {
        match subtype {
            Some(REWOUND_SUBTYPE) if entry.get(REWIND_OFFSET).is_some() => {
                // Its history, taken by the last entry going back there (no copy kept after).
                let offset = entry
                    .get(REWIND_OFFSET)
                    .and_then(Value::as_u64)
                    .and_then(|offset| usize::try_from(offset).ok());
                let target = offset.and_then(|offset| {
                    let last = self.rewind_targets.get(&offset)?.last_line == number;
                    if last {
                        self.rewind_targets.remove(&offset)?.history
                    } else {
                        self.rewind_targets.get(&offset)?.history.clone()
                    }
                });
                // An offset that is no entry's start before this one: a damaged entry.
                let Some(messages) = target else {
                    self.skipped.push(number);
                    return;
                };
                self.before_boundary = std::mem::replace(&mut self.history, messages);
                self.after_boundary = 0;
                self.awaited = 0;
                self.emptied = self.history.is_empty();
            }
            subtype if is_boundary(subtype) => {
                self.before_boundary = self.history.clone();
                self.after_boundary = 0;
                self.emptied = subtype == Some(REWOUND_SUBTYPE);
                // The messages of the history after it are the entries that follow.
                let event = if self.emptied {
                    HistoryEvent::Rewound {
                        turn: 0,
                        messages: Vec::new(),
                    }
                } else {
                    HistoryEvent::Compacted {
                        trigger: loop_core::CompactTrigger::Auto,
                        pre_tokens: 0,
                        messages: Vec::new(),
                    }
                };
                event.apply(&mut self.history);
                self.awaited = entry
                    .get(HISTORY_MESSAGES)
                    .and_then(Value::as_u64)
                    .and_then(|count| usize::try_from(count).ok())
                    .unwrap_or(0);
            }
            Some(REWRITTEN_SUBTYPE) => match rewritten_results(entry) {
                Some(results) => HistoryEvent::Rewritten(results).apply(&mut self.history),
                None => self.skipped.push(number),
            },
            Some(TURN_SUBTYPE) => self.turns += 1,
            Some(USER_CONTEXT_SUBTYPE) => {
                self.user_context = entry
                    .get("content")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            _ => {}
        }
    }

    /// A user or assistant entry: its message, unless it has no content.
    fn message(&mut self, number: usize, kind: &str, entry: &Value) {
        let Some(message) = entry.get("message") else {
            return;
        };
        let param = json!({"role": kind, "content": message.get("content").cloned().unwrap_or(Value::Null)});
        let Ok(param) = serde_json::from_value::<MessageParam>(param) else {
            self.skipped.push(number);
            return;
        };
        if param.content.is_empty() {
            return;
        }
        if let Some(at) = entry
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_timestamp)
        {
            self.last_activity = Some(at);
        }
        HistoryEvent::Appended(param).apply(&mut self.history);
    }

    /// The history as the file leaves it so far, as [`Replay::finish`] would give it.
    fn settled(&self) -> Vec<MessageParam> {
        let history =
            if self.after_boundary < self.awaited || (self.history.is_empty() && !self.emptied) {
                self.before_boundary.clone()
            } else {
                self.history.clone()
            };
        context::normalize_messages(history, &mut Vec::new())
    }

    /// The history the file leaves, and whether a rewind emptied it.
    fn finish(mut self, path: &Path) -> anyhow::Result<(Loaded, bool)> {
        if self.entries == 0
            && let Some(first) = self.skipped.first()
        {
            bail!(
                "{}:{first}: not a JSON entry: not a transcript",
                path.display()
            );
        }
        // A boundary cut short (a crash while it was written), or a compaction with nothing
        // after it: the history before it stands. A rewind to an empty history is kept.
        if self.after_boundary < self.awaited || (self.history.is_empty() && !self.emptied) {
            self.history = self.before_boundary;
            self.emptied = false;
        }
        let mut repairs = Vec::new();
        let messages = context::normalize_messages(self.history, &mut repairs);
        let loaded = Loaded {
            messages,
            repairs,
            skipped: self.skipped,
            user_context: self.user_context,
            last_activity: self.last_activity,
            turns: self.turns,
        };
        Ok((loaded, self.emptied))
    }
}

/// The results a `rewritten` entry holds, `None` when it does not read.
fn rewritten_results(
    entry: &Value,
) -> Option<Vec<(protocol::ToolUseId, protocol::ToolResultContent)>> {
    entry
        .get("results")
        .and_then(Value::as_array)
        .map(|results| {
            results
                .iter()
                .filter_map(|result| {
                    Some((
                        serde_json::from_value(result.get("tool_use_id")?.clone()).ok()?,
                        serde_json::from_value(result.get("content")?.clone()).ok()?,
                    ))
                })
                .collect()
        })
}

/// The warning for damaged lines skipped while loading `path`: the file and every line.
pub fn skipped_warning(path: &Path, lines: &[usize]) -> String {
    let lines: Vec<String> = lines.iter().map(ToString::to_string).collect();
    format!(
        "{}: skipped {} damaged line{} ({}): the entries there are not JSON or not a message; the rest of the session is resumed",
        path.display(),
        lines.len(),
        if lines.len() == 1 { "" } else { "s" },
        lines.join(", ")
    )
}

/// The session files of `dir` (`*.jsonl`, regular files only).
pub fn session_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        // A regular file, not through a link: a FIFO would block, a link to /dev/zero never
        // end, and a link may lead to another project's session.
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|entry| entry.path())
        .collect()
}

/// `YYYY-MM-DD HH:MM` of an RFC 3339 UTC time (the form every list of sessions and turns
/// shows).
/// Anything else (a damaged or hostile entry) shows as `?`.
pub fn short_time(time: &str) -> String {
    match parse_timestamp(time) {
        Some(_) => time.get(..16).unwrap_or("?").replace('T', " "),
        None => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use protocol::ContentBlock;

    use super::*;

    /// Regression: appending after a crash left a half-written line glued the new entry to
    /// it, and every later load failed.
    #[test]
    fn project_folders_do_not_collide_and_fit_a_file_name() {
        let one = project_dir(Path::new("/a/b-c")).unwrap();
        let two = project_dir(Path::new("/a/b/c")).unwrap();
        assert_ne!(one, two);
        let one_name = one.file_name().unwrap().to_string_lossy().into_owned();
        assert!(one_name.starts_with("-a-b-c-"), "{one_name}");
        let long = format!("/{}", "é".repeat(200));
        let name = project_dir(Path::new(&long)).unwrap();
        let name = name.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.len() <= 197, "{} bytes", name.len());
        assert_eq!(
            project_dir(Path::new(&long))
                .ok()
                .map(|p| p.file_name().map(ToOwned::to_owned)),
            Some(Some(name.into()))
        );
    }

    #[test]
    fn a_half_written_last_line_is_dropped_before_appending() {
        let dir = std::env::temp_dir().join(format!("agent-transcript-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let whole = r#"{"type":"user","message":{"role":"user","content":"first"}}"#;
        std::fs::write(&path, format!("{whole}\n{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"half")).unwrap();
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        transcript
            .append_param(&MessageParam::user_text("second"))
            .unwrap();
        let loaded = load(&path).unwrap();
        let texts: Vec<String> = loaded.messages[0]
            .content
            .iter()
            .filter_map(|b| b.as_text().map(str::to_owned))
            .collect();
        assert_eq!(texts, ["first", "second"]);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
        // A second writer of the same session is refused while the first holds it.
        let second = Transcript::open(path.clone(), "s".into(), &dir);
        let error = second
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(error.contains("in use by another agent"), "{error}");
        assert!(error.contains(&std::process::id().to_string()), "{error}");
        let lock_file = path.with_extension("jsonl.lock");
        assert!(lock_file.exists());
        drop(transcript);
        // Let go: no lock file is left beside the session.
        assert!(!lock_file.exists());

        // A whole entry that only lacks its newline is kept: the newline is added.
        let answer = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"answer"}]}}"#;
        std::fs::write(&path, format!("{whole}\n{answer}")).unwrap();
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        transcript
            .append_param(&MessageParam::user_text("next"))
            .unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.messages.len(), 3, "{:?}", loaded.messages);
        assert_eq!(loaded.messages[1].content[0].as_text(), Some("answer"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_that_are_not_transcripts_are_refused() {
        let dir = std::env::temp_dir().join(format!("agent-not-transcript-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let whole = r#"{"type":"user","message":{"role":"user","content":"first"}}"#;
        for (name, text, message) in [
            ("one.json", "{\"a\":1}\n", "no user or assistant messages"),
            ("text.txt", "just some words\n", "not a JSON entry"),
            (
                "cut.jsonl",
                "just some words",
                "no user or assistant messages",
            ),
            ("empty.jsonl", "", "no user or assistant messages"),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            let error = format!("{:#}", load(&path).unwrap_err());
            assert!(error.contains(message), "{name}: {error}");
        }
        // A whole line that does not parse is skipped and reported, not a crash remnant.
        let path = dir.join("bad-last.jsonl");
        std::fs::write(&path, format!("{whole}\n{{oops\n")).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.skipped, [2]);
        assert_eq!(loaded.messages.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_compaction_restarts_the_history_and_a_lost_summary_keeps_the_old_one() {
        let dir = std::env::temp_dir().join(format!("agent-compacted-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        transcript
            .append_user_context("Working directory: /w")
            .unwrap();
        transcript
            .append_param(&MessageParam::user_text("old question"))
            .unwrap();
        let summary = MessageParam::user_text("<compact-boundary>\nthe summary");
        transcript
            .append_compaction("auto", 1234, std::slice::from_ref(&summary))
            .unwrap();
        drop(transcript);
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.messages, std::slice::from_ref(&summary));
        assert_eq!(
            loaded.user_context.as_deref(),
            Some("Working directory: /w")
        );
        // A crash right after the boundary entry: the history before it still loads.
        let text = std::fs::read_to_string(&path).unwrap();
        let cut: Vec<&str> = text.lines().take(3).collect();
        std::fs::write(&path, cut.join("\n") + "\n").unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.messages, [MessageParam::user_text("old question")]);
        // A compaction cut after the first of its two messages: a load keeps the history
        // before it, and a writer cuts it off before appending.
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        let kept = MessageParam::user_text("kept tail");
        transcript
            .append_compaction("auto", 99, &[summary.clone(), kept])
            .unwrap();
        drop(transcript);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        std::fs::write(&path, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
        assert_eq!(
            load(&path).unwrap().messages,
            [MessageParam::user_text("old question")]
        );
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        transcript
            .append_param(&MessageParam::user_text("new question"))
            .unwrap();
        drop(transcript);
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.messages.len(), 1, "{:?}", loaded.messages);
        let texts: Vec<&str> = loaded.messages[0]
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        assert_eq!(texts, ["old question", "new question"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_bytes_cost_only_their_line_and_latest_takes_regular_files_only() {
        let dir = std::env::temp_dir().join(format!("agent-bytes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let whole = r#"{"type":"user","message":{"role":"user","content":"first"}}"#;
        let path = dir.join("s.jsonl");
        // Invalid UTF-8 in the middle, and a last line cut inside `é`.
        let mut bytes = format!("{whole}\n").into_bytes();
        bytes.extend_from_slice(b"{\"type\":\"user\",\"message\":{\"content\":\"\xff\"}}\n");
        bytes.extend_from_slice(format!("{whole}\n").as_bytes());
        bytes.extend_from_slice(b"{\"type\":\"user\",\"message\":{\"content\":\"caf\xc3");
        std::fs::write(&path, &bytes).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.skipped, [2]);
        assert_eq!(loaded.messages.len(), 1);
        // A FIFO and a link are not sessions to continue.
        nix::unistd::mkfifo(&dir.join("fifo.jsonl"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("zero.jsonl")).unwrap();
        assert_eq!(session_files(&dir), std::slice::from_ref(&path));
        assert!(
            load(&dir.join("fifo.jsonl"))
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_764_474_712_345);
        assert_eq!(timestamp(t), "2025-11-30T03:51:52.345Z");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        for millis in [0, 1_764_474_712_345, 951_782_400_000, 4_102_444_799_999] {
            let t = UNIX_EPOCH + Duration::from_millis(millis);
            assert_eq!(parse_timestamp(&timestamp(t)), Some(t), "{}", timestamp(t));
        }
        assert_eq!(
            parse_timestamp("2026-01-21T06:19:38Z"),
            Some(UNIX_EPOCH + Duration::from_secs(1_768_976_378))
        );
        for bad in [
            "",
            "2026-01-21",
            "2026-13-01T00:00:00Z",
            "2026-01-21T06:19:38",
            "x-y-zT1:2:3Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }
}
