//! Where the control plane's programs are: `$TELEMESH_CONTROL_PLANE` (a folder holding `etcd`,
//! `kube-apiserver`, `kube-controller-manager` and `kube-scheduler`: any upstream v1.33+
//! release binaries), else the xz-compressed copies our machines keep in
//! `../shared/tools/control-plane/` beside the workspace, unpacked (and checked against their
//! checksums) by their own `unpack.sh` into the workspace's cache, `target/control-plane/`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The variable naming a folder of control-plane executables.
pub const ENV: &str = "TELEMESH_CONTROL_PLANE";

/// The programs a control plane is made of.
pub const PROGRAMS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// The workspace this crate was built in (the folder holding the root Cargo.toml).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

/// The folder of control-plane executables: `$TELEMESH_CONTROL_PLANE`, else the shared tools
/// unpacked into `<workspace>/target/control-plane`. `Ok(None)` when neither exists (the
/// caller skips or says what to set); an error when a named folder lacks a program or the
/// unpacking fails.
pub fn locate() -> anyhow::Result<Option<PathBuf>> {
    if let Some(dir) = std::env::var_os(ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        check(&dir).with_context(|| format!("${ENV}={}", dir.display()))?;
        return Ok(Some(dir));
    }
    let root = workspace_root();
    let script = root.join("../shared/tools/control-plane/unpack.sh");
    if !script.is_file() {
        return Ok(None);
    }
    let cache = root.join("target/control-plane");
    unpack(&script, &cache)?;
    check(&cache)?;
    Ok(Some(cache))
}

/// Runs `unpack.sh` into `cache`, one process at a time (test binaries and the dev cluster may
/// ask at once): the script leaves checked binaries alone, so only the first pays.
fn unpack(script: &Path, cache: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
    let lock_path = cache.join(".unpack.lock");
    let lock = std::fs::File::create(&lock_path)
        .with_context(|| format!("creating {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    // The stamp holds the checksums the last unpack checked: while they are the shared
    // tools' own, the binaries are those (later calls need not read 325 MB again).
    let sums = script.with_file_name("SHA256SUMS");
    let expected =
        std::fs::read_to_string(&sums).with_context(|| format!("reading {}", sums.display()))?;
    let stamp = cache.join(".unpacked");
    if PROGRAMS.iter().all(|p| cache.join(p).is_file())
        && std::fs::read_to_string(&stamp).is_ok_and(|s| s == expected)
    {
        return Ok(());
    }
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg(cache)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} {} failed ({}): {}",
        script.display(),
        cache.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    std::fs::write(&stamp, expected).with_context(|| format!("writing {}", stamp.display()))
}

fn check(dir: &Path) -> anyhow::Result<()> {
    for program in PROGRAMS {
        let path = dir.join(program);
        anyhow::ensure!(path.is_file(), "{} is missing", path.display());
    }
    Ok(())
}

/// [`locate`] for a test: the folder, or None after printing `SKIPPED <test>: ...` on stderr
/// (past the harness's capture, so a passing run shows it). An error locating them (a broken
/// `$TELEMESH_CONTROL_PLANE`, a failed unpack) fails the test: it is not an absence.
pub fn for_test(test: &str) -> Option<PathBuf> {
    match locate() {
        Ok(Some(dir)) => Some(dir),
        Ok(None) => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: no control-plane binaries (set {ENV} to a folder holding {})",
                PROGRAMS.join(", ")
            );
            None
        }
        Err(e) => panic!("locating the control-plane binaries for {test}: {e:#}"),
    }
}
