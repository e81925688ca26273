//! A day of arrivals replayed in sim, in accelerated time, twice: once with the extender ranking
//! preemption victims by unsaved work (`--scavenger-victims=unsaved`) and once with upstream's
//! plain choice (`--scavenger-victims=scheduler`). Everything is real but time: sim with its
//! kubelets (playing the workload model: work, checkpoints, resume, waste), the real agents
//! (observing checkpoint markers, gossiping `s:` entries), a real coordinator (the ScavengerJob
//! controller and the extender) and kube-scheduler (the real one when its binary is there, else
//! sim's, which preempts as upstream does).
//!
//! The day: an ordinary Deployment follows a daily curve (low at night, ramping up within the
//! hour when users arrive, swinging by day, down in the evening) and a second one runs a nightly
//! ETL batch; a stream of ScavengerJobs of mixed lengths, widths and checkpoint intervals
//! arrives all day, and the evening's still wait at midnight. Printed: requested CPU use with
//! and without scavengers (and how close to the threshold it stays while scavengers wait), and
//! the CPU-seconds preemption wasted (work since the last checkpoint) under each victim choice,
//! with what explains them: preempt calls, extender answers kube-scheduler refused (it then
//! preempts on its own), ScavengerJob and pod runs interrupted, the most one run lost.
//! `TELEMESH_SCAVENGE_DAY_TRACE=<dir>` leaves each run's timeline, ledger and logs there
//! ([`Trace`]). `TELEMESH_SCAVENGE_DAY_SEED` replays another day of the same generator (default
//! [`SEED`]), `TELEMESH_SCAVENGE_DAY_QUEUE` passes `--scavenger-queue` (`strict`, the default,
//! or `backfill`). The last line, `DAY seed=… queue=… ranked=… plain=… ratio=…`, is what
//! scripts/scavenge-day.sh collects over several days.
//!
//! Not part of the test suite's figures: it runs only when `TELEMESH_SCAVENGE_DAY` is set (to
//! the real seconds one simulated day takes; scripts/scavenge-day.sh sets it), and otherwise
//! says SKIPPED. It asserts that the replay ran (jobs ran, were preempted, and finished), not
//! the figures: those are what the script prints.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::json;
use telemesh_core::scavenge::JOB_LABEL;
use telemesh_core::scavenge::crd::Phase;
use telemesh_sim::cluster::workload::{Interruption, Report};
use telemesh_tests::SimEnv;
use telemesh_tests::cluster::{ClusterParts, create_deployment_with};
use telemesh_tests::mesh::Mesh;
use telemesh_tests::upstream::{KUBE_SCHEDULER, KubeScheduler};

const NS: &str = "day";
const NODES: [&str; 4] = ["sim-node-0", "sim-node-1", "sim-node-2", "sim-node-3"];
/// Simulated seconds in a day.
const DAY: f64 = 86_400.0;
/// The admission threshold the coordinator runs with.
const THRESHOLD: f64 = 0.70;
/// Simulated time between two steps of the driver (replica changes, arrivals, use samples).
const STEP: f64 = 300.0;
/// The default seed of the day's arrivals: both runs replay the same day.
const SEED: u64 = 20_261_124;

/// The seed of the day replayed: `TELEMESH_SCAVENGE_DAY_SEED`, else [`SEED`].
fn day_seed() -> u64 {
    static SEED_OF_DAY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED_OF_DAY.get_or_init(|| {
        std::env::var("TELEMESH_SCAVENGE_DAY_SEED").map_or(SEED, |s| {
            s.parse()
                .expect("TELEMESH_SCAVENGE_DAY_SEED is an unsigned integer")
        })
    })
}

/// The coordinator's `--scavenger-queue`: `TELEMESH_SCAVENGE_DAY_QUEUE`, else its default.
fn queue_mode() -> Option<String> {
    std::env::var("TELEMESH_SCAVENGE_DAY_QUEUE")
        .ok()
        .filter(|q| !q.is_empty())
}

/// Simulated seconds of arrivals before midnight still waiting at 0:00.
const BACKLOG: f64 = 4.0 * 3600.0;
/// Pods of each nightly ETL run (2 CPUs each).
const ETL_PODS: i32 = 8;

/// One ScavengerJob arrival, in simulated time.
#[derive(Debug, Clone)]
struct Arrival {
    at: f64,
    name: String,
    pods: u32,
    cpu: u32,
    work: f64,
    checkpoint_every: f64,
}

/// The day's ScavengerJobs: one every 15 minutes on average, 1 to 3 pods of 1 or 2 CPUs, 1 to 6
/// hours of work, checkpointing every 5 minutes to 2 hours (log-uniform: a simulation that
/// saves often beside a training run that saves rarely), declared as their interval. The day
/// starts warm: those that arrived in the last [`BACKLOG`] seconds before midnight wait in the
/// queue at 0:00 (created at once), as the evening's jobs do when the cluster is full, so the
/// night's scavengers hold the room up to the threshold from the first ETL run on.
fn arrivals() -> Vec<Arrival> {
    let mut rng = StdRng::seed_from_u64(day_seed());
    let mut out = Vec::new();
    let mut at = -BACKLOG;
    let mut i = 0;
    while at < DAY * 0.85 {
        at += -900.0 * (1.0 - rng.random::<f64>()).ln();
        i += 1;
        let (shortest, longest) = (300.0_f64, 7200.0_f64);
        out.push(Arrival {
            at,
            name: format!("sj-{i:03}"),
            pods: *[1, 1, 1, 2, 2, 3].get(rng.random_range(0..6)).unwrap(),
            cpu: rng.random_range(1..=2),
            work: rng.random_range(3600.0..6.0 * 3600.0),
            checkpoint_every: shortest * (longest / shortest).powf(rng.random::<f64>()),
        });
    }
    out
}

/// The ordinary Deployment's replicas (1-CPU pods) at simulated time `t`: 6 of the 32 CPUs at
/// night, 22 within the hour from 7:30 when users arrive, down again between 19:00 and 21:00;
/// by day the load moves by up to 3 pods either way every quarter hour (users come and go, an
/// autoscaler follows). The morning ramp and the daytime swings are what reclaim the room
/// scavengers took.
fn web_replicas(t: f64) -> i32 {
    let hour = (t / 3600.0) % 24.0;
    let (night, day) = (6.0, 22.0);
    let curve = match hour {
        h if h < 7.5 => night,
        h if h < 8.5 => night + (day - night) * (h - 7.5),
        h if h < 19.0 => day,
        h if h < 21.0 => day - (day - night) * (h - 19.0) / 2.0,
        _ => night,
    };
    let swing = if (8.5..19.0).contains(&hour) {
        day_swings()[(t / 900.0) as usize % 96]
    } else {
        0
    };
    curve.round() as i32 + swing
}

/// The daytime swing of each quarter hour, -3 to 3 pods, the same in both runs.
fn day_swings() -> [i32; 96] {
    let mut rng = StdRng::seed_from_u64(day_seed() ^ 0x5157_1e6e);
    std::array::from_fn(|_| rng.random_range(-3..=3))
}

/// The ETL Deployment's replicas (2-CPU pods): a nightly ETL run of [`ETL_PODS`] for 45
/// minutes at 1:00, 3:00 and 5:00, when scavengers hold the room up to the threshold. With the
/// morning ramp, these are the moments ordinary demand outgrows the 30 % headroom the threshold
/// keeps: the only moments anything is preempted, since scavengers never start above the
/// threshold. Eight pods (16 of the 32 CPUs, ordinary demand then 22) make about 6 of the
/// night's ~16 scavenger CPUs go at each run: enough preemptions in a day for the waste figure
/// to say something (with six, the first days preempted two or three runs a day, and one
/// unlucky victim decided the ratio), while most scavengers stay, so there is a choice.
fn etl_replicas(t: f64) -> i32 {
    let hour = (t / 3600.0) % 24.0;
    let running = [1.0, 3.0, 5.0]
        .iter()
        .any(|s| (*s..*s + 0.75).contains(&hour));
    if running { ETL_PODS } else { 0 }
}

/// Figures of one run.
#[derive(Debug, Default)]
struct Run {
    /// Mean requested CPU use, ordinary pods only.
    ordinary_use: f64,
    /// Mean requested CPU use, everything.
    total_use: f64,
    /// Mean total use over the samples taken while ScavengerJobs waited to start.
    use_while_waiting: f64,
    waiting_samples: usize,
    wasted_cpu_seconds: f64,
    /// Pod runs interrupted (sim's ledger).
    interruptions: u64,
    /// ScavengerJob runs interrupted (the controller's count).
    job_interruptions: u64,
    /// The most one ScavengerJob run lost when interrupted, real CPU-seconds (sim's ledger).
    largest_loss: f64,
    completions: u64,
    preempted_jobs: usize,
    /// Preempt calls the extender answered.
    preempt_calls: u64,
    /// Extender answers kube-scheduler refused and replaced by its own victims (`None`: sim's
    /// scheduler, which does not say).
    refused: Option<usize>,
    /// The coordinator's preempt figures (`preempt` lines of its /metrics).
    preempt_metrics: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_day_of_scavengers_with_and_without_unsaved_work_ranking() {
    let Ok(seconds) = std::env::var("TELEMESH_SCAVENGE_DAY") else {
        println!(
            "SKIPPED: set TELEMESH_SCAVENGE_DAY to the real seconds of a simulated day (scripts/scavenge-day.sh)"
        );
        return;
    };
    let day_seconds: f64 = seconds
        .parse()
        .expect("TELEMESH_SCAVENGE_DAY is a number of seconds");
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let speed = DAY / day_seconds;
    println!(
        "one simulated day in {day_seconds} s ({speed:.0}× real time), seed {}, queue {}, {} ScavengerJobs",
        day_seed(),
        queue_mode().as_deref().unwrap_or("strict (default)"),
        arrivals().len()
    );
    let ranked = replay("unsaved", speed).await;
    let plain = replay("scheduler", speed).await;
    print_figures(&ranked, &plain, speed);
    for run in [&ranked, &plain] {
        assert!(
            run.completions > 0,
            "no scavenger finished: the replay did not run"
        );
        assert!(
            run.interruptions > 0,
            "nothing was preempted: the day did not test victim choice"
        );
    }
}

fn print_figures(ranked: &Run, plain: &Run, speed: f64) {
    println!();
    println!("requested CPU use (mean over the day)       ranked     plain");
    println!(
        "  ordinary workloads only                  {:>6.1} %  {:>6.1} %",
        ranked.ordinary_use * 100.0,
        plain.ordinary_use * 100.0
    );
    println!(
        "  with scavengers                          {:>6.1} %  {:>6.1} %",
        ranked.total_use * 100.0,
        plain.total_use * 100.0
    );
    println!(
        "  while scavengers waited (threshold {:.0} %)  {:>6.1} %  {:>6.1} %  ({} and {} samples)",
        THRESHOLD * 100.0,
        ranked.use_while_waiting * 100.0,
        plain.use_while_waiting * 100.0,
        ranked.waiting_samples,
        plain.waiting_samples
    );
    println!("preemption");
    println!(
        "  preempt calls to the extender            {:>8}  {:>8}",
        ranked.preempt_calls, plain.preempt_calls
    );
    let refused = |r: &Run| r.refused.map_or("n/a".to_owned(), |n| n.to_string());
    println!(
        "  answers kube-scheduler refused           {:>8}  {:>8}",
        refused(ranked),
        refused(plain)
    );
    println!(
        "  ScavengerJob runs interrupted            {:>8}  {:>8}",
        ranked.job_interruptions, plain.job_interruptions
    );
    println!(
        "  pod runs interrupted                     {:>8}  {:>8}",
        ranked.interruptions, plain.interruptions
    );
    println!(
        "  ScavengerJobs preempted at least once    {:>8}  {:>8}",
        ranked.preempted_jobs, plain.preempted_jobs
    );
    println!(
        "  finished runs                            {:>8}  {:>8}",
        ranked.completions, plain.completions
    );
    println!(
        "  wasted CPU-seconds (simulated)           {:>8.0}  {:>8.0}",
        ranked.wasted_cpu_seconds * speed,
        plain.wasted_cpu_seconds * speed
    );
    println!(
        "  the most one interrupted run lost        {:>8.0}  {:>8.0}",
        ranked.largest_loss * speed,
        plain.largest_loss * speed
    );
    let ratio = if plain.wasted_cpu_seconds > 0.0 {
        ranked.wasted_cpu_seconds / plain.wasted_cpu_seconds
    } else {
        f64::NAN
    };
    println!("  ranked / plain waste                     {ratio:>8.2}  (target ≤ 0.33)");
    for (name, run) in [("ranked", ranked), ("plain", plain)] {
        println!("the coordinator's preempt figures, {name}:");
        for line in &run.preempt_metrics {
            println!("  {line}");
        }
    }
    // One line per day for scripts/scavenge-day.sh.
    println!(
        "DAY seed={} queue={} ranked={:.0} plain={:.0} ratio={ratio:.3} runs_interrupted={}/{} refused={}/{} use={:.1}/{:.1}",
        day_seed(),
        queue_mode().as_deref().unwrap_or("strict"),
        ranked.wasted_cpu_seconds * speed,
        plain.wasted_cpu_seconds * speed,
        ranked.job_interruptions,
        plain.job_interruptions,
        refused(ranked),
        refused(plain),
        ranked.total_use * 100.0,
        plain.total_use * 100.0,
    );
}

/// Replays the day with `victims` as the coordinator's `--scavenger-victims`.
async fn replay(victims: &str, speed: f64) -> Run {
    let env = SimEnv::start(NODES.len()).await;
    let client = env.client().await;
    install(&client).await;
    let nodes: Vec<(&str, &str)> = NODES.iter().map(|n| (*n, "node_metric 1\n")).collect();
    let mut coordinator_args = vec![
        format!("--scavenger-victims={victims}"),
        format!("--scavenger-threshold={THRESHOLD}"),
        "--scavenger-admission-interval=500ms".to_owned(),
        "--scavenger-unschedulable-timeout=10s".to_owned(),
    ];
    coordinator_args.extend(queue_mode().map(|q| format!("--scavenger-queue={q}")));
    let coordinator_args: Vec<&str> = coordinator_args.iter().map(String::as_str).collect();
    let mesh = Mesh::start_with(&env, &nodes, &[], &coordinator_args, 1).await;
    // Waste from preemption only: no agent is under pressure, so none evicts a scavenger.
    mesh.calm_pressure();
    let parts = ClusterParts::start(&env, NODES.len()).await;
    let url = mesh.coordinators[0].url_prefix();
    let scheduler = match KUBE_SCHEDULER.find("scavenge_day") {
        Some(binary) => Some(KubeScheduler::start(&binary, &env, &url, true)),
        None => {
            println!("(kube-scheduler not found: sim's scheduler preempts instead)");
            parts.start_scheduler(&env, &url).await;
            None
        }
    };
    create_deployment_with(
        &client,
        NS,
        "web",
        web_replicas(0.0),
        json!({"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}),
    )
    .await;
    create_deployment_with(
        &client,
        NS,
        "etl",
        0,
        json!({"resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}),
    )
    .await;

    let allocatable = allocatable_cpu(&client).await;
    let mut pending = arrivals();
    pending.reverse();
    let start = Instant::now();
    let wall_start = std::time::SystemTime::now();
    let mut timeline = Vec::new();
    let mut run = Run::default();
    let mut samples = 0usize;
    let mut t = 0.0;
    while t < DAY {
        while pending.last().is_some_and(|a| a.at <= t) {
            let a = pending.pop().unwrap();
            create_job(&client, &a, speed).await;
        }
        scale(&client, "web", web_replicas(t)).await;
        scale(&client, "etl", etl_replicas(t)).await;
        let (ordinary, scavengers) = requested_cpu(&client).await;
        samples += 1;
        run.ordinary_use += ordinary / allocatable;
        run.total_use += (ordinary + scavengers) / allocatable;
        let waiting = jobs_waiting(&client).await;
        if waiting {
            run.use_while_waiting += (ordinary + scavengers) / allocatable;
            run.waiting_samples += 1;
        }
        timeline.push(json!([
            t,
            ordinary,
            scavengers,
            waiting,
            web_replicas(t),
            etl_replicas(t)
        ]));
        t += STEP;
        let due = start + Duration::from_secs_f64(t / speed);
        tokio::time::sleep_until(due.into()).await;
    }
    run.ordinary_use /= samples as f64;
    run.total_use /= samples as f64;
    if run.waiting_samples > 0 {
        run.use_while_waiting /= run.waiting_samples as f64;
    }
    let report = env.sim.workloads.report();
    let scheduler_log = scheduler.as_ref().map(|s| s.process.output());
    if let Ok(dir) = std::env::var("TELEMESH_SCAVENGE_DAY_TRACE") {
        let trace = Trace {
            dir: dir.as_ref(),
            victims,
            started: wall_start,
            speed,
            timeline: &timeline,
        };
        trace.write(
            &report,
            &mesh.coordinators[0].process.output(),
            scheduler_log.as_deref(),
        );
    }
    run.refused = scheduler_log.map(|lines| {
        lines
            .iter()
            .filter(|l| l.contains("Skipped extender as it returned error"))
            .count()
    });
    run.largest_loss = job_losses(&report.interruptions)
        .into_iter()
        .fold(0.0, f64::max);
    run.wasted_cpu_seconds = report.total.wasted_cpu_seconds;
    run.interruptions = report.total.interruptions;
    run.completions = report.total.completions;
    run.preempted_jobs = report
        .jobs
        .values()
        .filter(|j| j.figures.interruptions > 0)
        .count();
    let metrics = mesh.coordinators[0].metrics().await;
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    run.preempt_calls = counter("telemesh_coordinator_extender_decisions_total{verb=\"Preempt\"");
    run.job_interruptions = counter("telemesh_coordinator_scavengers_interruptions_total");
    run.preempt_metrics = metrics
        .lines()
        .filter(|l| {
            !l.starts_with('#')
                && (l.contains("preempt") || l.contains("victims") || l.contains("loss_avoided"))
        })
        .filter(|l| !l.contains("_bucket"))
        .map(str::to_owned)
        .collect();
    drop(mesh);
    run
}

/// What each interrupted ScavengerJob run lost, real CPU-seconds: the ledger's pod runs of one
/// job that ended within [`SAME_RUN`] of each other (a preempted pod, then the siblings the
/// controller deletes) count as one.
fn job_losses(interruptions: &[Interruption]) -> Vec<f64> {
    let mut runs: Vec<(&str, u64, f64)> = Vec::new();
    for i in interruptions {
        let lost = i.wasted_seconds * i.cores;
        match runs
            .iter_mut()
            .rev()
            .find(|(job, last, _)| *job == i.job && i.at_ms.saturating_sub(*last) <= SAME_RUN)
        {
            Some(run) => {
                run.1 = i.at_ms;
                run.2 += lost;
            }
            None => runs.push((&i.job, i.at_ms, lost)),
        }
    }
    runs.into_iter().map(|(_, _, lost)| lost).collect()
}

/// Pod runs of one job interrupted this close together (real milliseconds) are one run's.
const SAME_RUN: u64 = 3_000;

/// Where `TELEMESH_SCAVENGE_DAY_TRACE` asks the replay to leave what it saw, for reading the
/// decisions against the work they cost: per run (`unsaved-…`, `scheduler-…`) the use
/// timeline (`meta.json`: real start, speed, and per step `[t, ordinary CPUs, scavenger CPUs,
/// waiting, web, etl]`), sim's ledger with every interruption (`workloads.json`), the
/// coordinator's log (debug lines per preempt candidate when `TELEMESH_TEST_COORDINATOR_LOG`
/// asks, e.g. `info,telemesh_coordinator::extender=debug`) and kube-scheduler's.
struct Trace<'a> {
    dir: &'a std::path::Path,
    victims: &'a str,
    started: std::time::SystemTime,
    speed: f64,
    timeline: &'a [serde_json::Value],
}

impl Trace<'_> {
    fn write(&self, report: &Report, coordinator: &[String], scheduler: Option<&[String]>) {
        std::fs::create_dir_all(self.dir).unwrap();
        let file = |name: &str| self.dir.join(format!("{}-{name}", self.victims));
        let meta = json!({
            "startedMs": telemesh_core::gossip::schema::unix_ms(self.started),
            "speed": self.speed,
            "timeline": self.timeline,
        });
        std::fs::write(file("meta.json"), meta.to_string()).unwrap();
        std::fs::write(
            file("workloads.json"),
            serde_json::to_string_pretty(report).unwrap(),
        )
        .unwrap();
        std::fs::write(file("coordinator.log"), coordinator.join("\n")).unwrap();
        if let Some(lines) = scheduler {
            std::fs::write(file("kube-scheduler.log"), lines.join("\n")).unwrap();
        }
    }
}

async fn install(client: &Client) {
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(telemesh_core::scavenge::crd::CRD_YAML).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let class = json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": telemesh_core::scavenge::PRIORITY_CLASS},
        "value": telemesh_core::scavenge::PRIORITY, "preemptionPolicy": "Never",
    });
    let api: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
        )),
    );
    api.create(
        &PostParams::default(),
        &serde_json::from_value(class).unwrap(),
    )
    .await
    .unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Creates the ScavengerJob of `a`, its simulated durations divided by `speed`.
async fn create_job(client: &Client, a: &Arrival, speed: f64) {
    let real = |secs: f64| format!("{}ms", (secs / speed * 1000.0).round() as u64);
    let job = json!({
        "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
        "metadata": {"name": a.name, "namespace": NS},
        "spec": {
            "image": "telemesh/checkpoint-demo",
            "parallelism": a.pods,
            "resources": {"requests": {"cpu": a.cpu.to_string(), "memory": "1Gi"}},
            "checkpointInterval": real(a.checkpoint_every),
            "podMetadata": {"annotations": {
                telemesh_sim::cluster::workload::WORK_ANNOTATION: real(a.work),
                telemesh_sim::cluster::workload::CHECKPOINT_EVERY_ANNOTATION: real(a.checkpoint_every),
            }},
        }
    });
    let api: Api<telemesh_core::scavenge::crd::ScavengerJob> = Api::namespaced(client.clone(), NS);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(job).unwrap(),
    )
    .await
    .unwrap();
}

async fn scale(client: &Client, name: &str, replicas: i32) {
    Api::<Deployment>::namespaced(client.clone(), NS)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

async fn allocatable_cpu(client: &Client) -> f64 {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    nodes
        .items
        .iter()
        .filter_map(|n| n.status.as_ref()?.allocatable.as_ref()?.get("cpu"))
        .filter_map(telemesh_core::fit::amount)
        .sum()
}

/// CPU requested by pods bound to a node and not finished: (ordinary, scavengers).
async fn requested_cpu(client: &Client) -> (f64, f64) {
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let mut out = (0.0, 0.0);
    for pod in &pods.items {
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if !bound || matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let cpu = telemesh_core::fit::pod_requests(pod)
            .get("cpu")
            .copied()
            .unwrap_or(0.0);
        if pod.labels().contains_key(JOB_LABEL) {
            out.1 += cpu;
        } else {
            out.0 += cpu;
        }
    }
    out
}

/// Whether any ScavengerJob waits to start (Pending or Interrupted).
async fn jobs_waiting(client: &Client) -> bool {
    let api: Api<telemesh_core::scavenge::crd::ScavengerJob> = Api::namespaced(client.clone(), NS);
    let jobs = api.list(&ListParams::default()).await.unwrap();
    jobs.items.iter().any(|j| {
        let phase = j.status.as_ref().map(|s| s.phase).unwrap_or_default();
        matches!(phase, Phase::Pending | Phase::Interrupted)
    })
}
