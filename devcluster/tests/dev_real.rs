//! `telemesh-sim dev --control-plane real` end to end: the dev cluster on the upstream control
//! plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), Telemesh installed from
//! deploy/manifests/telemesh.yaml, each agent and coordinator process authenticated as its own
//! service account. Headless, it must tell the whole health story and exit 0, leaving nothing
//! running. Skipped (passing, with a `SKIPPED` line) where no control-plane binaries are found.
#![allow(clippy::unwrap_used)]

mod dev_support;

use dev_support::tell_health_story;

#[tokio::test]
async fn headless_dev_cluster_on_a_real_control_plane_tells_the_whole_story() {
    const TEST: &str = "headless_dev_cluster_on_a_real_control_plane_tells_the_whole_story";
    // The dev cluster finds the same binaries (or $TELEMESH_CONTROL_PLANE) itself.
    if telemesh_sim::control_plane::binaries::for_test(TEST).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Port 0 (dev()'s --listen): the control plane takes a random 127.a.b.c of its own.
    let stdout = tell_health_story(dir.path(), &["--control-plane", "real"]).await;
    assert!(
        stdout.contains("installed Telemesh from deploy/manifests/telemesh.yaml"),
        "{stdout}"
    );
}
