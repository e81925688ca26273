//! What the agent's loops share: the latest collection, the gossip member handle, the write
//! client and the evictor.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context as _;
use telemesh_core::metric::Sample;
use telemesh_runtime::gossip::GossipMember;

/// The latest collection's node samples and when they were taken: written by the collection
/// loop, read by the policy and scavenger loops.
pub type LatestSamples = Arc<parking_lot::RwLock<Option<(SystemTime, Vec<Sample>)>>>;

/// The gossip member, shared by the loops that publish; `None` once shutdown took it.
pub type SharedGossip = Arc<tokio::sync::Mutex<Option<GossipMember>>>;

/// The node's evictor, shared by the policy loop and the scavenger loop so that
/// `--max-evictions-per-minute` bounds the node's evictions, whoever asks.
pub type SharedEvictor = Arc<tokio::sync::Mutex<crate::enforcement::evictor::Evictor>>;

/// The node's evictor when local eviction is on, writing through `client` (a
/// [`write_client`]), Events recorded as the node's `telemesh-agent`, pods of other nodes
/// refused into `refusals`.
pub fn evictor(
    client: &kube::Client,
    node_name: &str,
    config: Option<&crate::config::EvictionConfig>,
    backoff: &crate::enforcement::api_backoff::SharedApiBackoff,
    refusals: crate::enforcement::scope::Refusals,
) -> Option<SharedEvictor> {
    let config = config?;
    let client = client.clone();
    let reporter = kube::runtime::events::Reporter {
        controller: "telemesh-agent".into(),
        instance: Some(node_name.to_owned()),
    };
    let recorder = kube::runtime::events::Recorder::new(client.clone(), reporter);
    Some(Arc::new(tokio::sync::Mutex::new(
        crate::enforcement::evictor::Evictor::new(
            node_name,
            refusals,
            client,
            recorder,
            config.clone(),
            backoff.clone(),
        ),
    )))
}

/// The client of the agent's writes (labels, policy status, the recovery annotation,
/// evictions, Events), which does not retry within a call: a disruption budget's 429 is an
/// answer, tried again on a later pass, and an unavailable server is waited out by the agent's
/// one backoff ([`crate::enforcement::api_backoff`]) while the policy loop goes on evaluating, instead of
/// blocking inside kube-rs's retries (up to 15, minutes with `Retry-After`).
pub async fn write_client(
    kubeconfig: Option<&Path>,
    user_agent: &http::HeaderValue,
) -> anyhow::Result<kube::Client> {
    let mut config = telemesh_runtime::client::kube_config(kubeconfig, user_agent).await?;
    config.default_retry = false;
    kube::Client::try_from(config).context("building the Kubernetes client")
}
