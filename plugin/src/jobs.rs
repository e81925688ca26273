//! `jobs`: ScavengerJobs with their phase, interruptions and running time from their status,
//! and the work each would lose if interrupted now, from the view's scavenger pods (what the
//! extender's unsaved-work victim ranker reads).

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::ResourceExt as _;
use serde::Serialize;
use serde_json::Value;
use telemesh_core::scavenge::crd::ScavengerJob;

use crate::table::{self, Table, UNKNOWN};

/// A job's unsaved work across its pods in the view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unsaved {
    /// Its pods the view shows.
    pub pods: usize,
    /// The longest time since a pod's last checkpoint, seconds.
    pub seconds: f64,
    /// CPU-seconds since the pods' last checkpoints, at their CPU requests.
    pub cpu_seconds: f64,
}

/// Each job's (`namespace/name`) unsaved work, from `GET /api/v1/nodes`.
pub fn unsaved_by_job(nodes: &Value) -> BTreeMap<String, Unsaved> {
    let mut out: BTreeMap<String, Unsaved> = BTreeMap::new();
    let pods = nodes["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["scavengers"].as_object())
        .flat_map(|pods| pods.values());
    for pod in pods {
        let Some(job) = pod["job"].as_str() else {
            continue;
        };
        let u = out.entry(job.to_owned()).or_default();
        u.pods += 1;
        u.seconds = u.seconds.max(pod["unsavedSeconds"].as_f64().unwrap_or(0.0));
        u.cpu_seconds += pod["unsavedCpuSeconds"].as_f64().unwrap_or(0.0);
    }
    out
}

/// The columns (NAMESPACE first with `all_namespaces`).
fn headers(all_namespaces: bool) -> Vec<&'static str> {
    let columns = [
        "NAME",
        "PHASE",
        "INTERRUPTED",
        "RUNNING-FOR",
        "UNSAVED",
        "UNSAVED-CPU-S",
        "WASTED-CPU-S",
        "AGE",
    ];
    all_namespaces
        .then_some("NAMESPACE")
        .into_iter()
        .chain(columns)
        .collect()
}

/// The table of `jobs` at `now`; `unsaved` is `None` when the view could not be read (the
/// UNSAVED cells are then `<unknown>`; a job without pods in the view has none: `0s`, `0.0`).
pub fn jobs_table(
    jobs: &[ScavengerJob],
    unsaved: Option<&BTreeMap<String, Unsaved>>,
    now: Timestamp,
    all_namespaces: bool,
) -> Table {
    let mut t = Table::new(&headers(all_namespaces));
    for job in jobs {
        let namespace = job.namespace().unwrap_or_default();
        let status = job.status.clone().unwrap_or_default();
        let running_for = status
            .current_run_start
            .as_ref()
            .filter(|_| status.phase == telemesh_core::scavenge::crd::Phase::Running)
            .map_or_else(|| "-".to_owned(), |t| table::age_since(Some(t.0), now));
        let (unsaved_for, unsaved_cpu) = match unsaved {
            None => (UNKNOWN.to_owned(), UNKNOWN.to_owned()),
            Some(map) => {
                let u = map
                    .get(&format!("{namespace}/{}", job.name_any()))
                    .copied()
                    .unwrap_or_default();
                (
                    table::age_seconds(u.seconds),
                    format!("{:.1}", u.cpu_seconds),
                )
            }
        };
        let row = all_namespaces
            .then(|| namespace.clone())
            .into_iter()
            .chain([
                job.name_any(),
                status.phase.as_str().to_owned(),
                status.interrupted_count.to_string(),
                running_for,
                unsaved_for,
                unsaved_cpu,
                format!("{:.1}", status.wasted_cpu_seconds),
                table::age_since(job.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
            ])
            .collect();
        t.push(row);
    }
    t
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn job(name: &str, status: Value) -> ScavengerJob {
        serde_json::from_value(json!({
            "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
            "metadata": {"name": name, "namespace": "batch", "creationTimestamp": "2026-11-25T01:00:00Z"},
            "spec": {"image": "x", "checkpointInterval": "30s"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn unsaved_work_adds_up_per_job_across_nodes() {
        let pod = |job: &str, s: f64, cpu_s: f64| json!({"job": job, "unsavedSeconds": s, "unsavedCpuSeconds": cpu_s});
        let nodes = json!({"nodes": [
            {"name": "n1", "scavengers": {"u1": pod("batch/render", 20.0, 40.0), "u2": pod("batch/etl", 5.0, 5.0)}},
            {"name": "n2", "scavengers": {"u3": pod("batch/render", 30.0, 30.0)}},
            {"name": "n3"},
        ]});
        let by_job = unsaved_by_job(&nodes);
        assert_eq!(
            by_job["batch/render"],
            Unsaved {
                pods: 2,
                seconds: 30.0,
                cpu_seconds: 70.0
            }
        );
        assert_eq!(by_job["batch/etl"].pods, 1);
    }

    #[test]
    fn rows_show_status_and_unsaved_work() {
        let now: Timestamp = "2026-11-25T01:10:00Z".parse().unwrap();
        let jobs = [
            job(
                "render",
                json!({"phase": "Running", "interruptedCount": 2, "currentRunStart": "2026-11-25T01:08:00Z", "wastedCpuSeconds": 12.5}),
            ),
            job(
                "etl",
                json!({"phase": "Interrupted", "interruptedCount": 1, "currentRunStart": "2026-11-25T01:08:00Z"}),
            ),
        ];
        let unsaved = BTreeMap::from([(
            "batch/render".to_owned(),
            Unsaved {
                pods: 1,
                seconds: 25.0,
                cpu_seconds: 50.0,
            },
        )]);
        let text = jobs_table(&jobs, Some(&unsaved), now, false).render();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows[0], headers(false));
        assert_eq!(
            rows[1],
            ["render", "Running", "2", "2m", "25s", "50.0", "12.5", "10m"]
        );
        // Not running: no running time (a stale currentRunStart is not shown), nothing unsaved.
        assert_eq!(
            rows[2],
            ["etl", "Interrupted", "1", "-", "0s", "0.0", "0.0", "10m"]
        );
        let blind = jobs_table(&jobs, None, now, true);
        assert_eq!(blind.rows()[0][0], "batch");
        assert_eq!(blind.rows()[0][5], UNKNOWN);
    }
}
