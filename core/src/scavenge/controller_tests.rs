//! Tests of the controller's decisions.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::scavenge::crd::{ScavengerJobSpec, ScavengerJobStatus};

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_767_225_600 + secs).unwrap()
}

fn sj(name: &str) -> ScavengerJob {
    serde_json::from_value(json!({
        "apiVersion": "telemesh.io/v1alpha1",
        "kind": "ScavengerJob",
        "metadata": {"name": name, "namespace": "batch", "uid": format!("uid-{name}"),
            "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "image": "registry.example/render:1",
            "command": ["/render"],
            "args": ["--frames=100"],
            "env": [{"name": "MODE", "value": "fast"}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                          "limits": {"cpu": "1", "memory": "1Gi"}},
            "volumes": [
                {"name": "work", "mountPath": "/work", "persistentVolumeClaim": {"claimName": "render-work"}},
                {"name": "conf", "mountPath": "/etc/render", "readOnly": true, "configMap": {"name": "render-conf"}},
                {"name": "token", "mountPath": "/var/token", "secret": {"secretName": "render-token"}}
            ],
            "parallelism": 2,
            "runAsUser": 1000,
            "checkpointInterval": "1m",
            "minimumRun": "5m",
            "podMetadata": {"labels": {"team": "vfx"}, "annotations": {"sim.telemesh.io/run-for": "10m"}}
        }
    }))
    .unwrap()
}

fn with_status(mut j: ScavengerJob, status: ScavengerJobStatus) -> ScavengerJob {
    j.status = Some(status);
    j
}

fn running(job: &str, since: i64, pods: &[&str]) -> ScavengerJobStatus {
    ScavengerJobStatus {
        phase: Phase::Running,
        running_timestamps: vec![Time(at(since))],
        current_run_start: Some(Time(at(since))),
        checkpoint_window_start: Some(Time(at(since))),
        job_name: Some(job.into()),
        pods: pods.iter().map(|p| p.to_string()).collect(),
        ..Default::default()
    }
}

fn job(name: &str, conditions: &[&str]) -> Job {
    let conditions: Vec<_> = conditions
        .iter()
        .map(|c| json!({"type": c, "status": "True"}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "batch"},
        "status": {"conditions": conditions}
    }))
    .unwrap()
}

fn pod(name: &str, job: &str, phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "batch",
            "labels": {JOB_LABEL: "render", JOB_NAME_LABEL: job}},
        "status": {"phase": phase}
    }))
    .unwrap()
}

fn with_condition(mut p: Pod, type_: &str, status: &str, message: &str) -> Pod {
    let s = p.status.get_or_insert_with(Default::default);
    s.conditions.get_or_insert_with(Vec::new).push(
        serde_json::from_value(json!({"type": type_, "status": status, "message": message}))
            .unwrap(),
    );
    p
}

struct Case {
    sj: ScavengerJob,
    jobs: Vec<Job>,
    pods: Vec<Pod>,
    missing: Vec<VolumeRef>,
    admission: Admission,
    now: Timestamp,
}

impl Case {
    fn new(sj: ScavengerJob) -> Self {
        Self {
            sj,
            jobs: Vec::new(),
            pods: Vec::new(),
            missing: Vec::new(),
            admission: Admission::Wait("waiting for its turn".into()),
            now: at(1000),
        }
    }

    fn decide(&self) -> Decision {
        reconcile(&Observed {
            sj: &self.sj,
            jobs: &self.jobs,
            pods: &self.pods,
            missing: &self.missing,
            admission: &self.admission,
            now: self.now,
            unschedulable_timeout: Duration::from_secs(30),
            start_timeout: Duration::from_secs(60),
        })
    }
}

// === the Job ===

#[test]
fn the_job_carries_everything_the_contract_names() {
    let job = serde_json::to_value(job_for(&sj("render"), 3).unwrap()).unwrap();
    assert_eq!(job["metadata"]["name"], "render-3");
    assert_eq!(job["metadata"]["labels"][JOB_LABEL], "render");
    let owner = &job["metadata"]["ownerReferences"][0];
    assert_eq!(
        (
            &owner["kind"],
            &owner["name"],
            &owner["uid"],
            &owner["controller"]
        ),
        (
            &json!("ScavengerJob"),
            &json!("render"),
            &json!("uid-render"),
            &json!(true)
        )
    );
    let spec = &job["spec"];
    assert_eq!(
        (&spec["parallelism"], &spec["completions"]),
        (&json!(2), &json!(2))
    );
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["backoffLimit"], 0);
    let template = &spec["template"];
    assert_eq!(
        template["metadata"]["labels"],
        json!({JOB_LABEL: "render", "team": "vfx"})
    );
    assert_eq!(
        template["metadata"]["annotations"],
        json!({
            CHECKPOINT_INTERVAL_ANNOTATION: "60",
            MINIMUM_RUN_ANNOTATION: "300",
            "sim.telemesh.io/run-for": "10m"
        })
    );
    let pod = &template["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["priorityClassName"], PRIORITY_CLASS);
    assert_eq!(pod["securityContext"], json!({"runAsUser": 1000}));
    assert_eq!(
        pod["volumes"],
        json!([
            {"name": CHECKPOINT_VOLUME, "emptyDir": {}},
            {"name": "work", "persistentVolumeClaim": {"claimName": "render-work"}},
            {"name": "conf", "configMap": {"name": "render-conf"}},
            {"name": "token", "secret": {"secretName": "render-token"}}
        ])
    );
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.example/render:1");
    assert_eq!(
        (&c["command"], &c["args"]),
        (&json!(["/render"]), &json!(["--frames=100"]))
    );
    assert_eq!(
        c["env"],
        json!([
            {"name": "MODE", "value": "fast"},
            {"name": CHECKPOINT_FILE_ENV, "value": "/var/run/telemesh/checkpoint"}
        ])
    );
    assert_eq!(
        c["resources"]["requests"],
        json!({"cpu": "500m", "memory": "1Gi"})
    );
    assert_eq!(
        c["volumeMounts"],
        json!([
            {"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_MOUNT_PATH},
            {"name": "work", "mountPath": "/work"},
            {"name": "conf", "mountPath": "/etc/render", "readOnly": true},
            {"name": "token", "mountPath": "/var/token"}
        ])
    );
}

#[test]
fn a_bare_spec_gives_a_bare_job() {
    let mut bare = sj("bare");
    bare.spec = ScavengerJobSpec {
        image: "busybox".into(),
        checkpoint_interval: "90s".into(),
        parallelism: 1,
        ..Default::default()
    };
    let job = serde_json::to_value(job_for(&bare, 1).unwrap()).unwrap();
    let pod = &job["spec"]["template"]["spec"];
    assert!(pod.get("securityContext").is_none());
    assert!(pod["containers"][0].get("command").is_none());
    assert_eq!(
        job["spec"]["template"]["metadata"]["annotations"],
        json!({CHECKPOINT_INTERVAL_ANNOTATION: "90"})
    );
    assert_eq!(pod["volumes"].as_array().unwrap().len(), 1);
}

#[test]
fn run_requests_count_every_pod_and_limits_stand_in() {
    let r = run_requests(&sj("render"));
    assert_eq!(r["cpu"], 1.0);
    assert_eq!(r["memory"], 2.0 * 1024.0 * 1024.0 * 1024.0);
    let mut limits_only = sj("l");
    limits_only.spec.resources = serde_json::from_value(json!({"limits": {"cpu": "2"}})).unwrap();
    assert_eq!(run_requests(&limits_only)["cpu"], 4.0);
}

// === the queue and admission ===

fn waiting(name: &str, interrupted: u32, created: &str) -> ScavengerJob {
    let mut j = sj(name);
    j.metadata.creation_timestamp = Some(Time(created.parse().unwrap()));
    let phase = if interrupted > 0 {
        Phase::Interrupted
    } else {
        Phase::Pending
    };
    with_status(
        j,
        ScavengerJobStatus {
            phase,
            interrupted_count: interrupted,
            ..Default::default()
        },
    )
}

#[test]
fn the_queue_puts_the_most_interrupted_first_then_the_oldest_then_the_name() {
    let jobs = [
        waiting("young", 0, "2026-01-01T00:00:09Z"),
        waiting("old", 0, "2026-01-01T00:00:01Z"),
        waiting("twice", 2, "2026-01-01T00:00:08Z"),
        waiting("once-b", 1, "2026-01-01T00:00:05Z"),
        waiting("once-a", 1, "2026-01-01T00:00:05Z"),
        with_status(sj("running"), running("running-1", 0, &[])),
        with_status(
            sj("done"),
            ScavengerJobStatus {
                phase: Phase::Succeeded,
                interrupted_count: 9,
                ..Default::default()
            },
        ),
    ];
    let order: Vec<String> = queue(&jobs).iter().map(|j| j.name_any()).collect();
    assert_eq!(order, ["twice", "once-a", "once-b", "old", "young"]);
    // No status yet is Pending, and a job being deleted waits for nothing.
    let mut deleting = sj("deleting");
    deleting.metadata.deletion_timestamp = Some(Time(at(0)));
    let fresh = sj("fresh");
    let order: Vec<String> = queue([&deleting, &fresh])
        .iter()
        .map(|j| j.name_any())
        .collect();
    assert_eq!(order, ["fresh"]);
}

fn load(requested_cpu: f64, measured_cpu: Option<f64>) -> ClusterLoad {
    ClusterLoad {
        allocatable: Resources::from([("cpu".into(), 10.0), ("memory".into(), 100e9)]),
        requested: Resources::from([("cpu".into(), requested_cpu), ("memory".into(), 10e9)]),
        measured: measured_cpu
            .map(|m| BTreeMap::from([("cpu".to_owned(), m), ("memory".to_owned(), 0.1)]))
            .unwrap_or_default(),
    }
}

#[test]
fn use_counts_the_candidate_by_the_chosen_measure() {
    let one_cpu = Resources::from([("cpu".into(), 1.0)]);
    let busy_requests = load(6.0, Some(0.2));
    assert!((busy_requests.use_with(UseMode::Requested, &one_cpu) - 0.7).abs() < 1e-9);
    assert!((busy_requests.use_with(UseMode::Measured, &one_cpu) - 0.3).abs() < 1e-9);
    assert!((busy_requests.use_with(UseMode::Both, &one_cpu) - 0.7).abs() < 1e-9);
    let busy_measured = load(1.0, Some(0.8));
    assert!((busy_measured.use_with(UseMode::Both, &one_cpu) - 0.9).abs() < 1e-9);
    // Memory counts too: the largest share wins.
    let mem = Resources::from([("memory".into(), 80e9)]);
    assert!((load(0.0, None).use_with(UseMode::Requested, &mem) - 0.9).abs() < 1e-9);
    // No agent figures: measured falls back to requests.
    assert!((load(6.0, None).use_with(UseMode::Measured, &one_cpu) - 0.7).abs() < 1e-9);
    // No capacity at all: nothing fits.
    assert!(
        ClusterLoad::default()
            .use_with(UseMode::Requested, &one_cpu)
            .is_infinite()
    );
    assert_eq!(
        ClusterLoad::default().use_with(UseMode::Requested, &Resources::new()),
        0.0
    );
}

#[test]
fn only_the_head_of_the_queue_starts_and_only_under_the_threshold() {
    // Each run of `render` requests 1 CPU (2 pods × 500m) of 10.
    let jobs = [
        waiting("first", 1, "2026-01-01T00:00:09Z"),
        waiting("second", 0, "2026-01-01T00:00:01Z"),
    ];
    let q = queue(&jobs);
    let pick = |requested: f64| {
        next_to_start(&q, &load(requested, None), UseMode::Requested, 0.7).map(|j| j.name_any())
    };
    assert_eq!(pick(5.0).as_deref(), Some("first"));
    assert_eq!(
        pick(6.0).as_deref(),
        Some("first"),
        "exactly at the threshold starts"
    );
    assert_eq!(
        pick(6.5),
        None,
        "the head does not fit, and nothing jumps it"
    );
    assert!(next_to_start(&[], &load(0.0, None), UseMode::Requested, 0.7).is_none());

    // The same answers, with the reason to wait.
    let admit = |j: &ScavengerJob, requested: f64| {
        admission(j, &q, &load(requested, None), UseMode::Requested, 0.7)
    };
    assert_eq!(admit(&jobs[0], 6.0), Admission::Start);
    assert_eq!(
        admit(&jobs[0], 6.5),
        Admission::Wait(
            "waiting for room: cluster use would be 75% with this job, over the 70% threshold"
                .into()
        )
    );
    assert_eq!(
        admit(&jobs[1], 0.0),
        Admission::Wait("waiting for its turn: 1 ScavengerJob ahead in the queue".into())
    );
}

// === the queue modes ===

/// `j` with `pods` pods of 500m CPU each.
fn sized(mut j: ScavengerJob, pods: i32) -> ScavengerJob {
    j.spec.parallelism = pods;
    j
}

/// A job interrupted once, at `t`, waiting since: `pods` × 500m.
fn interrupted_at(name: &str, pods: i32, t: i64) -> ScavengerJob {
    let mut j = sized(waiting(name, 1, "2026-01-01T00:00:05Z"), pods);
    j.status.as_mut().unwrap().interrupted_timestamps = vec![Time(at(t))];
    j
}

/// A job running since `since`, interrupted `interrupted` times before: `pods` × 500m.
fn running_since(name: &str, pods: i32, since: i64, interrupted: u32) -> ScavengerJob {
    let mut j = sized(
        with_status(sj(name), running(&format!("{name}-1"), since, &[])),
        pods,
    );
    j.status.as_mut().unwrap().interrupted_count = interrupted;
    j
}

#[test]
fn backfill_starts_a_job_behind_a_head_that_does_not_fit_when_it_fits_beside_the_heads_next_start()
{
    // 10 CPUs, threshold 7. The head (interrupted at 100) needs 3 CPUs; `elder`, running since
    // before the head began to wait, holds 2; ordinary pods request 3. Use with the head would
    // be 8: it waits for `elder`. `small` (1 CPU, never ran) fits now (6), and beside the head
    // once `elder` is gone (3 + 3 + 1 = 7).
    let head = interrupted_at("head", 6, 100);
    let small = sized(waiting("small", 0, "2026-01-01T00:00:07Z"), 2);
    let elder = running_since("elder", 4, 50, 0);
    let jobs = [head.clone(), small.clone()];
    let q = queue(&jobs);
    let running = [&elder];
    let admit = |mode, j: &ScavengerJob| {
        admission_by(
            mode,
            j,
            &q,
            &running,
            &load(5.0, None),
            UseMode::Requested,
            0.7,
        )
    };
    assert_eq!(admit(QueueMode::Backfill, &small), Admission::Start);
    assert!(
        matches!(admit(QueueMode::Backfill, &head), Admission::Wait(w) if w.starts_with("waiting for room"))
    );
    // Strict: nothing jumps the head, as `admission` always did.
    let turn = Admission::Wait("waiting for its turn: 1 ScavengerJob ahead in the queue".into());
    assert_eq!(admit(QueueMode::Strict, &small), turn);
    assert_eq!(
        admission(&small, &q, &load(5.0, None), UseMode::Requested, 0.7),
        turn
    );
    assert_eq!(QueueMode::default(), QueueMode::Strict);
}

#[test]
fn backfill_never_takes_the_room_the_head_waits_for() {
    let head = interrupted_at("head", 6, 100);
    let small = sized(waiting("small", 0, "2026-01-01T00:00:07Z"), 2);
    let jobs = [head.clone(), small.clone()];
    let q = queue(&jobs);
    let admit = |running: &[&ScavengerJob], requested: f64| {
        admission_by(
            QueueMode::Backfill,
            &small,
            &q,
            running,
            &load(requested, None),
            UseMode::Requested,
            0.7,
        )
    };
    let turn = Admission::Wait("waiting for its turn: 1 ScavengerJob ahead in the queue".into());
    // Ordinary demand alone (5) keeps the head out (8): the room it waits for is what that
    // demand gives back, so `small` (which fits now: 6) must not take it.
    assert_eq!(admit(&[], 5.0), turn);
    // A job that jumped the head (started at 200, after it began to wait) stays counted: with
    // `elder` (2, before) and `jumper` (2, after) beside 2 of ordinary demand, the head would
    // need 2 + 2 + 3 = 7 once `elder` is gone, and `small` on top makes 8.
    let elder = running_since("elder", 4, 50, 0);
    let jumper = running_since("jumper", 4, 200, 0);
    assert_eq!(admit(&[&elder, &jumper], 6.0), turn);
    // A smaller jumper leaves room: 2 + 1 + 3 + 1 = 7.
    let jumper = running_since("jumper", 2, 200, 0);
    assert_eq!(admit(&[&elder, &jumper], 5.0), Admission::Start);
    // A job ranked ahead of the head (interrupted twice) is waited for whenever it started.
    let ahead = running_since("ahead", 4, 300, 2);
    assert_eq!(admit(&[&ahead], 5.0), Admission::Start);
    // A job that does not fit now never starts, whatever the reservation: 6.5 + 1 > 7.
    assert_eq!(admit(&[&elder], 6.5), turn);
    // When the head fits, it goes first and nothing else starts in the same turn.
    assert_eq!(admit(&[], 3.0), turn);
}

#[test]
fn backfill_takes_the_first_job_in_queue_order_that_fits_beside_the_head() {
    // Behind the head: `wide` (interrupted, 3 CPUs: does not fit now), then two small ones
    // that never ran. The older small one goes; the younger one waits for its turn.
    let head = interrupted_at("head", 6, 100);
    let mut wide = interrupted_at("wide", 6, 100);
    wide.metadata.creation_timestamp = Some(Time(at(6)));
    let small_a = sized(waiting("small-a", 0, "2026-01-01T00:00:07Z"), 2);
    let small_b = sized(waiting("small-b", 0, "2026-01-01T00:00:08Z"), 2);
    let jobs = [small_b.clone(), wide.clone(), head.clone(), small_a.clone()];
    let q = queue(&jobs);
    let order: Vec<String> = q.iter().map(|j| j.name_any()).collect();
    assert_eq!(order, ["head", "wide", "small-a", "small-b"]);
    let elder = running_since("elder", 4, 50, 0);
    let admit = |j: &ScavengerJob| {
        admission_by(
            QueueMode::Backfill,
            j,
            &q,
            &[&elder],
            &load(5.0, None),
            UseMode::Requested,
            0.7,
        )
    };
    assert_eq!(admit(&small_a), Admission::Start);
    assert_eq!(
        admit(&small_b),
        Admission::Wait("waiting for its turn: 3 ScavengerJobs ahead in the queue".into())
    );
    assert!(matches!(admit(&wide), Admission::Wait(_)));
}

#[test]
fn next_to_start_by_is_the_one_job_admission_by_starts() {
    // The backfill fixtures above, over loads from empty to full, both modes, with and without
    // running jobs: the poll's pick and each job's own admission never disagree.
    let head = interrupted_at("head", 6, 100);
    let mut wide = interrupted_at("wide", 6, 100);
    wide.metadata.creation_timestamp = Some(Time(at(6)));
    let small_a = sized(waiting("small-a", 0, "2026-01-01T00:00:07Z"), 2);
    let small_b = sized(waiting("small-b", 0, "2026-01-01T00:00:08Z"), 2);
    let jobs = [head, wide, small_a, small_b];
    let q = queue(&jobs);
    let elder = running_since("elder", 4, 50, 0);
    let jumper = running_since("jumper", 2, 200, 0);
    for queue_mode in [QueueMode::Strict, QueueMode::Backfill] {
        for running in [&[][..], &[&elder][..], &[&elder, &jumper][..]] {
            for tenths in 0..=100 {
                let load = load(f64::from(tenths) / 10.0, None);
                let pick =
                    next_to_start_by(queue_mode, &q, running, &load, UseMode::Requested, 0.7);
                let started: Vec<&str> = q
                    .iter()
                    .filter(|j| {
                        admission_by(queue_mode, j, &q, running, &load, UseMode::Requested, 0.7)
                            == Admission::Start
                    })
                    .map(|j| j.metadata.name.as_deref().unwrap())
                    .collect();
                let picked: Vec<&str> = pick
                    .iter()
                    .map(|j| j.metadata.name.as_deref().unwrap())
                    .collect();
                assert_eq!(
                    picked,
                    started,
                    "{queue_mode:?}, {tenths}, {}",
                    running.len()
                );
            }
        }
    }
    assert!(
        next_to_start_by(
            QueueMode::Backfill,
            &[],
            &[],
            &load(0.0, None),
            UseMode::Requested,
            0.7
        )
        .is_none()
    );
}

/// `j` with the status message `message`.
fn told(mut j: ScavengerJob, message: &str) -> ScavengerJob {
    j.status.get_or_insert_with(Default::default).message = message.into();
    j
}

#[test]
fn a_poll_looks_only_at_the_job_that_may_start_and_the_first_told_something_out_of_date() {
    // Four jobs of 1 CPU behind ordinary demand of 6.5 (of 10, threshold 7): none fits, and
    // each already says why it waits, so a poll reconciles none of them.
    let names = ["a", "b", "c", "d"];
    let current = |position: usize| match position {
        0 => "waiting for room: cluster use would be 75% with this job, over the 70% threshold"
            .to_owned(),
        1 => "waiting for its turn: 1 ScavengerJob ahead in the queue".to_owned(),
        n => format!("waiting for its turn: {n} ScavengerJobs ahead in the queue"),
    };
    let job = |i: usize| {
        told(
            waiting(names[i], 0, &format!("2026-01-01T00:00:0{i}Z")),
            &current(i),
        )
    };
    let jobs: Vec<ScavengerJob> = (0..4).map(job).collect();
    let q = queue(&jobs);
    let poll = |q: &[&ScavengerJob], queue_mode, requested: f64| -> Vec<String> {
        polled(
            queue_mode,
            q,
            &[],
            &load(requested, None),
            UseMode::Requested,
            0.7,
        )
        .iter()
        .map(|j| j.name_any())
        .collect()
    };
    assert!(poll(&q, QueueMode::Strict, 6.5).is_empty());
    assert!(poll(&q, QueueMode::Backfill, 6.5).is_empty(), "none fits");
    // Room for the head: it alone, as its own admission says (its message is not looked at).
    assert_eq!(poll(&q, QueueMode::Strict, 5.0), ["a"]);
    // Each message is what the job's own admission gives it.
    for (j, message) in q.iter().zip(0..4) {
        assert_eq!(
            admission(j, &q, &load(6.5, None), UseMode::Requested, 0.7),
            Admission::Wait(current(message))
        );
    }

    // Out of date (the head's use changed, a job ahead left, or no status yet): only the
    // first such job in queue order, beside the one that may start.
    assert_eq!(
        poll(&q, QueueMode::Strict, 6.4),
        ["a"],
        "74%: the head's message"
    );
    let mut moved = jobs.clone();
    moved[2] = told(moved[2].clone(), &current(3));
    moved[3] = told(moved[3].clone(), &current(2));
    let q = queue(&moved);
    assert_eq!(poll(&q, QueueMode::Strict, 6.5), ["c"]);
    assert_eq!(poll(&q, QueueMode::Strict, 5.0), ["a", "c"]);
    let mut fresh = jobs.clone();
    fresh[3].status = None;
    let q = queue(&fresh);
    assert_eq!(poll(&q, QueueMode::Strict, 6.5), ["d"]);
    // The job that starts is polled for its start, not twice.
    let mut head_fits = jobs.clone();
    head_fits[0] = told(head_fits[0].clone(), "");
    let q = queue(&head_fits);
    assert_eq!(poll(&q, QueueMode::Strict, 5.0), ["a"]);
    assert!(poll(&[], QueueMode::Backfill, 0.0).is_empty());
}

#[test]
fn a_backfill_poll_looks_at_the_job_that_may_start_behind_the_head() {
    let head = interrupted_at("head", 6, 100);
    let small = sized(waiting("small", 0, "2026-01-01T00:00:07Z"), 2);
    let elder = running_since("elder", 4, 50, 0);
    let room = "waiting for room: cluster use would be 80% with this job, over the 70% threshold";
    let jobs = [
        told(head, room),
        told(
            small,
            "waiting for its turn: 1 ScavengerJob ahead in the queue",
        ),
    ];
    let q = queue(&jobs);
    let poll = |queue_mode| -> Vec<String> {
        polled(
            queue_mode,
            &q,
            &[&elder],
            &load(5.0, None),
            UseMode::Requested,
            0.7,
        )
        .iter()
        .map(|j| j.name_any())
        .collect()
    };
    assert_eq!(poll(QueueMode::Backfill), ["small"]);
    assert!(poll(QueueMode::Strict).is_empty());
}

#[test]
fn a_job_waits_since_its_last_interruption_run_or_creation() {
    let fresh = waiting("fresh", 0, "2026-01-01T00:00:07Z");
    assert_eq!(waiting_since(&fresh), Some(at(7)));
    assert_eq!(
        waiting_since(&interrupted_at("head", 2, 100)),
        Some(at(100))
    );
    let mut given_up = fresh.clone();
    given_up.status.as_mut().unwrap().running_timestamps = vec![Time(at(40))];
    assert_eq!(waiting_since(&given_up), Some(at(40)));
}

#[test]
fn without_takes_running_requests_out_of_both_measures() {
    let freed = Resources::from([("cpu".into(), 2.0)]);
    let l = load(5.0, Some(0.5)).without(&freed);
    assert!((l.requested["cpu"] - 3.0).abs() < 1e-9);
    assert!((l.measured["cpu"] - 0.3).abs() < 1e-9);
    let l = load(1.0, Some(0.1)).without(&freed);
    assert_eq!((l.requested["cpu"], l.measured["cpu"]), (0.0, 0.0));
}

// === reconcile: waiting ===

#[test]
fn a_waiting_job_starts_when_admitted() {
    let mut case = Case::new(sj("render"));
    let waits = case.decide();
    let s = waits.status.unwrap();
    assert_eq!(
        (s.phase, s.message.as_str()),
        (Phase::Pending, "waiting for its turn"),
        "not admitted: a first status says why"
    );
    assert!(waits.create.is_none() && waits.transition.is_none());
    case.sj.status = Some(s);
    assert_eq!(
        case.decide(),
        Decision::default(),
        "the same reason is not written again"
    );
    case.admission = Admission::Start;
    let d = case.decide();
    assert_eq!(d.transition, Some(Transition::Started { run: 1 }));
    assert_eq!(d.create.as_ref().unwrap().name_any(), "render-1");
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Running);
    assert_eq!(s.job_name.as_deref(), Some("render-1"));
    assert_eq!(s.running_timestamps, [Time(at(1000))]);
    assert_eq!(s.current_run_start, Some(Time(at(1000))));
    assert_eq!(s.checkpoint_window_start, Some(Time(at(1000))));
    let running = s.conditions.iter().find(|c| c.type_ == "Running").unwrap();
    assert_eq!(running.status, "True");
    assert_eq!(d.requeue_after, Some(Duration::from_secs(60)));

    // The third run of a twice-interrupted job.
    let again = with_status(
        sj("render"),
        ScavengerJobStatus {
            phase: Phase::Interrupted,
            interrupted_count: 2,
            running_timestamps: vec![Time(at(1)), Time(at(2))],
            ..Default::default()
        },
    );
    let mut case = Case::new(again);
    case.admission = Admission::Start;
    let d = case.decide();
    assert_eq!(d.create.unwrap().name_any(), "render-3");
    assert_eq!(d.status.unwrap().interrupted_count, 2);
}

#[test]
fn a_new_run_waits_until_the_last_one_is_gone() {
    let mut case = Case::new(waiting("render", 1, "2026-01-01T00:00:00Z"));
    case.admission = Admission::Start;
    case.jobs = vec![job("render-1", &[])];
    case.pods = vec![pod("render-1-a", "render-1", "Running")];
    let d = case.decide();
    assert_eq!(d.delete, ["render-1"]);
    assert_eq!((d.create, d.status), (None, None));
    case.jobs.clear();
    assert_eq!(case.decide(), Decision::default(), "pods still terminating");
    case.pods.clear();
    case.admission = Admission::Wait("waiting for room".into());
    assert_eq!(case.decide().status.unwrap().message, "waiting for room");
    case.admission = Admission::Start;
    assert!(case.decide().create.is_some());
}

#[test]
fn missing_volume_sources_fail_the_job_naming_each() {
    let mut case = Case::new(sj("render"));
    case.admission = Admission::Start;
    case.missing = vec![
        VolumeRef::Claim("render-work".into()),
        VolumeRef::Secret("render-token".into()),
    ];
    let d = case.decide();
    assert!(d.create.is_none());
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Failed);
    assert!(
        s.message
            .contains("PersistentVolumeClaim render-work, Secret render-token"),
        "{}",
        s.message
    );
    assert_eq!(s.finished_timestamp, Some(Time(at(1000))));
    assert!(
        s.conditions
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True")
    );
    assert!(matches!(d.transition, Some(Transition::Failed { .. })));
    case.missing.truncate(1);
    let one = case.decide().status.unwrap().message;
    assert!(
        one.starts_with("missing volume source: PersistentVolumeClaim render-work;"),
        "{one}"
    );
}

#[test]
fn an_interval_that_does_not_parse_fails_the_job() {
    let mut bad = sj("render");
    bad.spec.checkpoint_interval = "soon".into();
    let d = Case::new(bad).decide();
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Failed);
    assert!(
        s.message.contains("checkpointInterval \"soon\""),
        "{}",
        s.message
    );
}

#[test]
fn ended_jobs_are_left_alone() {
    for phase in [Phase::Succeeded, Phase::Failed] {
        let mut case = Case::new(with_status(
            sj("render"),
            ScavengerJobStatus {
                phase,
                ..Default::default()
            },
        ));
        case.jobs = vec![job("render-1", &["Complete"])];
        case.admission = Admission::Start;
        assert_eq!(case.decide(), Decision::default());
    }
}

// === reconcile: running ===

fn running_case(pods: Vec<Pod>, recorded: &[&str]) -> Case {
    let mut case = Case::new(with_status(
        sj("render"),
        running("render-1", 970, recorded),
    ));
    case.jobs = vec![job("render-1", &[])];
    case.pods = pods;
    case
}

#[test]
fn a_complete_job_succeeds() {
    let mut case = running_case(vec![pod("a", "render-1", "Succeeded")], &["a"]);
    case.jobs = vec![job("render-1", &["Complete"])];
    let d = case.decide();
    assert_eq!(d.transition, Some(Transition::Succeeded));
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Succeeded);
    assert_eq!(s.finished_timestamp, Some(Time(at(1000))));
    assert_eq!(s.current_run_start, None);
    assert!(d.delete.is_empty(), "the finished Job stays for its logs");
}

#[test]
fn a_pod_failing_on_its_own_fails_the_job() {
    let failed: Pod = serde_json::from_value(json!({
        "metadata": {"name": "b", "labels": {JOB_NAME_LABEL: "render-1"}},
        "status": {"phase": "Failed", "containerStatuses": [{"name": "job", "image": "x", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]}
    }))
    .unwrap();
    let case = running_case(vec![pod("a", "render-1", "Running"), failed], &["a", "b"]);
    let d = case.decide();
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.message, "pod b failed: exit code 3 (Error)");
    assert_eq!(s.interrupted_count, 0);
    assert_eq!(d.delete, ["render-1"], "the other pods stop");
}

#[test]
fn a_preempted_pod_interrupts_the_whole_job() {
    let victim = with_condition(
        pod("b", "render-1", "Running"),
        "DisruptionTarget",
        "True",
        "",
    );
    let case = running_case(vec![pod("a", "render-1", "Running"), victim], &["a", "b"]);
    let d = case.decide();
    assert_eq!(d.delete, ["render-1"]);
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Interrupted);
    assert_eq!(s.interrupted_count, 1);
    assert_eq!(s.interrupted_timestamps, [Time(at(1000))]);
    assert_eq!((s.job_name, s.current_run_start), (None, None));
    assert!(s.pods.is_empty());
    assert!(
        s.message.contains("pod b was preempted or evicted"),
        "{}",
        s.message
    );
    // Started at 970 with a 60 s interval: 30 s since the window start, 1 CPU in all.
    match d.transition.unwrap() {
        Transition::Interrupted {
            wasted_cpu_seconds, ..
        } => assert!((wasted_cpu_seconds - 30.0).abs() < 1e-9),
        other => panic!("{other:?}"),
    }
    assert!((s.wasted_cpu_seconds - 30.0).abs() < 1e-9);
}

#[test]
fn every_way_of_removing_a_pod_interrupts() {
    let terminating = {
        let mut p = pod("b", "render-1", "Running");
        p.metadata.deletion_timestamp = Some(Time(at(999)));
        p
    };
    let evicted = {
        let mut p = pod("b", "render-1", "Failed");
        p.status.as_mut().unwrap().reason = Some("Evicted".into());
        p
    };
    // Deleted, and its kubelet has reported the end (SIGTERM, exit 143): the API server keeps
    // it Terminating, Failed, while the Job controller's finalizer holds it.
    let terminated: Pod = serde_json::from_value(json!({
        "metadata": {"name": "b", "labels": {JOB_NAME_LABEL: "render-1"},
            "deletionTimestamp": "1970-01-01T00:16:39Z",
            "finalizers": ["batch.kubernetes.io/job-tracking"]},
        "status": {"phase": "Failed", "containerStatuses": [{"name": "job", "image": "x", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 143, "reason": "Error"}}}]}
    }))
    .unwrap();
    let a = || pod("a", "render-1", "Running");
    for (what, case) in [
        (
            "terminating",
            running_case(vec![a(), terminating], &["a", "b"]),
        ),
        (
            "terminating, its end reported Failed by the kubelet",
            running_case(vec![a(), terminated], &["a", "b"]),
        ),
        (
            "evicted by the kubelet",
            running_case(vec![a(), evicted], &["a", "b"]),
        ),
        (
            "gone before finishing",
            running_case(vec![a()], &["a", "b"]),
        ),
        ("Job removed", {
            let mut c = running_case(vec![a()], &["a"]);
            c.jobs.clear();
            c
        }),
        ("Job failed, no pod failed on its own", {
            let mut c = running_case(vec![a()], &["a"]);
            c.jobs = vec![job("render-1", &["Failed"])];
            c
        }),
    ] {
        let s = case
            .decide()
            .status
            .unwrap_or_else(|| panic!("{what}: no status"));
        assert_eq!(s.phase, Phase::Interrupted, "{what}");
        assert_eq!(s.interrupted_count, 1, "{what}");
    }
}

#[test]
fn unschedulable_pods_start_a_clock_and_give_up_after_the_timeout() {
    let pending = || {
        with_condition(
            pod("a", "render-1", "Pending"),
            "PodScheduled",
            "False",
            "0/3 nodes are available",
        )
    };
    let case = running_case(vec![pending()], &[]);
    let d = case.decide();
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Running);
    assert_eq!(s.unschedulable_since, Some(Time(at(1000))));
    assert_eq!(s.pods, ["a"]);
    assert_eq!(d.requeue_after, Some(Duration::from_secs(30)));

    let mut status = running("render-1", 970, &["a"]);
    status.unschedulable_since = Some(Time(at(990)));
    let mut case = Case::new(with_status(sj("render"), status.clone()));
    case.jobs = vec![job("render-1", &[])];
    case.pods = vec![pending()];
    let d = case.decide();
    assert_eq!(d.status, None, "10 s of 30: nothing to write");
    assert_eq!(d.requeue_after, Some(Duration::from_secs(20)));

    case.now = at(1020);
    let d = case.decide();
    assert_eq!(d.delete, ["render-1"]);
    assert!(
        matches!(d.transition, Some(Transition::Unschedulable { ref reason }) if reason == "0/3 nodes are available")
    );
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Pending);
    assert_eq!(s.interrupted_count, 0, "never ran: not an interruption");
    assert_eq!(s.job_name, None);
    assert!(s.message.contains("unschedulable for 30s"), "{}", s.message);

    // Scheduled meanwhile: the clock stops.
    case.now = at(1000);
    case.pods = vec![pod("a", "render-1", "Running")];
    assert_eq!(case.decide().status.unwrap().unschedulable_since, None);
}

#[test]
fn a_healthy_run_records_its_pods_and_its_checkpoint_window() {
    let case = running_case(
        vec![
            pod("a", "render-1", "Running"),
            pod("b", "render-1", "Pending"),
        ],
        &["a"],
    );
    let d = case.decide();
    let s = d.status.unwrap();
    assert_eq!(s.pods, ["a", "b"]);
    // Started at 970, interval 60: the window started at 970 and the next at 1030.
    assert_eq!(s.checkpoint_window_start, Some(Time(at(970))));
    assert_eq!(d.requeue_after, Some(Duration::from_secs(30)));
    assert!(d.transition.is_none() && d.delete.is_empty() && d.create.is_none());

    let mut later = running_case(
        vec![
            pod("a", "render-1", "Running"),
            pod("b", "render-1", "Running"),
        ],
        &["a", "b"],
    );
    later.now = at(1100);
    let s = later.decide().status.unwrap();
    assert_eq!(s.checkpoint_window_start, Some(Time(at(1090))));

    // Nothing changed: nothing to write.
    let mut same = running_case(vec![pod("a", "render-1", "Running")], &["a"]);
    same.now = at(1000);
    assert_eq!(same.decide().status, None);
}

#[test]
fn jobs_of_earlier_runs_are_deleted_while_running() {
    let mut case = running_case(vec![pod("a", "render-1", "Running")], &["a"]);
    case.jobs.push(job("render-0", &[]));
    assert_eq!(case.decide().delete, ["render-0"]);
}

// === reconcile: pods placed that do not start ===

/// A pod of run render-1 bound to sim-node-0 at `placed`, Pending, its container waiting with
/// the kubelet's `reason` and `message`.
fn placed(name: &str, placed: i64, reason: &str, message: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "batch",
            "labels": {JOB_LABEL: "render", JOB_NAME_LABEL: "render-1"}},
        "spec": {"nodeName": "sim-node-0", "containers": [{"name": "job", "image": "x"}]},
        "status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True",
                            "lastTransitionTime": at(placed).to_string()}],
            "containerStatuses": [{"name": "job", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": reason, "message": message}}}]}
    }))
    .unwrap()
}

/// Run render-1 started at 970 with `pods`, looked at `now`.
fn stuck_case(pods: Vec<Pod>, now: i64) -> Case {
    let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut case = running_case(pods, &names);
    case.now = at(now);
    case
}

#[test]
fn a_pod_that_cannot_pull_waits_out_the_start_timeout_then_the_job_waits_again() {
    let pull = || placed("a", 980, "ImagePullBackOff", "Back-off pulling image \"x\"");
    // 20 s of 60 since it was placed: nothing to do but look again when the 60 s are up.
    let d = stuck_case(vec![pull()], 1000).decide();
    assert_eq!((d.status, d.transition), (None, None));
    assert!(d.delete.is_empty());
    assert_eq!(
        d.requeue_after,
        Some(Duration::from_secs(30)),
        "the next window comes first"
    );
    let d = stuck_case(vec![pull()], 1035).decide();
    assert_eq!(
        d.requeue_after,
        Some(Duration::from_secs(5)),
        "then the timeout"
    );

    let d = stuck_case(vec![pull()], 1040).decide();
    assert_eq!(d.delete, ["render-1"]);
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Pending);
    assert_eq!(
        s.message,
        "pod a has not started 60s after it was placed on sim-node-0 \
         (ImagePullBackOff: Back-off pulling image \"x\"); waiting for another turn"
    );
    assert_eq!(
        (s.interrupted_count, s.finished_timestamp),
        (0, None),
        "not an interruption"
    );
    assert_eq!((s.job_name, s.current_run_start), (None, None));
    assert!(s.pods.is_empty());
    assert_eq!(
        d.transition,
        Some(Transition::NotStarted {
            reason: "pod a on sim-node-0: ImagePullBackOff: Back-off pulling image \"x\"".into()
        })
    );
    let t = Transition::NotStarted {
        reason: String::new(),
    };
    assert_eq!((t.reason(), t.is_warning()), ("NotStarted", true));
    let running = s.conditions.iter().find(|c| c.type_ == "Running").unwrap();
    assert_eq!(running.status, "False");
}

#[test]
fn a_cause_that_cannot_clear_by_itself_fails_the_job() {
    let d = stuck_case(
        vec![placed(
            "a",
            980,
            "InvalidImageName",
            "couldn't parse image name \"Bad:1\"",
        )],
        1040,
    )
    .decide();
    assert_eq!(d.delete, ["render-1"], "the rest of the run stops");
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.finished_timestamp, Some(Time(at(1040))));
    assert_eq!(
        s.message,
        "pod a has not started 60s after it was placed on sim-node-0 \
         (InvalidImageName: couldn't parse image name \"Bad:1\"); this does not clear by itself: \
         fix it, then create the ScavengerJob anew"
    );
    assert!(
        matches!(d.transition, Some(Transition::Failed { ref reason }) if *reason == s.message)
    );
    let failed = s.conditions.iter().find(|c| c.type_ == "Failed").unwrap();
    assert_eq!(failed.status, "True");
}

#[test]
fn each_cause_is_given_up_as_classified() {
    for (reason, message, phase) in [
        (
            "InvalidImageName",
            "invalid reference format",
            Phase::Failed,
        ),
        (
            "CreateContainerConfigError",
            "secret \"token\" not found",
            Phase::Failed,
        ),
        (
            "ErrImageNeverPull",
            "image is not present with pull policy of Never",
            Phase::Failed,
        ),
        (
            "ErrImagePull",
            "failed to pull and unpack image",
            Phase::Pending,
        ),
        (
            "ImagePullBackOff",
            "Back-off pulling image \"x\"",
            Phase::Pending,
        ),
        // A Secret or ConfigMap volume that is missing: FailedMount Events, ContainerCreating.
        ("ContainerCreating", "", Phase::Pending),
        ("SomethingNew", "", Phase::Pending),
    ] {
        let s = stuck_case(vec![placed("a", 900, reason, message)], 1040)
            .decide()
            .status
            .unwrap_or_else(|| panic!("{reason}: no status"));
        assert_eq!(s.phase, phase, "{reason}");
        assert!(s.message.contains(reason), "{reason}: {}", s.message);
    }
    // No container status from the kubelet at all (its node may be down): transient.
    let mut silent = placed("a", 900, "", "");
    silent.status.as_mut().unwrap().container_statuses = None;
    let s = stuck_case(vec![silent], 1040).decide().status.unwrap();
    assert_eq!(s.phase, Phase::Pending);
    assert!(
        s.message.contains("reported no container status"),
        "{}",
        s.message
    );
}

#[test]
fn the_start_clock_counts_from_placement_never_from_before_the_run() {
    // Placed at 1000, 30 s after the run started: given up at 1060, not at 1030.
    let late = || placed("a", 1000, "ErrImagePull", "");
    assert_eq!(stuck_case(vec![late()], 1059).decide().transition, None);
    assert!(stuck_case(vec![late()], 1060).decide().transition.is_some());
    // Placed "before" the run started (an API server clock behind ours): from the run's start.
    let early = || placed("a", 900, "ErrImagePull", "");
    assert_eq!(stuck_case(vec![early()], 1029).decide().transition, None);
    assert!(
        stuck_case(vec![early()], 1030)
            .decide()
            .transition
            .is_some()
    );
    // No time on the condition: from the run's start too.
    let mut untimed = early();
    untimed.status.as_mut().unwrap().conditions = None;
    assert_eq!(
        stuck_case(vec![untimed.clone()], 1029).decide().transition,
        None
    );
    assert!(
        stuck_case(vec![untimed], 1030)
            .decide()
            .transition
            .is_some()
    );
}

#[test]
fn a_permanent_cause_wins_and_running_pods_are_never_given_up() {
    let d = stuck_case(
        vec![
            placed("a", 900, "ImagePullBackOff", ""),
            placed(
                "b",
                900,
                "CreateContainerConfigError",
                "configmap \"conf\" not found",
            ),
        ],
        1040,
    )
    .decide();
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Failed);
    assert!(
        s.message.starts_with("pod b has not started"),
        "{}",
        s.message
    );

    // Running for long past the start timeout (and one pod placed, not yet due): nothing.
    let mut case = running_case(
        vec![
            pod("a", "render-1", "Running"),
            placed("b", 1080, "ContainerCreating", ""),
        ],
        &["a", "b"],
    );
    case.now = at(1100);
    let d = case.decide();
    assert_eq!(d.transition, None);
    assert!(d.delete.is_empty());
    let s = d.status.unwrap();
    assert_eq!(s.phase, Phase::Running);
    assert_eq!(
        d.requeue_after,
        Some(Duration::from_secs(40)),
        "b's start timeout at 1140, before the next window at 1150"
    );
}
