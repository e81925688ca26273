//! `move`, `swap` and `scale`: the params of WAM's `action.Move`, `action.Swap` and
//! `action.Scale` exactly as WAM's curl calls send them, and what to say about the replies.

use serde_json::{Value, json};

/// `deployment/NAME` or `statefulset/NAME` (kubectl's spellings: `deploy`, `deployment.apps`,
/// `sts`, ...) as WAM's kind and the name; `None` for anything else.
pub fn workload(arg: &str) -> Option<(&'static str, &str)> {
    let (kind, name) = arg.split_once('/')?;
    let kind = match kind.to_ascii_lowercase().as_str() {
        "deployment" | "deployments" | "deploy" | "deployment.apps" | "deployments.apps" => {
            "Deployment"
        }
        "statefulset" | "statefulsets" | "sts" | "statefulset.apps" | "statefulsets.apps" => {
            "StatefulSet"
        }
        _ => return None,
    };
    (!name.is_empty() && !name.contains('/')).then_some((kind, name))
}

/// `action.Move`'s params.
pub fn move_params(namespace: &str, pod: &str, node: &str) -> Value {
    json!({"pod": {"namespace": namespace, "name": pod}, "node": {"name": node}})
}

/// `action.Swap`'s params.
pub fn swap_params(namespace: &str, x: &str, y: &str) -> Value {
    json!({"x": {"namespace": namespace, "name": x}, "y": {"namespace": namespace, "name": y}})
}

/// `action.Scale`'s params.
pub fn scale_params(namespace: &str, kind: &str, name: &str, replicas: i32) -> Value {
    json!({"workload": {"namespace": namespace, "kind": kind, "name": name}, "replicas": replicas})
}

/// `action.Wait`'s params: wait up to `seconds` (the API caps it at 300).
pub fn wait_params(action_id: &str, namespace: &str, seconds: u64) -> Value {
    json!({"actionId": action_id, "namespace": namespace, "timeoutSeconds": seconds.clamp(1, 300)})
}

/// The line kubectl would print for an accepted action: `workloadaction.telemesh.io/wa-… created`.
pub fn created_line(result: &Value, what: &str) -> String {
    format!(
        "workloadaction.telemesh.io/{} created ({what})\n",
        result["actionId"].as_str().unwrap_or("<unknown>")
    )
}

/// Whether an `action.Get`/`action.Wait` result has ended, and the line saying how.
pub fn ended(result: &Value) -> Option<(bool, String)> {
    let phase = result["phase"].as_str()?;
    if !matches!(phase, "Succeeded" | "Failed" | "RolledBack") {
        return None;
    }
    let message = result["status"]["message"].as_str().unwrap_or_default();
    let line = format!(
        "workloadaction.telemesh.io/{} {phase}{}{message}\n",
        result["actionId"].as_str().unwrap_or("<unknown>"),
        if message.is_empty() { "" } else { ": " },
    );
    Some((phase == "Succeeded", line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_take_kubectls_spellings() {
        assert_eq!(workload("deployment/web"), Some(("Deployment", "web")));
        assert_eq!(workload("deploy/web"), Some(("Deployment", "web")));
        assert_eq!(workload("sts/db"), Some(("StatefulSet", "db")));
        assert_eq!(workload("StatefulSet.apps/db"), Some(("StatefulSet", "db")));
        assert_eq!(workload("web"), None);
        assert_eq!(workload("pod/web"), None);
        assert_eq!(workload("deployment/"), None);
    }

    #[test]
    fn params_are_wams() {
        assert_eq!(
            move_params("ul", "a-1", "n3"),
            json!({"pod": {"namespace": "ul", "name": "a-1"}, "node": {"name": "n3"}})
        );
        assert_eq!(swap_params("ul", "a", "b")["y"]["name"], "b");
        assert_eq!(
            scale_params("ul", "Deployment", "web", 2),
            json!({"workload": {"namespace": "ul", "kind": "Deployment", "name": "web"}, "replicas": 2})
        );
        assert_eq!(wait_params("wa-1", "ul", 900)["timeoutSeconds"], 300);
    }

    #[test]
    fn only_final_phases_end_and_only_succeeded_succeeds() {
        let r = |phase: &str| json!({"actionId": "wa-1", "phase": phase, "status": {"message": "done"}});
        assert_eq!(ended(&r("Running")), None);
        assert_eq!(
            ended(&r("Succeeded")),
            Some((
                true,
                "workloadaction.telemesh.io/wa-1 Succeeded: done\n".to_owned()
            ))
        );
        assert_eq!(ended(&r("RolledBack")).map(|e| e.0), Some(false));
        assert_eq!(
            created_line(&json!({"actionId": "wa-9"}), "Move Pod ul/a to n3"),
            "workloadaction.telemesh.io/wa-9 created (Move Pod ul/a to n3)\n"
        );
    }
}
