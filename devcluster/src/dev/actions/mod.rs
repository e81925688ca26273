//! The actions story (`telemesh-sim dev --story actions`): WAM's demo (seed 000) played against
//! Telemesh. It creates WAM's demo objects in namespace `ul` (devcluster/dev/actions-demo.yaml), then
//! sends the seed's calls in the seed's order to the coordinators' API Service (`POST /rpc`, the
//! body in WAM's exact shape), each after the previous one ended (`action.Wait`), and checks
//! every outcome as the API shows it: the pod on the node, the replica count, exactly that pod
//! gone. Headless, it passes only when every action ended as it should.
//!
//! The seed's nodes are k3d's `k3d-aces-agent-N`; here each is `sim-node-<N mod nodes>`
//! ([`seed_node`]). The seed redeploys a CronJob's pod; the dev cluster has no CronJob
//! controller, so a pod of scheduled-test (a Deployment on the default scheduler) stands in.

mod checks;
mod observe;
mod rpc;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use serde::Deserialize as _;
use serde_json::{Value, json};
use tokio::time::Instant;

use self::checks::{PodSeen, ResourcesSeen, Verdict, WorkloadSeen};
use self::observe::Observer;
use self::rpc::Rpc;
use super::story::{Story, check_processes};
use telemesh_sim::processes::Processes;

/// The seed's namespace.
pub const NAMESPACE: &str = "ul";
const DEMO_OBJECTS: &str = include_str!("../../../dev/actions-demo.yaml");
/// How long one action may take, from the call to its outcome settling in the API.
const STEP_DEADLINE: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(250);
/// UpdateResources as the seed asks it.
const NEW_CPU_REQUEST: &str = "50m";
const NEW_CPU_LIMIT: &str = "200m";

/// The dev cluster's node for the seed's `k3d-aces-agent-<agent>`: `sim-node-<agent mod nodes>`.
/// The seed names agents 7, 4 and 6; with 4 or more nodes they map to three distinct nodes.
pub fn seed_node(agent: usize, nodes: usize) -> String {
    format!("sim-node-{}", agent % nodes.max(1))
}

/// One of the seed's calls and how it ended.
struct Outcome {
    what: String,
    verdict: Verdict,
}

/// Plays the story; `Ok(true)` when every action ended as it should.
pub async fn play(
    story: &Story,
    client: &Client,
    api_service: SocketAddr,
    nodes: usize,
    processes: &mut Processes,
) -> anyhow::Result<bool> {
    let play = Play::new(story, client, api_service, nodes)?;
    let mut outcomes = Vec::new();
    let setup = play.set_up(client).await?;
    play.record(&mut outcomes, "WAM's demo objects are in place", setup);
    for step in Call::SEED {
        check_processes(processes)?;
        story.say(&format!("-> {}", play.describe(step)));
        let verdict = play.call(step).await;
        play.record(&mut outcomes, &play.describe(step), verdict);
    }
    println!("actions:");
    let mut all = true;
    for o in &outcomes {
        match &o.verdict {
            Ok(_) => println!("  ok      {}", o.what),
            Err(why) => {
                all = false;
                println!("  FAILED  {}: {why}", o.what);
            }
        }
    }
    let good = outcomes.iter().filter(|o| o.verdict.is_ok()).count();
    println!("actions: {good} of {} ended as they should", outcomes.len());
    Ok(all)
}

/// `--story actions-objects`: WAM's demo objects only, for a person (or
/// scripts/actions-curl.sh) to send the seed's curl calls; `Ok(true)` once they are in place.
pub async fn objects_only(
    story: &Story,
    client: &Client,
    api_service: SocketAddr,
    nodes: usize,
    kubeconfig: &std::path::Path,
) -> anyhow::Result<bool> {
    let play = Play::new(story, client, api_service, nodes)?;
    let setup = play.set_up(client).await?;
    let ready = setup.is_ok();
    play.record(&mut Vec::new(), "WAM's demo objects are in place", setup);
    if ready {
        story.say(&format!(
            "send the seed's calls: RPC={} KUBECONFIG={} NODE_7={} NODE_4={} NODE_6={} scripts/actions-curl.sh",
            play.rpc.url(),
            kubeconfig.display(),
            play.x,
            play.y,
            play.z
        ));
    }
    Ok(ready)
}

/// Creates namespace `ul` and the objects of devcluster/dev/actions-demo.yaml.
async fn apply_demo_objects(client: &Client) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {NAMESPACE}"))?;
    for doc in serde_yaml_ng::Deserializer::from_str(DEMO_OBJECTS) {
        let value = Value::deserialize(doc).context("devcluster/dev/actions-demo.yaml")?;
        let name = value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match value["kind"].as_str() {
            Some("Deployment") => {
                let d: Deployment = serde_json::from_value(value)?;
                Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
                    .create(&PostParams::default(), &d)
                    .await
                    .with_context(|| format!("creating Deployment {name}"))?;
            }
            Some("StatefulSet") => {
                let s: StatefulSet = serde_json::from_value(value)?;
                Api::<StatefulSet>::namespaced(client.clone(), NAMESPACE)
                    .create(&PostParams::default(), &s)
                    .await
                    .with_context(|| format!("creating StatefulSet {name}"))?;
            }
            other => anyhow::bail!("devcluster/dev/actions-demo.yaml: unexpected kind {other:?}"),
        }
    }
    Ok(())
}

/// The seed's calls, in the seed's order.
#[derive(Debug, Clone, Copy)]
enum Call {
    CreateAOnX,
    CreateAOnY,
    DeleteAOnX,
    MoveAFromYToX,
    CreateBOnY,
    CreateBOnYAgain,
    SwapAOnXWithBOnY,
    BindTestC0,
    Redeploy,
    UpdateResources,
    BindNewPod,
    BindNextNewPod,
    ScaleTo1,
    ScaleTo4,
}

impl Call {
    const SEED: [Self; 14] = [
        Self::CreateAOnX,
        Self::CreateAOnY,
        Self::DeleteAOnX,
        Self::MoveAFromYToX,
        Self::CreateBOnY,
        Self::CreateBOnYAgain,
        Self::SwapAOnXWithBOnY,
        Self::BindTestC0,
        Self::Redeploy,
        Self::UpdateResources,
        Self::BindNewPod,
        Self::BindNextNewPod,
        Self::ScaleTo1,
        Self::ScaleTo4,
    ];
}

fn workload(name: &str) -> Value {
    json!({"namespace": NAMESPACE, "kind": "Deployment", "name": name})
}

fn pod_ref(name: &str) -> Value {
    json!({"namespace": NAMESPACE, "name": name})
}

struct Play<'a> {
    story: &'a Story,
    rpc: Rpc,
    observer: Observer,
    /// The seed's k3d-aces-agent-7.
    x: String,
    /// The seed's k3d-aces-agent-4.
    y: String,
    /// The seed's k3d-aces-agent-6.
    z: String,
}

impl<'a> Play<'a> {
    fn new(
        story: &'a Story,
        client: &Client,
        api_service: SocketAddr,
        nodes: usize,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            nodes >= 4,
            "the actions story needs at least 4 nodes (--nodes 4): the seed names three distinct \
             agents and the default scheduler needs room"
        );
        Ok(Self {
            story,
            rpc: Rpc::new(api_service),
            observer: Observer::new(client.clone(), NAMESPACE),
            x: seed_node(7, nodes),
            y: seed_node(4, nodes),
            z: seed_node(6, nodes),
        })
    }

    /// Creates WAM's demo objects and waits until they are as the seed expects.
    async fn set_up(&self, client: &Client) -> anyhow::Result<Verdict> {
        self.story.say(&format!(
            "the seed's k3d-aces-agent-7, -4 and -6 are {}, {} and {} here; calls go to {}",
            self.x,
            self.y,
            self.z,
            self.rpc.url()
        ));
        apply_demo_objects(client).await?;
        self.story.say(&format!(
            "applied WAM's demo objects in namespace {NAMESPACE} (devcluster/dev/actions-demo.yaml): \
             Deployments test-a and test-b (0 replicas, default scheduler), StatefulSet test-c and \
             Deployment pending-test (scheduler telemesh-unscheduled: nothing places them), \
             Deployment scheduled-test (default scheduler)"
        ));
        Ok(self.settle(async || self.setup_ready().await).await)
    }

    fn describe(&self, call: Call) -> String {
        let (x, y, z) = (&self.x, &self.y, &self.z);
        match call {
            Call::CreateAOnX => format!("action.Create: a replica of test-a on {x}"),
            Call::CreateAOnY => format!("action.Create: a replica of test-a on {y}"),
            Call::DeleteAOnX => format!("action.Delete: test-a's pod on {x}"),
            Call::MoveAFromYToX => format!("action.Move: test-a's pod on {y} to {x}"),
            Call::CreateBOnY => format!("action.Create: a replica of test-b on {y}"),
            Call::CreateBOnYAgain => format!("action.Create: another replica of test-b on {y}"),
            Call::SwapAOnXWithBOnY => {
                format!("action.Swap: test-a's pod on {x} with test-b's first pod on {y}")
            }
            Call::BindTestC0 => format!("action.Bind: test-c-0 (Pending, unscheduled) to {z}"),
            Call::Redeploy => "action.Redeploy: scheduled-test's first pod".to_owned(),
            Call::UpdateResources => format!(
                "action.UpdateResources: pending-test's example-container cpu request {NEW_CPU_REQUEST}, limit {NEW_CPU_LIMIT}"
            ),
            Call::BindNewPod => format!("action.Bind: pending-test's newest pod to {z}"),
            Call::BindNextNewPod => {
                format!("action.Bind: pending-test's next new pod to {z}; the rollout completes")
            }
            Call::ScaleTo1 => "action.Scale: scheduled-test to 1 replica".to_owned(),
            Call::ScaleTo4 => "action.Scale: scheduled-test to 4 replicas".to_owned(),
        }
    }

    fn record(&self, outcomes: &mut Vec<Outcome>, what: &str, verdict: Verdict) {
        match &verdict {
            Ok(seen) => self.story.say(&format!("OK  {seen}")),
            Err(why) => self.story.say(&format!("FAILED  {what}: {why}")),
        }
        outcomes.push(Outcome {
            what: what.to_owned(),
            verdict,
        });
    }

    /// Polls `check` until it passes or [`STEP_DEADLINE`] ends; the last reason otherwise.
    async fn settle(&self, mut check: impl AsyncFnMut() -> anyhow::Result<Verdict>) -> Verdict {
        let deadline = Instant::now() + STEP_DEADLINE;
        loop {
            let last = match check().await {
                Ok(Ok(seen)) => return Ok(seen),
                Ok(Err(why)) => why,
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() >= deadline {
                return Err(format!("after {STEP_DEADLINE:?}: {last}"));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The demo objects as the seed expects them before its first call.
    async fn setup_ready(&self) -> anyhow::Result<Verdict> {
        let scheduled = self.observer.deployment("scheduled-test").await?;
        if scheduled.live().filter(|p| p.ready).count() < 2 {
            return Ok(Err(
                "scheduled-test's 2 pods are not Running and Ready yet".into()
            ));
        }
        let pending = self.observer.deployment("pending-test").await?;
        if pending.live().filter(|p| p.node.is_none()).count() < 2 {
            return Ok(Err("pending-test's 2 Pending pods are not there yet".into()));
        }
        let test_c = self.observer.stateful_set("test-c").await?;
        if !test_c
            .live()
            .any(|p| p.name == "test-c-0" && p.node.is_none())
        {
            return Ok(Err("test-c-0 is not there, Pending, yet".into()));
        }
        Ok(Ok(
            "WAM's demo objects are in place: scheduled-test runs 2 pods; pending-test's 2 pods \
             and test-c-0 are Pending, unscheduled"
                .into(),
        ))
    }

    /// Sends `method` with `params`, waits for the action to end, and returns its id.
    async fn act(&self, method: &str, params: Value) -> anyhow::Result<String> {
        let id = self.rpc.submit(method, params).await?;
        self.story.say(&format!(
            "   accepted as action {id} (kubectl get wa -n {NAMESPACE} {id})"
        ));
        let observer = &self.observer;
        self.rpc
            .wait(&id, NAMESPACE, Instant::now() + STEP_DEADLINE, async || {
                Ok(observer.action(&id).await?.phase.is_terminal())
            })
            .await?;
        Ok(id)
    }

    async fn call(&self, call: Call) -> Verdict {
        self.try_call(call)
            .await
            .unwrap_or_else(|e| Err(format!("{e:#}")))
    }

    async fn try_call(&self, call: Call) -> anyhow::Result<Verdict> {
        let o = &self.observer;
        let (x, y, z) = (self.x.as_str(), self.y.as_str(), self.z.as_str());
        match call {
            Call::CreateAOnX | Call::CreateAOnY | Call::CreateBOnY | Call::CreateBOnYAgain => {
                let (name, node) = match call {
                    Call::CreateAOnX => ("test-a", x),
                    Call::CreateAOnY => ("test-a", y),
                    _ => ("test-b", y),
                };
                let before = o.deployment(name).await?;
                let id = self
                    .act(
                        "action.Create",
                        json!({"workload": workload(name), "node": {"name": node}}),
                    )
                    .await?;
                Ok(self
                    .settle(async || {
                        Ok(checks::created_on(
                            &o.action(&id).await?,
                            &before,
                            &o.deployment(name).await?,
                            node,
                        ))
                    })
                    .await)
            }
            Call::DeleteAOnX => {
                let before = o.deployment("test-a").await?;
                let target = on_node(&before, "test-a", x)?;
                let id = self
                    .act("action.Delete", json!({"pod": pod_ref(&target.name)}))
                    .await?;
                Ok(self
                    .settle(async || {
                        Ok(checks::deleted(
                            &o.action(&id).await?,
                            &before,
                            &o.deployment("test-a").await?,
                            &target,
                        ))
                    })
                    .await)
            }
            Call::MoveAFromYToX => {
                let before = o.deployment("test-a").await?;
                let target = on_node(&before, "test-a", y)?;
                let floor = o
                    .follow_ready(&o.deployment_selector("test-a").await?)
                    .await?;
                let id = self
                    .act(
                        "action.Move",
                        json!({"pod": pod_ref(&target.name), "node": {"name": x}}),
                    )
                    .await;
                let min_ready = floor.finish().await;
                let id = id?;
                Ok(self
                    .settle(async || {
                        Ok(checks::moved(
                            &o.action(&id).await?,
                            &before,
                            &o.deployment("test-a").await?,
                            &target,
                            x,
                            min_ready,
                        ))
                    })
                    .await)
            }
            Call::SwapAOnXWithBOnY => {
                let (a_before, b_before) =
                    (o.deployment("test-a").await?, o.deployment("test-b").await?);
                let a = on_node(&a_before, "test-a", x)?;
                let b = on_node(&b_before, "test-b", y)?;
                let id = self
                    .act(
                        "action.Swap",
                        json!({"x": pod_ref(&a.name), "y": pod_ref(&b.name)}),
                    )
                    .await?;
                Ok(self
                    .settle(async || {
                        Ok(checks::swapped(
                            &o.action(&id).await?,
                            (&a_before, &o.deployment("test-a").await?, &a),
                            (&b_before, &o.deployment("test-b").await?, &b),
                        ))
                    })
                    .await)
            }
            Call::BindTestC0 => {
                let before = o.stateful_set("test-c").await?;
                let target = before
                    .live()
                    .find(|p| p.name == "test-c-0" && p.node.is_none())
                    .cloned()
                    .context("test-c-0 is not Pending without a node")?;
                self.bind(&target, "test-c", z, true).await
            }
            Call::Redeploy => {
                let before = o.deployment("scheduled-test").await?;
                let target = before
                    .live()
                    .min_by(|a, b| a.name.cmp(&b.name))
                    .cloned()
                    .context("scheduled-test has no pod")?;
                let id = self
                    .act("action.Redeploy", json!({"pod": pod_ref(&target.name)}))
                    .await?;
                Ok(self
                    .settle(async || {
                        Ok(checks::redeployed(
                            &o.action(&id).await?,
                            &before,
                            &o.deployment("scheduled-test").await?,
                            &target,
                        ))
                    })
                    .await)
            }
            Call::UpdateResources => {
                let before = o
                    .template_resources("pending-test", "example-container")
                    .await?;
                let asked = ResourcesSeen {
                    cpu_request: Some(NEW_CPU_REQUEST.into()),
                    cpu_limit: Some(NEW_CPU_LIMIT.into()),
                    ..ResourcesSeen::default()
                };
                let id = self
                    .act(
                        "action.UpdateResources",
                        json!({"workload": workload("pending-test"), "resources": {
                            "container_name": "example-container",
                            "cpu_request": NEW_CPU_REQUEST, "cpu_limit": NEW_CPU_LIMIT}}),
                    )
                    .await?;
                Ok(self
                    .settle(async || {
                        Ok(checks::resources_updated(
                            &o.action(&id).await?,
                            &before,
                            &o.template_resources("pending-test", "example-container")
                                .await?,
                            &asked,
                        ))
                    })
                    .await)
            }
            Call::BindNewPod | Call::BindNextNewPod => {
                // The seed waits for a person to see the new Pending pod; so does the story.
                let target = self
                    .settle(async || {
                        let w = o.deployment("pending-test").await?;
                        Ok(checks::next_to_bind(&w, NEW_CPU_REQUEST)
                            .map(|p| p.name.clone())
                            .ok_or_else(|| {
                                format!(
                                    "no Pending pod of pending-test with cpu request {NEW_CPU_REQUEST} appeared"
                                )
                            }))
                    })
                    .await;
                let Ok(name) = target else {
                    return Ok(target);
                };
                let w = o.deployment("pending-test").await?;
                let target = w
                    .live()
                    .find(|p| p.name == name)
                    .cloned()
                    .with_context(|| format!("{name} went away"))?;
                let bound = self.bind(&target, "pending-test", z, false).await?;
                if matches!(call, Call::BindNewPod) || bound.is_err() {
                    return Ok(bound);
                }
                let rolled = self
                    .settle(async || {
                        Ok(checks::rolled_out(
                            &o.deployment("pending-test").await?,
                            NEW_CPU_REQUEST,
                            z,
                        ))
                    })
                    .await;
                Ok(bound.and_then(|b| rolled.map(|r| format!("{b}; {r}"))))
            }
            Call::ScaleTo1 | Call::ScaleTo4 => {
                let want = if matches!(call, Call::ScaleTo1) { 1 } else { 4 };
                let before = o.deployment("scheduled-test").await?;
                let id = self
                    .act(
                        "action.Scale",
                        json!({"workload": workload("scheduled-test"), "replicas": want}),
                    )
                    .await?;
                Ok(self
                    .settle(async || {
                        Ok(checks::scaled(
                            &o.action(&id).await?,
                            &before,
                            &o.deployment("scheduled-test").await?,
                            want,
                        ))
                    })
                    .await)
            }
        }
    }

    /// action.Bind of `target` (a pod of `owner`) to `node`, checked.
    async fn bind(
        &self,
        target: &PodSeen,
        owner: &str,
        node: &str,
        stateful: bool,
    ) -> anyhow::Result<Verdict> {
        let o = &self.observer;
        let id = self
            .act(
                "action.Bind",
                json!({"pod": pod_ref(&target.name), "node": {"name": node}}),
            )
            .await?;
        Ok(self
            .settle(async || {
                let after = if stateful {
                    o.stateful_set(owner).await?
                } else {
                    o.deployment(owner).await?
                };
                Ok(checks::bound(&o.action(&id).await?, &after, target, node))
            })
            .await)
    }
}

/// The seed's pick of `workload`'s pod on `node`.
fn on_node(w: &WorkloadSeen, workload: &str, node: &str) -> anyhow::Result<PodSeen> {
    checks::first_pod_on(w, node)
        .cloned()
        .with_context(|| format!("{workload} has no pod on {node} to act on"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_seeds_three_agents_are_three_nodes_from_four_nodes_up() {
        for nodes in 4..=12 {
            let picked: std::collections::BTreeSet<String> =
                [7, 4, 6].iter().map(|a| seed_node(*a, nodes)).collect();
            assert_eq!(picked.len(), 3, "{nodes} nodes");
        }
        assert_eq!(seed_node(7, 8), "sim-node-7");
        assert_eq!(seed_node(7, 4), "sim-node-3");
    }

    #[test]
    fn the_demo_objects_are_wams() {
        let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(DEMO_OBJECTS)
            .map(|d| Value::deserialize(d).unwrap())
            .collect();
        let find = |name: &str| docs.iter().find(|d| d["metadata"]["name"] == name).unwrap();
        for name in ["test-a", "test-b"] {
            let d = find(name);
            assert_eq!(d["spec"]["replicas"], 0);
            assert!(d["spec"]["template"]["spec"].get("schedulerName").is_none());
        }
        let c = find("test-c");
        assert_eq!(c["kind"], "StatefulSet");
        assert_eq!(c["spec"]["replicas"], 2);
        assert_eq!(
            c["spec"]["volumeClaimTemplates"][0]["metadata"]["name"],
            "data"
        );
        assert!(c["spec"]["template"]["spec"]["containers"][0]["readinessProbe"].is_object());
        let p = find("pending-test");
        let spec = &p["spec"]["template"]["spec"];
        assert_eq!(spec["schedulerName"], "telemesh-unscheduled");
        assert_eq!(
            c["spec"]["template"]["spec"]["schedulerName"],
            "telemesh-unscheduled"
        );
        assert_eq!(spec["containers"][0]["name"], "example-container");
        assert_eq!(spec["containers"][0]["resources"]["requests"]["cpu"], "1m");
        assert_eq!(
            spec["containers"][0]["resources"]["requests"]["memory"],
            "128Mi"
        );
        assert_eq!(spec["containers"][0]["resources"]["limits"]["cpu"], "20m");
        let s = find("scheduled-test");
        assert_eq!(s["spec"]["replicas"], 2);
        assert!(s["spec"]["template"]["spec"].get("schedulerName").is_none());
        assert!(docs.iter().all(|d| d["metadata"]["namespace"] == NAMESPACE));
    }
}
