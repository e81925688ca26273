//! The controller against sim (its API server and Job controller; no scheduler, so pods stay
//! unbound): how often a long queue of waiting jobs is reconciled.
#![allow(clippy::unwrap_used)]

use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use prometheus_client::registry::Registry;
use serde_json::json;
use telemesh_core::scavenge::controller::{QueueMode, UseMode};
use telemesh_core::scavenge::crd::{CRD_YAML, PRIORITY_CLASS_YAML, ScavengerJobStatus};
use telemesh_runtime::testing::eventually;
use telemesh_sim::{Sim, SimConfig};

use super::*;

/// Bounds a broken run; not a timing goal.
const WAIT: Duration = Duration::from_secs(60);
/// How many jobs wait behind the running one.
const QUEUED: usize = 30;

async fn install(client: &Client) {
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(CRD_YAML).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let class: PriorityClass = serde_yaml_ng::from_str(PRIORITY_CLASS_YAML).unwrap();
    Api::<PriorityClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let node: Node =
        serde_json::from_value(telemesh_sim::nodes::node_object("node-0", "8", "32Gi", 110))
            .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let sjs = Api::<ScavengerJob>::all(client.clone());
    eventually("the ScavengerJob CRD served", WAIT, || {
        let sjs = sjs.clone();
        async move { sjs.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// Creates ScavengerJob `name` of one pod requesting `cpu`, checkpointing every second (so a
/// running one is reconciled about once a second).
async fn scavenger(sjs: &Api<ScavengerJob>, name: &str, cpu: &str) {
    let sj: ScavengerJob = serde_json::from_value(json!({
        "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"image": "registry.example/work:1", "checkpointInterval": "1s",
                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
    }))
    .unwrap();
    sjs.create(&PostParams::default(), &sj).await.unwrap();
}

async fn status(sjs: &Api<ScavengerJob>, name: &str) -> Option<ScavengerJobStatus> {
    sjs.get(name).await.ok()?.status
}

/// Thirty jobs wait behind a running one on a full cluster, none of which may start: they are
/// not reconciled every admission interval, so the running job's reconciles do not wait behind
/// theirs, and the deletion of its pod is noticed before even one round over the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_jobs_that_may_not_start_are_not_polled_and_a_preemption_is_noticed_first() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().await.unwrap();
    install(&client).await;
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    tokio::spawn(telemesh_sim::cluster::controllers::run(
        client.clone(),
        stop.clone(),
    ));
    let metrics = Metrics::register(&mut Registry::default());
    // A short interval: before, the thirty waiting jobs kept the one-at-a-time queue busy.
    let admission_interval = Duration::from_millis(20);
    let parts = Parts {
        client: client.clone(),
        settings: Settings {
            enabled: true,
            threshold: 0.7,
            mode: UseMode::Requested,
            queue: QueueMode::Strict,
            unschedulable_timeout: Duration::from_secs(120),
            start_timeout: Duration::from_secs(300),
            admission_interval,
            check_secrets: false,
        },
        metrics: metrics.clone(),
        view: ClusterView::default(),
        stale_after: Duration::from_secs(45),
        replica: "test".into(),
    };
    let controller = controller(&client);
    let ctx = context(parts, controller.store(), &stop);
    tokio::spawn(control(controller, ctx.clone(), stop.clone()));

    // The running job takes half of the 8 CPUs; each waiting one would make 75 %.
    let sjs = Api::<ScavengerJob>::namespaced(client.clone(), "default");
    scavenger(&sjs, "running", "4").await;
    let pod = eventually("the running job's pod recorded", WAIT, || async {
        let s = status(&sjs, "running").await?;
        (s.phase == Phase::Running).then_some(())?;
        s.pods.first().cloned()
    })
    .await;
    let names: Vec<String> = (0..QUEUED).map(|i| format!("waiting-{i:02}")).collect();
    for name in &names {
        scavenger(&sjs, name, "2").await;
    }
    // Settled: each says why it waits, by its place in the queue.
    let told = |position: usize| match position {
        0 => "waiting for room: cluster use would be 75% with this job, over the 70% threshold"
            .to_owned(),
        1 => "waiting for its turn: 1 ScavengerJob ahead in the queue".to_owned(),
        n => format!("waiting for its turn: {n} ScavengerJobs ahead in the queue"),
    };
    eventually("every waiting job told why it waits", WAIT, || async {
        for (position, name) in names.iter().enumerate() {
            let s = status(&sjs, name).await?;
            (s.phase == Phase::Pending && s.message == told(position)).then_some(())?;
        }
        Some(())
    })
    .await;

    // Five of the running job's checkpoint windows (some 250 admission intervals; its
    // reconciles record each): the waiting jobs, none of which may start, are not reconciled
    // meanwhile (before, each was, every interval).
    let waiting = ctx.reconciles(Reconciled::Waiting);
    let window = |s: &ScavengerJobStatus| s.checkpoint_window_start.as_ref().map(|t| t.0);
    let first = window(&status(&sjs, "running").await.unwrap()).unwrap();
    eventually(
        "five checkpoint windows of the running job",
        WAIT,
        || async {
            let now = window(&status(&sjs, "running").await?)?;
            (now.duration_since(first) >= k8s_openapi::jiff::SignedDuration::from_secs(5))
                .then_some(())
        },
    )
    .await;
    let polled = ctx.reconciles(Reconciled::Waiting) - waiting;
    assert!(
        polled < QUEUED as u64,
        "{polled} reconciles of jobs that may not start over five checkpoint windows"
    );

    // Its pod deleted (as by preemption), the running job is interrupted before the queue
    // has been gone over once.
    let waiting = ctx.reconciles(Reconciled::Waiting);
    Api::<Pod>::namespaced(client.clone(), "default")
        .delete(&pod, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the running job interrupted", WAIT, || async {
        let s = status(&sjs, "running").await?;
        (s.interrupted_count == 1).then_some(())
    })
    .await;
    let polled = ctx.reconciles(Reconciled::Waiting) - waiting;
    assert!(
        polled < QUEUED as u64,
        "{polled} reconciles of waiting jobs before the interruption was noticed"
    );
    // Counted once its status is written (a failed write is retried, and must not count
    // twice), so the counter follows the status the test just read.
    eventually("the interruption counted", WAIT, || async {
        (metrics.interruptions.get() > 0).then_some(())
    })
    .await;
    assert_eq!(metrics.interruptions.get(), 1);
}
