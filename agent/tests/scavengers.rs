//! Scavenger pods end to end, in-process: sim's kubelet stand-in plays two scavenger pods (one
//! checkpointing every second and touching its marker under the node's host root, one that
//! never checkpoints), a real agent publishes `s:<uid>` with the checkpoint it observed (the
//! marker's time, or the pod's start for the one without), and when the node's scripted PSI
//! stays high it evicts the pod that loses the least unsaved work, through the rate-limited
//! evictor, and drops its key.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use telemesh_core::gossip::Role;
use telemesh_core::scavenge::{
    CHECKPOINT_INTERVAL_ANNOTATION, CHECKPOINT_VOLUME, JOB_LABEL, ScavengerPod,
};
use telemesh_runtime::gossip::GossipMember;
use telemesh_runtime::testing::eventually;
use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, Kubelet};
use telemesh_sim::cluster::workload::{CHECKPOINT_EVERY_ANNOTATION, WORK_ANNOTATION, marker_path};
use tokio_util::sync::CancellationToken;

use common::{NS, PolicyEnv, WAIT, host_root};

const NODE: &str = "sim-node-0";

fn scavenger(name: &str, checkpoint_every: Option<&str>, interval_secs: u64) -> Pod {
    let mut annotations = serde_json::json!({
        WORK_ANNOTATION: "1h",
        CHECKPOINT_INTERVAL_ANNOTATION: interval_secs.to_string(),
    });
    if let Some(every) = checkpoint_every {
        annotations[CHECKPOINT_EVERY_ANNOTATION] = every.into();
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": NS, "labels": {JOB_LABEL: name},
                     "annotations": annotations},
        "spec": {"nodeName": NODE, "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "telemesh-checkpoint-demo",
                                 "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
                 "volumes": [{"name": CHECKPOINT_VOLUME, "emptyDir": {}}]}
    }))
    .unwrap()
}

fn pressure(root: &Path, avg10: f64) {
    let text = format!(
        "some avg10={avg10:.2} avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    );
    let tmp = root.join("proc/pressure/.cpu.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, root.join("proc/pressure/cpu")).unwrap();
}

async fn get_metrics(addr: std::net::SocketAddr) -> String {
    let url = format!("http://{addr}/metrics");
    let body = telemesh_sim::cluster::http::request(http::Method::GET, &url, None)
        .await
        .unwrap();
    String::from_utf8(body.to_vec()).unwrap()
}

fn millis(t: SystemTime) -> u64 {
    u64::try_from(t.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

#[tokio::test]
async fn scavengers_are_gossiped_with_observed_checkpoints_and_evicted_least_unsaved_first() {
    let env = PolicyEnv::start(1, &[]).await;
    let root = env.dir.path().join("hosts").join(NODE);
    host_root(&root, "");
    pressure(&root, 1.0);
    let stop = CancellationToken::new();
    let _stop_on_drop = stop.clone().drop_guard();
    let kubelet = Kubelet {
        node: NODE.into(),
        index: 0,
        backoff: CRASH_BACKOFF,
        host_root: Some(root.clone()),
        workloads: env.sim.workloads.clone(),
    };
    tokio::spawn(kubelet.run(
        env.client.clone(),
        tokio::sync::watch::channel(Vec::new()).1,
        stop.clone(),
    ));
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let saver = pods
        .create(&PostParams::default(), &scavenger("saver", Some("1s"), 60))
        .await
        .unwrap();
    let loser = pods
        .create(&PostParams::default(), &scavenger("loser", None, 3600))
        .await
        .unwrap();
    let (saver_uid, loser_uid) = (saver.metadata.uid.unwrap(), loser.metadata.uid.unwrap());

    let config = env.agent_config(
        NODE,
        &root,
        &[
            "--scavenger-pressure-threshold=50".into(),
            "--scavenger-pressure-for=300ms".into(),
            // One eviction a minute: the second scavenger stays however long the pressure does.
            "--max-evictions-per-minute=1".into(),
        ],
    );
    let agent = telemesh_agent::start(config, stop.child_token())
        .await
        .unwrap();
    let observer_config = env.agent_config(
        "observer",
        &root,
        &[format!("--gossip-seeds={}", agent.gossip_addr)],
    );
    let observer = GossipMember::start(
        observer_config
            .gossip
            .member_config("observer", Role::Observer)
            .unwrap(),
    )
    .await
    .unwrap();
    let observer = &observer;
    let gossiped = || async move {
        let members = observer.members().await;
        let node = members.iter().find(|m| &*m.id.node_name == NODE)?;
        Some(node.state.scavengers.clone())
    };

    // The loser never touches its marker and declares an hour's window: its checkpoint is its
    // start.
    let loser_started = eventually("the loser's start time", WAIT, || async {
        let pod = pods.get("loser").await.ok()?;
        Some(SystemTime::from(pod.status?.start_time?.0))
    })
    .await;
    let saver_marker = marker_path(&root, &saver_uid);
    let (seen_saver, seen_loser) = eventually(
        "s: keys with the saver's observed marker time and the loser's start",
        WAIT,
        || async {
            let keys = gossiped().await?;
            let marker = std::fs::metadata(&saver_marker).ok()?.modified().ok()?;
            let saver: ScavengerPod = keys.get(&saver_uid)?.clone();
            let loser: ScavengerPod = keys.get(&loser_uid)?.clone();
            (saver.checkpoint_ms == millis(marker) && loser.checkpoint_ms == millis(loser_started))
                .then_some((saver, loser))
        },
    )
    .await;
    assert_eq!(seen_saver.job, format!("{NS}/saver"));
    assert_eq!(
        (seen_saver.cpu_millis, seen_saver.memory_bytes),
        (250, 64 << 20)
    );
    assert_eq!(seen_loser.job, format!("{NS}/loser"));

    // Sustained pressure: the saver loses under a second of work, the loser everything since it
    // started, so the saver goes.
    pressure(&root, 90.0);
    eventually("the saver evicted", WAIT, || async {
        pods.get_opt("saver").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        pods.get_opt("loser").await.unwrap().is_some(),
        "one eviction a minute: the loser stays"
    );
    let addr = agent.http_addr;
    eventually("the eviction counted", WAIT, || async move {
        get_metrics(addr)
            .await
            .contains("telemesh_agent_scavenger_evictions_total{outcome=\"evicted\"} 1\n")
            .then_some(())
    })
    .await;
    eventually("the saver's key removed", WAIT, || async {
        let keys = gossiped().await?;
        (!keys.contains_key(&saver_uid) && keys.contains_key(&loser_uid)).then_some(())
    })
    .await;
    agent.shutdown().await;
}
