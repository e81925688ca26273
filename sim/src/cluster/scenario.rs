//! Scripted telemetry and faults: a scenario file says what each simulated node measures and
//! when things change ("sim-node-2's node_metric drops to -1 at t=15s", "pods labelled app=d
//! crash every 10 s on sim-node-1"). The runner writes each node's metrics as a node-exporter
//! textfile under `<root>/<node>/textfile/` (what that node's agent reads with
//! `--host-root <root>/<node> --textfile-dir /textfile`) and hands fault rules to the kubelets.
//!
//! ```yaml
//! telemetry:                 # every node starts with these
//!   node_metric: 50
//! steps:
//! - at: 15s
//!   node: sim-node-2         # absent: every node
//!   set: {node_metric: -1}
//! - at: 20s
//!   node: sim-node-1
//!   ramp: {node_cpu_pressure: 80}
//!   over: 10s               # linear from the value at 20s to 80 at 30s
//! - at: 5s
//!   fault: {node: sim-node-1, selector: {app: d}, kind: crash, every: 10s}
//! - at: 5s                   # start faults: sandbox or pull, no `every`
//!   fault: {node: sim-node-2, selector: {app: d}, kind: sandbox}
//! - at: 60s
//!   clearFaults: sim-node-1  # or "*"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::kubelet::{Fault, FaultRule};

/// The file name the runner writes in each node's textfile directory.
pub const TEXTFILE: &str = "telemesh-sim.prom";

/// A parsed scenario.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Metric → value every node starts with.
    #[serde(default)]
    pub telemetry: BTreeMap<String, f64>,
    /// Changes, by time from the scenario's start (any order in the file).
    #[serde(default)]
    pub steps: Vec<Step>,
}

/// One change.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    /// When, from the scenario's start (`15s`, `1m`).
    #[serde(deserialize_with = "duration")]
    pub at: Duration,
    /// The node; absent: every node (telemetry steps only).
    #[serde(default)]
    pub node: Option<String>,
    /// Metrics set at once.
    #[serde(default)]
    pub set: BTreeMap<String, f64>,
    /// Metrics moved linearly to these values over `over`.
    #[serde(default)]
    pub ramp: BTreeMap<String, f64>,
    /// How long a ramp takes.
    #[serde(default, deserialize_with = "optional_duration")]
    pub over: Option<Duration>,
    /// A fault rule to add.
    #[serde(default)]
    pub fault: Option<FaultSpec>,
    /// Removes the fault rules of this node (`*`: all).
    #[serde(default)]
    pub clear_faults: Option<String>,
    /// What to tell the person watching; a description is made up when absent.
    #[serde(default)]
    pub say: Option<String>,
}

/// A fault rule as written in a scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultSpec {
    /// The node.
    pub node: String,
    /// Labels the pods must carry.
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    /// crash, oom or fail; or a start fault: sandbox or pull.
    pub kind: Fault,
    /// How long a container runs before the fault (again); none for a start fault.
    #[serde(default, deserialize_with = "duration")]
    pub every: Duration,
}

fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    telemesh_runtime::cli::parse_duration(&text).map_err(serde::de::Error::custom)
}

fn optional_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// Something the scenario did, for the narration.
#[derive(Debug, Clone, PartialEq)]
pub struct Happened {
    /// When, from the scenario's start.
    pub at: Duration,
    /// The step's `say`, or a description.
    pub what: String,
}

impl Scenario {
    /// Reads a scenario file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the scenario {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in the scenario {}", path.display()))
    }

    /// Parses and checks a scenario.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut scenario: Self = serde_yaml_ng::from_str(text).context(
            "not a scenario: expected `telemetry` (metric: value) and `steps` (at, node, set, \
             ramp, over, fault, clearFaults, say)",
        )?;
        for step in &scenario.steps {
            if !step.ramp.is_empty() && step.over.is_none() {
                bail!("the step at {:?} ramps without `over`", step.at);
            }
            if let Some(f) = &step.fault
                && !f.kind.at_start()
                && f.every.is_zero()
            {
                bail!(
                    "the {:?} fault at {:?} needs `every` (how long a container runs before it)",
                    f.kind,
                    step.at
                );
            }
            let name_ok = |m: &String| {
                !m.is_empty()
                    && m.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    && !m.starts_with(|c: char| c.is_ascii_digit())
            };
            if let Some(bad) = step
                .set
                .keys()
                .chain(step.ramp.keys())
                .find(|m| !name_ok(m))
            {
                bail!("{bad:?} is not a Prometheus metric name");
            }
        }
        scenario.steps.sort_by_key(|s| s.at);
        Ok(scenario)
    }

    /// Writes the starting telemetry of `nodes` under `root`, so agents started next read it.
    pub fn prepare(&self, root: &Path, nodes: &[String]) -> anyhow::Result<Telemetry> {
        let telemetry = Telemetry {
            root: root.to_owned(),
            values: nodes
                .iter()
                .map(|n| (n.clone(), self.telemetry.clone()))
                .collect(),
            ramps: Vec::new(),
        };
        for node in nodes {
            telemetry.write(node)?;
        }
        Ok(telemetry)
    }

    /// Plays the steps from now on: telemetry into files, faults into `faults`, each step told on
    /// `happened`. Returns when the last step (and ramp) is done or at `stop`.
    pub async fn play(
        self,
        mut telemetry: Telemetry,
        faults: watch::Sender<Vec<FaultRule>>,
        happened: broadcast::Sender<Happened>,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        let start = tokio::time::Instant::now();
        let mut steps = self.steps.into_iter().peekable();
        loop {
            let elapsed = start.elapsed();
            while let Some(step) = steps.next_if(|s| s.at <= elapsed) {
                let what = telemetry.apply(&step, elapsed, &faults)?;
                let _ = happened.send(Happened { at: step.at, what });
            }
            telemetry.advance_ramps(elapsed)?;
            if steps.peek().is_none() && telemetry.ramps.is_empty() {
                return Ok(());
            }
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Ramp {
    node: String,
    metric: String,
    from: f64,
    to: f64,
    start: Duration,
    over: Duration,
}

/// Every node's current scripted metrics and the files they are written to.
#[derive(Debug, Clone)]
pub struct Telemetry {
    root: PathBuf,
    values: BTreeMap<String, BTreeMap<String, f64>>,
    ramps: Vec<Ramp>,
}

impl Telemetry {
    /// The textfile directory of `node`.
    pub fn textfile_dir(root: &Path, node: &str) -> PathBuf {
        root.join(node).join("textfile")
    }

    /// Current value of `metric` on `node`.
    pub fn value(&self, node: &str, metric: &str) -> Option<f64> {
        self.values.get(node)?.get(metric).copied()
    }

    fn nodes_of(&self, step: &Step) -> anyhow::Result<Vec<String>> {
        match &step.node {
            Some(n) if self.values.contains_key(n) => Ok(vec![n.clone()]),
            Some(n) => bail!(
                "the step at {:?} names node {n}, which the dev cluster does not have (nodes: {})",
                step.at,
                self.values.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            None => Ok(self.values.keys().cloned().collect()),
        }
    }

    fn apply(
        &mut self,
        step: &Step,
        now: Duration,
        faults: &watch::Sender<Vec<FaultRule>>,
    ) -> anyhow::Result<String> {
        let nodes = self.nodes_of(step)?;
        let mut said = Vec::new();
        for node in &nodes {
            let values = self.values.entry(node.clone()).or_default();
            for (metric, value) in &step.set {
                values.insert(metric.clone(), *value);
            }
            for (metric, to) in &step.ramp {
                self.ramps
                    .retain(|r| !(r.node == *node && r.metric == *metric));
                self.ramps.push(Ramp {
                    node: node.clone(),
                    metric: metric.clone(),
                    from: values.get(metric).copied().unwrap_or(0.0),
                    to: *to,
                    start: now,
                    over: step.over.unwrap_or_default(),
                });
            }
            if !step.set.is_empty() {
                self.write(node)?;
            }
        }
        let place = step.node.clone().unwrap_or_else(|| "every node".into());
        for (metric, value) in &step.set {
            said.push(format!("telemetry: {metric} on {place} is now {value}"));
        }
        for (metric, to) in &step.ramp {
            said.push(format!(
                "telemetry: {metric} on {place} rises to {to} over {:?}",
                step.over.unwrap_or_default()
            ));
        }
        if let Some(spec) = &step.fault {
            let rule = FaultRule {
                node: spec.node.clone(),
                selector: spec.selector.clone(),
                fault: spec.kind,
                every: spec.every,
            };
            faults.send_modify(|rules| rules.push(rule));
            said.push(if spec.kind.at_start() {
                format!(
                    "fault: {} cannot start pods {:?} ({:?})",
                    spec.node, spec.selector, spec.kind
                )
            } else {
                format!(
                    "fault: pods {:?} on {} suffer {:?} every {:?}",
                    spec.selector, spec.node, spec.kind, spec.every
                )
            });
        }
        if let Some(node) = &step.clear_faults {
            faults.send_modify(|rules| rules.retain(|r| node != "*" && r.node != *node));
            said.push(format!("fault: {node} recovers"));
        }
        Ok(step.say.clone().unwrap_or_else(|| said.join("; ")))
    }

    fn advance_ramps(&mut self, now: Duration) -> anyhow::Result<()> {
        let mut touched = Vec::new();
        for r in &self.ramps {
            let done = now.saturating_sub(r.start).as_secs_f64() / r.over.as_secs_f64().max(1e-9);
            let value = r.from + (r.to - r.from) * done.min(1.0);
            if let Some(values) = self.values.get_mut(&r.node) {
                values.insert(r.metric.clone(), value);
            }
            touched.push(r.node.clone());
        }
        self.ramps.retain(|r| now < r.start + r.over);
        touched.dedup();
        for node in touched {
            self.write(&node)?;
        }
        Ok(())
    }

    /// Writes `node`'s metrics atomically (rename), as node-exporter asks of textfile writers.
    fn write(&self, node: &str) -> anyhow::Result<()> {
        let dir = Self::textfile_dir(&self.root, node);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the telemetry directory {}", dir.display()))?;
        let mut text = String::new();
        for (metric, value) in self.values.get(node).into_iter().flatten() {
            text.push_str(&format!("# TYPE {metric} gauge\n{metric} {value}\n"));
        }
        let tmp = dir.join(format!(".{TEXTFILE}.tmp"));
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, dir.join(TEXTFILE))
            .with_context(|| format!("renaming {} into place", tmp.display()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const SCENARIO: &str = "
telemetry: {node_metric: 50}
steps:
- at: 2s
  node: b
  ramp: {node_cpu: 80}
  over: 4s
- at: 1s
  node: a
  set: {node_metric: -1}
  say: a breaks
- at: 1s
  fault: {node: b, selector: {app: d}, kind: crash, every: 10s}
- at: 3s
  clearFaults: b
- at: 4s
  fault: {node: a, selector: {app: d}, kind: sandbox}
";

    #[test]
    fn steps_write_files_ramp_linearly_and_manage_faults() {
        let dir = tempfile::tempdir().unwrap();
        let scenario = Scenario::parse(SCENARIO).unwrap();
        assert_eq!(
            scenario.steps[0].at,
            Duration::from_secs(1),
            "sorted by time"
        );
        let nodes = vec!["a".to_owned(), "b".to_owned()];
        let mut t = scenario.prepare(dir.path(), &nodes).unwrap();
        let file = |n: &str| {
            std::fs::read_to_string(Telemetry::textfile_dir(dir.path(), n).join(TEXTFILE)).unwrap()
        };
        assert_eq!(file("a"), "# TYPE node_metric gauge\nnode_metric 50\n");
        let (faults, rules) = watch::channel(Vec::new());
        let said: Vec<String> = scenario
            .steps
            .iter()
            .map(|s| t.apply(s, s.at, &faults).unwrap())
            .collect();
        assert_eq!(said[0], "a breaks");
        assert!(file("a").contains("node_metric -1\n"));
        assert!(said[3].contains("recovers"));
        assert_eq!(
            said[4],
            "fault: a cannot start pods {\"app\": \"d\"} (Sandbox)"
        );
        assert_eq!(
            rules.borrow().iter().map(|r| r.fault).collect::<Vec<_>>(),
            [Fault::Sandbox],
            "b's crash rule cleared at 3s; a start fault needs no `every`"
        );
        t.advance_ramps(Duration::from_secs(4)).unwrap();
        assert_eq!(t.value("b", "node_cpu"), Some(40.0), "halfway from 0 to 80");
        t.advance_ramps(Duration::from_secs(7)).unwrap();
        assert_eq!(t.value("b", "node_cpu"), Some(80.0));
        assert!(t.ramps.is_empty());
        assert!(file("b").contains("node_cpu 80\n"));
    }

    #[test]
    fn bad_scenarios_are_refused_with_a_reason() {
        for (text, why) in [
            ("steps:\n- at: 1s\n  ramp: {x: 1}\n", "without `over`"),
            (
                "steps:\n- at: 1s\n  set: {\"bad-name\": 1}\n",
                "not a Prometheus",
            ),
            ("steps:\n- at: soon\n", "not a scenario"),
            ("telemetry: {}\nwhatever: 1\n", "not a scenario"),
            (
                "steps:\n- at: 1s\n  fault: {node: a, kind: crash}\n",
                "needs `every`",
            ),
        ] {
            let err = format!("{:#}", Scenario::parse(text).unwrap_err());
            assert!(err.contains(why), "{text}: {err}");
        }
        let t = Scenario::default()
            .prepare(tempfile::tempdir().unwrap().path(), &["a".into()])
            .unwrap();
        let mut t = t;
        let (faults, _) = watch::channel(Vec::new());
        let step = Step {
            node: Some("zz".into()),
            ..Step::default()
        };
        assert!(t.apply(&step, Duration::ZERO, &faults).is_err());
    }
}
