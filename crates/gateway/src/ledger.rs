//! The ledger file: one JSON line per tool call, append-only, hash-chained.
//!
//! Each line is a [`LedgerEntry`] whose last field, `hash`, is the sha256 of the line as it
//! would read without that field, and whose `prev_hash` is the previous line's `hash` (64
//! zeros on the first line). So editing a line breaks its own hash, and removing or
//! reordering lines breaks `seq` and the chain; [`verify`] reports the first line that is
//! wrong. A truncated tail (a line cut short) fails to parse; whole lines cut from the end are
//! caught by comparing with the last record the store holds ([`verify`]'s `expected`).
//!
//! Appends are safe across processes (`forge serve` and `forge mcp` may share a data
//! directory): the writer holds an exclusive `flock` on the file while it reads the last
//! line's hash and appends its own. The file lives in the data directory, which no sandbox
//! mounts.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use forge_policy::Decision;
use rustix::fs::{FlockOperation, flock};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::reply::Outcome;

/// The `prev_hash` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The field every line ends with, spelled as serde writes it.
const HASH_FIELD: &str = ",\"hash\":\"";

/// One recorded tool call: a line of the JSONL file and a row of the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerEntry {
    /// Line number, from 1.
    pub seq: u64,
    pub ts_ms: i64,
    pub session_id: String,
    pub tool: String,
    /// The arguments, secrets redacted and long values shortened.
    pub arguments: Value,
    /// Absent when the arguments were invalid: nothing was judged.
    pub decision: Option<Decision>,
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub outcome: Outcome,
    /// A short form of the result or the error.
    pub summary: Value,
    pub duration_us: u64,
    pub idempotency_key: Option<String>,
    pub prev_hash: String,
    /// sha256 of this line without this field.
    #[serde(default)]
    pub hash: String,
}

/// Why a ledger file does not verify.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read the ledger {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The first line (1-based) that is not what the chain says it should be.
    #[error("line {line}: {reason}")]
    BadLine { line: u64, reason: String },
}

/// What a verified ledger holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub lines: u64,
    /// The hash of the last line ([`GENESIS`] for an empty ledger).
    pub last_hash: String,
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        use std::fmt::Write as _;
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// Splits a line into the text its hash covers and the hash it claims.
fn split_hash(line: &str) -> Option<(String, &str)> {
    let body = line.strip_suffix("\"}")?;
    let at = body.len().checked_sub(64 + HASH_FIELD.len())?;
    let (head, tail) = body.split_at_checked(at)?;
    let claimed = tail.strip_prefix(HASH_FIELD)?;
    Some((format!("{head}}}"), claimed))
}

/// Checks the whole file at `path`. `expected` is the last `(seq, hash)` another record
/// holds (the store); a file that stops short of it has lost its tail.
pub fn verify(path: &Path, expected: Option<(u64, &str)>) -> Result<VerifyReport, VerifyError> {
    let text = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => {
            return Err(VerifyError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let bad = |line: u64, reason: String| VerifyError::BadLine { line, reason };
    let mut prev = GENESIS.to_owned();
    let mut count = 0u64;
    let mut rest = text.as_slice();
    while !rest.is_empty() {
        let number = count + 1;
        let Some(end) = rest.iter().position(|b| *b == b'\n') else {
            return Err(bad(
                number,
                "the line is cut short (no end of line): the ledger's tail was truncated"
                    .to_owned(),
            ));
        };
        let (raw, next) = (&rest[..end], &rest[end + 1..]);
        rest = next;
        let line = std::str::from_utf8(raw)
            .map_err(|_| bad(number, "the line is not UTF-8".to_owned()))?;
        let entry: LedgerEntry = serde_json::from_str(line)
            .map_err(|error| bad(number, format!("not a ledger record: {error}")))?;
        let (body, claimed) = split_hash(line)
            .ok_or_else(|| bad(number, "the line does not end with its hash".to_owned()))?;
        if sha256_hex(body.as_bytes()) != claimed {
            return Err(bad(
                number,
                "the line's contents do not match its hash: it was edited".to_owned(),
            ));
        }
        if entry.seq != number {
            return Err(bad(
                number,
                format!(
                    "sequence number {} where {number} belongs: lines were removed or reordered",
                    entry.seq
                ),
            ));
        }
        if entry.prev_hash != prev {
            return Err(bad(
                number,
                format!(
                    "the line does not follow line {count}: lines were removed, reordered or edited"
                ),
            ));
        }
        claimed.clone_into(&mut prev);
        count = number;
    }
    if let Some((seq, hash)) = expected
        && (seq > count || (seq == count && hash != prev))
    {
        return Err(bad(
            count + 1,
            format!(
                "the store records {seq} calls but the file ends after {count}: the ledger's tail was removed"
            ),
        ));
    }
    Ok(VerifyReport {
        lines: count,
        last_hash: prev,
    })
}

/// The appending end of the ledger file.
#[derive(Debug)]
pub(crate) struct LedgerFile {
    path: PathBuf,
    tail: Mutex<Option<Tail>>,
}

/// The open file and what this process last saw at its end. Another process may have
/// appended since; the length tells.
#[derive(Debug)]
struct Tail {
    file: File,
    len: u64,
    seq: u64,
    hash: String,
}

impl LedgerFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            tail: Mutex::new(None),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry`, filling in `seq`, `prev_hash` and `hash`. Blocking: call it off the
    /// async runtime's worker threads.
    pub(crate) fn append(&self, entry: &mut LedgerEntry) -> std::io::Result<()> {
        let mut guard = self
            .tail
            .lock()
            .map_err(|_| std::io::Error::other("the ledger lock is poisoned"))?;
        if guard.is_none() {
            if let Some(parent) = self.path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .open(&self.path)?;
            *guard = Some(Tail {
                file,
                len: u64::MAX,
                seq: 0,
                hash: GENESIS.to_owned(),
            });
        }
        let Some(tail) = guard.as_mut() else {
            return Err(std::io::Error::other("the ledger file is not open"));
        };
        flock(&tail.file, FlockOperation::LockExclusive)?;
        let result = Self::append_locked(tail, entry);
        let unlocked = flock(&tail.file, FlockOperation::Unlock);
        result?;
        unlocked?;
        Ok(())
    }

    fn append_locked(tail: &mut Tail, entry: &mut LedgerEntry) -> std::io::Result<()> {
        let len = tail.file.metadata()?.len();
        let mut lead = "";
        if len != tail.len {
            let (seq, hash, ends_line) = last_line(&mut tail.file, len)?;
            tail.seq = seq;
            tail.hash = hash;
            if !ends_line {
                // A writer died mid-line. Start a fresh line; verify reports the cut one.
                lead = "\n";
            }
        }
        entry.seq = tail.seq + 1;
        entry.prev_hash.clone_from(&tail.hash);
        entry.hash.clear();
        let mut body = serde_json::to_string(&EntryBody(entry)).map_err(std::io::Error::other)?;
        let hash = sha256_hex(body.as_bytes());
        body.pop();
        let line = format!("{lead}{body}{HASH_FIELD}{hash}\"}}\n");
        tail.file.write_all(line.as_bytes())?;
        tail.len = len + line.len() as u64;
        tail.seq = entry.seq;
        tail.hash.clone_from(&hash);
        entry.hash = hash;
        Ok(())
    }
}

/// An entry serialized without its `hash` field: the text the hash covers.
struct EntryBody<'a>(&'a LedgerEntry);

impl Serialize for EntryBody<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let e = self.0;
        let mut s = serializer.serialize_struct("LedgerEntry", 13)?;
        s.serialize_field("seq", &e.seq)?;
        s.serialize_field("ts_ms", &e.ts_ms)?;
        s.serialize_field("session_id", &e.session_id)?;
        s.serialize_field("tool", &e.tool)?;
        s.serialize_field("arguments", &e.arguments)?;
        s.serialize_field("decision", &e.decision)?;
        s.serialize_field("rule", &e.rule)?;
        s.serialize_field("reason", &e.reason)?;
        s.serialize_field("outcome", &e.outcome)?;
        s.serialize_field("summary", &e.summary)?;
        s.serialize_field("duration_us", &e.duration_us)?;
        s.serialize_field("idempotency_key", &e.idempotency_key)?;
        s.serialize_field("prev_hash", &e.prev_hash)?;
        s.end()
    }
}

/// The sequence number and hash of the file's last line, and whether the file ends with a
/// newline. Reads backwards in blocks, so a long ledger costs one block.
fn last_line(file: &mut File, len: u64) -> std::io::Result<(u64, String, bool)> {
    if len == 0 {
        return Ok((0, GENESIS.to_owned(), true));
    }
    let mut buffer: Vec<u8> = Vec::new();
    let mut start = len;
    let ends_line;
    loop {
        let block = start.min(8192);
        start -= block;
        let mut chunk = vec![0; usize::try_from(block).map_err(std::io::Error::other)?];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&buffer);
        buffer = chunk;
        let trimmed = buffer.strip_suffix(b"\n").unwrap_or(&buffer);
        if trimmed.contains(&b'\n') || start == 0 {
            ends_line = buffer.ends_with(b"\n");
            break;
        }
    }
    let trimmed = buffer.strip_suffix(b"\n").unwrap_or(&buffer);
    let line = trimmed.rsplit(|b| *b == b'\n').next().unwrap_or_default();
    let text = String::from_utf8_lossy(line);
    // A cut or garbled last line still chains: its hash is whatever it claims, or the hash
    // of its bytes; verify reports it either way.
    let seq_hash = serde_json::from_str::<LedgerEntry>(&text)
        .ok()
        .map(|entry| (entry.seq, entry.hash));
    Ok(match seq_hash {
        Some((seq, hash)) if ends_line => (seq, hash, true),
        Some((seq, _)) => (seq, sha256_hex(line), false),
        None => (0, sha256_hex(line), ends_line),
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn entry(tool: &str) -> LedgerEntry {
        LedgerEntry {
            seq: 0,
            ts_ms: 1,
            session_id: "ses-000000000001".to_owned(),
            tool: tool.to_owned(),
            arguments: json!({"path": "/workspace/a"}),
            decision: Some(Decision::Allow),
            rule: Some("default".to_owned()),
            reason: Some("no rule objected".to_owned()),
            outcome: Outcome::Ok,
            summary: json!({"bytes": 3}),
            duration_us: 5,
            idempotency_key: None,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    fn write(path: &Path, n: usize) {
        let ledger = LedgerFile::new(path.to_owned());
        for i in 0..n {
            ledger.append(&mut entry(&format!("tool{i}"))).unwrap();
        }
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn rewrite(path: &Path, lines: &[String]) {
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    #[test]
    fn a_written_ledger_verifies_and_chains() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        write(&path, 3);
        let report = verify(&path, None).unwrap();
        assert_eq!(report.lines, 3);
        let entries: Vec<LedgerEntry> = lines(&path)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(entries[0].prev_hash, GENESIS);
        assert_eq!(entries[1].prev_hash, entries[0].hash);
        assert_eq!(entries[2].hash, report.last_hash);
        assert_eq!(
            verify(&path, Some((3, report.last_hash.as_str()))).unwrap(),
            report
        );
        // A second writer (another process) continues the same chain.
        write(&path, 2);
        assert_eq!(verify(&path, None).unwrap().lines, 5);
    }

    #[test]
    fn writers_with_their_own_descriptors_keep_one_chain() {
        // Two open file descriptions, as two processes sharing a data directory have: the
        // flock serialises them and each re-reads the end the other wrote.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || write(&path, 50))
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        assert_eq!(verify(&path, None).unwrap().lines, 100);
    }

    #[test]
    fn tampering_is_found_at_the_first_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        write(&path, 4);
        let original = lines(&path);
        let last = verify(&path, None).unwrap().last_hash;
        let check = |lines: &[String]| {
            rewrite(&path, lines);
            match verify(&path, Some((4, last.as_str()))) {
                Err(VerifyError::BadLine { line, .. }) => line,
                other => panic!("{other:?}"),
            }
        };

        let mut edited = original.clone();
        edited[1] = edited[1].replace("tool1", "tool9");
        let mut removed = original.clone();
        removed.remove(2);
        let mut reordered = original.clone();
        reordered.swap(1, 2);
        let mut cut_lines = original.clone();
        cut_lines.pop();
        assert_eq!(
            [
                check(&edited),
                check(&removed),
                check(&reordered),
                check(&cut_lines)
            ],
            [2, 3, 2, 4]
        );

        // A tail cut mid-line.
        let text = original.join("\n");
        std::fs::write(&path, &text[..text.len() - 10]).unwrap();
        assert!(matches!(
            verify(&path, None),
            Err(VerifyError::BadLine { line: 4, .. })
        ));
    }
}
