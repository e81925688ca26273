//! sim as nodes only: what a cluster of real machines adds to a control plane, against any API
//! server through the kube client, as KWOK does. Each simulated node is registered as its
//! kubelet registers it (a Node with capacity, addresses and a Ready condition) and kept alive
//! as kubelet keeps it: a Lease in `kube-node-lease` renewed every [`LEASE_RENEW`], and the
//! Ready condition's heartbeat refreshed every [`STATUS_REPORT`]. kube-controller-manager's
//! node lifecycle controller reads both: a node whose lease stops is tainted unreachable and,
//! five minutes on, its pods are evicted. The kubelet stand-ins
//! ([`Kubelet`](super::kubelet::Kubelet)) play the pods' lives, graceful deletion included.
//!
//! Against sim itself nothing here is needed (sim's own nodes never go stale), but it works
//! there too, which the tests use to compare the two.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How often a node's Lease is renewed (kubelet: `nodeLeaseDurationSeconds` 40 / 4).
pub const LEASE_RENEW: Duration = Duration::from_secs(10);

/// The Lease's duration (kubelet's `nodeLeaseDurationSeconds`).
pub const LEASE_DURATION_SECONDS: i32 = 40;

/// How often the Ready condition's heartbeat is refreshed while nothing changes (kubelet's
/// `nodeStatusReportFrequency` is 5 minutes; 1 minute keeps `kubectl describe node` lively).
pub const STATUS_REPORT: Duration = Duration::from_secs(60);

/// The namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// One simulated machine.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Node name.
    pub name: String,
    /// CPU capacity (`"8"`).
    pub cpu: String,
    /// Memory capacity (`"32Gi"`).
    pub memory: String,
    /// Pod capacity.
    pub pods: u32,
}

impl Machine {
    /// A machine of the dev cluster's size (8 CPUs, 32 GiB, 110 pods) named `name`.
    pub fn standard(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            cpu: "8".into(),
            memory: "32Gi".into(),
            pods: 110,
        }
    }
}

/// Registers each machine's Node (kept as it is when it exists: a kubelet restarting) and its
/// Lease, then returns; [`heartbeat`] keeps them alive.
pub async fn register(client: &Client, machines: &[Machine]) -> anyhow::Result<()> {
    ensure_lease_namespace(client).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    for m in machines {
        let node: Node = serde_json::from_value(crate::nodes::node_object(
            &m.name, &m.cpu, &m.memory, m.pods,
        ))
        .context("a Node object")?;
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e).with_context(|| format!("registering Node {}", m.name)),
        }
        renew_lease(client, &m.name).await?;
    }
    Ok(())
}

/// Keeps the machines alive until `stop`: each Lease renewed every [`LEASE_RENEW`], each Ready
/// heartbeat every [`STATUS_REPORT`]. A failed renewal is retried at the next tick (the API
/// server may be down; a real kubelet keeps trying too).
pub async fn heartbeat(client: Client, machines: Vec<Machine>, stop: CancellationToken) {
    let mut lease_tick = tokio::time::interval(LEASE_RENEW);
    let mut status_tick = tokio::time::interval(STATUS_REPORT);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = lease_tick.tick() => {
                for m in &machines {
                    if let Err(e) = renew_lease(&client, &m.name).await {
                        tracing::debug!(node = %m.name, error = format!("{e:#}"), "lease renewal failed; retrying");
                    }
                }
            }
            _ = status_tick.tick() => {
                for m in &machines {
                    if let Err(e) = report_ready(&client, &m.name).await {
                        tracing::debug!(node = %m.name, error = format!("{e:#}"), "node status report failed; retrying");
                    }
                }
            }
        }
    }
}

/// The namespace exists on a real control plane (kube-apiserver makes it at start), not
/// necessarily on sim.
async fn ensure_lease_namespace(client: &Client) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": LEASE_NAMESPACE}}))
        .context("a Namespace object")?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating namespace {LEASE_NAMESPACE}")),
    }
}

/// Creates or renews `node`'s Lease, as kubelet's node lease controller does.
async fn renew_lease(client: &Client, node: &str) -> anyhow::Result<()> {
    let api: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    // A MicroTime, as Leases carry.
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": node, "namespace": LEASE_NAMESPACE},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                 "renewTime": now},
    });
    api.patch(
        node,
        &PatchParams::apply("telemesh-sim-kubelet").force(),
        &Patch::Apply(&lease),
    )
    .await
    .with_context(|| format!("renewing the Lease of node {node}"))?;
    Ok(())
}

/// Refreshes the Ready condition's `lastHeartbeatTime` (its transition time stays).
async fn report_ready(client: &Client, node: &str) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let current = api
        .get_status(node)
        .await
        .with_context(|| format!("reading Node {node}"))?;
    let now = crate::apiserver::objects::lifecycle::now();
    let mut conditions = current
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    for c in &mut conditions {
        if c.type_ == "Ready" {
            c.last_heartbeat_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                now.parse().context("the current time")?,
            ));
        }
    }
    // Conditions merge by type under a strategic merge patch, so only Ready's fields change.
    api.patch_status(
        node,
        &PatchParams::default(),
        &Patch::Strategic(json!({"status": {"conditions": conditions}})),
    )
    .await
    .with_context(|| format!("reporting Node {node}'s status"))?;
    Ok(())
}
