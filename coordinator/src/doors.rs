//! The coordinator's HTTP doors and their limits: the extender, the JSON API, `/rpc` and the
//! health port, each behind a [`telemesh_runtime::door::Door`].
//!
//! Rate limits apply per client address to the JSON API and `/rpc` only. The extender is not
//! rate-limited: kube-scheduler calls it once per verb per scheduling cycle, as fast as pods
//! arrive (500+ calls/s in scripts/scheduler-throughput.sh), and treats any non-200 answer as
//! the extender's failure. A 429 would fail the pod's cycle (`ignorable: false`: the pod goes
//! back to the queue and backs off, up to 10 s) or skip our filter altogether
//! (`ignorable: true`): a limit would turn load into unschedulable pods or unchecked
//! placements, never into less work. The extender is defended instead by the client
//! certificate it asks for (`--extender-client-ca`), the body limit and the two deadlines, and
//! its cost per call is a few tens of microseconds from memory (no API call).

use std::sync::Arc;

use telemesh_runtime::door::{Connections, Door, DoorMetrics, DoorName, Limits, Rate, TimeoutArgs};

/// Default of `--extender-max-body-mib`. A full-node request (`nodeCacheCapable: false`)
/// carries every candidate Node. sim's Node (`telemesh_sim::nodes::node_object`) is 1.1 kB;
/// a cloud node adds what sim leaves out: 50 images (kubelet's `nodeStatusMaxImages`, two
/// registry names each: 12.3 kB), 12 cloud labels, 4 annotations and 3 pressure conditions:
/// 14,960 bytes in all (`extender_body_fits_5000_realistic_nodes` builds it and measures).
/// 5,000 × 14,960 B = 74.8 MB = 71.3 MiB; with a third for headroom (longer names, more labels
/// and the Pod itself), 95 MiB, rounded to 96 MiB.
pub const EXTENDER_MAX_BODY_MIB: usize = 96;

/// Largest body of the JSON API: its routes are GETs without one, so only a header's worth.
pub const API_MAX_BODY: usize = 16 << 10;

/// Largest body of `/metrics`, `/healthz` and `/readyz`: GETs without one.
pub const HEALTH_MAX_BODY: usize = 16 << 10;

/// Deadlines and rate limits of the coordinator's doors.
#[derive(Debug, Clone, clap::Args)]
pub struct DoorArgs {
    #[command(flatten)]
    pub timeouts: TimeoutArgs,
    /// Requests per second one client address may make to the JSON API (`/api/v1/...`);
    /// 0 for no limit. Over it: 429 with Retry-After.
    #[arg(long, env = "TELEMESH_API_RATE_LIMIT", default_value_t = 50)]
    pub api_rate_limit: u32,
    /// Requests one client address may make to the JSON API at once after a quiet spell.
    #[arg(long, env = "TELEMESH_API_RATE_BURST", default_value_t = 100)]
    pub api_rate_burst: u32,
    /// Requests per second one client address may make to `/rpc` (a batch is one request);
    /// 0 for no limit. Over it: 429 with Retry-After.
    #[arg(long, env = "TELEMESH_RPC_RATE_LIMIT", default_value_t = 20)]
    pub rpc_rate_limit: u32,
    /// Requests one client address may make to `/rpc` at once after a quiet spell.
    #[arg(long, env = "TELEMESH_RPC_RATE_BURST", default_value_t = 50)]
    pub rpc_rate_burst: u32,
}

/// The doors, built once per replica.
#[derive(Debug, Clone)]
pub struct Doors {
    /// The extender.
    pub extender: Arc<Door>,
    /// The JSON API.
    pub api: Arc<Door>,
    /// `/rpc`.
    pub rpc: Arc<Door>,
    /// `/metrics`, `/healthz`, `/readyz`.
    pub health: Arc<Door>,
    /// Header deadline and the counter, for the listeners.
    connections: Connections,
}

// === impl Doors ===

impl Doors {
    /// Builds the doors from the flags and the extender's body limit (bytes).
    pub fn new(args: &DoorArgs, extender_max_body: usize, metrics: &DoorMetrics) -> Self {
        let body_timeout = args.timeouts.http_body_timeout;
        let door = |name, max_body, rate| {
            Door::new(
                name,
                Limits {
                    max_body,
                    body_timeout,
                    rate,
                },
                metrics.clone(),
            )
        };
        Self {
            extender: door(DoorName::Extender, extender_max_body, None),
            api: door(
                DoorName::Api,
                API_MAX_BODY,
                Rate::per_second(args.api_rate_limit, args.api_rate_burst),
            ),
            rpc: door(
                DoorName::Rpc,
                crate::actions::rpc::MAX_BODY,
                Rate::per_second(args.rpc_rate_limit, args.rpc_rate_burst),
            ),
            health: door(DoorName::Http, HEALTH_MAX_BODY, None),
            connections: Connections {
                door: DoorName::Http,
                header_timeout: args.timeouts.http_header_timeout,
                metrics: metrics.clone(),
            },
        }
    }

    /// How the listener of `door` serves its connections.
    pub fn connections(&self, door: DoorName) -> Connections {
        Connections {
            door,
            ..self.connections.clone()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A cloud node as its kubelet reports it: sim's Node, plus what sim leaves out (images,
    /// cloud labels and annotations, the pressure conditions).
    fn realistic_node(i: usize) -> Value {
        let name = format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 256, i % 256);
        let mut node = telemesh_sim::nodes::node_object(&name, "8", "32Gi", 110);
        let registry = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
        // kubelet's nodeStatusMaxImages: 50, each by digest and by tag.
        node["status"]["images"] = (0..50)
            .map(|i| {
                json!({"names": [
                    format!("{registry}/team-{i}/service-{i}@sha256:{}", "a".repeat(64)),
                    format!("{registry}/team-{i}/service-{i}:v1.{i}.0"),
                ], "sizeBytes": 123_456_789})
            })
            .collect();
        for label in [
            "topology.kubernetes.io/region",
            "topology.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "beta.kubernetes.io/instance-type",
            "failure-domain.beta.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/region",
            "beta.kubernetes.io/os",
            "beta.kubernetes.io/arch",
            "eks.amazonaws.com/nodegroup",
            "eks.amazonaws.com/capacityType",
            "k8s.io/cloud-provider-aws",
            "topology.ebs.csi.aws.com/zone",
        ] {
            node["metadata"]["labels"][label] = json!("eu-west-1a-some-value-1234");
        }
        node["metadata"]["annotations"] = json!({
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "csi.volume.kubernetes.io/nodeid": "{\"ebs.csi.aws.com\":\"i-0123456789abcdef0\",\"efs.csi.aws.com\":\"i-0123456789abcdef0\"}",
            "alpha.kubernetes.io/provided-node-ip": "10.0.123.45",
        });
        for c in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
            node["status"]["conditions"]
                .as_array_mut()
                .unwrap()
                .push(json!({
                    "type": c, "status": "False", "reason": format!("KubeletHasSufficient{c}"),
                    "message": "kubelet has sufficient something available",
                    "lastHeartbeatTime": "2026-11-25T01:00:00Z",
                    "lastTransitionTime": "2026-11-25T01:00:00Z",
                }));
        }
        node
    }

    /// The default extender body limit carries 5,000 such nodes in one full-node request, and
    /// is not far beyond that (a third to spare, not 256 MiB).
    #[test]
    fn extender_body_fits_5000_realistic_nodes() {
        let node = serde_json::to_vec(&realistic_node(4_999)).unwrap().len();
        let envelope =
            serde_json::to_vec(&json!({"Pod": {}, "Nodes": {"items": []}, "NodeNames": null}))
                .unwrap()
                .len();
        // Items are comma separated; a full Pod is a few kB more.
        let body = 5_000 * (node + 1) + envelope + (16 << 10);
        let limit = EXTENDER_MAX_BODY_MIB << 20;
        assert!(
            (14_000..16_000).contains(&node),
            "the arithmetic above says 14,960 bytes a node, measured {node}"
        );
        assert!(body < limit, "{body} bytes do not fit {limit}");
        assert!(
            limit < body * 3 / 2,
            "{limit} is far beyond the {body} bytes 5,000 nodes need"
        );
    }
}
