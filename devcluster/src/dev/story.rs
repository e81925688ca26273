//! What the dev cluster tells the person watching: each thing it observes, in words, with the time
//! since start, and a checklist of the built-in story's steps. Everything is observed through the
//! API (labels, pods, Events) or reported by the cluster's own parts (scenario, scheduler), never
//! assumed from what was asked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::bail;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt as _};
use tokio::sync::broadcast;
use tokio::time::Instant;

use telemesh_sim::cluster::pod_state::is_running_and_ready;
use telemesh_sim::cluster::scenario::Happened;
use telemesh_sim::cluster::scheduler::Decision;

use telemesh_sim::processes::Processes;

/// The node the built-in scenario breaks (devcluster/dev/scenario.yaml).
const BAD_NODE: &str = "sim-node-1";
/// The label scheduling-policy's deschedule strategy puts on a violating node.
const VIOLATING: (&str, &str) = ("scheduling-policy", "violating");
const DEMO_NS: &str = "health-metric-demo";
const DEMO_SELECTOR: &str = "app=telemesh-demo";
const POLL: Duration = Duration::from_millis(250);

/// Which story the dev cluster tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoryKind {
    /// TAS policies: telemetry breaks a node, its agent labels it and evicts, the extender
    /// steers replacements elsewhere, the node recovers.
    Health,
    /// kubeRL's demo, measured: nodes that crash pods of type D are learnt and avoided for D.
    Rewards,
    /// The same with kubeRL's own failures: nodes that cannot start pods of type D (no sandbox,
    /// an image they cannot pull) are learnt and avoided for D.
    RewardsStart,
    /// WAM's demo: its objects in namespace `ul` and the seed's calls played through `/rpc`,
    /// each outcome checked through the API.
    Actions,
    /// WAM's demo objects only, for a person or scripts/actions-curl.sh to send the seed's calls.
    ActionsObjects,
}

/// The built-in story's steps, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    ClusterUp,
    DemoRunning,
    Labelled,
    Evicted,
    Rescheduled,
    Unlabelled,
}

impl Step {
    const ALL: [Self; 6] = [
        Self::ClusterUp,
        Self::DemoRunning,
        Self::Labelled,
        Self::Evicted,
        Self::Rescheduled,
        Self::Unlabelled,
    ];

    fn describe(self) -> &'static str {
        match self {
            Self::ClusterUp => "both coordinators see every node through the sealed gossip",
            Self::DemoRunning => "the demo Deployment's pods are placed and Running",
            Self::Labelled => "sim-node-1's agent labels its node scheduling-policy=violating",
            Self::Evicted => "the demo pods on sim-node-1 are evicted by its agent",
            Self::Rescheduled => {
                "their replacements run elsewhere, sim-node-1 filtered out by the extender"
            }
            Self::Unlabelled => "the label goes away once the telemetry recovers",
        }
    }
}

/// The narration and checklist.
pub struct Story {
    start: Instant,
    /// Interactive: keep following after the checklist is done.
    interactive: bool,
    /// The steps that must be observed.
    checklist: Vec<Step>,
    /// The built-in health story runs, so its later steps are watched for.
    built_in: bool,
    nodes: usize,
    seen: Mutex<BTreeMap<Step, Duration>>,
    state: Mutex<Observed>,
    /// With the real kube-scheduler (which reports no decisions to us): the coordinators'
    /// metrics URLs, whose filter counts show the extender refusing nodes.
    filter_metrics: std::sync::OnceLock<Vec<String>>,
}

#[derive(Default)]
struct Observed {
    labels: BTreeMap<String, BTreeSet<String>>,
    events: BTreeSet<String>,
    on_bad_node: BTreeSet<String>,
    evictions: usize,
    extender_filtered_bad_node: bool,
    recovered: bool,
    complete_said: bool,
}

impl Story {
    /// A story for `kind`; `built_in`: the built-in scenario of the health story runs.
    pub fn new(interactive: bool, kind: StoryKind, built_in: bool, nodes: &[String]) -> Self {
        let checklist = match (kind, built_in) {
            (StoryKind::Health, true) => Step::ALL.to_vec(),
            (StoryKind::Health, false) => vec![Step::ClusterUp, Step::DemoRunning],
            (
                StoryKind::Rewards
                | StoryKind::RewardsStart
                | StoryKind::Actions
                | StoryKind::ActionsObjects,
                _,
            ) => {
                vec![Step::ClusterUp]
            }
        };
        Self {
            start: Instant::now(),
            interactive,
            checklist,
            built_in: built_in && kind == StoryKind::Health,
            nodes: nodes.len(),
            seen: Mutex::new(BTreeMap::new()),
            state: Mutex::new(Observed::default()),
            filter_metrics: std::sync::OnceLock::new(),
        }
    }

    /// The real kube-scheduler places pods: the extender's refusals are read from the
    /// coordinators' metrics at `urls` (`/metrics`) instead of the stand-in's decisions. In the
    /// built-in scenario only sim-node-1 ever breaks dontschedule, so any node the filter
    /// removed is sim-node-1.
    pub fn follow_filter_metrics(&self, urls: Vec<String>) {
        let _ = self.filter_metrics.set(urls);
    }

    /// Prints one line of the story.
    pub fn say(&self, what: &str) {
        println!("[{:>6.1}s] {what}", self.start.elapsed().as_secs_f64());
    }

    fn mark(&self, step: Step) {
        let elapsed = self.start.elapsed();
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.contains_key(&step) {
            return;
        }
        seen.insert(step, elapsed);
        drop(seen);
        self.say(&format!("OK  {}", step.describe()));
    }

    fn has(&self, step: Step) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(&step)
    }

    fn steps(&self) -> Vec<Step> {
        self.checklist.clone()
    }

    /// Prints the checklist; `Ok(true)` if every step was observed.
    pub fn report(&self) -> anyhow::Result<bool> {
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut all = true;
        println!("story:");
        for step in self.steps() {
            match seen.get(&step) {
                Some(at) => println!("  ok      {:>6.1}s  {}", at.as_secs_f64(), step.describe()),
                None => {
                    all = false;
                    println!("  MISSING           {}", step.describe());
                }
            }
        }
        Ok(all)
    }

    /// Waits until every coordinator's view lists every node.
    pub async fn wait_cluster_up(
        &self,
        apis: &[String],
        processes: &mut Processes,
    ) -> anyhow::Result<()> {
        loop {
            check_processes(processes)?;
            let mut up = 0;
            for api in apis {
                if let Ok(body) = telemesh_sim::cluster::http::request(
                    http::Method::GET,
                    &format!("{api}/api/v1/nodes"),
                    None,
                )
                .await
                    && let Ok(view) = serde_json::from_slice::<serde_json::Value>(&body)
                    && view["nodes"]
                        .as_array()
                        .is_some_and(|n| n.len() >= self.nodes)
                {
                    up += 1;
                }
            }
            if up == apis.len() {
                self.mark(Step::ClusterUp);
                return Ok(());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the demo Deployment's pods all run and tells where they landed.
    pub async fn wait_demo_running(&self, client: &Client) -> anyhow::Result<()> {
        self.say("applied: TASPolicy CRD, deploy/examples/scheduling-policy.yaml and multirules-policy.yaml (unchanged TAS files), Deployment health-metric-demo/demo (8 pods linked to scheduling-policy)");
        loop {
            let pods = demo_pods(client).await?;
            if pods.len() >= 8 && pods.iter().all(is_running_and_ready) {
                let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
                for p in &pods {
                    *per_node.entry(node_of(p)).or_default() += 1;
                }
                let placement: Vec<String> =
                    per_node.iter().map(|(n, c)| format!("{n} x{c}")).collect();
                self.say(&format!(
                    "scheduler (calling the coordinators' extender) placed the demo: {}",
                    placement.join(", ")
                ));
                let mut state = self.lock();
                state.on_bad_node = pods
                    .iter()
                    .filter(|p| node_of(p) == BAD_NODE)
                    .map(|p| p.name_any())
                    .collect();
                drop(state);
                self.mark(Step::DemoRunning);
                return Ok(());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Observed> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Narrates scenario steps, scheduler decisions, label changes and evictions; returns `true`
    /// once the checklist is complete (headless), or never (interactive: until Ctrl-C).
    pub async fn follow(
        &self,
        client: &Client,
        mut happened: broadcast::Receiver<Happened>,
        mut decisions: broadcast::Receiver<Decision>,
        processes: &mut Processes,
    ) -> anyhow::Result<bool> {
        let mut tick = tokio::time::interval(POLL);
        loop {
            tokio::select! {
                h = happened.recv() => if let Ok(h) = h {
                    if h.what.contains("recovers") {
                        self.lock().recovered = true;
                    }
                    self.say(&h.what);
                },
                d = decisions.recv() => if let Ok(d) = d { self.decision(d) },
                _ = tick.tick() => {
                    check_processes(processes)?;
                    self.observe(client).await?;
                    if self.steps().iter().all(|s| self.has(*s)) {
                        let mut state = self.lock();
                        if !state.complete_said {
                            state.complete_said = true;
                            drop(state);
                            self.say("the story is complete");
                            if !self.interactive {
                                return Ok(true);
                            }
                            self.say("still running: Ctrl-C stops every process this command started");
                        }
                    }
                }
            }
        }
    }

    fn decision(&self, d: Decision) {
        match d {
            Decision::Placed {
                pod,
                node,
                filtered,
            } => {
                let why: Vec<String> = filtered.iter().map(|(n, r)| format!("{n}: {r}")).collect();
                if filtered.contains_key(BAD_NODE) {
                    self.lock().extender_filtered_bad_node = true;
                }
                if why.is_empty() {
                    self.say(&format!("scheduler: {pod} -> {node}"));
                } else {
                    self.say(&format!(
                        "scheduler: {pod} -> {node}; the extender filtered out {}",
                        why.join("; ")
                    ));
                }
            }
            Decision::Unschedulable { pod, message } => {
                self.say(&format!("scheduler: {pod} cannot be placed: {message}"))
            }
        }
    }

    async fn observe(&self, client: &Client) -> anyhow::Result<()> {
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await?;
        for node in &nodes.items {
            let labels: BTreeSet<String> = node
                .labels()
                .iter()
                .filter(|(k, v)| *v == "violating" || k.starts_with("telemetry.aware.scheduling."))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let name = node.name_any();
            let mut state = self.lock();
            let before = state
                .labels
                .insert(name.clone(), labels.clone())
                .unwrap_or_default();
            drop(state);
            for added in labels.difference(&before) {
                self.say(&format!("{name}'s agent labelled its node {added}"));
            }
            for removed in before.difference(&labels) {
                self.say(&format!("{name}'s agent removed the label {removed}"));
            }
        }
        let events = Api::<Event>::namespaced(client.clone(), DEMO_NS)
            .list(&ListParams::default())
            .await?;
        for e in &events.items {
            if e.reason.as_deref() != Some("Evicted") {
                continue;
            }
            let mut state = self.lock();
            if !state.events.insert(e.uid().unwrap_or_default()) {
                continue;
            }
            state.evictions += 1;
            drop(state);
            let pod = e
                .regarding
                .as_ref()
                .and_then(|r| r.name.clone())
                .unwrap_or_default();
            let by = e.reporting_instance.clone().unwrap_or_default();
            self.say(&format!(
                "{by}'s agent evicted {pod}: {}",
                e.note.clone().unwrap_or_default()
            ));
        }
        if !self.built_in {
            return Ok(());
        }
        self.observe_filter_metrics().await;
        let bad_labelled = self
            .lock()
            .labels
            .get(BAD_NODE)
            .is_some_and(|l| l.contains(&format!("{}={}", VIOLATING.0, VIOLATING.1)));
        if self.has(Step::DemoRunning) && bad_labelled {
            self.mark(Step::Labelled);
        }
        let pods = demo_pods(client).await?;
        let names: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
        let (evicted_all, evictions, filtered, recovered) = {
            let state = self.lock();
            (
                !state.on_bad_node.is_empty() && state.on_bad_node.is_disjoint(&names),
                state.evictions,
                state.extender_filtered_bad_node,
                state.recovered,
            )
        };
        if self.has(Step::Labelled) && evicted_all && evictions > 0 {
            self.mark(Step::Evicted);
        }
        let placed_elsewhere = pods.len() >= 8
            && pods.iter().all(is_running_and_ready)
            && pods.iter().all(|p| node_of(p) != BAD_NODE);
        if self.has(Step::Evicted) && placed_elsewhere && filtered {
            self.mark(Step::Rescheduled);
        }
        if self.has(Step::Labelled) && recovered && !bad_labelled {
            self.mark(Step::Unlabelled);
        }
        Ok(())
    }
}

impl Story {
    async fn observe_filter_metrics(&self) {
        let Some(urls) = self.filter_metrics.get() else {
            return;
        };
        if self.lock().extender_filtered_bad_node {
            return;
        }
        let mut removed = 0.0;
        for url in urls {
            let Ok(body) = telemesh_sim::cluster::http::request(http::Method::GET, url, None).await
            else {
                continue;
            };
            removed += String::from_utf8_lossy(&body)
                .lines()
                .filter_map(|l| l.strip_prefix(FILTER_FAILED_METRIC))
                .filter_map(|v| v.trim().parse::<f64>().ok())
                .sum::<f64>();
        }
        if removed > 0.0 {
            self.lock().extender_filtered_bad_node = true;
            self.say(&format!(
                "the coordinators' filter has refused {removed} candidate node(s) so far (only {BAD_NODE} breaks dontschedule)"
            ));
        }
    }
}

/// The coordinator's count of candidate nodes its filter removed.
const FILTER_FAILED_METRIC: &str =
    "telemesh_coordinator_extender_filtered_nodes_total{result=\"Failed\"}";

/// Fails when a child process has exited (its log says why).
pub fn check_processes(processes: &mut Processes) -> anyhow::Result<()> {
    if let Some((name, status)) = processes.exited() {
        bail!("{name} exited ({status}); its log is in the state directory's logs/");
    }
    Ok(())
}

async fn demo_pods(client: &Client) -> anyhow::Result<Vec<Pod>> {
    let list = Api::<Pod>::namespaced(client.clone(), DEMO_NS)
        .list(&ListParams::default().labels(DEMO_SELECTOR))
        .await?;
    Ok(list.items)
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}
