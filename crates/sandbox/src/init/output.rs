//! Buffers for process output: a capped capture for commands run to completion, and a
//! sliding window with cursors for background processes.

use std::collections::VecDeque;

use forge_types::{OutputChunk, StreamKind};

/// Accepts the first `limit` bytes of a stream, keeping them unless they are streamed on
/// instead, and remembers whether more came.
#[derive(Debug)]
pub(crate) struct Capture {
    pub(crate) kept: Vec<u8>,
    accepted: usize,
    limit: usize,
    keep: bool,
    pub(crate) truncated: bool,
}

impl Capture {
    /// A capture that keeps what it accepts (for the final result).
    pub(crate) fn keeping(limit: u64) -> Self {
        Self::new(limit, true)
    }

    /// A capture that only counts (the output is streamed as it arrives).
    pub(crate) fn counting(limit: u64) -> Self {
        Self::new(limit, false)
    }

    fn new(limit: u64, keep: bool) -> Self {
        Self {
            kept: Vec::new(),
            accepted: 0,
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            keep,
            truncated: false,
        }
    }

    /// Accepts what fits under the limit and returns that part.
    pub(crate) fn accept<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        let take = self.limit.saturating_sub(self.accepted).min(data.len());
        if take < data.len() {
            self.truncated = true;
        }
        self.accepted += take;
        if self.keep {
            self.kept.extend_from_slice(&data[..take]);
        }
        &data[..take]
    }
}

/// The output of a background process: a window of the most recent bytes, addressed by a
/// cursor that counts every byte the process ever wrote (stdout and stderr interleaved as
/// they arrived).
#[derive(Debug)]
pub(crate) struct OutputLog {
    chunks: VecDeque<OutputChunk>,
    /// Cursor of the first byte still kept.
    start: u64,
    /// Cursor just past the last byte written.
    end: u64,
    kept: usize,
    window: usize,
}

impl OutputLog {
    pub(crate) fn new(window: usize) -> Self {
        Self {
            chunks: VecDeque::new(),
            start: 0,
            end: 0,
            kept: 0,
            window,
        }
    }

    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    pub(crate) fn push(&mut self, stream: StreamKind, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.chunks.push_back(OutputChunk {
            cursor: self.end,
            stream,
            data: data.to_vec(),
        });
        self.end += data.len() as u64;
        self.kept += data.len();
        while self.kept > self.window {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let excess = self.kept - self.window;
            if front.data.len() <= excess {
                self.kept -= front.data.len();
                self.start += front.data.len() as u64;
                self.chunks.pop_front();
            } else {
                front.data.drain(..excess);
                front.cursor += excess as u64;
                self.start += excess as u64;
                self.kept -= excess;
            }
        }
    }

    /// Up to `max_bytes` of output from `cursor`, and how many bytes before the window were
    /// asked for but are gone.
    pub(crate) fn read(&self, cursor: u64, max_bytes: u64) -> (Vec<OutputChunk>, u64, u64) {
        let dropped = self.start.saturating_sub(cursor);
        let mut at = cursor.max(self.start);
        let mut budget = max_bytes;
        let mut out = Vec::new();
        for chunk in &self.chunks {
            if budget == 0 {
                break;
            }
            let chunk_end = chunk.cursor + chunk.data.len() as u64;
            if chunk_end <= at {
                continue;
            }
            let skip = usize::try_from(at - chunk.cursor).unwrap_or(0);
            let take = usize::try_from(budget.min((chunk.data.len() - skip) as u64)).unwrap_or(0);
            out.push(OutputChunk {
                cursor: at,
                stream: chunk.stream,
                data: chunk.data[skip..skip + take].to_vec(),
            });
            at += take as u64;
            budget -= take as u64;
        }
        (out, at.max(cursor.min(self.end)), dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn chunk(cursor: u64, stream: StreamKind, data: &[u8]) -> OutputChunk {
        OutputChunk {
            cursor,
            stream,
            data: data.to_vec(),
        }
    }

    #[test]
    fn capture_keeps_the_head_and_flags_the_rest() {
        let mut capture = Capture::keeping(5);
        assert_eq!(capture.accept(b"abc"), b"abc");
        assert_eq!(capture.accept(b"defg"), b"de");
        assert_eq!(capture.accept(b"h"), b"");
        assert_eq!(
            (capture.kept.as_slice(), capture.truncated),
            (&b"abcde"[..], true)
        );
    }

    #[test]
    fn streamed_output_is_counted_against_the_limit() {
        let mut capture = Capture::counting(5);
        assert_eq!(capture.accept(b"abc"), b"abc");
        assert_eq!(capture.accept(b"defg"), b"de");
        assert!(capture.truncated);
        assert!(capture.kept.is_empty());
    }

    #[test]
    fn log_reads_from_cursors_and_reports_what_slid_out() {
        let mut log = OutputLog::new(6);
        log.push(StreamKind::Stdout, b"abcd");
        log.push(StreamKind::Stderr, b"ef");
        assert_eq!(
            log.read(1, 100),
            (
                vec![
                    chunk(1, StreamKind::Stdout, b"bcd"),
                    chunk(4, StreamKind::Stderr, b"ef")
                ],
                6,
                0
            )
        );
        log.push(StreamKind::Stdout, b"ghi");
        // The window keeps the last six bytes: "defghi".
        assert_eq!(
            log.read(0, 4),
            (
                vec![
                    chunk(3, StreamKind::Stdout, b"d"),
                    chunk(4, StreamKind::Stderr, b"ef"),
                    chunk(6, StreamKind::Stdout, b"g")
                ],
                7,
                3
            )
        );
        assert_eq!(log.read(9, 10), (vec![], 9, 0));
        assert_eq!(log.end(), 9);
    }
}
