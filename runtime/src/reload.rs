//! Reloading mounted files when they change: the one mechanism behind TLS certificate reload
//! (extender HTTPS, QUIC both ways) and the gossip keyring reload.
//!
//! **Decision: compare the files' contents, no file-watch crate.** Kubernetes updates a mounted
//! Secret by writing a new timestamped directory and swapping the `..data` symlink; the file a
//! process opened keeps pointing at the old, deleted inode. inotify watches (the `notify` crate)
//! then report the deletion of what they watched, not the new file, and must be re-armed on the
//! directory, which is why controller-runtime's certwatcher added a polling fallback. A
//! signature of each file's contents read through the symlinks (length and hash) changes on a
//! symlink swap and on an in-place write alike, costs a few microseconds for files of a few
//! KB, and needs no task: TLS checks it on each handshake (so the next handshake after a
//! rotation uses the new files, and established connections are never touched), gossip on a
//! timer (datagrams are too frequent to look for each). A `stat` signature (device, inode,
//! modification time, length) was tried first and missed a rewrite of the same length within
//! one tick of the file system's coarse clock, or into a freed inode reused at once.
//!
//! A reload runs while the signature is held, so a handshake that comes during it waits for the
//! new material rather than taking the change as handled and using the old one. A reload that
//! fails (a half-written pair, a bad file) keeps the previous material, logs a warning and
//! counts, and is tried again when the files change again.

use std::hash::{DefaultHasher, Hasher as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

/// One file's length and contents' hash; `None` when it cannot be read.
type Stat = Option<(usize, u64)>;

/// A set of files and their signature when last looked at.
#[derive(Debug)]
pub struct Watched {
    paths: Vec<PathBuf>,
    last: Mutex<Vec<Stat>>,
}

// === impl Watched ===

impl Watched {
    /// Starts watching `paths`, as they are now.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        let now = signature(&paths);
        Self {
            paths,
            last: Mutex::new(now),
        }
    }

    /// Returns true, once, when any file changed since the last call (or since `new`).
    pub fn changed(&self) -> bool {
        self.on_change(|| ())
    }

    /// Runs `reload` when any file changed since the last look, and returns whether it ran.
    /// Callers that look meanwhile wait until `reload` is done, then see no change.
    pub fn on_change(&self, reload: impl FnOnce()) -> bool {
        let mut last = self.last.lock();
        let now = signature(&self.paths);
        if *last == now {
            return false;
        }
        reload();
        *last = now;
        true
    }

    /// The files watched.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

fn signature(paths: &[PathBuf]) -> Vec<Stat> {
    paths
        .iter()
        .map(|p| {
            std::fs::read(p).ok().map(|bytes| {
                let mut hash = DefaultHasher::new();
                hash.write(&bytes);
                (bytes.len(), hash.finish())
            })
        })
        .collect()
}

/// A value loaded from files, reloaded when they change.
pub struct Reloading<T> {
    what: &'static str,
    files: Watched,
    current: RwLock<Arc<T>>,
    load: Box<dyn Fn() -> Result<T, String> + Send + Sync>,
    reloads: AtomicU64,
    failures: AtomicU64,
}

impl<T> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("what", &self.what)
            .field("files", &self.files.paths)
            .finish_non_exhaustive()
    }
}

// === impl Reloading ===

impl<T: Send + Sync + 'static> Reloading<T> {
    /// Loads `what` from `paths` with `load` now (its error is returned as is), and again
    /// whenever [`Self::get`] finds the files changed (then its error is logged and counted).
    pub fn new<E: std::fmt::Display>(
        what: &'static str,
        paths: Vec<PathBuf>,
        load: impl Fn() -> Result<T, E> + Send + Sync + 'static,
    ) -> Result<Self, E> {
        // The signature is taken before the first load: a change during it is seen next time.
        let files = Watched::new(paths);
        let first = load()?;
        Ok(Self {
            what,
            files,
            current: RwLock::new(Arc::new(first)),
            load: Box::new(move || load().map_err(|e| e.to_string())),
            reloads: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    }

    /// The current value, reloaded first if the files changed.
    pub fn get(&self) -> Arc<T> {
        self.files.on_change(|| match (self.load)() {
            Ok(value) => {
                *self.current.write() = Arc::new(value);
                self.reloads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(what = self.what, files = ?self.files.paths, "reloaded after the files changed");
            }
            Err(error) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    what = self.what,
                    %error,
                    "files changed but do not load; keeping the previous ones until they change again"
                );
            }
        });
        self.current.read().clone()
    }

    /// Successful reloads so far.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Failed reloads so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use telemesh_core::testing::kubelet_swap;

    fn number(path: PathBuf) -> Reloading<u32> {
        Reloading::new("number", vec![path.clone()], move || {
            std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())?
                .trim()
                .parse::<u32>()
                .map_err(|e| e.to_string())
        })
        .unwrap()
    }

    #[test]
    fn a_secret_symlink_swap_is_seen_once() {
        let dir = tempfile::tempdir().unwrap();
        kubelet_swap(dir.path(), 1, &[("n", b"1")]).unwrap();
        let r = number(dir.path().join("n"));
        assert_eq!(*r.get(), 1);
        kubelet_swap(dir.path(), 2, &[("n", b"2")]).unwrap();
        assert_eq!(*r.get(), 2);
        assert_eq!(*r.get(), 2);
        assert_eq!((r.reloads(), r.failures()), (1, 0));
    }

    #[test]
    fn a_bad_file_keeps_the_previous_value_until_it_changes_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        let r = number(path.clone());
        std::fs::write(&path, "not a number, and longer").unwrap();
        assert_eq!(*r.get(), 1);
        assert_eq!(*r.get(), 1);
        assert_eq!(r.failures(), 1, "tried once per change, not once per call");
        std::fs::write(&path, "3").unwrap();
        assert_eq!(*r.get(), 3);
    }

    #[test]
    fn a_look_during_a_reload_waits_for_the_new_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        let (loading, started) = std::sync::mpsc::channel();
        let slow = Arc::new(
            Reloading::new("number", vec![path.clone()], {
                let path = path.clone();
                let loading = Mutex::new(loading);
                move || {
                    let n = std::fs::read_to_string(&path)
                        .unwrap()
                        .parse::<u32>()
                        .unwrap();
                    if n == 2 {
                        loading.lock().send(()).unwrap();
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    Ok::<_, String>(n)
                }
            })
            .unwrap(),
        );
        std::fs::write(&path, "2").unwrap();
        let first = std::thread::spawn({
            let slow = slow.clone();
            move || *slow.get()
        });
        // The first look is loading the new value; a second look now must not get the old one.
        started.recv().unwrap();
        assert_eq!(*slow.get(), 2);
        assert_eq!(first.join().unwrap(), 2);
        assert_eq!(slow.reloads(), 1);
    }

    #[test]
    fn a_rewrite_of_the_same_length_at_once_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        let r = number(path.clone());
        for n in 2..=9 {
            std::fs::write(&path, n.to_string()).unwrap();
            assert_eq!(*r.get(), n);
        }
    }

    #[test]
    fn the_first_load_fails_with_the_loaders_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing");
        let err = Reloading::<u32>::new("number", vec![path.clone()], move || {
            std::fs::read_to_string(&path).map(|_| 0)
        })
        .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
