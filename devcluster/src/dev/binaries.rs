//! Where the dev cluster finds the binaries it starts.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Finds `telemesh-agent` and `telemesh-coordinator`: in `dir`, else beside this binary (cargo
/// builds them all into one target directory).
pub fn binary(dir: Option<&Path>, name: &str) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(d) => d.to_owned(),
        None => std::env::current_exe()
            .context("locating telemesh-sim")?
            .parent()
            .map(Path::to_owned)
            .context("telemesh-sim has no parent directory")?,
    };
    let path = dir.join(name);
    anyhow::ensure!(
        path.is_file(),
        "{} not found; build the binaries first (`cargo build --workspace --bins`, which \
         scripts/dev.sh does) or pass --bin-dir",
        path.display()
    );
    Ok(path)
}
