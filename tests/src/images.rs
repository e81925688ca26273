//! Telemesh's container images as `scripts/images.sh --hermetic` builds them, run with buildah:
//! `buildah run --isolation chroot` runs a command in an image's root filesystem without a
//! container runtime (none runs on our machines: their sandbox refuses `podman run`'s
//! setrlimit). `scripts/test.sh` builds the images and names their tag in
//! [`IMAGE_TAG_VAR`]; without it the image tests say SKIPPED.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::process::Command;

/// The variable naming the tag of the images under test (`scripts/test.sh` sets it).
pub const IMAGE_TAG_VAR: &str = "TELEMESH_IMAGE_TAG";

/// The images' repository prefix: `scripts/images.sh`'s default `REGISTRY`.
pub const REGISTRY: &str = "telemesh";

/// The tag of the images under test, or why there are none to test here.
pub fn image_tag() -> Result<String, String> {
    let tag = std::env::var(IMAGE_TAG_VAR).map_err(|_| {
        format!(
            "{IMAGE_TAG_VAR} is not set (scripts/test.sh builds the images with buildah and sets it)"
        )
    })?;
    buildah(&["version"]).map_err(|e| format!("buildah cannot run here: {e}"))?;
    Ok(tag)
}

/// `REGISTRY/name:tag`, as the chart names its images.
pub fn reference(name: &str, tag: &str) -> String {
    format!("{REGISTRY}/{name}:{tag}")
}

/// Runs buildah with `args`; returns its standard output, or what went wrong.
pub fn buildah(args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new("buildah")
        .args(args)
        .output()
        .map_err(|e| format!("cannot start buildah: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "buildah {} exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The image's configuration (`buildah inspect`'s `OCIv1.config`: User, Entrypoint, Env,
/// WorkingDir, Labels) and its size as buildah reports it (`110MB`).
pub fn inspect(reference: &str) -> (serde_json::Value, String) {
    let text = buildah(&["inspect", "--type", "image", reference])
        .unwrap_or_else(|e| panic!("inspecting {reference}: {e}"));
    let mut image: serde_json::Value =
        serde_json::from_str(&text).expect("buildah inspect prints JSON");
    let size = buildah(&["images", "--noheading", "--format", "{{.Size}}", reference])
        .map(|s| s.split_whitespace().collect())
        .unwrap_or_default();
    (image["OCIv1"]["config"].take(), size)
}

/// A buildah working container made from an image; removed on drop.
#[derive(Debug)]
pub struct WorkingContainer {
    name: String,
}

impl WorkingContainer {
    /// `buildah from` the image in the local store (never pulled), under a name of its own.
    pub fn from_image(reference: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "telemesh-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        buildah(&[
            "from",
            "--quiet",
            "--pull=never",
            "--name",
            &name,
            reference,
        ])
        .unwrap_or_else(|e| panic!("making a container from {reference}: {e}"));
        Self { name }
    }

    /// A command running `program` inside the container, as the image's user, with each of
    /// `mounts` (host directories) bound at the same path and `env` set (the container does
    /// not inherit the command's environment). The container shares the host's network, as
    /// the agent's DaemonSet pod does (`hostNetwork`). Start it with
    /// [`Process::spawn_group`](crate::Process::spawn_group): killing `buildah run` alone
    /// leaves `program` running.
    pub fn command(&self, mounts: &[&Path], env: &[(&str, &str)], program: &str) -> Command {
        let mut cmd = Command::new("buildah");
        cmd.args(["run", "--isolation", "chroot"]);
        for mount in mounts {
            cmd.arg("--volume")
                .arg(format!("{}:{}", mount.display(), mount.display()));
        }
        for (key, value) in env {
            cmd.arg("--env").arg(format!("{key}={value}"));
        }
        cmd.arg(&self.name).arg("--").arg(program);
        cmd
    }

    /// The container's root filesystem, mounted on the host (`buildah mount`).
    pub fn root(&self) -> PathBuf {
        let out = buildah(&["mount", &self.name])
            .unwrap_or_else(|e| panic!("mounting {}: {e}", self.name));
        PathBuf::from(out.trim())
    }
}

impl Drop for WorkingContainer {
    fn drop(&mut self) {
        let _ = buildah(&["rm", &self.name]);
    }
}

/// The process running `program` (its name, as `/proc/PID/comm` shows it truncated) in the
/// process group `group`: the command a `buildah run` started. It is the container's main
/// process, which the kubelet would signal (`buildah run` itself kills its command on SIGTERM
/// instead of passing the signal on).
pub fn process_in_group(group: u32, program: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
        let (head, rest) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1;
        let pgrp: u32 = rest.split_whitespace().nth(2)?.parse().ok()?;
        (pgrp == group && program.starts_with(comm) && !comm.is_empty()).then_some(pid)
    })
}

/// The agent inside its image, as a mesh runs it ([`Mesh::start_in_image`](crate::mesh::Mesh::start_in_image)).
#[derive(Debug)]
pub struct AgentImage {
    /// The container every agent of the mesh runs in.
    pub container: WorkingContainer,
    /// The agent binary's path in the image (its entrypoint).
    pub program: String,
}
