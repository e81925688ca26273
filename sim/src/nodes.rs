//! Simulated nodes: Node objects with capacity and a Ready condition, as a kubelet registers them.

use serde_json::{Value, json};

/// Returns a Ready Node object named `name` with the given capacity.
pub fn node_object(name: &str, cpu: &str, memory: &str, pods: u32) -> Value {
    let now = crate::apiserver::objects::lifecycle::now();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "telemesh-sim"
            }
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": pods.to_string()},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods.to_string()},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "telemesh-sim kubelet is posting ready status",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": "v1.33.0-telemesh-sim", "osImage": "telemesh-sim", "kernelVersion": "6.0.0",
                "containerRuntimeVersion": "sim://1.0", "operatingSystem": "linux", "architecture": "amd64",
                "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""
            }
        }
    })
}

/// Creates `count` nodes named `sim-node-0..` through the server's create path.
pub fn create_nodes(
    server: &std::sync::Arc<crate::Server>,
    count: usize,
) -> Result<(), crate::apiserver::requests::error::ApiError> {
    for i in 0..count {
        let obj = node_object(&format!("sim-node-{i}"), "8", "32Gi", 110);
        crate::apiserver::rest::verbs::create_object(
            server,
            "",
            "v1",
            "nodes",
            None,
            obj,
            &crate::apiserver::requests::kit::WriteOptions::internal(),
        )?;
    }
    Ok(())
}
