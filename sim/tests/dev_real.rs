//! `telemesh-sim dev --control-plane real` end to end: the dev cluster on the upstream control
//! plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), Telemesh installed from
//! deploy/manifests/telemesh.yaml, each agent and coordinator process authenticated as its own
//! service account. Headless, it must tell the whole health story and exit 0, leaving nothing
//! running. Skipped (passing, with a `SKIPPED` line) where no control-plane binaries are found.
#![allow(clippy::unwrap_used)]

mod dev_support;

use std::time::Duration;

use dev_support::{assert_health_story_told, dev, processes_under};

#[tokio::test]
async fn headless_dev_cluster_on_a_real_control_plane_tells_the_whole_story() {
    const TEST: &str = "headless_dev_cluster_on_a_real_control_plane_tells_the_whole_story";
    // The dev cluster finds the same binaries (or $TELEMESH_CONTROL_PLANE) itself.
    if telemesh_sim::control_plane::binaries::for_test(TEST).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Port 0 (dev()'s --listen): the control plane takes a random 127.a.b.c of its own.
    let child = dev(
        dir.path(),
        &["--control-plane", "real", "--nodes", "3", "--for", "150s"],
    );
    let out = tokio::time::timeout(Duration::from_secs(200), child.wait_with_output())
        .await
        .expect("telemesh-sim dev --for 150s overran its own deadline")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "dev failed:\n{stdout}");
    assert!(
        stdout.contains("installed Telemesh from deploy/manifests/telemesh.yaml"),
        "{stdout}"
    );
    assert_health_story_told(&stdout);
    assert_eq!(
        processes_under(dir.path()),
        Vec::<u32>::new(),
        "left running"
    );
}
