//! Subresources with behaviour of their own: pods/binding, pods/eviction (PodDisruptionBudgets
//! honoured) and */scale (autoscaling/v1 Scale over the object's replica paths).

use std::sync::Arc;

use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

use super::{patch, verbs};
use crate::apiserver::crds::vap;
use crate::apiserver::requests::error::{ApiError, ApiResult};
use crate::apiserver::requests::kit::json_response;
use crate::apiserver::requests::kit::{DeleteOptions, PatchType, Propagation, WriteOptions, key};
use crate::apiserver::server::Server;
use crate::storage::registry::{ResourceDef, ResourceId};
use crate::storage::selectors::LabelSelector;
use crate::storage::store::{ObjKey, Stored};

fn success(code: u16) -> Response {
    let s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code});
    json_response(
        StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
        s.to_string(),
    )
}

/// `POST pods/{name}/binding`: assigns the pod to a node, once.
pub fn bind(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    mut binding: Value,
    opts: &WriteOptions,
) -> ApiResult<Response> {
    admit_subresource(
        server,
        def,
        ns,
        name,
        "binding",
        ("", "v1", "Binding"),
        &mut binding,
        opts,
    )?;
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "",
            "Binding",
            name,
            vec![(
                "target.name".into(),
                "FieldValueRequired",
                "Required value".into(),
            )],
        ));
    }
    let k = key(def, ns, name);
    server.store.write(|txn| -> ApiResult<()> {
        let cur = txn
            .get(&def.id(), &k)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let mut pod = cur.value();
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::conflict(
                "",
                "pods/binding",
                name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        let assigned = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !assigned.is_empty() {
            return Err(ApiError::conflict(
                "",
                "pods/binding",
                name,
                &format!("pod {name} is already assigned to node {assigned:?}"),
            ));
        }
        if let Some(uid) = binding.pointer("/metadata/uid").and_then(Value::as_str)
            && !uid.is_empty()
            && uid != cur.uid
        {
            return Err(ApiError::conflict(
                "",
                "pods/binding",
                name,
                "the UID in the binding does not match the pod",
            ));
        }
        pod["spec"]["nodeName"] = json!(node);
        if let Some(ann) = binding
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        {
            for (k, v) in ann {
                pod["metadata"]["annotations"][k] = v.clone();
            }
        }
        set_condition(&mut pod, "PodScheduled", "True", None);
        txn.put(def, k.clone(), pod);
        Ok(())
    })?;
    Ok(success(201))
}

/// Admits a create of a Pod's `sub`resource (`binding`, `eviction`) whose body is `obj` of kind
/// `kind`, before anything is read or written, as kube-apiserver's REST handler does: the
/// policies see that object (with the request's namespace), never the Pod.
#[allow(clippy::too_many_arguments)]
fn admit_subresource(
    server: &Server,
    def: &ResourceDef,
    ns: Option<&str>,
    name: &str,
    sub: &str,
    kind: (&str, &str, &str),
    obj: &mut Value,
    opts: &WriteOptions,
) -> ApiResult<()> {
    let Some(user) = &opts.requester else {
        return Ok(());
    };
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        && meta
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        && let Some(ns) = ns
    {
        meta.insert("namespace".into(), json!(ns));
    }
    let request = vap::Request {
        operation: vap::Operation::Create,
        resource: vap::GroupVersion::new(&def.group, &def.version, &def.plural),
        subresource: sub,
        kind: vap::GroupVersion::new(kind.0, kind.1, kind.2),
        namespace: ns.unwrap_or_default(),
        name,
        object: Some(obj),
        old_object: None,
        user,
        dry_run: opts.dry_run,
    };
    server
        .store
        .write(|txn| vap::admit(&server.vap, txn, &request))
        .map(|_warnings| ())
}

/// Sets a pod condition (`status.conditions[type]`), keeping its transition time when the
/// status does not change.
pub fn set_condition(pod: &mut Value, ty: &str, status: &str, reason: Option<&str>) {
    let now = crate::apiserver::objects::lifecycle::now();
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let conds = pod["status"]
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert(json!([])));
    let Some(Value::Array(conds)) = conds else {
        return;
    };
    let mut c =
        json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": now});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
    {
        Some(existing) if existing.get("status").and_then(Value::as_str) == Some(status) => {}
        Some(existing) => *existing = c,
        None => conds.push(c),
    }
}

/// Returns whether a pod counts as healthy for a disruption budget: Running and Ready.
pub fn pod_is_healthy(pod: &Value) -> bool {
    pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
        && pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

/// A disruption budget's arithmetic for its pods now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// Pods the budget covers.
    pub expected: i64,
    /// Of those, Running and Ready.
    pub healthy: i64,
    /// Healthy pods the budget wants.
    pub desired: i64,
}

impl Budget {
    /// Returns how many more pods may be disrupted.
    pub fn allowed(&self) -> i64 {
        (self.healthy - self.desired).max(0)
    }
}

fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            // Upstream rounds percentages up.
            Some((pct * total + 99) / 100)
        }
        _ => None,
    }
}

/// Computes a budget from the PDB spec and the pods it selects.
pub fn budget(pdb: &Value, pods: &[Value]) -> Budget {
    let expected = pods.len() as i64;
    let healthy = pods.iter().filter(|p| pod_is_healthy(p)).count() as i64;
    let desired = if let Some(min) = pdb.pointer("/spec/minAvailable") {
        scaled(min, expected).unwrap_or(0)
    } else if let Some(max) = pdb.pointer("/spec/maxUnavailable") {
        (expected - scaled(max, expected).unwrap_or(0)).max(0)
    } else {
        0
    };
    Budget {
        expected,
        healthy,
        desired,
    }
}

/// `POST pods/{name}/eviction`: deletes the pod unless a PodDisruptionBudget forbids it (429).
pub fn evict(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    mut eviction: Value,
    opts: &WriteOptions,
) -> ApiResult<Response> {
    admit_subresource(
        server,
        def,
        ns,
        name,
        "eviction",
        ("policy", "v1", "Eviction"),
        &mut eviction,
        opts,
    )?;
    let namespace = ns.unwrap_or_default();
    let k = key(def, ns, name);
    let pod = server
        .store
        .get(&def.id(), &k)
        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?
        .value();
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let terminating = pod.pointer("/metadata/deletionTimestamp").is_some();
    let ignores_budget = terminating || matches!(phase, "Succeeded" | "Failed" | "Pending");
    if !ignores_budget {
        let pdbs_id = ResourceId::new("policy", "poddisruptionbudgets");
        let (pdbs, _) = server.store.snapshot(&pdbs_id);
        let pod_labels: std::collections::BTreeMap<String, String> = pod
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let matching: Vec<Value> = pdbs
            .range(ObjKey::new(namespace, "")..)
            .take_while(|(k, _)| k.namespace == namespace)
            .map(|(_, s)| s.value())
            .filter(|pdb| {
                let sel = pdb.pointer("/spec/selector").cloned().unwrap_or(Value::Null);
                matches!(LabelSelector::from_label_selector_object(&sel), Ok(Some(s)) if !s.is_empty() && s.matches(&pod_labels))
            })
            .collect();
        if matching.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = matching.first() {
            let pods = covered_pods(server, pdb, namespace);
            let b = budget(pdb, &pods);
            let always_allow_unhealthy = pdb
                .pointer("/spec/unhealthyPodEvictionPolicy")
                .and_then(Value::as_str)
                == Some("AlwaysAllow");
            let pod_healthy = pod_is_healthy(&pod);
            let allowed = if pod_healthy {
                b.allowed() > 0
            } else {
                always_allow_unhealthy || b.healthy >= b.desired
            };
            if !allowed {
                let pdb_name = pdb
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                return Err(ApiError::new(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.")
                    .with_details(json!({"causes": [{
                        "reason": "DisruptionBudget",
                        "message": format!("The disruption budget {pdb_name} needs {} healthy pods and has {} currently", b.desired, b.healthy)
                    }]})));
            }
        }
    }
    let opts_v = eviction
        .get("deleteOptions")
        .cloned()
        .unwrap_or(Value::Null);
    let mut opts = DeleteOptions {
        propagation: match opts_v.get("propagationPolicy").and_then(Value::as_str) {
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Foreground") => Some(Propagation::Foreground),
            Some("Background") => Some(Propagation::Background),
            _ => None,
        },
        uid: opts_v
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_owned),
        resource_version: opts_v
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned),
        grace_period_seconds: opts_v.get("gracePeriodSeconds").and_then(Value::as_i64),
        dry_run: opts_v
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All")),
        // Admitted above as the eviction; kube-apiserver's eviction deletes without admission.
        requester: None,
    };
    if !opts.dry_run {
        mark_disruption_target(server, def, ns, name, &mut opts)?;
    }
    verbs::delete_object(server, def, ns, name, &opts)?;
    Ok(success(201))
}

/// Marks the pod to be evicted as kube-apiserver's eviction does before it deletes it
/// (`addConditionAndDeletePod`): condition `DisruptionTarget` True, reason
/// `EvictionByEvictionAPI`, written to the latest pod; a resourceVersion precondition then
/// names the marked pod. A pod the preconditions do not match is left to the delete, which
/// refuses it.
fn mark_disruption_target(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    opts: &mut DeleteOptions,
) -> ApiResult<()> {
    let Some(current) = server.store.get(&def.id(), &key(def, ns, name)) else {
        return Ok(());
    };
    if opts.uid.as_ref().is_some_and(|uid| *uid != current.uid)
        || opts
            .resource_version
            .as_ref()
            .is_some_and(|rv| *rv != current.rv.to_string())
    {
        return Ok(());
    }
    let mut pod = current.value();
    let mut conditions = pod
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
        .map(std::mem::take)
        .unwrap_or_default();
    let at = conditions
        .iter()
        .position(|c| c["type"] == "DisruptionTarget");
    // podutil.UpdatePodCondition: in place, the transition time changing only with the status.
    let transition = at
        .map(|i| &conditions[i])
        .filter(|c| c["status"] == "True")
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Value::String(crate::apiserver::objects::lifecycle::now()));
    let condition = json!({
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": transition,
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    });
    match at {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    pod["status"]["conditions"] = Value::Array(conditions);
    let (stored, _) = verbs::update_object(
        server,
        def,
        ns,
        name,
        Some("status"),
        pod,
        &WriteOptions::internal(),
    )?;
    if opts.resource_version.is_some() {
        opts.resource_version = Some(stored.rv.to_string());
    }
    Ok(())
}

/// Returns the live pods a PDB selects in its namespace.
pub fn covered_pods(server: &Server, pdb: &Value, namespace: &str) -> Vec<Value> {
    let sel = pdb
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or(Value::Null);
    let Ok(Some(sel)) = LabelSelector::from_label_selector_object(&sel) else {
        return Vec::new();
    };
    let (pods, _) = server.store.snapshot(&ResourceId::new("", "pods"));
    pods.range(ObjKey::new(namespace, "")..)
        .take_while(|(k, _)| k.namespace == namespace)
        .filter(|(_, s)| sel.matches(&s.labels))
        .map(|(_, s)| s.value())
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .collect()
}

fn pointer_of(json_path: &str) -> String {
    json_path
        .trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, p| format!("{acc}/{p}"))
}

fn set_at(obj: &mut Value, json_path: &str, v: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = json_path.trim_start_matches('.').split('.').collect();
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        if i == parts.len() - 1 {
            cur[*p] = v;
            return;
        }
        cur = &mut cur[*p];
    }
}

fn scale_of(def: &ResourceDef, s: &Stored) -> ApiResult<Value> {
    let paths = def
        .scale
        .as_ref()
        .ok_or_else(|| ApiError::no_route("scale"))?;
    let obj = s.value();
    let spec = obj
        .pointer(&pointer_of(&paths.spec_replicas))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status = obj
        .pointer(&pointer_of(&paths.status_replicas))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = match &paths.label_selector {
        Some(p) => obj
            .pointer(&pointer_of(p))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        None => LabelSelector::from_label_selector_object(
            obj.pointer("/spec/selector").unwrap_or(&Value::Null),
        )
        .ok()
        .flatten()
        .map(|s| s.to_query())
        .unwrap_or_default(),
    };
    let meta = &obj["metadata"];
    let mut scale = json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                     "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
        "spec": {"replicas": spec},
        "status": {"replicas": status},
    });
    if !selector.is_empty() {
        scale["status"]["selector"] = json!(selector);
    }
    Ok(scale)
}

/// `GET */scale`.
pub fn get_scale(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
) -> ApiResult<Response> {
    let s = server
        .store
        .get(&def.id(), &key(def, ns, name))
        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
    Ok(json_response(
        StatusCode::OK,
        scale_of(def, &s)?.to_string(),
    ))
}

fn write_scale(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    compute: impl FnOnce(Value) -> ApiResult<Value>,
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let paths = def
        .scale
        .clone()
        .ok_or_else(|| ApiError::no_route("scale"))?;
    let k = key(def, ns, name);
    let stored = server.store.write(|txn| -> ApiResult<Arc<Stored>> {
        let cur = txn
            .get(&def.id(), &k)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let scale = compute(scale_of(def, &cur)?)?;
        let rv = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !rv.is_empty() && rv != cur.rv.to_string() {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                ApiError::STALE,
            ));
        }
        let Some(replicas) = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .filter(|r| *r >= 0)
        else {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                vec![(
                    "spec.replicas".into(),
                    "FieldValueInvalid",
                    "Invalid value: must be greater than or equal to 0".into(),
                )],
            ));
        };
        let mut obj = cur.value();
        set_at(&mut obj, &paths.spec_replicas, json!(replicas));
        verbs::commit_update(server, txn, def, &k, &cur, obj, None, opts).map(|(s, _)| s)
    })?;
    Ok(json_response(
        StatusCode::OK,
        scale_of(def, &stored)?.to_string(),
    ))
}

/// `PUT */scale`.
pub fn update_scale(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    body: Value,
    opts: &WriteOptions,
) -> ApiResult<Response> {
    write_scale(server, def, ns, name, |_| Ok(body), opts)
}

/// `PATCH */scale` (merge, JSON or strategic patch of the Scale object).
pub fn patch_scale(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    ty: PatchType,
    body: &Value,
    opts: &WriteOptions,
) -> ApiResult<Response> {
    write_scale(
        server,
        def,
        ns,
        name,
        |cur| match ty {
            PatchType::Json => patch::json_patch(&cur, body).map_err(verbs::json_patch_error),
            _ => Ok(patch::merge_patch(&cur, body)),
        },
        opts,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ready: bool) -> Value {
        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    #[test]
    fn budgets_count_healthy_pods_and_round_percentages_up() {
        let pods = vec![pod(true), pod(true), pod(false)];
        let min2 = json!({"spec": {"minAvailable": 2}});
        assert_eq!(
            budget(&min2, &pods),
            Budget {
                expected: 3,
                healthy: 2,
                desired: 2
            }
        );
        assert_eq!(budget(&min2, &pods).allowed(), 0);
        let max1 = json!({"spec": {"maxUnavailable": 1}});
        assert_eq!(budget(&max1, &pods).allowed(), 0);
        let pct = json!({"spec": {"minAvailable": "50%"}});
        assert_eq!(budget(&pct, &pods).desired, 2);
        assert_eq!(
            budget(&json!({"spec": {"minAvailable": "10%"}}), &pods).allowed(),
            1
        );
    }

    #[test]
    fn conditions_keep_their_transition_time_when_unchanged() {
        let mut p = json!({"status": {}});
        set_condition(&mut p, "Ready", "True", None);
        let t = p["status"]["conditions"][0]["lastTransitionTime"].clone();
        set_condition(&mut p, "Ready", "True", None);
        assert_eq!(p["status"]["conditions"][0]["lastTransitionTime"], t);
        set_condition(&mut p, "PodScheduled", "True", None);
        assert_eq!(p["status"]["conditions"].as_array().map(Vec::len), Some(2));
    }
}
