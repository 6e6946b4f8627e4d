//! Streaming command output with bounded memory (Pi's `OutputAccumulator`).
//!
//! Keeps a decoded tail of at most ~200 KB for display, counts lines and bytes of everything, and
//! once the output passes the truncation limits writes all of it (from the first byte) to a temp
//! file, so a command printing a gigabyte costs a gigabyte of disk and a few hundred KB of memory.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::BufWriter;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Mutex;

use super::truncate::truncate_tail;
use super::truncate::TruncatedBy;
use super::truncate::TruncationResult;
use super::truncate::DEFAULT_MAX_BYTES;
use super::truncate::DEFAULT_MAX_LINES;
use super::utf8::Utf8Stream;

/// The temp files this process created. They outlive their command, because the result
/// tells the model where the full output is and it may read it later in the run, but not the
/// process: [`remove_output_files`] deletes them when `pi` exits (Pi leaves them in the temp
/// directory forever).
static CREATED_FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Deletes every full-output temp file this process created (`pi-bash-*.log`); called when
/// `pi` exits. Files already gone are fine.
pub fn remove_output_files() {
    let files = std::mem::take(&mut *CREATED_FILES.lock().unwrap_or_else(|e| e.into_inner()));
    for path in files {
        let _ = std::fs::remove_file(path);
    }
}

/// Writes `data` to a new private file `<temp dir>/<prefix>-<16 hex><extension>` (never
/// following a link placed at the path) that is removed with the other output files when `pi`
/// exits; returns its path. For tools that save a whole result at once (MCP's long texts).
pub(crate) fn write_output_file(
    prefix: &str,
    extension: &str,
    data: &[u8],
    temp_dir: Option<&std::path::Path>,
) -> std::io::Result<PathBuf> {
    let dir = temp_dir.map_or_else(std::env::temp_dir, std::path::Path::to_path_buf);
    let path = dir.join(format!(
        "{prefix}-{:016x}{extension}",
        rand::random::<u64>()
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(data)?;
    CREATED_FILES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path.clone());
    Ok(path)
}

/// What the output looks like right now.
#[derive(Debug)]
pub(crate) struct OutputSnapshot {
    pub(crate) content: String,
    pub(crate) truncation: TruncationResult,
    pub(crate) full_output_path: Option<PathBuf>,
}

#[derive(Debug)]
pub(crate) struct OutputAccumulator {
    max_lines: usize,
    max_bytes: usize,
    max_rolling_bytes: usize,
    temp_prefix: &'static str,
    temp_dir: PathBuf,
    decoder: Utf8Stream,
    raw_chunks: Vec<Vec<u8>>,
    tail_text: String,
    tail_starts_at_line_boundary: bool,
    total_raw_bytes: usize,
    total_decoded_bytes: usize,
    completed_lines: usize,
    total_lines: usize,
    current_line_bytes: usize,
    has_open_line: bool,
    finished: bool,
    temp_path: Option<PathBuf>,
    temp_file: Option<BufWriter<File>>,
    /// Set when the temp file could not be created or written; output is then only counted.
    temp_failed: bool,
}

impl OutputAccumulator {
    pub(crate) fn new(temp_prefix: &'static str, temp_dir: Option<PathBuf>) -> Self {
        OutputAccumulator {
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
            max_rolling_bytes: DEFAULT_MAX_BYTES * 2,
            temp_prefix,
            temp_dir: temp_dir.unwrap_or_else(std::env::temp_dir),
            decoder: Utf8Stream::new(),
            raw_chunks: Vec::new(),
            tail_text: String::new(),
            tail_starts_at_line_boundary: true,
            total_raw_bytes: 0,
            total_decoded_bytes: 0,
            completed_lines: 0,
            total_lines: 0,
            current_line_bytes: 0,
            has_open_line: false,
            finished: false,
            temp_path: None,
            temp_file: None,
            temp_failed: false,
        }
    }

    pub(crate) fn append(&mut self, data: &[u8]) {
        if self.finished {
            return;
        }
        self.total_raw_bytes += data.len();
        let text = self.decoder.decode(data);
        self.append_decoded(&text);
        if self.temp_file.is_some() || self.should_use_temp_file() {
            self.ensure_temp_file();
            self.write_temp(data);
        } else if !data.is_empty() {
            self.raw_chunks.push(data.to_vec());
        }
    }

    pub(crate) fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let text = self.decoder.finish();
        self.append_decoded(&text);
        if self.should_use_temp_file() {
            self.ensure_temp_file();
        }
    }

    pub(crate) fn snapshot(&mut self, persist_if_truncated: bool) -> OutputSnapshot {
        // Clipping drops the partial first line of the retained tail; when the tail is only the
        // end of one over-long line, that is everything, so show the end of that line instead.
        let snapshot_text = match self.snapshot_text() {
            "" => self.tail_text.as_str(),
            text => text,
        };
        let mut truncation = truncate_tail(snapshot_text, self.max_lines, self.max_bytes);
        let truncated =
            self.total_lines > self.max_lines || self.total_decoded_bytes > self.max_bytes;
        truncation.truncated_by = if truncated {
            truncation
                .truncated_by
                .or(Some(if self.total_decoded_bytes > self.max_bytes {
                    TruncatedBy::Bytes
                } else {
                    TruncatedBy::Lines
                }))
        } else {
            None
        };
        truncation.truncated = truncated;
        truncation.total_lines = self.total_lines;
        truncation.total_bytes = self.total_decoded_bytes;
        if persist_if_truncated && truncated {
            self.ensure_temp_file();
        }
        OutputSnapshot {
            content: truncation.content.clone(),
            truncation,
            full_output_path: self.temp_path.clone(),
        }
    }

    /// All the output for programmatic callers (Pi's `readFullOutput`): everything when it
    /// fits in `max_bytes`, else its first and last halves around an "omitted" marker, and
    /// whether anything was left out. Call after [`Self::close_temp_file`].
    pub(crate) fn read_full_output(&self, max_bytes: usize) -> (String, bool) {
        use std::io::{Read, Seek, SeekFrom};
        let Some(path) = &self.temp_path else {
            return (
                String::from_utf8_lossy(&self.raw_chunks.concat()).into_owned(),
                false,
            );
        };
        // Only the two halves are read: the file can be gigabytes.
        let read = || -> std::io::Result<(String, bool)> {
            let mut file = File::open(path)?;
            let size = file.metadata()?.len();
            if size <= max_bytes as u64 {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                return Ok((String::from_utf8_lossy(&bytes).into_owned(), false));
            }
            let head_len = max_bytes / 2;
            let tail_len = max_bytes - head_len;
            let mut head = vec![0; head_len];
            file.read_exact(&mut head)?;
            let mut tail = vec![0; tail_len];
            file.seek(SeekFrom::Start(size - tail_len as u64))?;
            file.read_exact(&mut tail)?;
            // Cut at character boundaries: an incomplete sequence at the head's end and
            // continuation bytes at the tail's start are dropped.
            if let Err(e) = std::str::from_utf8(&head) {
                if e.error_len().is_none() {
                    head.truncate(e.valid_up_to());
                }
            }
            let skip = tail.iter().take_while(|b| *b & 0xc0 == 0x80).count();
            let omitted = size - head_len as u64 - tail_len as u64;
            let text = format!(
                "{}\n\n[... {omitted} bytes omitted ...]\n\n{}",
                String::from_utf8_lossy(&head),
                String::from_utf8_lossy(&tail[skip..])
            );
            Ok((text, true))
        };
        read().unwrap_or_else(|_| (self.tail_text.clone(), true))
    }

    /// Flushes and closes the temp file.
    pub(crate) fn close_temp_file(&mut self) {
        if let Some(mut file) = self.temp_file.take() {
            if file.flush().is_err() {
                self.temp_failed = true;
            }
        }
    }

    /// Bytes of the line being written when the output ended (for the partial-line notice).
    pub(crate) fn last_line_bytes(&self) -> usize {
        self.current_line_bytes
    }

    /// Memory held for output: the decoded tail plus raw chunks not yet in the temp file.
    #[cfg(test)]
    pub(crate) fn retained_bytes(&self) -> usize {
        self.tail_text.len() + self.raw_chunks.iter().map(Vec::len).sum::<usize>()
    }

    fn append_decoded(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let bytes = text.len();
        self.total_decoded_bytes += bytes;
        self.tail_text.push_str(text);
        if self.tail_text.len() > self.max_rolling_bytes * 2 {
            self.trim_tail();
        }
        match text.rfind('\n') {
            None => {
                self.current_line_bytes += bytes;
                self.has_open_line = true;
            }
            Some(last_newline) => {
                self.completed_lines += text.bytes().filter(|&b| b == b'\n').count();
                let tail = &text[last_newline + 1..];
                self.current_line_bytes = tail.len();
                self.has_open_line = !tail.is_empty();
            }
        }
        self.total_lines = self.completed_lines + usize::from(self.has_open_line);
    }

    fn trim_tail(&mut self) {
        let len = self.tail_text.len();
        if len <= self.max_rolling_bytes {
            return;
        }
        let mut start = len - self.max_rolling_bytes;
        while !self.tail_text.is_char_boundary(start) {
            start += 1;
        }
        if start > 0 {
            self.tail_starts_at_line_boundary = self.tail_text.as_bytes()[start - 1] == b'\n';
        }
        self.tail_text.drain(..start);
    }

    fn snapshot_text(&self) -> &str {
        if self.tail_starts_at_line_boundary {
            return &self.tail_text;
        }
        match self.tail_text.find('\n') {
            Some(newline) => &self.tail_text[newline + 1..],
            None => &self.tail_text,
        }
    }

    fn should_use_temp_file(&self) -> bool {
        self.total_raw_bytes > self.max_bytes
            || self.total_decoded_bytes > self.max_bytes
            || self.total_lines > self.max_lines
    }

    fn ensure_temp_file(&mut self) {
        if self.temp_path.is_some() || self.temp_failed {
            // Without a file nothing more is kept: memory stays bounded either way.
            self.raw_chunks.clear();
            return;
        }
        let name = format!("{}-{:016x}.log", self.temp_prefix, rand::random::<u64>());
        let path = self.temp_dir.join(name);
        // create_new never follows a link someone placed at the path; 0600 because output can
        // carry private data.
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path);
        match opened {
            Ok(file) => {
                CREATED_FILES
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(path.clone());
                self.temp_path = Some(path);
                self.temp_file = Some(BufWriter::with_capacity(256 * 1024, file));
                let chunks = std::mem::take(&mut self.raw_chunks);
                for chunk in chunks {
                    self.write_temp(&chunk);
                }
            }
            Err(_) => {
                self.temp_failed = true;
                self.raw_chunks.clear();
            }
        }
    }

    fn write_temp(&mut self, data: &[u8]) {
        if let Some(file) = self.temp_file.as_mut() {
            if file.write_all(data).is_err() {
                self.temp_failed = true;
                self.temp_file = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_stays_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut acc = OutputAccumulator::new("pi-test", Some(dir.path().to_path_buf()));
        acc.append(b"hello\nworld\n");
        acc.finish();
        let snapshot = acc.snapshot(true);
        assert_eq!(snapshot.content, "hello\nworld\n");
        assert!(!snapshot.truncation.truncated);
        assert_eq!(snapshot.truncation.total_lines, 2);
        assert_eq!(snapshot.full_output_path, None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn large_output_goes_to_file_with_bounded_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut acc = OutputAccumulator::new("pi-test", Some(dir.path().to_path_buf()));
        let chunk: Vec<u8> = (0..1000)
            .flat_map(|i| format!("line {i:06}\n").into_bytes())
            .collect();
        let mut written = 0usize;
        let mut max_retained = 0usize;
        for _ in 0..2000 {
            acc.append(&chunk);
            written += chunk.len();
            max_retained = max_retained.max(acc.retained_bytes());
        }
        acc.finish();
        let snapshot = acc.snapshot(true);
        acc.close_temp_file();
        // 24 MB went through; memory never held more than the rolling tail.
        assert!(
            max_retained <= 4 * DEFAULT_MAX_BYTES + chunk.len(),
            "{max_retained}"
        );
        let path = snapshot.full_output_path.clone().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, written);
        assert!(path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("pi-test-"));
        assert!(snapshot.truncation.truncated);
        assert_eq!(snapshot.truncation.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!(snapshot.truncation.total_lines, 2_000_000);
        assert_eq!(snapshot.truncation.output_lines, 2000);
        assert!(snapshot.content.ends_with("line 000999"));
    }
}
