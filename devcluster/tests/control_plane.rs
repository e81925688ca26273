//! sim as nodes only, on a real control plane (etcd, kube-apiserver and kube-controller-manager
//! v1.36 from ../shared/tools/control-plane, or `$TELEMESH_CONTROL_PLANE`): the machines register
//! and stay alive as kube-controller-manager's node lifecycle controller judges them, the kubelet
//! stand-ins run bound pods, and a deleted pod stays Terminating until its kubelet finishes it.
//! Each test says SKIPPED and passes where the binaries are absent.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use telemesh_runtime::testing::eventually;
use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, Kubelet};
use telemesh_sim::cluster::machines::{self, Machine};
use telemesh_sim::cluster::workload::Workloads;
use telemesh_sim::control_plane::{ControlPlane, ControlPlaneConfig, binaries};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "machines";

struct Cluster {
    plane: ControlPlane,
    client: Client,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A control plane with `nodes` machines registered and kept alive (no kubelets yet).
async fn cluster(test: &str, nodes: usize) -> Option<Cluster> {
    let binaries = binaries::for_test(test)?;
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::start(ControlPlaneConfig::new(binaries, dir.path().to_owned()))
        .await
        .unwrap();
    let client = plane.client().await.unwrap();
    let machines: Vec<Machine> = (0..nodes)
        .map(|i| Machine::standard(&format!("sim-node-{i}")))
        .collect();
    machines::register(&client, &machines).await.unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(machines::heartbeat(client.clone(), machines, stop.clone()));
    Some(Cluster {
        plane,
        client,
        stop,
        _dir: dir,
    })
}

impl Cluster {
    fn kubelet(&self, node: usize) {
        let kubelet = Kubelet {
            node: format!("sim-node-{node}"),
            index: u8::try_from(node).unwrap(),
            backoff: CRASH_BACKOFF,
            host_root: None,
            workloads: Workloads::default(),
        };
        let (_faults, rx) = tokio::sync::watch::channel(Vec::new());
        // The sender lives as long as the kubelet reads: keep it in the task.
        let (client, stop) = (self.client.clone(), self.stop.clone());
        tokio::spawn(async move {
            let _faults = _faults;
            kubelet.run(client, rx, stop).await;
        });
    }

    /// The namespace, once kube-controller-manager has made its `default` ServiceAccount (the
    /// ServiceAccount admission plugin refuses pods until then).
    async fn namespace(&self, name: &str) {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), name);
        eventually("the namespace's default ServiceAccount", WAIT, || {
            let accounts = accounts.clone();
            async move { accounts.get_opt("default").await.ok().flatten().map(|_| ()) }
        })
        .await;
    }

    async fn pod_on(&self, name: &str, node: &str) -> Pod {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
        }))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn machines_stay_ready_as_the_node_lifecycle_controller_judges_them() {
    let Some(c) = cluster(
        "machines_stay_ready_as_the_node_lifecycle_controller_judges_them",
        2,
    )
    .await
    else {
        return;
    };
    let nodes: Api<Node> = Api::all(c.client.clone());
    // TaintNodesByCondition taints a new node not-ready; the node lifecycle controller lifts the
    // taint once it has seen the node Ready with a fresh lease.
    for name in ["sim-node-0", "sim-node-1"] {
        eventually(
            &format!("{name} untainted by kube-controller-manager"),
            WAIT,
            || {
                let nodes = nodes.clone();
                async move {
                    let node = nodes.get(name).await.ok()?;
                    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
                    taints.is_empty().then_some(())
                }
            },
        )
        .await;
    }
    let lease = Api::<Lease>::namespaced(c.client.clone(), machines::LEASE_NAMESPACE)
        .get("sim-node-0")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("sim-node-0"));
    assert_eq!(
        spec.lease_duration_seconds,
        Some(machines::LEASE_DURATION_SECONDS)
    );
    assert!(spec.renew_time.is_some());
    assert!(
        c.plane
            .log_tail("kube-controller-manager")
            .contains("kube-controller-manager")
    );
}

#[tokio::test]
async fn a_deleted_pod_stays_terminating_until_its_kubelet_finishes_it() {
    let Some(mut c) = cluster(
        "a_deleted_pod_stays_terminating_until_its_kubelet_finishes_it",
        2,
    )
    .await
    else {
        return;
    };
    c.namespace(NS).await;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);

    // sim-node-1 has no kubelet yet: its pod's deletion waits.
    let orphan = c.pod_on("waits", "sim-node-1").await;
    let answer = pods
        .delete("waits", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = answer
        .left()
        .expect("a bound pod is not deleted at once: the API server waits for its kubelet");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert_eq!(terminating.uid(), orphan.uid());

    // sim-node-0's kubelet runs its pod, then finishes it when it is deleted.
    c.kubelet(0);
    c.pod_on("runs", "sim-node-0").await;
    eventually("the pod Running on sim-node-0", WAIT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("runs").await.ok()?;
            (pod.status?.phase.as_deref() == Some("Running")).then_some(())
        }
    })
    .await;
    pods.delete("runs", &DeleteParams::default()).await.unwrap();
    eventually(
        "the deleted pod gone once its kubelet finished it",
        WAIT,
        || {
            let pods = pods.clone();
            async move { pods.get_opt("runs").await.ok()?.is_none().then_some(()) }
        },
    )
    .await;

    // The pod on the node without a kubelet is still there, Terminating.
    let still = pods.get("waits").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    // Its kubelet starts: it finishes what was waiting.
    c.kubelet(1);
    eventually(
        "the waiting pod finished by sim-node-1's kubelet",
        WAIT,
        || {
            let pods = pods.clone();
            async move { pods.get_opt("waits").await.ok()?.is_none().then_some(()) }
        },
    )
    .await;
    assert!(c.plane.exited().is_none(), "a control-plane program exited");
}

/// What a client sees of a graceful deletion, step by step, on one API server: the answer to the
/// delete, the pod after it, a second delete asking for more time, then the kubelet's grace-0
/// delete and whether the pod is still there.
async fn graceful_deletion_as_seen(client: &Client) -> Vec<serde_json::Value> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "graceful", "namespace": NS},
        "spec": {"nodeName": "sim-node-9", "terminationGracePeriodSeconds": 45,
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let shape = |p: &Pod| {
        json!({
            "terminating": p.metadata.deletion_timestamp.is_some(),
            "grace": p.metadata.deletion_grace_period_seconds,
            "sameUid": p.uid() == created.uid(),
        })
    };
    let mut seen = Vec::new();
    let first = pods
        .delete("graceful", &DeleteParams::default())
        .await
        .unwrap();
    seen.push(first.left().as_ref().map_or(json!("deleted"), shape));
    let longer = pods
        .delete("graceful", &DeleteParams::default().grace_period(300))
        .await
        .unwrap();
    seen.push(longer.left().as_ref().map_or(json!("deleted"), shape));
    let shorter = pods
        .delete("graceful", &DeleteParams::default().grace_period(10))
        .await
        .unwrap();
    seen.push(shorter.left().as_ref().map_or(json!("deleted"), shape));
    let finished = pods
        .delete("graceful", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    seen.push(finished.left().as_ref().map_or(json!("deleted"), shape));
    seen.push(json!(pods.get_opt("graceful").await.unwrap().is_some()));
    seen
}

#[tokio::test]
async fn graceful_deletion_is_the_same_on_sim_and_the_real_api_server() {
    let Some(c) = cluster(
        "graceful_deletion_is_the_same_on_sim_and_the_real_api_server",
        0,
    )
    .await
    else {
        return;
    };
    c.namespace(NS).await;
    let real = graceful_deletion_as_seen(&c.client).await;

    let sim = telemesh_sim::Sim::start(telemesh_sim::SimConfig::default())
        .await
        .unwrap();
    let client = sim.client().await.unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let simulated = graceful_deletion_as_seen(&client).await;

    assert_eq!(
        real,
        vec![
            json!({"terminating": true, "grace": 45, "sameUid": true}),
            json!({"terminating": true, "grace": 45, "sameUid": true}),
            json!({"terminating": true, "grace": 10, "sameUid": true}),
            // The grace-0 delete answers with the pod as it was deleted.
            json!({"terminating": true, "grace": 0, "sameUid": true}),
            json!(false),
        ],
        "the real API server"
    );
    assert_eq!(simulated, real, "sim against the real API server");
}

#[tokio::test]
async fn the_nodes_command_plays_machines_for_any_api_server() {
    let Some(c) = cluster("the_nodes_command_plays_machines_for_any_api_server", 0).await else {
        return;
    };
    let _nodes = tokio::process::Command::new(env!("CARGO_BIN_EXE_telemesh-sim"))
        .args(["nodes", "--nodes", "2", "--kubeconfig"])
        .arg(c.plane.kubeconfig())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("starting telemesh-sim nodes");
    c.namespace(NS).await;
    let nodes: Api<Node> = Api::all(c.client.clone());
    eventually("sim-node-1 registered and untainted", WAIT, || {
        let nodes = nodes.clone();
        async move {
            let node = nodes.get_opt("sim-node-1").await.ok()??;
            let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
            taints.is_empty().then_some(())
        }
    })
    .await;
    c.pod_on("played", "sim-node-1").await;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    eventually("the pod Running on sim-node-1", WAIT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("played").await.ok()?;
            (pod.status?.phase.as_deref() == Some("Running")).then_some(())
        }
    })
    .await;
}
