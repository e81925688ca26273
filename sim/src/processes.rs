//! Child processes with their output in log files, all stopped (and waited for) together, so
//! none is left behind: the dev cluster's agents and coordinators, a real control plane's
//! etcd, kube-apiserver and controllers.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use anyhow::Context as _;
use tokio::process::{Child, Command};

/// The children, by name.
#[derive(Debug, Default)]
pub struct Processes {
    children: Vec<Running>,
}

#[derive(Debug)]
struct Running {
    name: String,
    program: PathBuf,
    log: PathBuf,
    child: Child,
    /// Earlier runs of this child (see [`Processes::respawn`]).
    earlier: u32,
}

impl Processes {
    /// Starts `program args`, its stdout and stderr in `log` (a new file). Returns its pid.
    pub fn spawn(
        &mut self,
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> anyhow::Result<u32> {
        let child = start(name, program, args, log)?;
        let pid = child.id().unwrap_or_default();
        self.children.push(Running {
            name: name.to_owned(),
            program: program.to_owned(),
            log: log.to_owned(),
            child,
            earlier: 0,
        });
        Ok(pid)
    }

    /// Starts the exited child `name` again, the same program with `args`, in its place. Its
    /// earlier run's log is kept beside the log as `<log>.<n>` (n = 1 for the first run);
    /// returns that path.
    pub fn respawn(&mut self, name: &str, args: &[String]) -> anyhow::Result<PathBuf> {
        let running = self
            .children
            .iter_mut()
            .find(|r| r.name == name)
            .with_context(|| format!("no child named {name} to start again"))?;
        anyhow::ensure!(
            matches!(running.child.try_wait(), Ok(Some(_))),
            "{name} is still running; only an exited child is started again"
        );
        let kept = PathBuf::from(format!("{}.{}", running.log.display(), running.earlier + 1));
        std::fs::rename(&running.log, &kept).with_context(|| {
            format!(
                "keeping {}'s log {} as {}",
                name,
                running.log.display(),
                kept.display()
            )
        })?;
        running.child = start(name, &running.program, args, &running.log)?;
        running.earlier += 1;
        Ok(kept)
    }

    /// The first child that has exited, if any.
    pub fn exited(&mut self) -> Option<(String, ExitStatus)> {
        self.children
            .iter_mut()
            .find_map(|r| match r.child.try_wait() {
                Ok(Some(status)) => Some((r.name.clone(), status)),
                _ => None,
            })
    }

    /// How child `name` ended, if it has.
    pub fn status(&mut self, name: &str) -> Option<ExitStatus> {
        self.children
            .iter_mut()
            .find(|r| r.name == name)
            .and_then(|r| r.child.try_wait().ok().flatten())
    }

    /// Child `name`'s pid while it runs.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.children
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| r.child.id())
    }

    /// Kills every child and waits for each, so none outlives the dev cluster.
    pub async fn stop_all(&mut self) {
        for r in &mut self.children {
            if let Err(e) = r.child.start_kill() {
                tracing::debug!(name = %r.name, error = %e, "already gone");
            }
        }
        for r in &mut self.children {
            if let Err(e) = r.child.wait().await {
                tracing::warn!(name = %r.name, error = %e, "waiting for a child failed");
            }
        }
        self.children.clear();
    }
}

/// Starts `program args` with its output in a new `log`.
fn start(name: &str, program: &Path, args: &[String], log: &Path) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone().context("duplicating the log file handle")?;
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // A dev cluster that panics or is dropped still takes its children with it.
        .kill_on_drop(true)
        // Its own process group: a terminal's Ctrl-C reaches only the dev cluster, which
        // then stops its children itself (none dies early and looks like a crash).
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {name} ({})", program.display()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A child that exits at once is started again in its place, its first log kept aside.
    #[tokio::test]
    async fn an_exited_child_is_started_again_with_new_arguments_and_its_old_log_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("child.log");
        let sh = Path::new("/bin/sh");
        let mut processes = Processes::default();
        processes
            .spawn(
                "child",
                sh,
                &["-c".into(), "echo first; exit 3".into()],
                &log,
            )
            .unwrap();
        let first = wait_exit(&mut processes).await;
        assert_eq!(first.code(), Some(3));
        let kept = processes
            .respawn("child", &["-c".into(), "echo second; exit 0".into()])
            .unwrap();
        assert_eq!(kept, dir.path().join("child.log.1"));
        let second = wait_exit(&mut processes).await;
        assert!(second.success());
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "first\n");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "second\n");
        processes.stop_all().await;
    }

    #[tokio::test]
    async fn a_running_child_is_not_started_twice() {
        let dir = tempfile::tempdir().unwrap();
        let mut processes = Processes::default();
        let sh = Path::new("/bin/sh");
        processes
            .spawn(
                "child",
                sh,
                &["-c".into(), "exec sleep 30".into()],
                &dir.path().join("log"),
            )
            .unwrap();
        assert!(processes.pid("child").is_some());
        let err = processes.respawn("child", &[]).unwrap_err();
        assert!(err.to_string().contains("still running"), "{err}");
        assert!(processes.respawn("nobody", &[]).is_err());
        processes.stop_all().await;
        assert_eq!(processes.pid("child"), None);
    }

    async fn wait_exit(processes: &mut Processes) -> ExitStatus {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                if let Some(status) = processes.status("child") {
                    return status;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the child exits within 10s")
    }
}
