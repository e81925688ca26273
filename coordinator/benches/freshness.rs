//! End-to-end freshness (issue 19, item 5): from a change in one node's telemetry until every
//! coordinator replica's view, and an extender filter over it, reflect the change. p50 and p99
//! of the total and of each part, at 10, 100 and 1,000 members.
//!
//! One process, chitchat's in-process `ChannelTransport` (unsealed, an instant network) on
//! tokio's paused clock: the figures are protocol time with free CPU, as in
//! `runtime/benches/gossip.rs`, whose member layout this follows (seeds: the first three agents;
//! start times spread over one round). What runs is the real code, with the binaries' default
//! flags (parsed from their `Cli`s, overridable below):
//! - N agents. `FRESHNESS_PROBES` of them (default 4) run the agent's real collection loop
//!   (`telemesh_agent::collection::run`: collector over a copy of the `host-a` fixture, deadband
//!   publisher, `publish_metrics`), each started at a random phase after its gossip member; the
//!   others publish the same 30 agent metric names through the same `publish_metrics` (metric
//!   groups) and change `FRESHNESS_UPDATES` of them a second (default 1) as background churn.
//! - Two coordinator replicas: gossip observers whose views are folded by the replica's own
//!   `follow_gossip` (the `Updater` on its `--view-tick`), each read by an `Extender` with a
//!   dontschedule policy `node_load1 > 8`.
//!
//! A trial: at a uniformly random instant (so at a uniform phase of the probe's collection
//! period), a probe's `/proc/loadavg` in its host root flips between load 1 and 20. Recorded,
//! on the paused clock: (a) when the probe's own gossip state holds the new value (its
//! collection read it and published it), (b) when each replica's gossip state holds it
//! (key-change callbacks), (c) when each replica's view holds it (polled every millisecond),
//! and (d) when a nodeCacheCapable filter over all N nodes, called on each replica's
//! `Extender`, answers accordingly (the probe removed at load 20, kept at load 1); the filter's
//! own cost is wall-clock server time. Parts, for the slower of the two replicas: collection
//! wait (a), gossip to the replicas (b − a), the view's fold tick (c − b), extender (d). The
//! JSON API reads the same view per request (no cache in front of it), so it is as fresh as (c).
//!
//! Then metric removals (issue 37): a probe's textfile names `node_lone_probe` at 20, which
//! a second dontschedule rule (`node_lone_probe > 8`) refuses; once both replicas refuse the
//! probe, the textfile drops the series at a uniformly random instant. Recorded as above, for
//! the metric's absence: (a) the probe's own gossip state no longer holds its group (the family
//! held only it, so the key is deleted: no key change reaches anyone, the hardest case), (b)
//! each replica's gossip state no longer holds it (polled every millisecond), (c) each
//! replica's view no longer holds the metric, (d) each replica's filter keeps the probe (the
//! metric is unknown, as it is to the agent). `FRESHNESS_REMOVALS` trials (default half the
//! change trials); FIGURE `freshness_removal_{p50,p99}_s`.
//!
//! `--stale-after` is set to an hour: on the paused clock wall time (which stamps values)
//! runs up to ten times faster than the protocol at 1,000 members, so values would otherwise
//! age out during a trial. Staleness is not what is measured here.
//!
//! Run: `cargo bench -p telemesh-coordinator --bench freshness`. Knobs:
//! `FRESHNESS_MEMBERS=10,100,1000`, `FRESHNESS_TRIALS` (default 200, 100, 40 by size),
//! `FRESHNESS_AGENT_ARGS` and `FRESHNESS_COORDINATOR_ARGS` (extra flags, e.g.
//! `--gossip-interval 500ms` or `--view-tick 50ms`), `FRESHNESS_SEED_REPLICAS=1` (agents seed
//! with the two replicas instead of the first three agents), `FRESHNESS_PUSH=0` (the probes'
//! policy watch is empty, so a verdict flip is not pushed to the replicas and travels by the
//! epidemic alone, as before `telemesh_agent::collection::verdict_push`), `FRESHNESS_SEED` (trial RNG).
//! Besides the tables it prints `FIGURE freshness_{p50,p99,gossip_p99,collect_p99,fold_p99}_s`
//! and `FIGURE freshness_removal_{p50,p99}_s`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use chitchat::transport::ChannelTransport;
use clap::Parser as _;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use rand::{Rng, SeedableRng};
use telemesh_coordinator::extender::Extender;
use telemesh_coordinator::metrics::ViewMetrics;
use telemesh_coordinator::policies::{PolicyCache, PolicySet};
use telemesh_coordinator::view::ClusterView;
use telemesh_core::gossip::groups;
use telemesh_core::gossip::schema::StateKey;
use telemesh_core::gossip::{NodeState, Role};
use telemesh_core::metric::MetricName;
use telemesh_core::policy::{Policy, TASPolicy};
use telemesh_core::testing::{agent_metric_names, agent_samples, copy_tree};
use telemesh_runtime::gossip::{GossipMember, KeySubscription};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The policy the extender evaluates: a node with load above 8, or with the textfile probe
/// above 8, takes no new pods (a node without the probe is judged by its load alone).
const POLICY: &str = r#"
apiVersion: telemetry.intel.com/v1alpha1
kind: TASPolicy
metadata: {name: freshness, namespace: bench}
spec:
  strategies:
    dontschedule:
      rules:
      - {metricname: node_load1, operator: GreaterThan, target: 8}
      - {metricname: node_lone_probe, operator: GreaterThan, target: 8}
"#;

const METRIC: &str = "node_load1";
/// The metric the removal trials remove: the only one of its family (`M:node_lone_`).
const REMOVED: &str = "node_lone_probe";
const LOW: f64 = 1.0;
const HIGH: f64 = 20.0;
const REPLICAS: usize = 2;

fn agent_name(i: usize) -> String {
    format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 250, i % 250)
}

fn agent_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 30_000 + i as u16))
}

fn replica_addr(r: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 2], 7_947 + r as u16))
}

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("a list of numbers"))
        .collect()
}

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn extra_args(name: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The agent's configuration as its binary would parse it, with the bench's extra flags.
fn agent_config(name: &str, host_root: &Path) -> telemesh_agent::config::Config {
    let mut args: Vec<String> = [
        "telemesh-agent",
        "--node-name",
        name,
        "--insecure-gossip",
        "--host-root",
    ]
    .map(str::to_owned)
    .to_vec();
    args.push(host_root.display().to_string());
    args.extend(extra_args("FRESHNESS_AGENT_ARGS"));
    let cli = telemesh_agent::config::Cli::try_parse_from(args).expect("agent flags");
    telemesh_agent::config::Config::try_from(cli).expect("agent configuration")
}

/// The coordinator's configuration as its binary would parse it, with the bench's extra flags.
fn coordinator_config(name: &str) -> telemesh_coordinator::config::Config {
    let mut args: Vec<String> = [
        "telemesh-coordinator",
        "--replica-name",
        name,
        "--insecure-gossip",
        "--stale-after",
        "1h",
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(extra_args("FRESHNESS_COORDINATOR_ARGS"));
    let cli = telemesh_coordinator::config::Cli::try_parse_from(args).expect("coordinator flags");
    telemesh_coordinator::config::Config::try_from(cli).expect("coordinator configuration")
}

/// Writes a probe host's textfile: [`REMOVED`] at `value`, or no series at all.
fn write_textfile(root: &Path, value: Option<f64>) {
    let dir = root.join("textfile");
    std::fs::create_dir_all(&dir).expect("textfile dir");
    let text = value.map_or(String::new(), |v| format!("{REMOVED} {v}\n"));
    let tmp = dir.join(".probe.prom.tmp");
    std::fs::write(&tmp, text).expect("write textfile");
    std::fs::rename(tmp, dir.join("probe.prom")).expect("rename textfile");
}

/// Whether `member`'s gossip state holds `node`'s [`REMOVED`] (its group, or its own key).
async fn holds_removed(member: &GossipMember, node: &str) -> bool {
    let name = MetricName::new(REMOVED).expect("a metric name");
    let group = groups::group_key(groups::prefix_of(REMOVED), 0);
    let single = StateKey::Metric(name).to_string();
    let mut held = false;
    member
        .visit_keys([node], |_, keys| {
            held = keys.get(&group).is_some() || keys.get(&single).is_some();
        })
        .await;
    held
}

/// Writes a probe host's `/proc/loadavg` with `load1`.
fn write_load(root: &Path, load1: f64) {
    std::fs::write(
        root.join("proc/loadavg"),
        format!("{load1:.2} 1.65 1.63 4/129 32241\n"),
    )
    .expect("write loadavg");
}

/// What the current trial waits for; the key-change callbacks fill it in.
#[derive(Debug, Default)]
struct Watch {
    node: String,
    target: f64,
    published: Option<Instant>,
    gossip: [Option<Instant>; REPLICAS],
}

/// Whether a key change carries the probe's metric at the target value.
fn carries(watch: &Watch, node: &str, key: &str, value: &str) -> bool {
    node == watch.node
        && NodeState::from_key_values([(key, value)])
            .metric(METRIC)
            .is_some_and(|v| v.value == watch.target)
}

/// Calls `record` when `member` learns the watched value (own or gossiped).
async fn follow(
    member: &GossipMember,
    watch: Arc<Mutex<Watch>>,
    record: impl Fn(&mut Watch) + Clone + Send + Sync + 'static,
) -> Vec<KeySubscription> {
    let mut subs = Vec::new();
    // Groups (`M:node_` holds node_load1) and, for a cluster on one key per metric, `m:`.
    for prefix in ["M:node_", "m:node_load1"] {
        let (watch, record) = (watch.clone(), record.clone());
        subs.push(
            member
                .on_key_change(prefix, move |change| {
                    let key = format!("{prefix}{}", change.key);
                    let mut w = watch.lock();
                    if carries(&w, change.node_name, &key, change.value) {
                        record(&mut w);
                    }
                })
                .await,
        );
    }
    subs
}

/// One trial's instants (paused clock) and the deciding filter calls' wall time.
struct Trial {
    changed: Instant,
    published: Instant,
    gossip: [Instant; REPLICAS],
    view: [Instant; REPLICAS],
    extender: [Duration; REPLICAS],
}

struct Probe {
    index: usize,
    root: PathBuf,
    load: f64,
}

struct Replica {
    view: ClusterView,
    extender: Extender,
}

/// The filter body kube-scheduler sends with nodeCacheCapable: the pod and every node's name.
fn filter_body(n: usize) -> Vec<u8> {
    let names: Vec<String> = (0..n).map(agent_name).collect();
    serde_json::to_vec(&serde_json::json!({
        "Pod": {
            "metadata": {"name": "web-7d9c5", "namespace": "bench", "uid": "0c5b-11",
                         "labels": {"app": "web", "telemetry-policy": "freshness"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
        },
        "Nodes": null,
        "NodeNames": names,
    }))
    .expect("encodes")
}

/// Whether the filter's answer reflects `node` at `load`: removed when above the policy's
/// target, kept otherwise. Returns the answer's wall-clock server time too.
fn filter_reflects(ext: &Extender, body: &[u8], node: &str, load: f64) -> (bool, Duration) {
    let (kept, took) = filter_keeps(ext, body, node);
    (kept == (load <= 8.0), took)
}

/// Whether the filter's answer keeps `node`, and the answer's wall-clock server time.
fn filter_keeps(ext: &Extender, body: &[u8], node: &str) -> (bool, Duration) {
    let started = std::time::Instant::now();
    let handled = ext.filter(body);
    let took = started.elapsed();
    assert_eq!(handled.reply.status, 200);
    let reply: serde_json::Value = serde_json::from_slice(&handled.reply.body).expect("json");
    let kept = reply["NodeNames"]
        .as_array()
        .is_some_and(|names| names.iter().any(|n| n.as_str() == Some(node)));
    (kept, took)
}

async fn wait_until(within: Duration, every: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(every).await;
    }
    false
}

/// Background churn: every non-probe agent changes `per_second` of its metrics a second.
async fn churn(members: Arc<Vec<(usize, GossipMember)>>, per_second: u32) {
    if per_second == 0 {
        return;
    }
    let names = agent_metric_names();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second);
    for round in 0usize.. {
        tick.tick().await;
        for (i, m) in members.iter() {
            let sample = telemesh_core::metric::Sample {
                name: names[(round + i) % 10].clone(),
                value: ((round * 31 + i * 7) % 1000) as f64 / 10.0,
            };
            let _ = m.publish_metrics(&[sample], SystemTime::now()).await;
        }
    }
}

async fn run(
    n: usize,
    trials: usize,
    removals: usize,
    rng: &mut rand::rngs::StdRng,
) -> (Vec<Trial>, Vec<Trial>) {
    let wall = std::time::Instant::now();
    let started = Instant::now();
    let progress = |what: &str| {
        eprintln!(
            "[freshness {n}] {what} at {:.1}s clock, {:.0}s wall",
            started.elapsed().as_secs_f64(),
            wall.elapsed().as_secs_f64()
        );
    };
    let channel = ChannelTransport::with_mtu(65_507);
    let probes_wanted = env_num("FRESHNESS_PROBES").unwrap_or(4).clamp(1, n as u64) as usize;
    let probe_indices: Vec<usize> = (0..probes_wanted).map(|k| k * n / probes_wanted).collect();
    let seed_replicas = std::env::var("FRESHNESS_SEED_REPLICAS").is_ok_and(|v| v == "1");
    let seeds: Vec<String> = if seed_replicas {
        (0..REPLICAS).map(|r| replica_addr(r).to_string()).collect()
    } else {
        (0..n.min(3)).map(|i| agent_addr(i).to_string()).collect()
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/tests/fixtures/host-a");
    let tmp = tempfile::tempdir().expect("temp dir");
    let stop = CancellationToken::new();
    let tasks = TaskTracker::new();

    // Agents, their starts spread over one round as in a real cluster.
    let mut swarm: Vec<(usize, GossipMember)> = Vec::new();
    let mut probes: Vec<Probe> = Vec::new();
    let mut probe_members: Vec<telemesh_agent::shared::SharedGossip> = Vec::new();
    let mut collect_interval = Duration::ZERO;
    for i in 0..n {
        let root = tmp.path().join(format!("host-{i}"));
        let config = agent_config(&agent_name(i), &root);
        collect_interval = config.collect_interval;
        let round = config.gossip.interval;
        let mut gossip = config
            .gossip
            .member_config(&agent_name(i), Role::Agent)
            .expect("gossip config");
        gossip.listen_addr = agent_addr(i);
        gossip.seeds = seeds.clone();
        let member = GossipMember::start_on(gossip, &channel)
            .await
            .expect("agent joins");
        if probe_indices.contains(&i) {
            copy_tree(&fixture, &root).expect("probe host root");
            write_load(&root, LOW);
            write_textfile(&root, None);
            let shared: telemesh_agent::shared::SharedGossip =
                Arc::new(tokio::sync::Mutex::new(Some(member)));
            // The collection loop starts at a random phase of the gossip round, as the agent's
            // start-up (kube client, pod watch) delays it after gossip.
            let delay = round.mul_f64(rng.random());
            tasks.spawn(start_collection(
                config,
                root.clone(),
                shared.clone(),
                delay,
                stop.child_token(),
            ));
            probes.push(Probe {
                index: i,
                root,
                load: LOW,
            });
            probe_members.push(shared);
        } else {
            member
                .publish_metrics(&agent_samples(i), SystemTime::now())
                .await
                .expect("publish");
            swarm.push((i, member));
        }
        // Random gaps, one round in all on average: rounds (and the replicas' view ticks) at
        // no common phase, as in a real cluster (even gaps line them up on one grid).
        tokio::time::sleep((round * 2 / n as u32).mul_f64(rng.random())).await;
    }
    let swarm = Arc::new(swarm);
    tasks.spawn(churn(
        swarm.clone(),
        env_num("FRESHNESS_UPDATES").unwrap_or(1) as u32,
    ));
    progress("agents started");

    // Two replicas, wired as `telemesh_coordinator::start` wires theirs.
    let policy: TASPolicy = serde_yaml_ng::from_str(POLICY).expect("policy parses");
    let policies = PolicyCache::with_set(PolicySet::from_policies([Policy::compile(&policy)]));
    let mut replicas = Vec::new();
    let mut observers = Vec::new();
    let mut view_tick = Duration::ZERO;
    for r in 0..REPLICAS {
        let config = coordinator_config(&format!("coordinator-{r}"));
        tokio::time::sleep(config.gossip.interval.mul_f64(rng.random())).await;
        view_tick = config.view.tick;
        let mut gossip = config
            .gossip
            .member_config(&config.replica_name, Role::Observer)
            .expect("gossip config");
        gossip.listen_addr = replica_addr(r);
        gossip.seeds = (0..n.min(3)).map(|i| agent_addr(i).to_string()).collect();
        let member = Arc::new(
            GossipMember::start_on(gossip, &channel)
                .await
                .expect("replica joins"),
        );
        let view = telemesh_coordinator::run::follow_gossip(
            vec![member.clone()],
            None,
            config.view.clone(),
            ViewMetrics::register(&mut Registry::default()),
            &tasks,
            stop.child_token(),
        )
        .await;
        let extender = Extender::new(view.clone(), policies.clone(), config.settings);
        replicas.push(Replica { view, extender });
        observers.push(member);
    }

    // Ready: both views hold every agent and every probe's first publication.
    let ready = wait_until(Duration::from_secs(600), Duration::from_millis(100), || {
        replicas.iter().all(|r| {
            let snap = r.view.load();
            snap.len() == n
                && probes.iter().all(|p| {
                    snap.node(&agent_name(p.index))
                        .and_then(|e| e.metric(METRIC))
                        .is_some_and(|v| v.value == LOW)
                })
        })
    })
    .await;
    assert!(ready, "the replicas' views did not fill within 600 s");
    progress("views filled");
    // Settle: membership and first rounds of churn.
    tokio::time::sleep(Duration::from_secs(5)).await;

    let watch: Arc<Mutex<Watch>> = Arc::default();
    let mut subs = Vec::new();
    for shared in &probe_members {
        let guard = shared.lock().await;
        let member = guard.as_ref().expect("probe member");
        subs.extend(
            follow(member, watch.clone(), |w| {
                w.published.get_or_insert_with(Instant::now);
            })
            .await,
        );
    }
    for (r, member) in observers.iter().enumerate() {
        subs.extend(
            follow(member, watch.clone(), move |w| {
                w.gossip[r].get_or_insert_with(Instant::now);
            })
            .await,
        );
    }

    let body = filter_body(n);
    let mut out = Vec::with_capacity(trials);
    for t in 0..trials {
        let probe = &mut probes[t % probes_wanted];
        let node = agent_name(probe.index);
        let target = if probe.load == LOW { HIGH } else { LOW };
        // A uniformly random instant: any phase of the probe's collection and gossip rounds.
        tokio::time::sleep(collect_interval.mul_f64(rng.random())).await;
        *watch.lock() = Watch {
            node: node.clone(),
            target,
            published: None,
            gossip: [None; REPLICAS],
        };
        let changed = Instant::now();
        write_load(&probe.root, target);
        probe.load = target;
        let mut view: [Option<Instant>; REPLICAS] = [None; REPLICAS];
        let mut extender: [Option<Duration>; REPLICAS] = [None; REPLICAS];
        let done = wait_until(Duration::from_secs(60), Duration::from_millis(1), || {
            for (r, replica) in replicas.iter().enumerate() {
                if extender[r].is_some() {
                    continue;
                }
                let holds = replica
                    .view
                    .load()
                    .node(&node)
                    .and_then(|e| e.metric(METRIC))
                    .is_some_and(|v| v.value == target);
                if !holds {
                    continue;
                }
                view[r].get_or_insert_with(Instant::now);
                let (reflects, took) = filter_reflects(&replica.extender, &body, &node, target);
                if reflects {
                    extender[r] = Some(took);
                }
            }
            extender.iter().all(Option::is_some)
        })
        .await;
        assert!(
            done,
            "trial {t}: the replicas did not reflect the change in 60 s"
        );
        let w = watch.lock();
        let published = w.published.expect("the probe published");
        let gossip = w.gossip.map(|g| g.expect("the replica's gossip had it"));
        out.push(Trial {
            changed,
            published,
            gossip,
            view: view.map(|v| v.expect("the view had it")),
            extender: extender.map(|e| e.expect("filter answered")),
        });
        if n >= 1000 || (t + 1) % 20 == 0 {
            let last = out.last().expect("a trial");
            let [c, g, f, e] = parts(last).map(|d| d.as_secs_f64());
            progress(&format!(
                "trial {}/{trials}: {:.3}s (collect {c:.3}, gossip {g:.3}, fold {f:.3}, extender {e:.4})",
                t + 1,
                total(last).as_secs_f64()
            ));
        }
    }
    drop(subs);
    progress("change trials done");

    let mut removed = Vec::with_capacity(removals);
    for t in 0..removals {
        let probe = &mut probes[t % probes_wanted];
        let node = agent_name(probe.index);
        let shared = &probe_members[t % probes_wanted];
        // Set up, not measured: load low, the probe series at 20, both replicas refusing it.
        write_load(&probe.root, LOW);
        probe.load = LOW;
        write_textfile(&probe.root, Some(HIGH));
        let refused = wait_until(Duration::from_secs(60), Duration::from_millis(10), || {
            replicas.iter().all(|r| {
                let holds = r.view.load().node(&node).is_some_and(|e| {
                    e.metric(METRIC).is_some_and(|v| v.value == LOW)
                        && e.metric(REMOVED).is_some_and(|v| v.value == HIGH)
                });
                holds && !filter_keeps(&r.extender, &body, &node).0
            })
        })
        .await;
        assert!(
            refused,
            "removal {t}: the replicas did not refuse the probe in 60 s"
        );
        tokio::time::sleep(collect_interval.mul_f64(rng.random())).await;
        let changed = Instant::now();
        write_textfile(&probe.root, None);
        let mut published = None;
        let mut gossip: [Option<Instant>; REPLICAS] = [None; REPLICAS];
        let mut view: [Option<Instant>; REPLICAS] = [None; REPLICAS];
        let mut extender: [Option<Duration>; REPLICAS] = [None; REPLICAS];
        let deadline = Instant::now() + Duration::from_secs(60);
        while extender.iter().any(Option::is_none)
            || published.is_none()
            || gossip.iter().any(Option::is_none)
        {
            assert!(
                Instant::now() < deadline,
                "removal {t}: the replicas did not drop the metric in 60 s"
            );
            if published.is_none() {
                let guard = shared.lock().await;
                let member = guard.as_ref().expect("probe member");
                if !holds_removed(member, &node).await {
                    published = Some(Instant::now());
                }
            }
            for (r, replica) in replicas.iter().enumerate() {
                if gossip[r].is_none() && !holds_removed(&observers[r], &node).await {
                    gossip[r] = Some(Instant::now());
                }
                if extender[r].is_some() {
                    continue;
                }
                let gone = replica
                    .view
                    .load()
                    .node(&node)
                    .is_some_and(|e| e.metric(REMOVED).is_none());
                if !gone {
                    continue;
                }
                view[r].get_or_insert_with(Instant::now);
                let (kept, took) = filter_keeps(&replica.extender, &body, &node);
                if kept {
                    extender[r] = Some(took);
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let published = published.expect("the probe removed it");
        removed.push(Trial {
            changed,
            published,
            // A replica's gossip may drop the key before the probe's poll saw it go.
            gossip: gossip.map(|g| g.expect("the replica's gossip dropped it").max(published)),
            view: view.map(|v| v.expect("the view dropped it")),
            extender: extender.map(|e| e.expect("filter answered")),
        });
        if n >= 1000 || (t + 1) % 20 == 0 {
            let last = removed.last().expect("a trial");
            let [c, g, f, e] = parts(last).map(|d| d.as_secs_f64());
            progress(&format!(
                "removal {}/{removals}: {:.3}s (collect {c:.3}, gossip {g:.3}, fold {f:.3}, extender {e:.4})",
                t + 1,
                total(last).as_secs_f64()
            ));
        }
    }
    stop.cancel();
    tasks.close();
    eprintln!(
        "[freshness {n}] collect interval {collect_interval:?}, view tick {view_tick:?}, seeds {}",
        if seed_replicas {
            "the replicas"
        } else {
            "the first three agents"
        }
    );
    (out, removed)
}

/// Runs the agent's real collection loop for a probe, after `delay`.
async fn start_collection(
    config: telemesh_agent::config::Config,
    root: PathBuf,
    gossip: telemesh_agent::shared::SharedGossip,
    delay: Duration,
    stop: CancellationToken,
) {
    tokio::time::sleep(delay).await;
    let mut registry = Registry::default();
    let metrics = telemesh_agent::metrics::AgentMetrics::register(&mut registry);
    let (pods, _writer) = kube::runtime::reflector::store();
    // The agent's policy watch, holding the replicas' policy: a flip of its dontschedule
    // verdict is pushed to the replicas (`FRESHNESS_PUSH=0`: no policy in view, no pushes, as
    // before the agent pushed).
    let (policies, mut policy_writer) = kube::runtime::reflector::store::<TASPolicy>();
    if std::env::var("FRESHNESS_PUSH").map_or(true, |v| v != "0") {
        let policy: TASPolicy = serde_yaml_ng::from_str(POLICY).expect("policy parses");
        policy_writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(policy));
    }
    let inputs = telemesh_agent::collection::Inputs {
        node_name: config.node_name.clone(),
        collector: telemesh_agent::collection::collect::CollectorConfig {
            textfile_dir: Some(PathBuf::from("/textfile")),
            ..telemesh_agent::collection::collect::CollectorConfig::with_root(root)
        },
        interval: config.collect_interval,
        deadband: config.deadband,
        prometheus_endpoints: Vec::new(),
        pods,
        pods_synced: Arc::new(AtomicBool::new(true)),
        policies,
        unknown: config.policy.unknown,
        gossip,
        counters: Arc::default(),
        latest_pods: Arc::default(),
        latest_samples: Arc::default(),
        metrics,
        http: Arc::new(telemesh_agent::http::HttpState {
            registry,
            ready: AtomicBool::new(false),
            debug_state: Box::new(|| Box::pin(async { serde_json::Value::Null })),
        }),
    };
    telemesh_agent::collection::run(inputs, stop).await;
}

/// Parts of a trial for the slower replica: collection wait, gossip to the replicas, the
/// view's fold, the extender's answer.
fn parts(t: &Trial) -> [Duration; 4] {
    let gossip = t.gossip.iter().max().copied().unwrap_or(t.published);
    let view = t.view.iter().max().copied().unwrap_or(gossip);
    let extender = t.extender.iter().max().copied().unwrap_or_default();
    [
        t.published - t.changed,
        gossip - t.published,
        view - gossip,
        extender,
    ]
}

fn total(t: &Trial) -> Duration {
    parts(t).iter().sum()
}

/// p50 and p99 of a trial kind's total and parts.
struct Row {
    total: (f64, f64),
    collect: (f64, f64),
    gossip: (f64, f64),
    fold: (f64, f64),
}

/// Prints one table row for `results` and returns its figures.
fn row(kind: &str, n: usize, results: &[Trial], wall_s: f64) -> Row {
    let col = |f: &dyn Fn(&Trial) -> f64| -> (f64, f64) {
        let v: Vec<f64> = results.iter().map(f).collect();
        (percentile(v.clone(), 0.5), percentile(v, 0.99))
    };
    let total = col(&|t| total(t).as_secs_f64());
    let part = |i: usize| col(&move |t: &Trial| parts(t)[i].as_secs_f64());
    let (collect, gossip, fold, ext) = (part(0), part(1), part(2), part(3));
    // Any one replica (the first): what a single-replica deployment would see.
    let one = col(&|t| (t.view[0] - t.changed + t.extender[0]).as_secs_f64());
    let pair = |(a, b): (f64, f64)| format!("{a:.3}/{b:.3}");
    println!(
        "{kind:>7} {n:>6} {:>6} | {:>13} {:>13} {:>13} {:>13} {:>13} | {:>13} {:>9.0}",
        results.len(),
        pair(total),
        pair(collect),
        pair(gossip),
        pair(fold),
        format!("{:.3}/{:.3}", ext.0 * 1e3, ext.1 * 1e3),
        pair(one),
        wall_s
    );
    Row {
        total,
        collect,
        gossip,
        fold,
    }
}

/// Nearest-rank percentile of unsorted `v`.
fn percentile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn main() {
    let sizes = env_list("FRESHNESS_MEMBERS", "10,100,1000");
    let mut rng = rand::rngs::StdRng::seed_from_u64(env_num("FRESHNESS_SEED").unwrap_or(19));
    println!(
        "freshness: telemetry change, or a metric's removal → every replica's view and extender \
         filter (s, paused clock)"
    );
    println!(
        "{:>7} {:>6} {:>6} | {:>13} {:>13} {:>13} {:>13} {:>13} | {:>13} {:>9}",
        "trial",
        "nodes",
        "trials",
        "total p50/p99",
        "collect",
        "gossip",
        "fold",
        "extender ms",
        "one replica",
        "wall s"
    );
    for n in sizes {
        let trials = env_num("FRESHNESS_TRIALS").map_or(
            match n {
                0..=10 => 200,
                11..=100 => 100,
                _ => 40,
            },
            |t| t as usize,
        );
        let removals = env_num("FRESHNESS_REMOVALS").map_or(trials / 2, |t| t as usize);
        let wall = std::time::Instant::now();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let (changes, removed) = runtime.block_on(run(n, trials, removals, &mut rng));
        drop(runtime);
        let wall = wall.elapsed().as_secs_f64();
        let change = row("change", n, &changes, wall);
        println!("FIGURE freshness_p50_s {n} {:.3} s", change.total.0);
        println!("FIGURE freshness_p99_s {n} {:.3} s", change.total.1);
        println!(
            "FIGURE freshness_collect_p99_s {n} {:.3} s",
            change.collect.1
        );
        println!("FIGURE freshness_gossip_p99_s {n} {:.3} s", change.gossip.1);
        println!("FIGURE freshness_fold_p99_s {n} {:.3} s", change.fold.1);
        if !removed.is_empty() {
            let removal = row("removal", n, &removed, wall);
            println!(
                "FIGURE freshness_removal_p50_s {n} {:.3} s",
                removal.total.0
            );
            println!(
                "FIGURE freshness_removal_p99_s {n} {:.3} s",
                removal.total.1
            );
        }
    }
    println!(
        "parts are for the slower replica of two; p50/p99 by nearest rank (below 100 trials p99 is \
         the largest or next to it); extender in ms of wall-clock server time, the rest protocol time"
    );
}
