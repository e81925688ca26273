//! Workload actions end to end: WAM's JSON-RPC calls sent to `POST /rpc` of the replica that
//! does not lead, executed by the leader among two real telemesh-coordinator processes, against sim with its kubelets
//! and controllers and the real kube-scheduler calling the coordinators' extender (the shipped
//! dev configuration), so the placement is enforced with every default filter on.
//!
//! - Create, Move, Delete and Swap do what they say (pods on the nodes, the exact pod gone,
//!   replica counts), a Move never leaves its workload below its count, and a callback tells
//!   the caller when an action ended;
//! - failure paths: a cordoned node (Failed with the scheduler's reason, count restored), a pod
//!   no scheduler serves (Failed, count restored), a new pod that never gets Ready
//!   (RolledBack), an unknown pod;
//! - killing the leader (SIGKILL) with 200 actions queued or running: the other replica takes
//!   over and every action ends exactly once, no replica added twice.
//!
//! The leader kill and Create/Move/Delete/Swap also run on a real control plane (etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler v1.36, sim's kubelets on the
//! nodes: `telemesh_tests::real`), where the controllers, the scheduler and graceful deletion
//! are upstream's own.
//!
//! Skipped, saying so, when the kube-scheduler binary (or, for the real runs, the control
//! plane) is absent.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt as _;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use telemesh_core::action::{ActionPhase, WorkloadAction};
use telemesh_sim::cluster::kubelet::{Fault, FaultRule};
use telemesh_tests::cluster::{ClusterParts, create_deployment, create_deployment_with, live_pods};
use telemesh_tests::mesh::Mesh;
use telemesh_tests::real::RealEnv;
use telemesh_tests::rpc;
use telemesh_tests::upstream::{KUBE_SCHEDULER, KubeScheduler};
use telemesh_tests::{SimEnv, eventually};

const NS: &str = "ul";
const NODES: [&str; 4] = ["sim-node-0", "sim-node-1", "sim-node-2", "sim-node-3"];
/// Bounds a broken run; not a timing goal.
const WAIT: Duration = Duration::from_secs(90);
const COORDINATOR_ARGS: [&str; 4] = [
    "--leader-lease-duration=3s",
    "--action-ready-timeout=10s",
    "--action-unschedulable-grace=1s",
    "--action-parallelism=16",
];

/// The API server a scene runs on.
#[derive(Debug, Clone, Copy)]
enum Backend {
    /// sim with its kubelets and controllers, the real kube-scheduler v1.32.
    Sim,
    /// The real control plane (kube-controller-manager's controllers, kube-scheduler v1.36),
    /// sim's kubelets on the nodes.
    Real,
}

/// What runs under the coordinators (held for their Drop: they stop the cluster).
#[allow(clippy::large_enum_variant, reason = "one per test, never moved about")]
enum Cluster {
    Sim {
        _env: SimEnv,
        parts: ClusterParts,
        _scheduler: KubeScheduler,
    },
    Real(RealEnv),
}

impl Cluster {
    /// Makes the kubelets apply `rules` from now on.
    fn set_faults(&self, rules: Vec<FaultRule>) {
        match self {
            Self::Sim { parts, .. } => parts.set_faults(rules),
            Self::Real(env) => env.set_faults(rules),
        }
    }
}

struct Scene {
    cluster: Cluster,
    mesh: Mesh,
    client: Client,
    /// The replica that does not lead at the start.
    standby: String,
}

impl Scene {
    /// sim with four nodes, two coordinators and kube-scheduler calling the extender of the
    /// one that does not lead (so the leader can die while scheduling goes on).
    async fn start(test: &str) -> Option<Self> {
        Self::start_on(test, Backend::Sim).await
    }

    /// [`Scene::start`] on `backend`.
    async fn start_on(test: &str, backend: Backend) -> Option<Self> {
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let nodes: Vec<(&str, &str)> = NODES.iter().map(|n| (*n, "node_metric 1\n")).collect();
        match backend {
            Backend::Sim => {
                let binary = KUBE_SCHEDULER.find(test)?;
                let env = SimEnv::start(NODES.len()).await;
                let parts = ClusterParts::start(&env, NODES.len()).await;
                let client = env.client().await;
                install(&client).await;
                let mesh = Mesh::start_with(&env, &nodes, &[], &COORDINATOR_ARGS, 2).await;
                let (mesh, standby) = leader_first(&client, mesh).await;
                let scheduler =
                    KubeScheduler::start(&binary, &env, &mesh.coordinators[1].url_prefix(), true);
                Some(Self {
                    cluster: Cluster::Sim {
                        _env: env,
                        parts,
                        _scheduler: scheduler,
                    },
                    mesh,
                    client,
                    standby,
                })
            }
            Backend::Real => {
                let mut env = RealEnv::start(test, NODES.len()).await?;
                let client = env.client().await;
                install(&client).await;
                env.wait_default_service_account(NS).await;
                let mesh = Mesh::start_with(&env, &nodes, &[], &COORDINATOR_ARGS, 2).await;
                let (mesh, standby) = leader_first(&client, mesh).await;
                env.start_scheduler(&mesh.coordinators[1].url_prefix(), true);
                Some(Self {
                    cluster: Cluster::Real(env),
                    mesh,
                    client,
                    standby,
                })
            }
        }
    }

    async fn deployment(&self, name: &str, replicas: i32) {
        create_deployment(&self.client, NS, name, replicas).await;
    }

    /// A Deployment whose container also has `extra` (a readinessProbe, ...).
    async fn deployment_with(&self, name: &str, replicas: i32, extra: Value) {
        create_deployment_with(&self.client, NS, name, replicas, extra).await;
    }

    /// Sends `method` with `params` to the standby replica's `POST /rpc` in WAM's dialect (the
    /// seed's body shape): any replica accepts, the leader runs. Returns the action's name.
    async fn act(&self, method: &str, params: Value) -> String {
        act(self.mesh.coordinators[1].api, method, params).await
    }
}

async fn act(api: std::net::SocketAddr, method: &str, params: Value) -> String {
    let reply = rpc::call(api, None, &format!("action.{method}"), params).await;
    assert_eq!(reply["error"], Value::Null, "{method} refused: {reply}");
    reply["result"]["actionId"].as_str().unwrap().to_owned()
}

/// The WorkloadAction CRD and the scene's namespace.
async fn install(client: &Client) {
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(telemesh_core::action::crd::CRD_YAML).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// `mesh` with the replica that leads first and the standby second, and the standby's name.
async fn leader_first(client: &Client, mut mesh: Mesh) -> (Mesh, String) {
    let leader = leader(client).await;
    let standby = if leader == "coordinator-1" {
        mesh.coordinators.swap(0, 1);
        "coordinator-0"
    } else {
        "coordinator-1"
    };
    (mesh, standby.to_owned())
}

/// The replica holding the executor Lease, once one does.
async fn leader(client: &Client) -> String {
    let leases =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), "default");
    eventually("a replica to hold the executor Lease", WAIT, || {
        let leases = leases.clone();
        async move {
            let lease = leases.get_opt("telemesh-coordinator").await.ok()??;
            lease.spec?.holder_identity.filter(|h| !h.is_empty())
        }
    })
    .await
}

/// Waits until `holder` holds the executor Lease.
async fn wait_leader(client: &Client, holder: &str) {
    eventually(
        &format!("{holder} to take the executor Lease"),
        WAIT,
        || async move { (leader(client).await == holder).then_some(()) },
    )
    .await;
}

async fn ended(client: &Client, name: &str) -> WorkloadAction {
    let api = Api::<WorkloadAction>::namespaced(client.clone(), NS);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let a = api.get(name).await.unwrap();
        if a.phase().is_terminal() {
            return a;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "action {name} did not end within {WAIT:?}: {}",
            serde_json::to_string_pretty(&a.status).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn message(a: &WorkloadAction) -> String {
    a.status
        .as_ref()
        .map(|s| s.message.clone())
        .unwrap_or_default()
}

/// Live (not terminating) pods of `app` by name → node.
async fn pods(client: &Client, app: &str) -> BTreeMap<String, String> {
    live_pods(client, NS, app).await
}

async fn replicas(client: &Client, name: &str) -> i32 {
    Api::<Deployment>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap()
        .spec
        .unwrap()
        .replicas
        .unwrap_or(1)
}

async fn create(scene: &Scene, app: &str, node: &str) -> WorkloadAction {
    let name = scene
        .act(
            "Create",
            json!({"workload": {"namespace": NS, "kind": "Deployment", "name": app}, "node": {"name": node}}),
        )
        .await;
    ended(&scene.client, &name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_move_delete_and_swap_do_what_they_say() {
    let test = "create_move_delete_and_swap_do_what_they_say";
    if let Some(scene) = Scene::start_on(test, Backend::Sim).await {
        create_move_delete_and_swap(scene).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_move_delete_and_swap_do_what_they_say_on_a_real_control_plane() {
    let test = "create_move_delete_and_swap_do_what_they_say_on_a_real_control_plane";
    if let Some(scene) = Scene::start_on(test, Backend::Real).await {
        create_move_delete_and_swap(scene).await;
    }
}

async fn create_move_delete_and_swap(scene: Scene) {
    let client = scene.client.clone();
    scene.deployment("test-a", 0).await;
    scene.deployment("test-b", 0).await;

    // Create A on node 3, then on node 1.
    let a = create(&scene, "test-a", "sim-node-3").await;
    assert_eq!(a.phase(), ActionPhase::Succeeded, "{}", message(&a));
    let created = &a.status.as_ref().unwrap().pods_created;
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].node, "sim-node-3");
    let a = create(&scene, "test-a", "sim-node-1").await;
    assert_eq!(a.phase(), ActionPhase::Succeeded, "{}", message(&a));
    let now = pods(&client, "test-a").await;
    let mut nodes: Vec<&str> = now.values().map(String::as_str).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["sim-node-1", "sim-node-3"], "{now:?}");
    assert_eq!(replicas(&client, "test-a").await, 2);

    // Move A's pod from node 1 to node 2: make before break, never below two live pods.
    let on_1 = now
        .iter()
        .find(|(_, n)| *n == "sim-node-1")
        .unwrap()
        .0
        .clone();
    let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let low_water = tokio::spawn({
        let (client, watching) = (client.clone(), watching.clone());
        async move {
            let mut lowest = usize::MAX;
            while watching.load(std::sync::atomic::Ordering::Relaxed) {
                lowest = lowest.min(pods(&client, "test-a").await.len());
            }
            lowest
        }
    });
    let moved = scene
        .act(
            "Move",
            json!({"pod": {"namespace": NS, "name": on_1}, "node": {"name": "sim-node-2"}}),
        )
        .await;
    let moved = ended(&client, &moved).await;
    assert_eq!(moved.phase(), ActionPhase::Succeeded, "{}", message(&moved));
    let after = pods(&client, "test-a").await;
    assert!(
        !after.contains_key(&on_1),
        "the moved pod is gone: {after:?}"
    );
    let mut nodes: Vec<&str> = after.values().map(String::as_str).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["sim-node-2", "sim-node-3"], "{after:?}");
    assert_eq!(replicas(&client, "test-a").await, 2);
    watching.store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        low_water.await.unwrap(),
        2,
        "test-a never ran fewer than 2 pods during the move"
    );
    let removed = &moved.status.as_ref().unwrap().pods_removed;
    assert_eq!(
        removed.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        [on_1.as_str()]
    );

    // Delete exactly A's pod on node 3.
    let on_3 = after
        .iter()
        .find(|(_, n)| *n == "sim-node-3")
        .unwrap()
        .0
        .clone();
    let (callback, mut called) = rpc::callee().await;
    let deleted = scene
        .act(
            "Delete",
            json!({"pod": {"namespace": NS, "name": on_3}, "callbackURL": callback}),
        )
        .await;
    let id = deleted.clone();
    let deleted = ended(&client, &deleted).await;
    assert_eq!(
        deleted.phase(),
        ActionPhase::Succeeded,
        "{}",
        message(&deleted)
    );
    let after = pods(&client, "test-a").await;
    assert_eq!(after.keys().collect::<Vec<_>>().len(), 1, "{after:?}");
    assert!(
        !after.contains_key(&on_3),
        "exactly the named pod went: {after:?}"
    );
    assert_eq!(replicas(&client, "test-a").await, 1);
    // The caller is told once the action ended, with what action.Get returns; the delivery is
    // recorded.
    let told = tokio::time::timeout(WAIT, called.recv())
        .await
        .expect("the callback within the wait")
        .unwrap();
    assert_eq!(
        (&told["actionId"], &told["phase"], &told["method"]),
        (&json!(id), &json!("Succeeded"), &json!("Delete")),
        "{told}"
    );
    eventually("the callback recorded as delivered", WAIT, || {
        let (client, id) = (client.clone(), id.clone());
        async move {
            let a = Api::<WorkloadAction>::namespaced(client, NS)
                .get(&id)
                .await
                .ok()?;
            a.status?
                .callback
                .filter(|c| c.delivered && c.attempts == 1)
        }
    })
    .await;

    // Swap A (node 2) with B (node 0).
    let b = create(&scene, "test-b", "sim-node-0").await;
    assert_eq!(b.phase(), ActionPhase::Succeeded, "{}", message(&b));
    let pod_a = pods(&client, "test-a").await.into_keys().next().unwrap();
    let pod_b = pods(&client, "test-b").await.into_keys().next().unwrap();
    let swap = scene
        .act(
            "Swap",
            json!({"x": {"namespace": NS, "name": pod_a}, "y": {"namespace": NS, "name": pod_b}}),
        )
        .await;
    let swap = ended(&client, &swap).await;
    assert_eq!(swap.phase(), ActionPhase::Succeeded, "{}", message(&swap));
    assert_eq!(
        pods(&client, "test-a")
            .await
            .into_values()
            .collect::<Vec<_>>(),
        ["sim-node-0"]
    );
    assert_eq!(
        pods(&client, "test-b")
            .await
            .into_values()
            .collect::<Vec<_>>(),
        ["sim-node-2"]
    );
    assert_eq!(
        (
            replicas(&client, "test-a").await,
            replicas(&client, "test-b").await
        ),
        (1, 1)
    );
    drop(scene.cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_end_failed_or_rolled_back_with_the_workload_restored() {
    let Some(scene) =
        Scene::start("failures_end_failed_or_rolled_back_with_the_workload_restored").await
    else {
        return;
    };
    let client = scene.client.clone();
    // Ready only after its first probe, a second after it starts: a container that crashes
    // sooner is never Ready.
    scene
        .deployment_with(
            "test-a",
            0,
            json!({"readinessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 1}}),
        )
        .await;

    // A cordoned node: the default filters refuse it, so the Create fails with the
    // scheduler's reason and the count is restored.
    Api::<Node>::all(client.clone())
        .patch(
            "sim-node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    let a = create(&scene, "test-a", "sim-node-1").await;
    assert_eq!(a.phase(), ActionPhase::Failed, "{}", message(&a));
    assert!(
        message(&a).contains("node sim-node-1 cannot take the new pod"),
        "{}",
        message(&a)
    );
    assert!(
        message(&a).contains("unschedulable"),
        "the scheduler's reason: {}",
        message(&a)
    );
    assert_eq!(replicas(&client, "test-a").await, 0);
    eventually("the refused pod to go", WAIT, || {
        let client = client.clone();
        async move { pods(&client, "test-a").await.is_empty().then_some(()) }
    })
    .await;

    // A pod no scheduler serves never reaches the extender: the Create fails once the Ready
    // wait runs out, and the count is restored.
    scene.deployment("test-x", 0).await;
    Api::<Deployment>::namespaced(client.clone(), NS)
        .patch(
            "test-x",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"template": {"spec": {"schedulerName": "no-such-scheduler"}}}}),
            ),
        )
        .await
        .unwrap();
    let x = create(&scene, "test-x", "sim-node-0").await;
    assert_eq!(x.phase(), ActionPhase::Failed, "{}", message(&x));
    assert!(
        message(&x).contains(
            "no new pod of Deployment ul/test-x was Running and Ready on node sim-node-0"
        ),
        "{}",
        message(&x)
    );
    assert_eq!(replicas(&client, "test-x").await, 0);

    // A new pod that never gets Ready (it crashes on node 2): the Move rolls back.
    let a = create(&scene, "test-a", "sim-node-0").await;
    assert_eq!(a.phase(), ActionPhase::Succeeded, "{}", message(&a));
    let original = pods(&client, "test-a").await.into_keys().next().unwrap();
    scene.cluster.set_faults(vec![FaultRule {
        node: "sim-node-2".into(),
        selector: BTreeMap::from([("app.kubernetes.io/name".into(), "test-a".into())]),
        fault: Fault::Crash,
        every: Duration::from_millis(1),
    }]);
    let moved = scene
        .act(
            "Move",
            json!({"pod": {"namespace": NS, "name": original}, "node": {"name": "sim-node-2"}}),
        )
        .await;
    let moved = ended(&client, &moved).await;
    assert_eq!(
        moved.phase(),
        ActionPhase::RolledBack,
        "{}",
        message(&moved)
    );
    assert!(message(&moved).contains("Ready"), "{}", message(&moved));
    assert_eq!(replicas(&client, "test-a").await, 1);
    eventually("only the original pod to remain", WAIT, || {
        let (client, original) = (client.clone(), original.clone());
        async move {
            let now = pods(&client, "test-a").await;
            (now.len() == 1 && now.contains_key(&original)).then_some(())
        }
    })
    .await;

    // An unknown pod.
    let gone = scene
        .act(
            "Delete",
            json!({"pod": {"namespace": NS, "name": "no-such-pod"}}),
        )
        .await;
    let gone = ended(&client, &gone).await;
    assert_eq!(gone.phase(), ActionPhase::Failed);
    assert!(
        message(&gone).contains("pod ul/no-such-pod does not exist"),
        "{}",
        message(&gone)
    );
    drop(scene.mesh);
}

/// Kills the leader while 200 Creates over 20 Deployments are queued or running; the standby
/// takes over and every action ends exactly once: every Deployment has exactly as many replicas
/// as Creates that succeeded on it, its live pods are exactly the pods those Creates made, and
/// no pod is claimed by two actions. A Create whose pod is not Ready within the scene's ready
/// timeout (a loaded machine) fails and undoes itself, which the counts hold to the same rule.
/// `TELEMESH_LEADER_KILL_ACTIONS` changes the count (scripts/actions-leader-kill.sh runs 1,000);
/// the counts are printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_loses_no_action_and_applies_no_step_twice() {
    let test = "killing_the_leader_loses_no_action_and_applies_no_step_twice";
    if let Some(scene) = Scene::start_on(test, Backend::Sim).await {
        leader_kill(scene).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_loses_no_action_and_applies_no_step_twice_on_a_real_control_plane() {
    let test =
        "killing_the_leader_loses_no_action_and_applies_no_step_twice_on_a_real_control_plane";
    if let Some(scene) = Scene::start_on(test, Backend::Real).await {
        leader_kill(scene).await;
    }
}

async fn leader_kill(mut scene: Scene) {
    let client = scene.client.clone();
    const WORKLOADS: usize = 20;
    let actions: usize = std::env::var("TELEMESH_LEADER_KILL_ACTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    assert!(
        actions.is_multiple_of(WORKLOADS),
        "a multiple of {WORKLOADS} actions"
    );
    // Room for every pod (sim's nodes take 110 pods, as a kubelet's default).
    let per_node = actions.div_ceil(NODES.len()) + 10;
    if per_node > 110 {
        for node in NODES {
            Api::<Node>::all(client.clone())
                .patch_status(
                    node,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"status": {"allocatable": {"pods": per_node.to_string()},
                                                   "capacity": {"pods": per_node.to_string()}}}),
                    ),
                )
                .await
                .unwrap();
        }
    }
    for w in 0..WORKLOADS {
        scene.deployment(&format!("w{w}"), 0).await;
    }
    // Sent 16 at a time, so most are still queued when the leader dies.
    let api_addr = scene.mesh.coordinators[1].api;
    let names: Vec<String> = futures::stream::iter(0..actions)
        .map(|i| {
            act(
                api_addr,
                "Create",
                json!({"workload": {"namespace": NS, "kind": "Deployment", "name": format!("w{}", i % WORKLOADS)},
                       "node": {"name": NODES[i % NODES.len()]}}),
            )
        })
        .buffered(16)
        .collect()
        .await;
    // Let the leader get going, then kill it mid-flight.
    let api = Api::<WorkloadAction>::namespaced(client.clone(), NS);
    let ended_before_kill = eventually("some actions to end", WAIT, || {
        let api = api.clone();
        async move {
            let list = api.list(&ListParams::default()).await.ok()?;
            let n = list
                .items
                .iter()
                .filter(|a| a.phase().is_terminal())
                .count();
            (n >= 10).then_some(n)
        }
    })
    .await;
    scene.mesh.coordinators[0].process.kill().await;
    let killed_at = tokio::time::Instant::now();
    wait_leader(&client, &scene.standby).await;
    let took_over = killed_at.elapsed();
    // Pods created by the Creates that succeeded, by Deployment; a pod claimed twice fails.
    let mut created: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut claimed: BTreeMap<String, String> = BTreeMap::new();
    let mut timed_out = 0;
    for name in &names {
        let a = ended(&client, name).await;
        let why = message(&a);
        let phase = a.phase();
        let status = a.status.unwrap();
        match phase {
            ActionPhase::Succeeded => {
                assert_eq!(status.pods_created.len(), 1, "{name} created one pod");
                let pod = &status.pods_created[0];
                if let Some(other) = claimed.insert(pod.uid.clone(), name.clone()) {
                    panic!("pod {} claimed by both {other} and {name}", pod.name);
                }
                created
                    .entry(a.spec.target)
                    .or_default()
                    .push(pod.name.clone());
            }
            // A new pod slower to get Ready than the scene's 10 s (a loaded machine) fails its
            // Create, which undoes the scale-up: that too ends the action exactly once, and
            // the counts below hold it to that. Any other ending is a defect.
            ActionPhase::Failed
                if why.contains("was Running and Ready on node")
                    && why.ends_with("the replica count is restored") =>
            {
                assert!(status.pods_created.is_empty(), "{name}: {status:?}");
                timed_out += 1;
            }
            phase => panic!("{name} ended {phase:?}: {why}"),
        }
    }
    // The standby did the work the leader left: more Creates succeeded than had ended at all
    // when the leader died.
    assert!(
        claimed.len() > ended_before_kill,
        "{} Creates succeeded, {ended_before_kill} had ended before the kill ({timed_out} timed out)",
        claimed.len()
    );
    let mut replicas_total = 0;
    let mut pods_total = 0;
    for w in 0..WORKLOADS {
        let name = format!("w{w}");
        let mut expected = created
            .remove(&format!("Deployment/{name}"))
            .unwrap_or_default();
        expected.sort();
        let replicas = replicas(&client, &name).await;
        assert_eq!(replicas, i32::try_from(expected.len()).unwrap(), "{name}");
        let live: Vec<String> = pods(&client, &name).await.into_keys().collect();
        assert_eq!(
            live, expected,
            "{name}: the live pods are those its Creates made"
        );
        replicas_total += usize::try_from(replicas).unwrap();
        pods_total += live.len();
    }
    eprintln!(
        "leader killed (SIGKILL) with {ended_before_kill} of {actions} actions ended; {} took over \
         {:.1} s later; {} of {actions} Succeeded and {timed_out} Failed (a pod not Ready in \
         time, undone), each exactly once ({} distinct pods created); {WORKLOADS} Deployments: \
         {replicas_total} replicas, {pods_total} live pods",
        scene.standby,
        took_over.as_secs_f64(),
        claimed.len(),
        claimed.len(),
    );
}
