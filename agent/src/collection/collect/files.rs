//! Reading small kernel files into one reused buffer, telling "absent" apart from "failed".

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use super::CollectError;

/// What reading one file gave.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// The text is in the buffer.
    Ok,
    /// The file (or a directory above it) does not exist: an absent source, not an error.
    Absent,
    /// The file exists but could not be read.
    Failed(CollectError),
}

/// Reads `path` into `buf` (cleared first). procfs and sysfs files report a size of 0, so this
/// reads to the end rather than trusting the metadata: through `Take`, because `File`'s own
/// `read_to_string` first asks for the size and position (`statx` and `lseek` on every file),
/// which are wasted syscalls here; `buf` keeps its capacity between files, so reads go straight
/// into it (`openat`, `read`, `read` at end of file, `close`).
pub(crate) fn read(path: &Path, buf: &mut String) -> Fetched {
    buf.clear();
    let result = File::open(path).and_then(|f| f.take(u64::MAX).read_to_string(buf));
    match result {
        Ok(_) => Fetched::Ok,
        Err(e) if is_absent(&e) => Fetched::Absent,
        Err(source) => Fetched::Failed(CollectError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether an I/O error means "not there" (including a path through a non-directory).
pub(crate) fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Builds the parse error for `path`.
pub(crate) fn parse_error(path: &Path, what: impl std::fmt::Display) -> CollectError {
    CollectError::Parse {
        path: path.to_path_buf(),
        what: what.to_string(),
    }
}

/// Splits `s` on ASCII whitespace and parses the `i`-th field (0-based) as `u64`.
pub(crate) fn field_u64(s: &str, i: usize) -> Option<u64> {
    s.split_ascii_whitespace().nth(i)?.parse().ok()
}

/// Reads `path` into `buf`, reporting an absent file (once per collector) or a failed read to
/// `out`; returns whether `buf` now holds the file's text.
pub(crate) fn load(
    path: &Path,
    buf: &mut String,
    out: &mut super::Out,
    source: super::Source,
) -> bool {
    match read(path, buf) {
        Fetched::Ok => true,
        Fetched::Absent => {
            out.absent(source, path, "file not found under the host root");
            false
        }
        Fetched::Failed(e) => {
            out.error(source, e);
            false
        }
    }
}
