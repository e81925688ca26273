//! Extender server time at 100, 1,000 and 5,000 nodes, both nodeCacheCapable modes: p50 and p99
//! per filter and per prioritize (request body in, reply body out: parsing, policy evaluation
//! against the cluster view, encoding; no socket), and for full-node mode the ratio to
//! serde_json merely parsing the same body (the floor), three ways: into `IgnoredAny` (validation
//! only, the strictest floor), into `serde_json::Value`, and into the k8s-openapi typed
//! `ExtenderArgs` a straightforward extender would use.
//!
//! Targets (issue 19, item 4): p99 < 0.5 ms at 5,000 nodes in nodeCacheCapable mode with
//! rewards and the seed policy (dontschedule and scheduleonmetric: the `cache+rw` rows, where
//! every node also gossips reward estimates for 8 pod types, the pod's among them; filter with
//! `--reward-floor 0.3`, prioritize blending rewards with telemetry); full-node mode within
//! 1.3 x the `IgnoredAny` parse of the same body at every size.
//!
//! Steadiness: each row runs in 5 batches after a warm-up; p50 and p99 are the medians of the
//! batches' own, and `±%` is the batches' range over that median. `EXTENDER_NODES` (e.g.
//! `100,1000`) picks the sizes, `EXTENDER_MODES` (`cache`, `cache+rw`, `full-node`) the modes,
//! `BENCH_MS` the time per row (default 2,500), `EXTENDER_PREEMPT=0` skips preempt. One
//! `FIGURE` line per headline figure: `extender_filter_p99_us` and
//! `extender_prioritize_p99_us` (`cache+rw`), `extender_filter_names_p99_us` (`cache`),
//! `extender_fullnode_ratio_filter` and `_prioritize` (p50 over the `IgnoredAny` p50).
//!
//! Preempt (issue 17): 100 and 1,000 candidate nodes, each running 10 scavenger pods (jobs of 5
//! pods spread over 5 nodes) with 2 of them the scheduler's victims, answered with
//! `--scavenger-victims unsaved` (the ranking) and `scheduler` (victims passed back), in both
//! modes; the difference is what ranking by unsaved work costs on kube-scheduler's path. The
//! API server's copy of every pod is in the replica's watch, all staying, so any may be swapped.
//! Run: `cargo bench -p telemesh-coordinator --bench extender` (only preempt: append
//! `-- preempt`).
//!
//! Instructions instead of time (issue 31, item 4): with `EXTENDER_INSTRUCTIONS=N` nothing is
//! timed; each chosen row (`EXTENDER_VERBS`: `filter`, `prioritize`, and `ignored`, the
//! `IgnoredAny` parse of a full-node body) is called once to warm up, then N times inside
//! [`counted`], which `scripts/extender-instructions.sh` counts under callgrind
//! (`--toggle-collect`): instructions per call, a figure that does not move with the machine's
//! load.

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use serde::de::IgnoredAny;
use telemesh_coordinator::extender::pods::ScavengerPods;
use telemesh_coordinator::extender::settings::RewardSettings;
use telemesh_coordinator::extender::unsaved::ScavengerVictims;
use telemesh_coordinator::extender::{Extender, Settings};
use telemesh_coordinator::policies::{PolicyCache, PolicySet};
use telemesh_coordinator::view::{ClusterView, NodeEntry, Snapshot};
use telemesh_core::extender::{
    ExtenderArgs, ExtenderPreemptionArgs, MetaPod, MetaVictims, Victims,
};
use telemesh_core::gossip::schema::unix_ms;
use telemesh_core::gossip::{Liveness, NodeState};
use telemesh_core::policy::{Policy, TASPolicy};

const SEED_POLICY: &str = include_str!("../../deploy/examples/scheduling-policy.yaml");

fn node_name(i: usize) -> String {
    format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 250, i % 250)
}

/// A node with 30 metrics, `node_metric` among them, and with `rewards` reward estimates for
/// 8 pod types, the bench pod's (`health-metric-demo/demo`) among them.
fn entry(i: usize, now_ms: u64, rewards: bool) -> NodeEntry {
    let mut kvs = vec![
        ("role".to_owned(), "agent".to_owned()),
        ("v".to_owned(), "1".to_owned()),
    ];
    kvs.push((
        "m:node_metric".into(),
        format!("{}@{now_ms}", (i * 7919) % 100),
    ));
    for m in 0..29 {
        kvs.push((
            format!("m:node_bench_metric_{m}"),
            format!("{}.5@{now_ms}", (i + m) % 97),
        ));
    }
    if rewards {
        for t in 0..8 {
            let pod_type = if t == 0 {
                "health-metric-demo/demo".to_owned()
            } else {
                format!("team-{t}/service-{t}")
            };
            kvs.push((
                format!("r:{pod_type}"),
                format!(
                    "{:.3},{:.3}@{now_ms}",
                    (i % 5) as f64 * 0.5,
                    (i % 7) as f64 * 0.5
                ),
            ));
        }
    }
    let state = NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    NodeEntry::new(&node_name(i), 1, Liveness::Live, state)
}

/// A Node as a real cluster's API server returns it (about 3.5 KB of JSON).
fn node_json(i: usize) -> serde_json::Value {
    let name = node_name(i);
    let images: Vec<serde_json::Value> = (0..12)
        .map(|k| {
            serde_json::json!({
                "names": [format!("registry.example.com/team-{k}/service-{k}@sha256:{:064x}", i * 31 + k),
                          format!("registry.example.com/team-{k}/service-{k}:v1.{k}.{i}")],
                "sizeBytes": 123_456_789 + k
            })
        })
        .collect();
    let conditions: Vec<serde_json::Value> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|t| {
            serde_json::json!({
                "type": t, "status": if *t == "Ready" { "True" } else { "False" },
                "lastHeartbeatTime": "2026-11-20T10:00:00Z", "lastTransitionTime": "2026-11-01T10:00:00Z",
                "reason": format!("Kubelet{t}"), "message": "kubelet is posting ready status"
            })
        })
        .collect();
    serde_json::json!({
        "metadata": {
            "name": name, "uid": format!("{:08x}-0000-4000-8000-{:012x}", i, i),
            "resourceVersion": format!("{}", 100_000 + i), "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "node.kubernetes.io/instance-type": "m6i.2xlarge", "topology.kubernetes.io/zone": "eu-west-1a",
                       "topology.kubernetes.io/region": "eu-west-1"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
        },
        "spec": {"podCIDR": format!("10.{}.{}.0/24", i / 250, i % 250), "providerID": format!("aws:///eu-west-1a/i-{i:017x}")},
        "status": {
            "capacity": {"cpu": "8", "memory": "32505856Ki", "pods": "110", "ephemeral-storage": "104845292Ki"},
            "allocatable": {"cpu": "7910m", "memory": "31488000Ki", "pods": "110", "ephemeral-storage": "96625420948"},
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250, i % 250)},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "ec2", "systemUUID": "ec2", "bootID": "b", "kernelVersion": "6.1.0",
                         "osImage": "Bottlerocket", "containerRuntimeVersion": "containerd://1.7.0",
                         "kubeletVersion": "v1.33.0", "kubeProxyVersion": "v1.33.0", "operatingSystem": "linux",
                         "architecture": "amd64"},
            "images": images
        }
    })
}

fn pod_json() -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": "demo-app-7d9c5", "namespace": "health-metric-demo", "uid": "0c5b-11",
                     "labels": {"app": "demo", "pod-template-hash": "7d9c5", "telemetry-policy": "scheduling-policy"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "demo-app-7d9c5", "uid": "r1", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                 "resources": {"limits": {"telemetry/scheduling": "1", "cpu": "500m"}, "requests": {"cpu": "250m"}}}],
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": "scheduling-policy", "operator": "NotIn", "values": ["violating"]}]}]}}}},
        "status": {"phase": "Pending"}
    })
}

/// A row's figures: the medians over [`BATCHES`] batches of each batch's p50 and p99, and how
/// far the batches spread around them (max − min over the median), so a reader can tell a real
/// change from noise.
struct Stats {
    p50: Duration,
    p99: Duration,
    p50_spread: f64,
    p99_spread: f64,
    samples: usize,
}

/// Batches per row: enough for a median and a spread, each batch long enough for its own p99.
const BATCHES: usize = 5;

/// Runs `f` for about `budget` after a warm-up, in [`BATCHES`] batches of at least 100 calls.
fn measure(budget: Duration, mut f: impl FnMut()) -> Stats {
    let warm = Instant::now();
    while warm.elapsed() < budget / 10 {
        f();
    }
    let per_batch = budget / BATCHES as u32;
    let mut p50s = Vec::with_capacity(BATCHES);
    let mut p99s = Vec::with_capacity(BATCHES);
    let mut samples = 0;
    for _ in 0..BATCHES {
        let mut batch = Vec::new();
        let started = Instant::now();
        while batch.len() < 100 || (started.elapsed() < per_batch && batch.len() < 20_000) {
            let t = Instant::now();
            f();
            batch.push(t.elapsed());
        }
        batch.sort();
        let at = |q: f64| batch[((batch.len() - 1) as f64 * q).round() as usize];
        p50s.push(at(0.50));
        p99s.push(at(0.99));
        samples += batch.len();
    }
    let (p50, p50_spread) = median_spread(&mut p50s);
    let (p99, p99_spread) = median_spread(&mut p99s);
    Stats {
        p50,
        p99,
        p50_spread,
        p99_spread,
        samples,
    }
}

/// The median of `xs` and their range as a fraction of it.
fn median_spread(xs: &mut [Duration]) -> (Duration, f64) {
    xs.sort();
    let median = xs[xs.len() / 2];
    let range = xs[xs.len() - 1] - xs[0];
    (
        median,
        range.as_secs_f64() / median.as_secs_f64().max(1e-12),
    )
}

/// Prints one `FIGURE` line for the scaling script.
fn figure(series: &str, nodes: usize, value: f64, unit: &str) {
    println!("FIGURE {series} {nodes} {value:.3} {unit}");
}

fn us(d: Duration) -> String {
    format!("{:>9.1}", d.as_secs_f64() * 1e6)
}

/// The uid of scavenger pod `k` (0..10) of node `i`.
fn scavenger_uid(i: usize, k: usize) -> String {
    format!("{i:08x}-5c4e-4000-8000-{k:012x}")
}

/// A node with 30 metrics and 10 scavenger pods: pod k of node i belongs to job
/// `batch/job-{(i / 5) * 10 + k}` (5 nodes per job), checkpointed between 0 and 29 minutes ago,
/// 500-2,000 millicores.
fn scavenger_entry(i: usize, now_ms: u64) -> NodeEntry {
    let mut kvs = vec![("role".to_owned(), "agent".to_owned())];
    for m in 0..30 {
        kvs.push((
            format!("m:node_bench_metric_{m}"),
            format!("{}.5@{now_ms}", (i + m) % 97),
        ));
    }
    for k in 0..10 {
        let unsaved_ms = ((i * 7 + k * 13) % 30) as u64 * 60_000;
        kvs.push((
            format!("s:{}", scavenger_uid(i, k)),
            format!(
                "batch/job-{}@{}@{}@{}",
                (i / 5) * 10 + k,
                now_ms - unsaved_ms,
                500 * (1 + (i + k) % 4),
                (1 + (i + k) % 4) << 30
            ),
        ));
    }
    let state = NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    NodeEntry::new(&node_name(i), 1, Liveness::Live, state)
}

/// Preempt server time with and without ranking by unsaved work.
fn preempt(budget: Duration, policies: &PolicyCache) {
    println!();
    println!("preempt server time (µs), 10 scavengers per node, 2 of them the scheduler's victims");
    println!(
        "{:>6} {:<6} {:<10} {:>9} {:>9} {:>10}",
        "nodes", "mode", "victims", "p50", "p99", "body KiB"
    );
    for n in [100usize, 1_000] {
        let now_ms = unix_ms(SystemTime::now());
        let view = ClusterView::with_snapshot(Snapshot::from_entries(
            (0..n).map(|i| scavenger_entry(i, now_ms)),
        ));
        // The API server's copies of the same pods, all staying: every pod may be swapped in.
        let api_pods: Vec<k8s_openapi::api::core::v1::Pod> = (0..n)
            .flat_map(|i| (0..10).map(move |k| (i, k)))
            .map(|(i, k)| {
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("p-{i}-{k}"), "namespace": "batch",
                        "uid": scavenger_uid(i, k),
                        "labels": {telemesh_core::scavenge::JOB_LABEL: format!("job-{}", (i / 5) * 10 + k)}},
                    "spec": {"nodeName": node_name(i), "containers": [{"name": "job", "image": "i"}]},
                    "status": {"phase": "Running"},
                }))
                .expect("pod decodes")
            })
            .collect();
        let pods = ScavengerPods::from_pods(&api_pods);
        let with = |ranking| {
            let settings = Settings {
                scavenger_victims: ranking,
                ..Settings::default()
            };
            Extender::new(view.clone(), policies.clone(), settings)
                .with_scavenger_pods(pods.clone())
        };
        let (unsaved, scheduler) = (
            with(ScavengerVictims::Unsaved),
            with(ScavengerVictims::Scheduler),
        );
        let chosen = |i: usize| [scavenger_uid(i, i % 10), scavenger_uid(i, (i + 3) % 10)];
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(pod_json()).expect("pod decodes");
        let meta = ExtenderPreemptionArgs {
            pod: Some(pod.clone()),
            node_name_to_victims: None,
            node_name_to_meta_victims: Some(
                (0..n)
                    .map(|i| {
                        let pods = chosen(i).into_iter().map(|uid| MetaPod { uid }).collect();
                        (
                            node_name(i),
                            MetaVictims {
                                pods,
                                num_pdb_violations: 0,
                            },
                        )
                    })
                    .collect(),
            ),
        };
        let full = ExtenderPreemptionArgs {
            pod: Some(pod.clone()),
            node_name_to_victims: Some(
                (0..n)
                    .map(|i| {
                        let pods = chosen(i)
                            .into_iter()
                            .map(|uid| {
                                let mut victim = pod.clone();
                                victim.metadata.uid = Some(uid);
                                victim
                            })
                            .collect();
                        (
                            node_name(i),
                            Victims {
                                pods,
                                num_pdb_violations: 0,
                            },
                        )
                    })
                    .collect(),
            ),
            node_name_to_meta_victims: None,
        };
        for (mode, args) in [("cache", &meta), ("full", &full)] {
            let body = serde_json::to_vec(args).expect("encodes");
            for (victims, ext) in [("scheduler", &scheduler), ("unsaved", &unsaved)] {
                let s = measure(budget, || {
                    let h = ext.preempt(black_box(&body));
                    assert_eq!(h.reply.status, 200);
                    black_box(h);
                });
                println!(
                    "{n:>6} {mode:<6} {victims:<10} {} {} {:>10.0}",
                    us(s.p50),
                    us(s.p99),
                    body.len() as f64 / 1024.0
                );
            }
        }
    }
}

/// The node counts to run: `EXTENDER_NODES` (comma-separated), else 100, 1,000 and 5,000.
fn node_counts() -> Vec<usize> {
    std::env::var("EXTENDER_NODES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| vec![100, 1_000, 5_000])
}

/// `EXTENDER_INSTRUCTIONS`: calls per row to count instead of timing them.
fn instruction_calls() -> Option<usize> {
    std::env::var("EXTENDER_INSTRUCTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
}

/// Calls `call` `calls` times: the one function callgrind counts (`--toggle-collect`), kept out
/// of line so that its name survives optimisation.
#[inline(never)]
fn counted(calls: usize, call: &mut dyn FnMut()) {
    for _ in 0..calls {
        call();
    }
}

/// Whether the comma-separated list in `var` (`EXTENDER_MODES`, `EXTENDER_VERBS`; unset: all)
/// names `item`.
fn wants(var: &str, item: &str) -> bool {
    std::env::var(var)
        .map(|v| v.split(',').any(|m| m.trim() == item))
        .unwrap_or(true)
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2500),
    );
    let policy: TASPolicy = serde_yaml_ng::from_str(SEED_POLICY).expect("seed policy parses");
    let policies = PolicyCache::with_set(PolicySet::from_policies([Policy::compile(&policy)]));
    if std::env::args().any(|a| a == "preempt") {
        preempt(budget, &policies);
        return;
    }
    println!(
        "extender server time (µs), body in → reply out; floors are serde_json parsing the same body"
    );
    println!(
        "p50 and p99 are medians over {BATCHES} batches; ± is the batches' range over that median"
    );
    println!(
        "{:>6} {:<10} {:<10} {:>9} {:>5} {:>9} {:>5} {:>7} | {:>10} {:>9} {:>9} {:>9} | {:>7} {:>7} {:>7}",
        "nodes",
        "mode",
        "verb",
        "p50",
        "±%",
        "p99",
        "±%",
        "calls",
        "body KiB",
        "ignored",
        "Value",
        "typed",
        "÷ign",
        "÷Value",
        "÷typed"
    );
    for n in node_counts() {
        let names: Vec<String> = (0..n).map(node_name).collect();
        let cached = serde_json::to_vec(&serde_json::json!({
            "Pod": pod_json(), "Nodes": null, "NodeNames": names
        }))
        .expect("encodes");
        let full = wants("EXTENDER_MODES", "full-node").then(|| {
            serde_json::to_vec(&serde_json::json!({
                "Pod": pod_json(),
                "Nodes": {"metadata": {}, "items": (0..n).map(node_json).collect::<Vec<_>>()},
                "NodeNames": null
            }))
            .expect("encodes")
        });
        for mode in ["cache", "cache+rw", "full-node"] {
            if !wants("EXTENDER_MODES", mode) {
                continue;
            }
            let body = match (mode, &full) {
                ("full-node", Some(full)) => full,
                _ => &cached,
            };
            // Built right before the mode's rows so that no metric turns stale (45 s) while
            // they run: `cache+rw` with reward estimates for 8 pod types on every node and
            // `--reward-floor 0.3`, the others without rewards.
            let now_ms = unix_ms(SystemTime::now());
            let rewards = mode == "cache+rw";
            let view = ClusterView::with_snapshot(Snapshot::from_entries(
                (0..n).map(|i| entry(i, now_ms, rewards)),
            ));
            let settings = Settings {
                rewards: RewardSettings {
                    floor: rewards.then_some(0.3),
                    ..RewardSettings::default()
                },
                ..Settings::default()
            };
            let ext = Extender::new(view, policies.clone(), settings);
            if let Some(calls) = instruction_calls() {
                for verb in ["filter", "prioritize", "ignored"] {
                    if !wants("EXTENDER_VERBS", verb) || (verb == "ignored" && mode != "full-node")
                    {
                        continue;
                    }
                    let mut call = || match verb {
                        "filter" => assert_eq!(ext.filter(black_box(body)).reply.status, 200),
                        "prioritize" => {
                            assert_eq!(ext.prioritize(black_box(body)).reply.status, 200);
                        }
                        _ => {
                            black_box(serde_json::from_slice::<IgnoredAny>(black_box(body)).ok());
                        }
                    };
                    call();
                    counted(calls, &mut call);
                    println!("counted {n} {mode} {verb} {calls}");
                }
                continue;
            }
            let floors = (mode == "full-node").then(|| {
                let ignored = measure(budget, || {
                    black_box(serde_json::from_slice::<IgnoredAny>(black_box(body)).ok());
                });
                let value = measure(budget, || {
                    black_box(serde_json::from_slice::<serde_json::Value>(black_box(body)).ok());
                });
                let typed = measure(budget, || {
                    black_box(serde_json::from_slice::<ExtenderArgs>(black_box(body)).ok());
                });
                (ignored, value, typed)
            });
            for verb in ["filter", "prioritize"] {
                let s = measure(budget, || {
                    let h = match verb {
                        "filter" => ext.filter(black_box(body)),
                        _ => ext.prioritize(black_box(body)),
                    };
                    assert_eq!(h.reply.status, 200);
                    black_box(h);
                });
                let floor_cols = match &floors {
                    Some((i, v, t)) => format!(
                        "{:>10.0} {} {} {} | {:>7.2} {:>7.2} {:>7.2}",
                        body.len() as f64 / 1024.0,
                        us(i.p50),
                        us(v.p50),
                        us(t.p50),
                        s.p50.as_secs_f64() / i.p50.as_secs_f64(),
                        s.p50.as_secs_f64() / v.p50.as_secs_f64(),
                        s.p50.as_secs_f64() / t.p50.as_secs_f64(),
                    ),
                    None => format!(
                        "{:>10.0} {:>9} {:>9} {:>9} | {:>7} {:>7} {:>7}",
                        body.len() as f64 / 1024.0,
                        "",
                        "",
                        "",
                        "",
                        "",
                        ""
                    ),
                };
                println!(
                    "{n:>6} {mode:<10} {verb:<10} {} {:>5.0} {} {:>5.0} {:>7} | {floor_cols}",
                    us(s.p50),
                    s.p50_spread * 100.0,
                    us(s.p99),
                    s.p99_spread * 100.0,
                    s.samples,
                );
                let p99_us = s.p99.as_secs_f64() * 1e6;
                match (mode, &floors) {
                    ("cache", _) if verb == "filter" => {
                        figure("extender_filter_names_p99_us", n, p99_us, "us");
                    }
                    ("cache+rw", _) => figure(&format!("extender_{verb}_p99_us"), n, p99_us, "us"),
                    (_, Some((ignored, _, _))) => figure(
                        &format!("extender_fullnode_ratio_{verb}"),
                        n,
                        s.p50.as_secs_f64() / ignored.p50.as_secs_f64(),
                        "x",
                    ),
                    _ => {}
                }
            }
        }
    }
    if std::env::var("EXTENDER_PREEMPT").as_deref() != Ok("0") && instruction_calls().is_none() {
        preempt(budget, &policies);
    }
}
