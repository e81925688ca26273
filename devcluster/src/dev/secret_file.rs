//! Files only their owner reads (keys, kubeconfigs, tokens): written with mode 0600 from the
//! start, so there is no moment they are readable by others.

use std::path::Path;

use anyhow::Context as _;

/// Writes `text` to `path`, created or truncated, mode 0600.
pub fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}
