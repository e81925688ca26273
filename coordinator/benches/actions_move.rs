//! The executor's overhead per Move beyond what the cluster itself takes. In one process: sim
//! with a kubelet stand-in per node, its workload controllers and its scheduler stand-in
//! (configured from deploy/scheduler/kube-scheduler-config.dev.yaml with the extender's URL
//! pointed at the replica, so every placement asks the coordinator's extender as in
//! production), and one coordinator replica that holds the executor's Lease. A Deployment of
//! `REPLICAS` pods spread over `NODES` nodes; then `MOVES` sequential `action.Move`s, each
//! POSTed to `/rpc` and waited for with `action.Wait` (after `WARMUP` unmeasured ones), each
//! started once the Deployment is quiet again (its status caught up with the previous Move).
//!
//! Per Move, all times taken by this process's clock:
//! - **end to end**: from sending the `action.Move` POST to `action.Wait` replying Succeeded.
//! - **new pod start-up**: from this benchmark's watch seeing the Deployment's `spec.replicas`
//!   go up by one to it seeing the new pod Running with `Ready=True`. That span is the
//!   Deployment and ReplicaSet controllers creating the pod, the scheduler placing it (its
//!   extender call included) and the kubelet starting it: work that would be the same if a
//!   person had run `kubectl scale`, and that the executor can only wait for.
//! - **old pod removal**: from the watch seeing `spec.replicas` go back down to it seeing the
//!   old pod deleted (or terminating): the controllers' and the API server's part of the
//!   scale-down.
//! - **overhead** = end to end − (start-up + removal): everything else, i.e. accepting the
//!   POST, the lead loop noticing the action, resolving it, every status write and read, the
//!   executor's own watches, its wait for the Deployment's status to catch up before it trusts
//!   deletion cost (shown separately as *status catch-up*, from the new pod Ready to the
//!   Deployment's status counting it, because it is the controller's time but the executor
//!   chooses to wait for it), ending the action, the Events, and `action.Wait` noticing the end.
//!   Both boundaries of each cluster span are seen through the same kind of watch, so its
//!   delivery latency cancels out; the overhead is the executor's cost a caller feels.
//!
//! Also printed: each segment of the action's own timeline from `status` (`spec.receivedAt`,
//! `status.startedAt`, every step's `startedAt`/`finishedAt`, `status.completedAt`, in
//! microseconds), gaps between steps included, so a slow part shows by name.
//!
//! Target (issue 16): overhead < 20 ms per Move.
//! Run: `cargo bench -p telemesh-coordinator --bench actions_move`; `MOVES` (default 30),
//! `WARMUP` (2), `REPLICAS` (3) and `NODES` (4) change the run.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Full};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use telemesh_coordinator::actions::executor::cluster;
use telemesh_core::action::{ActionPhase, WorkloadAction};
use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, Kubelet};
use telemesh_sim::cluster::scheduler::{self, config::SchedulerConfiguration};
use tokio_util::sync::CancellationToken;

#[path = "../tests/support/actions_env.rs"]
mod actions_env;

const NS: &str = "bench";
const APP: &str = "mover";
/// Bounds a broken run; not a timing goal.
const WAIT: Duration = Duration::from_secs(60);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the benchmark's own watches saw, and when.
#[derive(Debug, Clone)]
enum Seen {
    /// The Deployment with this `spec.replicas`, its status caught up or not.
    Deployment { replicas: i32, settled: bool },
    /// A pod, Running and Ready or not, or gone (deleted or terminating).
    Pod {
        name: String,
        ready: bool,
        gone: bool,
    },
}

/// Each sighting with the monotonic and the wall clock (the latter to place it among the
/// action's own timestamps).
type Log = Arc<Mutex<Vec<(Instant, jiff::Timestamp, Seen)>>>;

/// Follows the namespace's pods and Deployments into `log` until `stop`.
fn observe(client: &Client, log: &Log, stop: &CancellationToken) {
    let pods = watcher::watcher(
        Api::<Pod>::namespaced(client.clone(), NS),
        watcher::Config::default(),
    )
    .map(|e| {
        e.map(|e| match e {
            Event::Apply(p) | Event::InitApply(p) => vec![Seen::Pod {
                name: p.name_any(),
                ready: cluster::is_running_and_ready(&p),
                gone: cluster::is_terminating(&p),
            }],
            Event::Delete(p) => vec![Seen::Pod {
                name: p.name_any(),
                ready: false,
                gone: true,
            }],
            Event::Init | Event::InitDone => Vec::new(),
        })
    })
    .boxed();
    let deployments = watcher::watcher(
        Api::<Deployment>::namespaced(client.clone(), NS),
        watcher::Config::default(),
    )
    .map(|e| {
        e.map(|e| match e {
            Event::Apply(d) | Event::InitApply(d) => vec![Seen::Deployment {
                replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                settled: cluster::deployment_settled(&d),
            }],
            Event::Delete(_) | Event::Init | Event::InitDone => Vec::new(),
        })
    })
    .boxed();
    for mut stream in [pods, deployments] {
        let (log, stop) = (log.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => return,
                    e = stream.next() => e,
                };
                match event {
                    None => return,
                    Some(Ok(seen)) => {
                        let (now, wall) = (Instant::now(), jiff::Timestamp::now());
                        log.lock()
                            .unwrap()
                            .extend(seen.into_iter().map(|s| (now, wall, s)));
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "the benchmark's watch failed"),
                }
            }
        });
    }
}

/// Kubelets for `nodes`, the controllers, and sim's scheduler asking the replica's extender.
fn start_cluster(
    client: &Client,
    nodes: usize,
    extender: std::net::SocketAddr,
    stop: &CancellationToken,
) {
    for i in 0..nodes {
        let kubelet = Kubelet {
            node: format!("sim-node-{i}"),
            index: u8::try_from(i).unwrap(),
            backoff: CRASH_BACKOFF,
            host_root: None,
            workloads: telemesh_sim::cluster::workload::Workloads::default(),
        };
        tokio::spawn(kubelet.run(
            client.clone(),
            tokio::sync::watch::channel(Vec::new()).1,
            stop.clone(),
        ));
    }
    tokio::spawn(telemesh_sim::cluster::controllers::run(
        client.clone(),
        stop.clone(),
    ));
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/scheduler/kube-scheduler-config.dev.yaml");
    let mut config = SchedulerConfiguration::load(&shipped).unwrap();
    assert_eq!(
        config.extenders.len(),
        1,
        "the dev configuration has one extender"
    );
    config.extenders[0].url_prefix = format!("http://{extender}/scheduler");
    let settings = scheduler::Settings {
        config,
        ..scheduler::Settings::default()
    };
    let (decisions, _) = tokio::sync::broadcast::channel(16);
    tokio::spawn(scheduler::run(
        client.clone(),
        settings,
        decisions,
        stop.clone(),
    ));
}

async fn deployment(client: &Client, replicas: usize) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": APP, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": APP}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": APP}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
}

/// Waits until the Deployment's status has caught up and `replicas` pods run Ready with no
/// other pod around; returns them, name → node.
async fn quiet(client: &Client, replicas: usize) -> BTreeMap<String, String> {
    let (deployments, pods) = (
        Api::<Deployment>::namespaced(client.clone(), NS),
        Api::<Pod>::namespaced(client.clone(), NS),
    );
    telemesh_runtime::testing::eventually("the Deployment to be quiet", WAIT, || {
        let (deployments, pods) = (deployments.clone(), pods.clone());
        async move {
            let d = deployments.get(APP).await.ok()?;
            if !cluster::deployment_settled(&d) {
                return None;
            }
            let all = pods.list(&Default::default()).await.ok()?.items;
            let ready = all
                .iter()
                .filter(|p| cluster::is_running_and_ready(p))
                .count();
            (all.len() == replicas && ready == replicas).then(|| {
                all.iter()
                    .map(|p| {
                        (
                            p.name_any(),
                            cluster::node_of(p).unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
        }
    })
    .await
}

/// The pod to move (one on the busiest node) and where to (the least busy other node).
fn pick(pods: &BTreeMap<String, String>, nodes: usize) -> (String, String) {
    let mut load: BTreeMap<String, usize> =
        (0..nodes).map(|i| (format!("sim-node-{i}"), 0)).collect();
    for node in pods.values() {
        *load.entry(node.clone()).or_default() += 1;
    }
    let busiest = load
        .iter()
        .max_by_key(|(n, c)| (**c, std::cmp::Reverse(*n)))
        .unwrap()
        .0;
    let pod = pods.iter().find(|(_, n)| *n == busiest).unwrap().0.clone();
    let target = load
        .iter()
        .filter(|(n, _)| *n != busiest)
        .min_by_key(|(n, c)| (**c, *n))
        .unwrap()
        .0
        .clone();
    (pod, target)
}

type Http = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

async fn rpc(http: &Http, api: std::net::SocketAddr, method: &str, params: Value) -> Value {
    let body = json!({"method": method, "params": [params], "id": "1"});
    let req = http::Request::post(format!("http://{api}/rpc"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&body).unwrap())))
        .unwrap();
    let resp = http.request(req).await.unwrap();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let reply: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(reply["error"], Value::Null, "{method}: {reply}");
    reply["result"].clone()
}

/// One measured Move.
struct Measured {
    end_to_end: Duration,
    startup: Duration,
    removal: Duration,
    catch_up: Duration,
    /// The action's timeline: segment name → milliseconds.
    segments: Vec<(String, f64)>,
    /// The same with the benchmark's sightings in between.
    interleaved: Vec<(String, f64)>,
}

impl Measured {
    fn overhead(&self) -> Duration {
        self.end_to_end.saturating_sub(self.startup + self.removal)
    }
}

async fn one_move(
    http: &Http,
    api: std::net::SocketAddr,
    client: &Client,
    log: &Log,
    replicas: usize,
    pod: &str,
    node: &str,
) -> Measured {
    let posted_wall = jiff::Timestamp::now();
    let posted = Instant::now();
    let accepted = rpc(
        http,
        api,
        "action.Move",
        json!({"pod": {"namespace": NS, "name": pod}, "node": {"name": node}}),
    )
    .await;
    let id = accepted["actionId"].as_str().unwrap().to_owned();
    let waited = rpc(
        http,
        api,
        "action.Wait",
        json!({"actionId": id, "namespace": NS, "timeoutSeconds": WAIT.as_secs()}),
    )
    .await;
    let replied = Instant::now();
    let replied_wall = jiff::Timestamp::now();
    assert_eq!(waited["phase"], "Succeeded", "the Move succeeds: {waited}");
    let action = Api::<WorkloadAction>::namespaced(client.clone(), NS)
        .get(&id)
        .await
        .unwrap();
    assert_eq!(action.phase(), ActionPhase::Succeeded);
    let status = action.status.clone().unwrap();
    let new = status.pods_created[0].name.clone();
    let old = status.pods_removed[0].name.clone();
    assert_eq!(old, pod);
    let (n, up) = (
        i32::try_from(replicas).unwrap(),
        i32::try_from(replicas + 1).unwrap(),
    );

    let seen: Vec<(Instant, jiff::Timestamp, Seen)> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _, _)| *t >= posted)
        .cloned()
        .collect();
    let first = |after: Instant, want: &dyn Fn(&Seen) -> bool| -> Instant {
        seen.iter()
            .find(|(t, _, s)| *t >= after && want(s))
            .map(|(t, _, _)| *t)
            .unwrap_or_else(|| panic!("the watch never saw what the Move must have done: {seen:?}"))
    };
    let wall = |at: Instant| {
        seen.iter()
            .find(|(t, _, _)| *t == at)
            .map(|(_, w, _)| *w)
            .unwrap()
    };
    let scaled_up = first(
        posted,
        &|s| matches!(s, Seen::Deployment { replicas, .. } if *replicas == up),
    );
    let ready = first(
        scaled_up,
        &|s| matches!(s, Seen::Pod { name, ready: true, gone: false } if *name == new),
    );
    // The executor trusts deletion cost once the pods are Ready and the Deployment's status
    // has caught up; its status may have caught up before the pod was Ready.
    let settled_by_then = seen
        .iter()
        .rfind(|(t, _, s)| *t <= ready && matches!(s, Seen::Deployment { .. }))
        .is_some_and(|(_, _, s)| matches!(s, Seen::Deployment { replicas, settled: true } if *replicas == up));
    let caught_up = if settled_by_then {
        ready
    } else {
        first(
            ready,
            &|s| matches!(s, Seen::Deployment { replicas, settled: true } if *replicas == up),
        )
    };
    let scaled_down = first(
        scaled_up,
        &|s| matches!(s, Seen::Deployment { replicas, .. } if *replicas == n),
    );
    let gone = first(
        scaled_down,
        &|s| matches!(s, Seen::Pod { name, gone: true, .. } if *name == old),
    );

    // The action's own timeline, every boundary in order.
    let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
    let mut marks: Vec<(String, jiff::Timestamp)> = vec![
        ("POST".into(), posted_wall),
        ("receivedAt".into(), at(&action.spec.received_at)),
        (
            "startedAt".into(),
            at(status.started_at.as_deref().unwrap()),
        ),
    ];
    for step in &status.steps {
        marks.push((format!("{} start", step.name), at(&step.started_at)));
        marks.push((
            format!("{} end", step.name),
            at(step.finished_at.as_deref().unwrap()),
        ));
    }
    marks.push((
        "completedAt".into(),
        at(status.completed_at.as_deref().unwrap()),
    ));
    marks.push(("Wait reply".into(), replied_wall));
    let segments = segments_of(&marks);
    // Where the cluster's spans fall among the steps, as this benchmark's watch saw them.
    for (name, t) in [
        ("(watch: replicas up)", scaled_up),
        ("(watch: new pod Ready)", ready),
        ("(watch: status caught up)", caught_up),
        ("(watch: replicas down)", scaled_down),
        ("(watch: old pod gone)", gone),
    ] {
        marks.push((name.into(), wall(t)));
    }
    marks.sort_by_key(|(_, t)| *t);
    let interleaved = segments_of(&marks);
    Measured {
        end_to_end: replied - posted,
        startup: ready - scaled_up,
        removal: gone - scaled_down,
        catch_up: caught_up.saturating_duration_since(ready),
        segments,
        interleaved,
    }
}

/// The spans between consecutive marks: `step X` for a step's own start to end.
fn segments_of(marks: &[(String, jiff::Timestamp)]) -> Vec<(String, f64)> {
    marks
        .windows(2)
        .map(|w| {
            let (a, b) = (&w[0], &w[1]);
            let name = match (a.0.strip_suffix(" start"), b.0.strip_suffix(" end")) {
                (Some(x), Some(y)) if x == y => format!("step {x}"),
                _ => format!("{} → {}", a.0, b.0),
            };
            (name, b.1.duration_since(a.1).as_secs_f64() * 1e3)
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// p50, p90 and max of `values` (milliseconds).
fn summary(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let pct = |p: f64| values[((values.len() - 1) as f64 * p).round() as usize];
    format!(
        "p50 {:>8.1}  p90 {:>8.1}  max {:>8.1}",
        pct(0.5),
        pct(0.9),
        values[values.len() - 1]
    )
}

fn print_segments(measured: &[Measured], of: impl Fn(&Measured) -> &Vec<(String, f64)>) {
    let mut order: Vec<String> = Vec::new();
    let mut by_name: HashMap<String, Vec<f64>> = HashMap::new();
    for m in measured {
        for (name, v) in of(m) {
            if !by_name.contains_key(name) {
                order.push(name.clone());
            }
            by_name.entry(name.clone()).or_default().push(*v);
        }
    }
    for name in order {
        let values = by_name.remove(&name).unwrap();
        println!("  {name:<52} n {:>3}  {}", values.len(), summary(values));
    }
}

async fn run(nodes: usize, replicas: usize, warmup: usize, moves: usize) {
    let (sim, client, coordinator, _dir) = actions_env::start_leading(NS, &[]).await.into_parts();
    assert!(!coordinator.extender_https, "sim's scheduler speaks HTTP");
    telemesh_sim::nodes::create_nodes(&sim.server, nodes).unwrap();
    let stop = CancellationToken::new();
    start_cluster(&client, nodes, coordinator.extender_addr, &stop);
    let log: Log = Arc::default();
    observe(&client, &log, &stop);
    deployment(&client, replicas).await;
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let api = coordinator.api_addr;
    let mut measured = Vec::with_capacity(moves);
    for i in 0..warmup + moves {
        let pods = quiet(&client, replicas).await;
        let (pod, node) = pick(&pods, nodes);
        log.lock().unwrap().clear();
        let m = one_move(&http, api, &client, &log, replicas, &pod, &node).await;
        if i >= warmup {
            measured.push(m);
        }
    }
    stop.cancel();
    coordinator.shutdown().await;

    println!(
        "{moves} Moves ({warmup} warm-up Moves not counted), a Deployment of {replicas} over {nodes} nodes; milliseconds"
    );
    let figure = |name: &str, f: &dyn Fn(&Measured) -> Duration| {
        println!(
            "  {name:<34} {}",
            summary(measured.iter().map(|m| ms(f(m))).collect())
        );
    };
    figure("end to end (POST → Wait replies)", &|m| m.end_to_end);
    figure("new pod start-up (cluster)", &|m| m.startup);
    figure("old pod removal (cluster)", &|m| m.removal);
    figure("overhead (the rest)", &Measured::overhead);
    figure("  of which: status catch-up", &|m| m.catch_up);
    println!("the action's timeline (from its status), per segment:");
    print_segments(&measured, |m| &m.segments);
    println!(
        "the same with this benchmark's watch sightings in between (n: Moves with that order):"
    );
    print_segments(&measured, |m| &m.interleaved);
    println!(
        "overhead per Move: {} ms (target < 20 ms)",
        summary(measured.iter().map(|m| ms(m.overhead())).collect())
    );
}

fn main() {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "error");
    let nodes = env_usize("NODES", 4);
    let replicas = env_usize("REPLICAS", 3);
    let warmup = env_usize("WARMUP", 2);
    let moves = env_usize("MOVES", 30).max(1);
    assert!(nodes >= 2, "a Move needs two nodes");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(nodes, replicas, warmup, moves));
}
