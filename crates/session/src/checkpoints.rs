//! Checkpoints and rewind: what each user turn changed in the workspace, kept so a session
//! can go back to the end of any earlier turn (its files, its conversation, or both), and
//! undo that too.
//!
//! Everything is in the session's transcript, in the order it happened (docs/output-format.md
//! shows each entry):
//!
//! - `agent_turn`: a user turn begins (`turn`, counted from 1 over the whole session).
//! - `agent_checkpoint`: a file's content just before its first change in a turn (`path`,
//!   `before`: `{"sha256","bytes"}`, `null` when there was no file, or `{"bytes","saved":
//!   false}` for a file over [`MAX_SAVED_BYTES`]). The content is in
//!   `<session>/checkpoints/<sha256>`, stored once whatever the number of turns naming it.
//! - `agent_file_written`: what a change left (`path`, `sha256` or `"absent": true`), so a
//!   rewind knows a file changed since by someone else.
//! - `agent_rewind`: a rewind begins (`to_turn`, `code`, `conversation`, `undo`); the
//!   checkpoints of the files it changes follow it, then, for the conversation, an
//!   `agent_history_rewound` entry pointing at the point of the file whose history it went
//!   back to ([`Transcript::append_rewind`]).
//!
//! The state at any point of the file is thus known: a file's content there is the first
//! checkpoint of it written after that point (it was unchanged until then), and the
//! conversation is the history loaded from the file up to that point. "Turn N" is the point
//! where the next turn (or rewind) began; undoing a rewind goes back to the point where it
//! began. What commands and MCP servers change is found by the workspace snapshots around
//! each turn ([`crate::snapshots`]) and recorded the same way ([`record_changes`]).

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use anyhow::{Context as _, bail};
use protocol::MessageParam;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::transcript::{self, TURN_SUBTYPE, Transcript};

/// The largest file whose previous content is kept: 10 MiB. A bigger file is named in the
/// rewind list as not saved, and a rewind leaves it as it is.
pub const MAX_SAVED_BYTES: u64 = 10 << 20;

/// `subtype` of a file's content before its first change in a turn (or in a rewind).
pub const CHECKPOINT_SUBTYPE: &str = "agent_checkpoint";
/// `subtype` of what a change left in a file.
pub const WRITTEN_SUBTYPE: &str = "agent_file_written";
/// `subtype` of the entry that begins a rewind.
pub const REWIND_SUBTYPE: &str = "agent_rewind";

/// The folder of a session's saved contents: `<session>/checkpoints/` beside its transcript
/// `<session>.jsonl`.
pub fn objects_dir(transcript: &Path) -> PathBuf {
    transcript.with_extension("").join("checkpoints")
}

/// The fields naming `path` in an entry: `"path"` when it is UTF-8, else `"path_base64"`
/// (its bytes in standard base64), so any file name is recorded exactly.
fn path_fields(path: &Path) -> serde_json::Map<String, Value> {
    use base64::Engine as _;
    use std::os::unix::ffi::OsStrExt as _;
    let mut fields = serde_json::Map::new();
    match path.to_str() {
        Some(text) => fields.insert("path".into(), Value::String(text.to_owned())),
        None => fields.insert(
            "path_base64".into(),
            Value::String(
                base64::engine::general_purpose::STANDARD.encode(path.as_os_str().as_bytes()),
            ),
        ),
    };
    fields
}

/// The path an entry names ([`path_fields`]); `None` unless absolute.
fn entry_path(entry: &Value) -> Option<PathBuf> {
    use base64::Engine as _;
    use std::os::unix::ffi::OsStringExt as _;
    let path = match entry.get("path").and_then(Value::as_str) {
        Some(text) => PathBuf::from(text),
        None => {
            let encoded = entry.get("path_base64")?.as_str()?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?;
            PathBuf::from(std::ffi::OsString::from_vec(bytes))
        }
    };
    path.is_absolute().then_some(path)
}

/// An entry of `subtype` naming `path`, with `fields`.
fn file_entry(subtype: &str, path: &Path, fields: Value) -> Value {
    let mut entry = path_fields(path);
    entry.insert("subtype".into(), Value::String(subtype.to_owned()));
    if let Value::Object(fields) = fields {
        entry.extend(fields);
    }
    Value::Object(entry)
}

/// The lowercase hex SHA-256 of `bytes`.
fn digest(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Stores `bytes` as `objects/<sha256>` (once: an object is never rewritten) and returns the
/// digest. The folder is the user's only (0700), the file too (0600); it appears whole
/// (a temporary file renamed into place).
fn store(objects: &Path, bytes: &[u8]) -> std::io::Result<String> {
    let sha = digest(bytes);
    let path = objects.join(&sha);
    if path.is_file() {
        return Ok(sha);
    }
    transcript::private_dir(objects)?;
    let temporary = objects.join(format!(".{sha}.{}.tmp", std::process::id()));
    // A file (or link) left at the name is removed, never written through.
    let _ = fs::remove_file(&temporary);
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, &path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result.map(|()| sha)
}

/// The `before` value of a checkpoint of `content` (`None`: no file), storing what is kept.
fn keep(objects: &Path, content: Option<&[u8]>) -> std::io::Result<Value> {
    Ok(match content {
        None => Value::Null,
        Some(bytes) if bytes.len() as u64 > MAX_SAVED_BYTES => {
            json!({"bytes": bytes.len(), "saved": false})
        }
        Some(bytes) => json!({"sha256": store(objects, bytes)?, "bytes": bytes.len()}),
    })
}

/// The session's record of Write and Edit changes ([`tools::WriteJournal`]): one per
/// session, shared by the session's tools and every subagent's. It writes into the open
/// transcript ([`Journal::attach`]) and keeps a file's content once per user turn
/// ([`Journal::begin_turn`]).
#[derive(Debug, Default)]
pub struct Journal {
    sink: Mutex<Option<(Transcript, PathBuf)>>,
    turn: AtomicU64,
    /// Files kept in this turn.
    kept: Mutex<HashSet<PathBuf>>,
}

impl Journal {
    /// Writes into `transcript` from now on (the session's file, opened), keeping contents
    /// beside it.
    pub fn attach(&self, transcript: Transcript) {
        let objects = objects_dir(&transcript.path());
        *self.sink.lock().unwrap_or_else(PoisonError::into_inner) = Some((transcript, objects));
    }

    /// Stops writing (the session was left for a new one: `/clear`).
    pub fn detach(&self) {
        *self.sink.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// User turn `turn` begins: the next change of any file keeps its content again.
    pub fn begin_turn(&self, turn: u64) {
        self.turn.store(turn, Ordering::Relaxed);
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn sink(&self) -> Option<(Transcript, PathBuf)> {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl tools::WriteJournal for Journal {
    fn before_write(&self, path: &Path, previous: Option<&[u8]>) -> Result<(), String> {
        if in_worktree(path) {
            return Ok(());
        }
        // Held until the entry is written: two changes of one file at once keep one.
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.contains(path) {
            return Ok(());
        }
        let Some((transcript, objects)) = self.sink() else {
            return Err("the session's transcript is not open".into());
        };
        let before = keep(&objects, previous).map_err(|error| error.to_string())?;
        transcript
            .append_entry(
                "system",
                file_entry(
                    CHECKPOINT_SUBTYPE,
                    path,
                    json!({"turn": self.turn.load(Ordering::Relaxed), "before": before}),
                ),
            )
            .map_err(|error| format!("{error:#}"))?;
        kept.insert(path.to_path_buf());
        Ok(())
    }

    fn after_write(&self, path: &Path, written: &[u8]) {
        if in_worktree(path) {
            return;
        }
        if let Some((transcript, _)) = self.sink()
            && let Err(error) = transcript.append_entry(
                "system",
                file_entry(WRITTEN_SUBTYPE, path, json!({"sha256": digest(written)})),
            )
        {
            tracing::warn!("recording a change of {}: {error:#}", path.display());
        }
    }
}

/// Records what a turn's tools changed, as its workspace snapshots found it
/// ([`crate::snapshots`]): for each file, its content before the turn (unless Write or Edit
/// already kept it in this turn: theirs came first) and what the turn left. A file not kept
/// by the snapshots is named as not saved, so the rewind list shows it and a rewind leaves it.
///
/// # Errors
///
/// When the transcript cannot be written, or a content cannot be stored.
pub fn record_changes(
    transcript: &Transcript,
    journal: &Journal,
    turn: u64,
    changes: &crate::snapshots::TurnChanges,
) -> anyhow::Result<()> {
    let objects = objects_dir(&transcript.path());
    let kept = journal
        .kept
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for crate::snapshots::ChangedFile {
        path,
        before,
        after,
    } in &changes.files
    {
        if in_worktree(path) {
            continue;
        }
        if !kept.contains(path) {
            let before = keep(&objects, before.as_deref())
                .with_context(|| format!("keeping {}", path.display()))?;
            transcript.append_entry(
                "system",
                file_entry(
                    CHECKPOINT_SUBTYPE,
                    path,
                    json!({"turn": turn, "before": before, "by": "snapshot"}),
                ),
            )?;
        }
        let written = match after {
            Some(bytes) => json!({"sha256": digest(bytes)}),
            None => json!({"absent": true}),
        };
        transcript.append_entry("system", file_entry(WRITTEN_SUBTYPE, path, written))?;
    }
    for (path, bytes) in &changes.not_kept {
        if kept.contains(path) || in_worktree(path) {
            continue;
        }
        transcript.append_entry(
            "system",
            file_entry(
                CHECKPOINT_SUBTYPE,
                path,
                json!({"turn": turn, "before": {"bytes": bytes, "saved": false}, "by": "snapshot"}),
            ),
        )?;
    }
    Ok(())
}

/// Whether `path` is in a worktree under `.claude/worktrees/` ([`crate::worktree`]): its
/// changes are the worktree's branch's, kept or removed with it, and a rewind of the
/// session never writes there.
fn in_worktree(path: &Path) -> bool {
    let parts: Vec<_> = path.components().map(|part| part.as_os_str()).collect();
    parts
        .windows(2)
        .any(|pair| pair[0] == ".claude" && pair[1] == "worktrees")
}

/// A file's content as a checkpoint knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// There was no file.
    Absent,
    /// Kept, under this digest.
    Saved(String),
    /// Over [`MAX_SAVED_BYTES`] (this many bytes): not kept.
    NotSaved(u64),
}

impl Content {
    fn from_before(before: &Value) -> Option<Self> {
        if before.is_null() {
            return Some(Self::Absent);
        }
        if let Some(sha) = before.get("sha256").and_then(Value::as_str) {
            return is_digest(sha).then(|| Self::Saved(sha.to_owned()));
        }
        before
            .get("bytes")
            .and_then(Value::as_u64)
            .map(Self::NotSaved)
    }

    /// Whether `now` (a file's digest now, `None` when there is none) is this content.
    fn is(&self, now: Option<&str>) -> bool {
        match (self, now) {
            (Self::Absent, None) => true,
            (Self::Saved(sha), Some(now)) => sha == now,
            _ => false,
        }
    }
}

/// Whether `text` is a lowercase hex SHA-256 (an object's file name: nothing else is ever
/// joined onto the objects folder).
fn is_digest(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// One user turn of a session, as `/rewind` and `agent rewind` list it.
#[derive(Clone, Debug)]
pub struct Turn {
    /// Its number (from 1).
    pub number: u64,
    /// When it began (the entry's timestamp).
    pub started: String,
    /// Its prompt's text (the first text block of the next user message).
    pub prompt: String,
    /// Files changed in it (by Write and Edit as they ran, then by anything else as its
    /// snapshots found), in order, with what a rewind of it can restore.
    pub files: Vec<(PathBuf, Content)>,
    /// Where it began in the file.
    offset: usize,
}

/// A rewind recorded in a session.
#[derive(Clone, Debug)]
pub struct RewindMark {
    /// The turn it went back to.
    pub to_turn: u64,
    /// Whether it restored files.
    pub code: bool,
    /// Whether it restored the conversation.
    pub conversation: bool,
    /// Whether it undid the rewind before it.
    pub undo: bool,
    /// When.
    pub at: String,
    offset: usize,
}

/// One entry that says something about a file.
#[derive(Clone, Debug)]
enum FileEntry {
    /// Its content before a change.
    Checkpoint(Content),
    /// What a change left (`None`: no file).
    Written(Option<String>),
}

/// A session file read for rewinding: its turns, its rewinds, and every file entry, each at
/// its byte offset.
#[derive(Debug)]
pub struct Timeline {
    path: PathBuf,
    bytes: Vec<u8>,
    /// The user turns, in order.
    pub turns: Vec<Turn>,
    /// The rewinds, in order.
    pub rewinds: Vec<RewindMark>,
    files: Vec<(usize, PathBuf, FileEntry)>,
}

impl Timeline {
    /// Reads the session file `path`.
    ///
    /// # Errors
    ///
    /// When it cannot be read.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let size = fs::symlink_metadata(path)
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        if size > transcript::MAX_TRANSCRIPT_BYTES {
            bail!(
                "{}: {size} bytes, more than a transcript can be ({} bytes)",
                path.display(),
                transcript::MAX_TRANSCRIPT_BYTES
            );
        }
        let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let mut timeline = Self {
            path: path.to_path_buf(),
            bytes: Vec::new(),
            turns: Vec::new(),
            rewinds: Vec::new(),
            files: Vec::new(),
        };
        let mut offset = 0;
        let mut awaiting_prompt = None;
        // The turn whose changes the entries are (none after a rewind began).
        let mut in_turn = None;
        for line in bytes.split_inclusive(|byte| *byte == b'\n') {
            let at = offset;
            offset += line.len();
            if !line.ends_with(b"\n") {
                break; // A line a crash cut: not an entry.
            }
            let Ok(entry) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_owned);
            let number = |key: &str| entry.get(key).and_then(Value::as_u64).unwrap_or(0);
            let flag = |key: &str| entry.get(key).and_then(Value::as_bool).unwrap_or(false);
            match (text("type").as_deref(), text("subtype").as_deref()) {
                (Some("system"), Some(TURN_SUBTYPE)) => {
                    awaiting_prompt = Some(timeline.turns.len());
                    in_turn = Some(timeline.turns.len());
                    timeline.turns.push(Turn {
                        number: number("turn"),
                        started: text("timestamp").unwrap_or_default(),
                        prompt: String::new(),
                        files: Vec::new(),
                        offset: at,
                    });
                }
                (Some("system"), Some(REWIND_SUBTYPE)) => {
                    awaiting_prompt = None;
                    in_turn = None;
                    timeline.rewinds.push(RewindMark {
                        to_turn: number("to_turn"),
                        code: flag("code"),
                        conversation: flag("conversation"),
                        undo: flag("undo"),
                        at: text("timestamp").unwrap_or_default(),
                        offset: at,
                    });
                }
                (Some("system"), Some(CHECKPOINT_SUBTYPE)) => {
                    let (Some(path), Some(content)) = (
                        entry_path(&entry),
                        entry.get("before").and_then(Content::from_before),
                    ) else {
                        continue;
                    };
                    if let Some(turn) = in_turn.and_then(|index| timeline.turns.get_mut(index)) {
                        turn.files.push((path.clone(), content.clone()));
                    }
                    timeline
                        .files
                        .push((at, path, FileEntry::Checkpoint(content)));
                }
                (Some("system"), Some(WRITTEN_SUBTYPE)) => {
                    let Some(path) = entry_path(&entry) else {
                        continue;
                    };
                    let sha = text("sha256").filter(|sha| is_digest(sha));
                    if sha.is_none() && !flag("absent") {
                        continue;
                    }
                    timeline.files.push((at, path, FileEntry::Written(sha)));
                }
                (Some("user"), _) => {
                    if let Some(index) = awaiting_prompt.take() {
                        timeline.turns[index].prompt =
                            crate::sessions::prompt_text(&entry).unwrap_or_default();
                    }
                }
                _ => {}
            }
        }
        timeline.bytes = bytes;
        Ok(timeline)
    }

    /// The point where the session was when turn `turn` ended: where the next turn or rewind
    /// began, else the end of the file. Turn 0 is the point before the first turn.
    ///
    /// # Errors
    ///
    /// When the session has no such turn.
    pub fn end_of_turn(&self, turn: u64) -> anyhow::Result<usize> {
        if turn == 0 {
            return Ok(self.turns.first().map_or(self.bytes.len(), |t| t.offset));
        }
        let Some(found) = self.turns.iter().find(|t| t.number == turn) else {
            bail!(
                "the session has no turn {turn} (its turns: {})",
                match (self.turns.first(), self.turns.last()) {
                    (Some(first), Some(last)) => format!("{} to {}", first.number, last.number),
                    _ => "none recorded".to_owned(),
                }
            );
        };
        let next_turn = self
            .turns
            .iter()
            .map(|t| t.offset)
            .find(|at| *at > found.offset);
        let next_rewind = self
            .rewinds
            .iter()
            .map(|r| r.offset)
            .find(|at| *at > found.offset);
        Ok(match (next_turn, next_rewind) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => self.bytes.len(),
        })
    }

    /// The turn whose end the session was at, at `point`: the last turn begun before it, or
    /// the turn the last rewind before it went back to, whichever came later.
    fn turn_at(&self, point: usize) -> u64 {
        let turn = self
            .turns
            .iter()
            .rev()
            .find(|t| t.offset < point)
            .map(|t| (t.offset, t.number));
        let rewind = self
            .rewinds
            .iter()
            .rev()
            .find(|r| r.offset < point)
            .map(|r| (r.offset, r.to_turn));
        match (turn, rewind) {
            (Some(turn), Some(rewind)) => {
                if turn.0 > rewind.0 {
                    turn.1
                } else {
                    rewind.1
                }
            }
            (Some((_, number)), None) | (None, Some((_, number))) => number,
            (None, None) => 0,
        }
    }

    /// The point where the last rewind began (undoing it goes back there), with it.
    pub fn last_rewind(&self) -> Option<(usize, &RewindMark)> {
        self.rewinds.last().map(|mark| (mark.offset, mark))
    }

    /// The conversation at `point`: the history loaded from the file up to there.
    ///
    /// # Errors
    ///
    /// When that part of the file holds no entries at all.
    pub fn conversation_at(&self, point: usize) -> anyhow::Result<Vec<MessageParam>> {
        let (loaded, _) = transcript::parse(&self.path, &self.bytes[..point])?;
        Ok(loaded.messages)
    }

    /// What restoring the files to `point` would do: for each file changed after it, its
    /// content there, what the session last left in it, and what it holds now.
    pub fn code_plan(&self, point: usize) -> Vec<FilePlan> {
        let mut plans: BTreeMap<&Path, (Content, Option<Content>)> = BTreeMap::new();
        for (at, path, entry) in &self.files {
            if *at >= point
                && let FileEntry::Checkpoint(content) = entry
            {
                plans
                    .entry(path.as_path())
                    .or_insert_with(|| (content.clone(), None));
            }
        }
        // What the session last knew of each file: its last checkpoint or change.
        for (_, path, entry) in &self.files {
            if let Some((_, known)) = plans.get_mut(path.as_path()) {
                *known = Some(match entry {
                    FileEntry::Checkpoint(content) => content.clone(),
                    FileEntry::Written(Some(sha)) => Content::Saved(sha.clone()),
                    FileEntry::Written(None) => Content::Absent,
                });
            }
        }
        plans
            .into_iter()
            .map(|(path, (target, known))| {
                let now = Disk::of(path);
                let changed_outside = match (&known, &now) {
                    (Some(known), Disk::File(sha)) => !known.is(Some(sha)),
                    (Some(known), Disk::Absent) => !known.is(None),
                    (_, _) => true,
                };
                FilePlan {
                    path: path.to_path_buf(),
                    target,
                    changed_outside,
                    now,
                }
            })
            .collect()
    }
}

/// What a path holds now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disk {
    /// Nothing.
    Absent,
    /// A regular file, with its digest.
    File(String),
    /// Something a rewind does not touch: a link, a folder, a device, a file it cannot
    /// read, or a path whose folders are not what they were (a link among them).
    Other(String),
}

impl Disk {
    /// What `path` holds, without following a link at its end or in its folders.
    pub fn of(path: &Path) -> Self {
        if let Err(reason) = real_folders(path) {
            return Self::Other(reason);
        }
        match fs::symlink_metadata(path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Self::Absent,
            Err(error) => Self::Other(error.to_string()),
            Ok(meta) if meta.file_type().is_symlink() => Self::Other("now a link".into()),
            Ok(meta) if !meta.is_file() => Self::Other("not a regular file".into()),
            // Not read: its content could not be kept to undo the rewind, and a huge (or
            // sparse) file would take the memory and the time of the session.
            Ok(meta) if meta.len() > MAX_SAVED_BYTES => Self::Other(format!(
                "{} bytes now, over 10 MiB: its content could not be kept to undo a rewind",
                meta.len()
            )),
            Ok(_) => match read_file(path) {
                Ok(bytes) => Self::File(digest(&bytes)),
                Err(error) => Self::Other(error.to_string()),
            },
        }
    }
}

/// Checks that the folders of `path` are what its name says: the nearest one that exists
/// resolves to itself (no link among them could take a restore elsewhere).
fn real_folders(path: &Path) -> Result<(), String> {
    let mut folder = path.parent();
    while let Some(dir) = folder {
        match fs::symlink_metadata(dir) {
            Ok(_) => {
                return match dir.canonicalize() {
                    Ok(real) if real == dir => Ok(()),
                    Ok(_) => Err(format!("{} is now reached through a link", dir.display())),
                    Err(error) => Err(error.to_string()),
                };
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                folder = dir.parent();
            }
            Err(error) => return Err(error.to_string()),
        }
    }
    Err("no folder".into())
}

/// What a rewind does to one file.
#[derive(Clone, Debug)]
pub struct FilePlan {
    /// The file.
    pub path: PathBuf,
    /// Its content at the point rewound to.
    pub target: Content,
    /// Whether it changed since the session last changed or kept it (the user, a formatter,
    /// a command): overwriting it needs a yes (`--force` headless).
    pub changed_outside: bool,
    /// What it holds now.
    pub now: Disk,
}

impl FilePlan {
    /// Whether the file already is as the point rewound to had it.
    pub fn is_unchanged(&self) -> bool {
        match &self.now {
            Disk::File(sha) => self.target.is(Some(sha)),
            Disk::Absent => self.target.is(None),
            Disk::Other(_) => false,
        }
    }

    /// Why the file cannot be put back, if it cannot.
    fn obstacle(&self) -> Option<String> {
        match (&self.target, &self.now) {
            (Content::NotSaved(bytes), _) if *bytes > MAX_SAVED_BYTES => Some(format!(
                "{bytes} bytes then: over 10 MiB, its content was not saved"
            )),
            (Content::NotSaved(_), _) => Some(
                "its content then was not saved (a file .gitignore hid before, or past a turn's limit)"
                    .to_owned(),
            ),
            (_, Disk::Other(reason)) => Some(reason.clone()),
            _ => None,
        }
    }
}

/// What a rewind restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    /// The files the turns changed (by any tool).
    pub code: bool,
    /// The conversation.
    pub conversation: bool,
}

impl Scope {
    /// Files and conversation.
    pub const BOTH: Self = Self {
        code: true,
        conversation: true,
    };
}

/// What a rewind did.
#[derive(Debug, Default)]
pub struct Report {
    /// Files put back as they were.
    pub restored: Vec<PathBuf>,
    /// Files removed (they did not exist then).
    pub removed: Vec<PathBuf>,
    /// Files left as they are, and why.
    pub left: Vec<(PathBuf, String)>,
    /// The conversation after, when it was rewound.
    pub conversation: Option<Vec<MessageParam>>,
    /// The user turn whose end the conversation is back at (0: before the first), when it
    /// was rewound: with `conversation`, the [`loop_core::HistoryEvent::Rewound`] recorded.
    pub to_turn: u64,
}

impl Report {
    /// The history change the rewind recorded, when it rewound the conversation.
    pub fn history_event(&self) -> Option<loop_core::HistoryEvent> {
        self.conversation
            .as_ref()
            .map(|messages| loop_core::HistoryEvent::Rewound {
                turn: self.to_turn,
                messages: messages.clone(),
            })
    }
}

/// Where a rewind goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The end of this user turn (0: before the first).
    Turn(u64),
    /// Back to before the last rewind.
    UndoLast,
}

/// What to do with files changed since the session last changed them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Put them back too.
    Overwrite,
    /// Leave them as they are (listed in the report); restore the rest.
    Leave,
    /// Rewind nothing (headless without `--force`).
    Cancel,
}

/// Rewinds the session of `transcript` (its file, open: the session is locked) to `target`.
/// `overwrite` is asked once, with the files changed since the session last touched them,
/// what to do with them.
///
/// The rewind is written first (an `agent_rewind` entry), then each file's current content
/// is kept before it is replaced, so the rewind can itself be undone
/// ([`Target::UndoLast`]); for the conversation, a [`loop_core::HistoryEvent::Rewound`] is
/// recorded last.
///
/// # Errors
///
/// When the target does not exist, or the transcript cannot be written (nothing on disk is
/// changed after a failed write).
pub fn rewind(
    transcript: &Transcript,
    target: Target,
    scope: Option<Scope>,
    overwrite: &mut dyn FnMut(&[&FilePlan]) -> Decision,
) -> anyhow::Result<Report> {
    let timeline = Timeline::read(&transcript.path())?;
    let (point, to_turn, undo, scope) = match target {
        Target::Turn(turn) => (
            timeline.end_of_turn(turn)?,
            turn,
            false,
            scope.unwrap_or(Scope::BOTH),
        ),
        Target::UndoLast => {
            let Some((point, mark)) = timeline.last_rewind() else {
                bail!("the session has no rewind to undo");
            };
            // Undoing it would take the session back to before it, dropping any turn since.
            if let Some(later) = timeline.turns.iter().find(|t| t.offset > point) {
                bail!(
                    "turn {} began after the last rewind: undoing the rewind would drop it; rewind to a turn instead (`--turn N`; the list shows them)",
                    later.number
                );
            }
            let turn = timeline.turn_at(point);
            // By default, what the undone rewind restored.
            let scope = scope.unwrap_or(Scope {
                code: mark.code,
                conversation: mark.conversation,
            });
            (point, turn, true, scope)
        }
    };
    let conversation = scope
        .conversation
        .then(|| timeline.conversation_at(point))
        .transpose()?;
    let mut plans: Vec<FilePlan> = if scope.code {
        timeline
            .code_plan(point)
            .into_iter()
            .filter(|plan| !plan.is_unchanged())
            .collect()
    } else {
        Vec::new()
    };
    let mut report = Report::default();
    // Files changed since the session last touched them, and files that became something
    // a rewind does not write (a link, a folder): asked about, refused headless.
    // A file whose content then was not saved is left whatever it holds now: nothing to ask.
    let conflicts: Vec<&FilePlan> = plans
        .iter()
        .filter(|plan| !matches!(plan.target, Content::NotSaved(_)))
        .filter(|plan| plan.changed_outside || matches!(plan.now, Disk::Other(_)))
        .collect();
    let decision = if conflicts.is_empty() {
        Decision::Overwrite
    } else {
        overwrite(&conflicts)
    };
    if decision == Decision::Cancel {
        let names: Vec<String> = conflicts
            .iter()
            .map(|plan| match &plan.now {
                Disk::Other(reason) => format!("{} ({reason})", plan.path.display()),
                _ => plan.path.display().to_string(),
            })
            .collect();
        bail!(
            "nothing was rewound: {} changed since the session last changed {} ({}); --force restores the rest and overwrites what can be overwritten",
            if names.len() == 1 { "a file" } else { "files" },
            if names.len() == 1 { "it" } else { "them" },
            names.join(", "),
        );
    }
    if decision == Decision::Leave {
        let skipped: HashSet<PathBuf> = conflicts.iter().map(|plan| plan.path.clone()).collect();
        plans.retain(|plan| {
            let keep = !skipped.contains(&plan.path);
            if !keep {
                report.left.push((
                    plan.path.clone(),
                    "changed since the session's last change to it; not overwritten".into(),
                ));
            }
            keep
        });
    }
    // Files a rewind cannot put back are left, saying why.
    let (restorable, unrestorable): (Vec<FilePlan>, Vec<FilePlan>) = plans
        .into_iter()
        .partition(|plan| plan.obstacle().is_none());
    for plan in unrestorable {
        let reason = plan.obstacle().unwrap_or_default();
        report.left.push((plan.path, reason));
    }
    let plans = restorable;
    transcript.append_entry(
        "system",
        json!({
            "subtype": REWIND_SUBTYPE,
            "to_turn": to_turn,
            "code": scope.code,
            "conversation": scope.conversation,
            "undo": undo,
        }),
    )?;
    let objects = objects_dir(&transcript.path());
    for plan in &plans {
        restore(transcript, &objects, plan, &mut report)?;
    }
    if let Some(messages) = conversation {
        // A pointer to the point, not a copy of its history: the file grows by one line.
        transcript.append_rewind(to_turn, point)?;
        report.conversation = Some(messages);
        report.to_turn = to_turn;
    }
    Ok(report)
}

/// Puts one file back: keeps what it holds now (so the rewind can be undone), then writes the
/// kept content through a temporary file and a rename, or removes the file.
fn restore(
    transcript: &Transcript,
    objects: &Path,
    plan: &FilePlan,
    report: &mut Report,
) -> anyhow::Result<()> {
    let path = &plan.path;
    // A file that cannot be read, kept or changed is left, saying why; only a transcript
    // that cannot be written stops the rewind (what it did must be on record).
    let mut leave = |reason: String| report.left.push((path.clone(), reason));
    let current = match &plan.now {
        Disk::File(_) => match read_file(path) {
            Ok(bytes) => Some(bytes),
            Err(error) => {
                leave(format!("reading it: {error}"));
                return Ok(());
            }
        },
        _ => None,
    };
    let target = match &plan.target {
        Content::Saved(sha) => {
            let object = objects.join(sha);
            let bytes = match fs::read(&object) {
                Ok(bytes) if digest(&bytes) == *sha => bytes,
                Ok(_) => {
                    leave(format!("its saved content {} is damaged", object.display()));
                    return Ok(());
                }
                Err(error) => {
                    leave(format!("its saved content {}: {error}", object.display()));
                    return Ok(());
                }
            };
            Some(bytes)
        }
        Content::Absent => None,
        Content::NotSaved(_) => return Ok(()),
    };
    let before = match keep(objects, current.as_deref()) {
        Ok(before) => before,
        Err(error) => {
            leave(format!("keeping its content before restoring it: {error}"));
            return Ok(());
        }
    };
    transcript.append_entry(
        "system",
        file_entry(
            CHECKPOINT_SUBTYPE,
            path,
            json!({"turn": Value::Null, "before": before}),
        ),
    )?;
    // The folders are checked again just before the change (a link may have appeared).
    if let Err(reason) = real_folders(path) {
        leave(reason);
        return Ok(());
    }
    match target {
        Some(bytes) => {
            if let Err(error) = tools::replace_file(path, &bytes) {
                leave(format!("writing it: {error}"));
                return Ok(());
            }
            transcript.append_entry(
                "system",
                file_entry(WRITTEN_SUBTYPE, path, json!({"sha256": digest(&bytes)})),
            )?;
            report.restored.push(path.clone());
        }
        None => {
            if let Err(error) = remove_file(path) {
                leave(format!("removing it: {error}"));
                return Ok(());
            }
            transcript.append_entry(
                "system",
                file_entry(WRITTEN_SUBTYPE, path, json!({"absent": true})),
            )?;
            report.removed.push(path.clone());
        }
    }
    Ok(())
}

// A rewind reads, writes (as Write does: `tools::replace_file`, never torn, keeping the
// file's mode, owner, group and hard links) and removes files through their folder as opened from `/` with no
// link followed ([`tools::open_parent`]): the paths recorded are resolved ones, so a link on
// the way is something that changed since (a command swapping a folder for a link to
// `$HOME` while the rewind runs), and nothing goes through it.

/// The content of the regular file `path` (at most [`MAX_SAVED_BYTES`] and one byte), read
/// without following a link on the way and never blocking on what is not a regular file
/// (a FIFO swapped in).
fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let (folder, name) = tools::open_parent(Path::new("/"), path, false)?;
    let mut bytes = Vec::new();
    tools::open_regular_at(&folder, &name, false)?
        .take(MAX_SAVED_BYTES + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Removes the file `path` (gone already: no error), without following a link on the way.
fn remove_file(path: &Path) -> std::io::Result<()> {
    match tools::open_parent(Path::new("/"), path, false) {
        Ok((folder, name)) => tools::remove_file_at(&folder, &name),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// The files `turn` changed, each shown relative to `cwd` with what a rewind cannot restore
/// (`(new)`: it did not exist before; `(not saved)`, `(over 10 MiB: not saved)`).
pub fn turn_files(turn: &Turn, cwd: &Path) -> Vec<String> {
    turn.files
        .iter()
        .map(|(path, content)| {
            let shown = path.strip_prefix(cwd).unwrap_or(path).display().to_string();
            match content {
                Content::NotSaved(bytes) if *bytes > MAX_SAVED_BYTES => {
                    format!("{shown} (over 10 MiB: not saved)")
                }
                Content::NotSaved(_) => format!("{shown} (not saved)"),
                Content::Absent => format!("{shown} (new)"),
                Content::Saved(_) => shown,
            }
        })
        .collect()
}

/// The rewind list: one line per turn (number, start, files changed, prompt) and per rewind,
/// then what is not tracked. `cwd` shortens the paths shown.
pub fn describe(timeline: &Timeline, cwd: &Path) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    if timeline.turns.is_empty() {
        text.push_str("No turns recorded in this session yet.\n");
        return text;
    }
    let mut rewinds = timeline.rewinds.iter().peekable();
    for turn in &timeline.turns {
        while let Some(mark) = rewinds.next_if(|mark| mark.offset < turn.offset) {
            let _ = writeln!(text, "{}", describe_rewind(mark));
        }
        let files = turn_files(turn, cwd);
        let prompt: String = turn.prompt.split_whitespace().collect::<Vec<_>>().join(" ");
        let prompt: String = prompt.chars().take(60).collect();
        let _ = writeln!(
            text,
            "{:>4}  {}  {}  {}",
            turn.number,
            turn.started
                .get(..16)
                .unwrap_or(&turn.started)
                .replace('T', " "),
            render::printable(&format!("{prompt:?}"), false),
            if files.is_empty() {
                "no file changes".to_owned()
            } else {
                render::printable(&files.join(", "), false)
            }
        );
    }
    for mark in rewinds {
        let _ = writeln!(text, "{}", describe_rewind(mark));
    }
    text.push_str(
        "Files .gitignore ignores, symbolic links and files over 10 MiB are not saved; changes in folders added with --add-dir are kept only when Write or Edit made them.\n",
    );
    text
}

fn describe_rewind(mark: &RewindMark) -> String {
    let what = match (mark.code, mark.conversation) {
        (true, true) => "code and conversation",
        (true, false) => "code",
        (false, true) => "conversation",
        (false, false) => "nothing",
    };
    let time = crate::transcript::short_time(&mark.at);
    if mark.undo {
        format!(
            "      {time}  undid the rewind before ({what}; the end of turn {} again)",
            mark.to_turn
        )
    } else {
        format!(
            "      {time}  rewound to the end of turn {} ({what})",
            mark.to_turn
        )
    }
}

/// One line per file of a report, for the terminal.
pub fn summarize(report: &Report, cwd: &Path) -> String {
    use std::fmt::Write as _;
    let shown = |path: &Path| {
        render::printable(
            &path.strip_prefix(cwd).unwrap_or(path).display().to_string(),
            false,
        )
    };
    let mut text = String::new();
    for path in &report.restored {
        let _ = writeln!(text, "restored {}", shown(path));
    }
    for path in &report.removed {
        let _ = writeln!(text, "removed {} (it did not exist then)", shown(path));
    }
    for (path, reason) in &report.left {
        let _ = writeln!(
            text,
            "left {}: {}",
            shown(path),
            render::printable(reason, false)
        );
    }
    if let Some(messages) = &report.conversation {
        let _ = writeln!(
            text,
            "conversation rewound ({} message{})",
            messages.len(),
            if messages.len() == 1 { "" } else { "s" }
        );
    }
    if text.is_empty() {
        text.push_str("nothing to restore: the files are as they were then\n");
    }
    text
}

/// `agent rewind --session ID [--turn N | --undo] [--code | --conversation | --both]
/// [--force]`: without a target, the session's turns; with one, rewinds (files changed
/// since the session last changed them refuse the rewind unless `force`) and says what it
/// did. Returns the text to show. `scope` `None`: both for a turn, the undone rewind's for `--undo`.
///
/// # Errors
///
/// When `id` is not a session of `cwd`'s folder, the session is in use, the target does not
/// exist, or a changed file refuses the rewind.
pub fn run_command(
    cwd: &Path,
    id: &str,
    target: Option<Target>,
    scope: Option<Scope>,
    force: bool,
) -> anyhow::Result<String> {
    // A bare id: no path may lead to another folder's sessions.
    if id.is_empty()
        || id.len() > 64
        || !id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
    {
        bail!("--session {id:?}: not a session id (`agent sessions` lists them)");
    }
    let dirs = [
        Some(transcript::project_dir(cwd)?),
        transcript::legacy_project_dir(cwd)?,
    ];
    let Some(path) = dirs
        .iter()
        .flatten()
        .map(|dir| dir.join(format!("{id}.jsonl")))
        .find(|path| fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file()))
    else {
        bail!(
            "--session {id}: no such session of {} (`agent sessions` lists them)",
            cwd.display()
        );
    };
    let Some(target) = target else {
        return Ok(describe(&Timeline::read(&path)?, cwd));
    };
    let transcript = Transcript::open(path, id.to_owned(), cwd)?;
    let report = rewind(&transcript, target, scope, &mut |_| {
        if force {
            Decision::Overwrite
        } else {
            Decision::Cancel
        }
    })?;
    Ok(summarize(&report, cwd))
}

#[cfg(test)]
mod tests {
    use tools::WriteJournal as _;

    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("agent-checkpoints-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    /// A file is kept once per turn, a big one is named but not kept, and a rewind to turn 0
    /// leaves an empty conversation that loads as such (a resume starts from nothing).
    #[test]
    fn contents_are_kept_once_per_turn_and_big_files_are_named() {
        let dir = temp("journal");
        let path = dir.join("s.jsonl");
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        let journal = Journal::default();
        let file = dir.join("f.txt");
        let big = dir.join("big.bin");
        // Not attached: a change is refused rather than made without a checkpoint.
        assert!(journal.before_write(&file, None).is_err());
        journal.attach(transcript.clone());
        transcript
            .append_entry("system", json!({"subtype": TURN_SUBTYPE, "turn": 1}))
            .unwrap();
        transcript
            .append_param(&MessageParam::user_text("one"))
            .unwrap();
        journal.begin_turn(1);
        journal.before_write(&file, Some(b"v0")).unwrap();
        journal.after_write(&file, b"v1");
        journal.before_write(&file, Some(b"v1")).unwrap();
        journal.after_write(&file, b"v2");
        let large = vec![7u8; (MAX_SAVED_BYTES + 1) as usize];
        journal.before_write(&big, Some(&large)).unwrap();
        journal.after_write(&big, b"small");
        let timeline = Timeline::read(&path).unwrap();
        assert_eq!(timeline.turns.len(), 1);
        assert_eq!(timeline.turns[0].prompt, "one");
        assert_eq!(
            timeline.turns[0].files,
            [
                (file.clone(), Content::Saved(digest(b"v0"))),
                (big.clone(), Content::NotSaved(MAX_SAVED_BYTES + 1)),
            ]
        );
        let objects: Vec<_> = fs::read_dir(objects_dir(&path))
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(objects.len(), 1, "the big file is not stored");
        // The next turn keeps the file again.
        journal.begin_turn(2);
        journal.before_write(&file, Some(b"v2")).unwrap();
        let timeline = Timeline::read(&path).unwrap();
        assert_eq!(timeline.files.len(), 6);

        // The list says what was not saved.
        let list = describe(&timeline, &dir);
        assert!(list.contains("big.bin (over 10 MiB: not saved)"), "{list}");

        // Back to before the first turn: the big file is left (not saved), the other put
        // back; the conversation is empty and loads empty.
        fs::write(&file, "v2").unwrap();
        fs::write(&big, "small").unwrap();
        let report = rewind(&transcript, Target::Turn(0), Some(Scope::BOTH), &mut |_| {
            Decision::Cancel
        })
        .unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"v0");
        assert_eq!(report.restored, std::slice::from_ref(&file));
        assert_eq!(report.left.len(), 1, "{:?}", report.left);
        assert!(report.left[0].1.contains("not saved"), "{:?}", report.left);
        assert_eq!(report.conversation.as_deref(), Some(&[][..]));
        drop(transcript);
        let loaded = transcript::load(&path).unwrap();
        assert!(loaded.messages.is_empty());
        assert_eq!(loaded.turns, 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Attack: a folder on the way to a file the agent wrote is replaced by a link to
    /// elsewhere; the rewind does not write or remove through it.
    /// A conversation rewind adds a pointer, not a copy: twelve rewinds (and undos) of a
    /// long history each grow the file by less than 1 % of it, and each loads the history
    /// it went back to, as do the turns begun after them.
    #[test]
    fn conversation_rewinds_point_back_instead_of_copying() {
        let dir = temp("pointers");
        let path = dir.join("s.jsonl");
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        let mut ends = vec![Vec::new()];
        let mut history = Vec::new();
        let turn = |number: u64, history: &mut Vec<MessageParam>| {
            transcript
                .append_entry("system", json!({"subtype": TURN_SUBTYPE, "turn": number}))
                .unwrap();
            let prompt = MessageParam::user_text(format!("turn {number}"));
            let answer = MessageParam {
                role: protocol::Role::Assistant,
                content: vec![protocol::ContentBlock::text(
                    "x".repeat(100_000) + &number.to_string(),
                )],
            };
            transcript.append_param(&prompt).unwrap();
            transcript.append_param(&answer).unwrap();
            history.extend([prompt, answer]);
        };
        for number in 1..=3 {
            turn(number, &mut history);
            ends.push(history.clone());
        }
        let conversation = Some(Scope {
            code: false,
            conversation: true,
        });
        for round in 0..6_u64 {
            let target = round % 3 + 1;
            for step in [Target::Turn(target), Target::UndoLast] {
                let size = fs::metadata(&path).unwrap().len();
                let report = rewind(&transcript, step, conversation, &mut |_| {
                    Decision::Overwrite
                })
                .unwrap();
                let grown = fs::metadata(&path).unwrap().len() - size;
                assert!(grown * 100 < size, "{step:?}: {grown} bytes on {size}");
                let expected = match step {
                    Target::Turn(turn) => &ends[usize::try_from(turn).unwrap()],
                    Target::UndoLast => &ends[3],
                };
                assert_eq!(report.conversation.as_ref(), Some(expected), "{step:?}");
                let loaded = transcript::load(&path).unwrap();
                assert_eq!(&loaded.messages, expected, "{round}: {step:?}");
            }
        }
        // A turn after a rewind goes on from the rewound history.
        rewind(&transcript, Target::Turn(1), conversation, &mut |_| {
            Decision::Overwrite
        })
        .unwrap();
        let mut after = ends[1].clone();
        turn(4, &mut after);
        assert_eq!(transcript::load(&path).unwrap().messages, after);
        let _ = fs::remove_dir_all(&dir);
    }

    /// From an attack: a command swaps a folder for a link to elsewhere while a rewind runs
    /// (after its checks). Every write, removal and read of a rewind goes through the folder
    /// as opened from `/` without following links, so with the link in place each of them
    /// fails and nothing outside is touched.
    #[test]
    fn a_folder_swapped_for_a_link_takes_no_write_or_removal_elsewhere() {
        let dir = temp("swapped");
        let outside = dir.join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join(".bashrc"), "theirs").unwrap();
        let workspace = dir.join("ws");
        fs::create_dir_all(&workspace).unwrap();
        std::os::unix::fs::symlink(&outside, workspace.join("d")).unwrap();
        let path = workspace.join("d/.bashrc");
        assert!(tools::replace_file(&path, b"echo PWNED").is_err());
        assert!(remove_file(&path).is_err());
        assert!(read_file(&path).is_err());
        assert!(tools::replace_file(&workspace.join("d/new/file"), b"x").is_err());
        assert_eq!(
            fs::read_to_string(outside.join(".bashrc")).unwrap(),
            "theirs"
        );
        assert_eq!(
            fs::read_dir(&outside).unwrap().count(),
            1,
            "nothing made there"
        );
        // A FIFO swapped in for a file is refused, never waited on (a rewind would hang).
        let fifo = workspace.join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_file(&fifo).is_err());
        assert!(matches!(Disk::of(&fifo), Disk::Other(_)));
        // Without the link, the same calls work.
        fs::remove_file(workspace.join("d")).unwrap();
        tools::replace_file(&path, b"ours").unwrap();
        assert_eq!(read_file(&path).unwrap(), b"ours");
        remove_file(&path).unwrap();
        assert!(!path.exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_rewind_never_writes_through_a_link() {
        let dir = temp("link");
        let outside = temp("link-outside");
        let path = dir.join("s.jsonl");
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        let journal = Journal::default();
        journal.attach(transcript.clone());
        transcript
            .append_entry("system", json!({"subtype": TURN_SUBTYPE, "turn": 1}))
            .unwrap();
        journal.begin_turn(1);
        let sub = dir.join("sub");
        fs::create_dir_all(&sub).unwrap();
        let file = sub.join("new.txt");
        journal.before_write(&file, None).unwrap();
        fs::write(&file, "made").unwrap();
        journal.after_write(&file, b"made");
        // The model's command swaps the folder for a link to a folder holding a file of
        // the same name.
        fs::remove_dir_all(&sub).unwrap();
        fs::write(outside.join("new.txt"), "precious").unwrap();
        std::os::unix::fs::symlink(&outside, &sub).unwrap();
        let report = rewind(
            &transcript,
            Target::Turn(0),
            Some(Scope {
                code: true,
                conversation: false,
            }),
            &mut |_| Decision::Overwrite,
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(outside.join("new.txt")).unwrap(),
            "precious"
        );
        assert!(report.removed.is_empty(), "{report:?}");
        assert!(report.left[0].1.contains("link"), "{report:?}");
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&outside).unwrap();
    }

    /// A file reached through a name that is not UTF-8 is kept and restored exactly; a file
    /// grown past 10 MiB is neither read nor overwritten; hostile timestamps show as `?`.
    #[test]
    fn odd_names_big_files_and_bad_times() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = temp("odd");
        let path = dir.join("s.jsonl");
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        let journal = Journal::default();
        journal.attach(transcript.clone());
        transcript
            .append_entry("system", json!({"subtype": TURN_SUBTYPE, "turn": 1}))
            .unwrap();
        journal.begin_turn(1);
        let odd = dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt"));
        fs::write(&odd, "old").unwrap();
        journal.before_write(&odd, Some(b"old")).unwrap();
        fs::write(&odd, "new").unwrap();
        journal.after_write(&odd, b"new");
        let big = dir.join("big.bin");
        journal.before_write(&big, None).unwrap();
        fs::write(&big, "small").unwrap();
        journal.after_write(&big, b"small");
        // It grows past 10 MiB (sparse: no disk, no memory if never read).
        fs::File::options()
            .write(true)
            .open(&big)
            .unwrap()
            .set_len(MAX_SAVED_BYTES * 400)
            .unwrap();
        let report = rewind(
            &transcript,
            Target::Turn(0),
            Some(Scope {
                code: true,
                conversation: false,
            }),
            &mut |conflicts| {
                assert_eq!(conflicts.len(), 1);
                Decision::Overwrite
            },
        )
        .unwrap();
        assert_eq!(fs::read(&odd).unwrap(), b"old");
        assert_eq!(report.restored, std::slice::from_ref(&odd));
        assert_eq!(report.left.len(), 1, "{report:?}");
        assert!(report.left[0].1.contains("over 10 MiB"), "{report:?}");
        assert_eq!(fs::metadata(&big).unwrap().len(), MAX_SAVED_BYTES * 400);
        assert_eq!(
            crate::transcript::short_time("2025-01-01T00:0\u{e9}\x1b]0;x\x07"),
            "?"
        );
        assert_eq!(
            crate::transcript::short_time("2026-12-01T21:06:18.123Z"),
            "2026-12-01 21:06"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    /// An undo names the turn the session is back at, and a second undo (a redo) too.
    #[test]
    fn undos_name_the_turn_they_return_to() {
        let dir = temp("undo");
        let path = dir.join("s.jsonl");
        let transcript = Transcript::open(path.clone(), "s".into(), &dir).unwrap();
        for turn in 1..=3 {
            transcript
                .append_entry("system", json!({"subtype": TURN_SUBTYPE, "turn": turn}))
                .unwrap();
            transcript
                .append_param(&MessageParam::user_text(format!("prompt {turn}")))
                .unwrap();
        }
        let conversation = Some(Scope {
            code: false,
            conversation: true,
        });
        let mut never = |_: &[&FilePlan]| Decision::Cancel;
        let report = rewind(&transcript, Target::Turn(2), conversation, &mut never).unwrap();
        assert_eq!(report.conversation.map(|m| m.len()), Some(1));
        rewind(&transcript, Target::UndoLast, None, &mut never).unwrap();
        let report = rewind(&transcript, Target::UndoLast, None, &mut never).unwrap();
        // Back at turn 2's end: the redo.
        let texts: Vec<String> = report.conversation.unwrap()[0]
            .content
            .iter()
            .filter_map(|block| block.as_text().map(str::to_owned))
            .collect();
        assert_eq!(texts, ["prompt 1", "prompt 2"]);
        let timeline = Timeline::read(&path).unwrap();
        let marks: Vec<(u64, bool)> = timeline
            .rewinds
            .iter()
            .map(|m| (m.to_turn, m.undo))
            .collect();
        assert_eq!(marks, [(2, false), (3, true), (2, true)]);
        let list = describe(&timeline, &dir);
        assert!(
            list.contains("undid the rewind before (conversation; the end of turn 2 again)"),
            "{list}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
