//! The workload model through the real API: a kubelet stand-in runs an annotated scavenger pod,
//! touches its checkpoint marker under the node's host root, loses only the work since the last
//! checkpoint when the pod is deleted, and the next pod of the job resumes; the figures are
//! served as JSON on sim's address.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use telemesh_core::scavenge::{CHECKPOINT_VOLUME, JOB_LABEL};
use telemesh_runtime::testing::eventually;
use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, Kubelet};
use telemesh_sim::cluster::workload::{
    CHECKPOINT_EVERY_ANNOTATION, WORK_ANNOTATION, WORKLOADS_PATH, marker_path,
};
use telemesh_sim::{Sim, SimConfig};

const WAIT: Duration = Duration::from_secs(20);

fn scavenger(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {JOB_LABEL: "render"},
                     "annotations": {WORK_ANNOTATION: "3s", CHECKPOINT_EVERY_ANNOTATION: "500ms"}},
        "spec": {"nodeName": "sim-node-0", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "demo",
                                 "resources": {"requests": {"cpu": "2"}}}],
                 "volumes": [{"name": CHECKPOINT_VOLUME, "emptyDir": {}}]}
    }))
    .unwrap()
}

async fn figures(sim: &Sim) -> Value {
    let url = format!("{}{WORKLOADS_PATH}", sim.url());
    let body = telemesh_sim::cluster::http::request(http::Method::GET, &url, None)
        .await
        .unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn a_deleted_scavenger_loses_only_unsaved_work_and_the_next_pod_resumes() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 1).unwrap();
    let client = sim.client().await.unwrap();
    let host = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let _stop_on_drop = stop.clone().drop_guard();
    let kubelet = Kubelet {
        node: "sim-node-0".into(),
        index: 0,
        backoff: CRASH_BACKOFF,
        host_root: Some(host.path().to_owned()),
        workloads: sim.workloads.clone(),
    };
    tokio::spawn(kubelet.run(client.clone(), watch::channel(Vec::new()).1, stop.clone()));
    let pods = Api::<Pod>::namespaced(client.clone(), "default");

    let first = pods
        .create(&PostParams::default(), &scavenger("first"))
        .await
        .unwrap();
    let uid = first.metadata.uid.unwrap();
    let marker = marker_path(host.path(), &uid);
    let sim = &sim;
    eventually("two checkpoints of the first pod", WAIT, || async {
        let f = figures(sim).await;
        (f["jobs"]["default/render"]["savedSeconds"].as_f64()? >= 1.0).then_some(())
    })
    .await;
    let progress: f64 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(progress >= 1.0, "the marker says {progress}");

    pods.delete("first", &DeleteParams::default())
        .await
        .unwrap();
    let after = eventually("the interruption counted", WAIT, || async {
        let f = figures(sim).await;
        (f["total"]["interruptions"] == 1).then_some(f)
    })
    .await;
    let job = &after["jobs"]["default/render"];
    let wasted = job["wastedSeconds"].as_f64().unwrap();
    let saved = job["savedSeconds"].as_f64().unwrap();
    assert!(
        wasted < 0.5,
        "lost {wasted} s: less than one checkpoint period"
    );
    assert_eq!(job["wastedCpuSeconds"].as_f64().unwrap(), wasted * 2.0);
    assert_eq!(after["total"]["wastedCpuSeconds"], job["wastedCpuSeconds"]);
    assert_eq!(job["done"], false);
    eventually("the gone pod's directory removed", WAIT, || async {
        (!marker.exists()).then_some(())
    })
    .await;

    pods.create(&PostParams::default(), &scavenger("second"))
        .await
        .unwrap();
    eventually("the second pod Succeeded", WAIT, || async {
        let pod = pods.get("second").await.ok()?;
        (pod.status?.phase.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    let f = figures(sim).await;
    let job = &f["jobs"]["default/render"];
    assert_eq!(
        job["resumedSeconds"].as_f64().unwrap(),
        saved,
        "resumed, not from zero"
    );
    assert_eq!(job["done"], true);
    assert_eq!(job["completions"], 1);
    assert_eq!(
        job["wastedSeconds"].as_f64().unwrap(),
        wasted,
        "completion wastes nothing"
    );
    assert_eq!(job["savedSeconds"].as_f64().unwrap(), 3.0);
}
