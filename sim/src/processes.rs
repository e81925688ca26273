//! Child processes with their output in log files, all stopped (and waited for) together, so
//! none is left behind: the dev cluster's agents and coordinators, a real control plane's
//! etcd, kube-apiserver and controllers.

use std::path::Path;
use std::process::{ExitStatus, Stdio};

use anyhow::Context as _;
use tokio::process::{Child, Command};

/// The children, by name.
#[derive(Debug, Default)]
pub struct Processes {
    children: Vec<(String, Child)>,
}

impl Processes {
    /// Starts `program args`, its stdout and stderr appended to `log`. Returns its pid.
    pub fn spawn(
        &mut self,
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> anyhow::Result<u32> {
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating the log file handle")?;
        let child = Command::new(program)
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
            .with_context(|| format!("starting {name} ({})", program.display()))?;
        let pid = child.id().unwrap_or_default();
        self.children.push((name.to_owned(), child));
        Ok(pid)
    }

    /// The first child that has exited, if any.
    pub fn exited(&mut self) -> Option<(String, ExitStatus)> {
        self.children
            .iter_mut()
            .find_map(|(name, c)| match c.try_wait() {
                Ok(Some(status)) => Some((name.clone(), status)),
                _ => None,
            })
    }

    /// Kills every child and waits for each, so none outlives the dev cluster.
    pub async fn stop_all(&mut self) {
        for (name, child) in &mut self.children {
            if let Err(e) = child.start_kill() {
                tracing::debug!(%name, error = %e, "already gone");
            }
        }
        for (name, child) in &mut self.children {
            if let Err(e) = child.wait().await {
                tracing::warn!(%name, error = %e, "waiting for a child failed");
            }
        }
        self.children.clear();
    }
}
