//! Object lifecycle rules: what the API server fills in on create, what an update may change,
//! status-subresource semantics, generation and finalizers; per-kind defaults are in
//! [`super::defaults`].

use std::sync::Arc;

use rand::Rng as _;
use serde_json::{Map, Value, json};

use super::defaults;
use crate::apiserver::requests::error::{ApiError, ApiResult};
use crate::apiserver::requests::kit::FieldValidation;
use crate::apiserver::rest::patch::{BuiltinListMeta, ListMeta, SchemaListMeta};
use crate::storage::registry::{ResourceDef, ResourceId};
use crate::storage::selectors::LabelSelector;
use crate::storage::store::{ObjKey, Stored, Txn};

/// Returns the current time as the API server writes timestamps (RFC 3339, whole seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Returns the list merge rules for a resource: built-in patch strategies, or the CRD schema's
/// list types.
pub fn list_meta(def: &ResourceDef) -> Box<dyn ListMeta> {
    if let Some(crd) = &def.crd {
        return Box::new(SchemaListMeta::from_openapi(
            crd.schema.as_ref().unwrap_or(&Value::Null),
        ));
    }
    match BuiltinListMeta::for_kind(&def.group, &def.kind) {
        Some(m) => Box::new(m),
        None => Box::new(SchemaListMeta::from_openapi(&Value::Null)),
    }
}

fn meta_mut(obj: &mut Value) -> ApiResult<&mut Map<String, Value>> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the object must be a JSON object"))?;
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    if meta.is_null() {
        *meta = json!({});
    }
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// Kinds whose metadata.generation the server maintains (their strategies set it to 1 on
/// create and count spec changes).
fn tracks_generation(def: &ResourceDef) -> bool {
    def.is_custom()
        || matches!(
            (def.group.as_str(), def.kind.as_str()),
            ("", "Pod" | "ReplicationController")
                | (
                    "apps",
                    "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
                )
                | ("batch", _)
                | ("policy", _)
                | ("apiextensions.k8s.io", _)
                | ("admissionregistration.k8s.io", _)
                | ("flowcontrol.apiserver.k8s.io", _)
                | ("discovery.k8s.io", "EndpointSlice")
                | (
                    "networking.k8s.io",
                    "Ingress" | "IngressClass" | "NetworkPolicy"
                )
        )
}

const NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Returns whether `s` is a DNS-1123 subdomain (object names of most kinds).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Returns whether `s` is a DNS-1123 label (namespace and service names).
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && !s.contains('.') && is_dns_subdomain(s)
}

/// Fills in what the server owns on create and checks the object's identity.
pub fn prepare_create(
    def: &ResourceDef,
    obj: &mut Value,
    path_ns: Option<&str>,
    now: &str,
) -> ApiResult<()> {
    let kind = def.kind.clone();
    let group = def.group.clone();
    let meta = meta_mut(obj)?;
    if meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    // Namespace: from the path; the body may repeat it but not contradict it.
    if def.namespaced {
        let body_ns = meta
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let ns = match (path_ns, body_ns.as_str()) {
            (Some(p), "") => p.to_owned(),
            (Some(p), b) if p != b => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            (Some(p), _) => p.to_owned(),
            (None, "") => {
                return Err(ApiError::bad_request(
                    "the namespace of the object is missing and the request has none",
                ));
            }
            (None, b) => b.to_owned(),
        };
        meta.insert("namespace".into(), json!(ns));
    } else {
        meta.remove("namespace");
    }
    let mut name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if name.is_empty() {
        let prefix = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                &group,
                &kind,
                "",
                vec![(
                    "metadata.name".into(),
                    "FieldValueRequired",
                    "Required value: name or generateName is required".into(),
                )],
            ));
        }
        let mut rng = rand::rng();
        let suffix: String = (0..5)
            .map(|_| NAME_CHARS[rng.random_range(0..NAME_CHARS.len())] as char)
            .collect();
        name = format!("{prefix}{suffix}");
        meta.insert("name".into(), json!(name));
    }
    let valid = if def.group.is_empty() && matches!(def.plural.as_str(), "namespaces" | "services")
    {
        is_dns_label(&name)
    } else if def.is_custom() || def.plural == "customresourcedefinitions" {
        is_dns_subdomain(&name)
    } else {
        // Events and the like allow more; keep to the path-segment rule for them.
        !name.contains('/')
            && !name.contains('%')
            && name != "."
            && name != ".."
            && name.len() <= 253
    };
    if !valid {
        return Err(ApiError::invalid(
            &group,
            &kind,
            &name,
            vec![(
                "metadata.name".into(),
                "FieldValueInvalid",
                format!(
                    "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                ),
            )],
        ));
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now));
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("selfLink");
    if tracks_generation(def) {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if def.status
        && !(def.group.is_empty() && def.plural == "nodes")
        && let Some(o) = obj.as_object_mut()
    {
        // What a user sends as status is dropped; a built-in starts from its zero status.
        o.remove("status");
        if !def.is_custom() {
            o.insert("status".into(), defaults::zero_status(&group, &kind));
        }
    }
    if !def.is_custom() {
        let cx = defaults::CreateContext { name: &name, now };
        defaults::apply(&group, &kind, obj, &cx);
    }
    validate_builtin(def, obj, &name)
}

fn validate_builtin(def: &ResourceDef, obj: &Value, name: &str) -> ApiResult<()> {
    let mut causes: Vec<(String, &'static str, String)> = Vec::new();
    let mut check_pod_spec = |spec: Option<&Value>, at: &str| {
        let containers = spec
            .and_then(|s| s.get("containers"))
            .and_then(Value::as_array);
        match containers {
            None => causes.push((
                format!("{at}.containers"),
                "FieldValueRequired",
                "Required value".into(),
            )),
            Some(cs) if cs.is_empty() => causes.push((
                format!("{at}.containers"),
                "FieldValueRequired",
                "Required value".into(),
            )),
            Some(cs) => {
                let mut seen = std::collections::HashSet::new();
                for (i, c) in cs.iter().enumerate() {
                    let cname = str_at(c, "/name");
                    if cname.is_empty() {
                        causes.push((
                            format!("{at}.containers[{i}].name"),
                            "FieldValueRequired",
                            "Required value".into(),
                        ));
                    } else if !seen.insert(cname.to_owned()) {
                        causes.push((
                            format!("{at}.containers[{i}].name"),
                            "FieldValueDuplicate",
                            format!("Duplicate value: {cname:?}"),
                        ));
                    }
                    if str_at(c, "/image").is_empty() {
                        causes.push((
                            format!("{at}.containers[{i}].image"),
                            "FieldValueRequired",
                            "Required value".into(),
                        ));
                    }
                }
            }
        }
    };
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => check_pod_spec(obj.get("spec"), "spec"),
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => {
            check_pod_spec(obj.pointer("/spec/template/spec"), "spec.template.spec");
            if def.group == "apps" {
                let sel = obj
                    .pointer("/spec/selector")
                    .cloned()
                    .unwrap_or(Value::Null);
                match LabelSelector::from_label_selector_object(&sel) {
                    Ok(Some(s)) if !s.is_empty() => {
                        let labels = obj
                            .pointer("/spec/template/metadata/labels")
                            .and_then(Value::as_object)
                            .map(|m| {
                                m.iter()
                                    .filter_map(|(k, v)| {
                                        v.as_str().map(|v| (k.clone(), v.to_owned()))
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        if !s.matches(&labels) {
                            causes.push((
                                "spec.template.metadata.labels".into(),
                                "FieldValueInvalid",
                                "Invalid value: `selector` does not match template `labels`".into(),
                            ));
                        }
                    }
                    Ok(_) => causes.push((
                        "spec.selector".into(),
                        "FieldValueRequired",
                        "Required value".into(),
                    )),
                    Err(e) => causes.push((
                        "spec.selector".into(),
                        "FieldValueInvalid",
                        format!("Invalid value: {e}"),
                    )),
                }
            } else {
                let rp = str_at(obj, "/spec/template/spec/restartPolicy");
                if rp != "OnFailure" && rp != "Never" {
                    causes.push((
                        "spec.template.spec.restartPolicy".into(),
                        "FieldValueNotSupported",
                        format!(
                            "Unsupported value: {rp:?}: supported values: \"OnFailure\", \"Never\""
                        ),
                    ));
                }
            }
        }
        ("scheduling.k8s.io", "priorityclasses") => {
            if !obj.get("value").is_some_and(Value::is_i64) {
                causes.push((
                    "value".into(),
                    "FieldValueRequired",
                    "Required value".into(),
                ));
            }
            causes.extend(super::priority::class_causes(obj, None));
        }
        _ => {}
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&def.group, &def.kind, name, causes))
    }
}

/// Checks the object against its type: custom resources against their CRD schema (pruning,
/// defaulting, validation, CEL), built-in kinds by decoding them as the upstream Go types
/// would (a wrong type is a 400). Unknown fields are dropped, reported in warnings, or
/// rejected, as `fieldValidation` says.
pub fn validate_fields(
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
    mode: FieldValidation,
) -> ApiResult<Vec<String>> {
    validate_fields_of(def, obj, old, mode, None)
}

/// [`validate_fields`] of a write to subresource `sub` (None: the object itself). Through
/// `status`, kube-apiserver validates the status against its own schema
/// (`ValidateStatusUpdate`), so the OpenAPI messages name paths from there
/// (`interruptedCount in body ...`) while the causes' fields keep `status.`.
pub fn validate_fields_of(
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
    mode: FieldValidation,
    sub: Option<&str>,
) -> ApiResult<Vec<String>> {
    let name = str_at(obj, "/metadata/name").to_owned();
    // Objects arrive in the storage form (a converted kind's too): checked as the stored type.
    let group = def.storage_group();
    let unknown: Vec<String> =
        if let Some(compiled) = def.crd.as_ref().and_then(|c| c.compiled.as_ref()) {
            let pruned = compiled.prune(obj);
            // Strictly, an unknown field fails the decoding, before any validation (as in
            // kube-apiserver, whose decoder prunes custom resources).
            if mode == FieldValidation::Strict && !pruned.is_empty() {
                return Err(strict_decoding_error(def, &pruned, old.is_some()));
            }
            compiled.apply_defaults(obj);
            let errors = compiled.validate(obj, old);
            if !errors.is_empty() {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    &name,
                    errors
                        .into_iter()
                        .map(|e| match sub {
                            Some("status") => relative_to_status(e),
                            _ => (e.field, e.reason.as_str(), e.message),
                        })
                        .collect(),
                ));
            }
            pruned
        } else if def.crd.is_none() {
            super::typed::check(group, &def.storage_version, &def.kind, obj)
                .map_err(ApiError::bad_request)?
        } else {
            Vec::new()
        };
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    match mode {
        FieldValidation::Strict => Err(strict_decoding_error(def, &unknown, old.is_some())),
        FieldValidation::Warn => Ok(unknown
            .iter()
            .map(|u| format!("unknown field {u:?}"))
            .collect()),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// A status update's error as kube-apiserver words it, from a validation of the status alone:
/// paths in messages from the status (`status.x in body` → `x in body`) and the schema's plain
/// errors (no field, an empty value: `Checked value must be ...`) on `status`, not the root.
fn relative_to_status(
    e: crate::apiserver::crds::schema::FieldError,
) -> (String, &'static str, String) {
    static PATH: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(^|: | in )status\.(\S)").expect("a valid pattern")
    });
    let message = PATH.replace_all(&e.message, "${1}${2}").into_owned();
    let field = if e.field == "<nil>" && e.message.starts_with("Invalid value: \"\": ") {
        "status".to_owned()
    } else {
        e.field
    };
    (field, e.reason.as_str(), message)
}

/// The 400 of a strictly decoded object with `unknown` fields. A create body fails in
/// kube-apiserver's decoder, which names the kind (`transformDecodeError`); a patched object
/// (`patched`) is decoded after patching and does not.
fn strict_decoding_error(def: &ResourceDef, unknown: &[String], patched: bool) -> ApiError {
    let list: Vec<String> = unknown
        .iter()
        .map(|u| format!("unknown field {u:?}"))
        .collect();
    let error = format!("strict decoding error: {}", list.join(", "));
    ApiError::bad_request(if patched {
        error
    } else {
        format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {error}",
            kind = def.kind,
            version = def.version
        )
    })
}

/// Answers 404 for a missing namespace and 403 for a terminating one, as NamespaceLifecycle does.
pub fn check_namespace_open(txn: &Txn<'_>, ns: &str) -> ApiResult<()> {
    let id = ResourceId::new("", "namespaces");
    let Some(n) = txn.get(&id, &ObjKey::new("", ns)) else {
        return Err(ApiError::not_found("", "namespaces", ns));
    };
    if field_is(&n, "status.phase", "Terminating")
        || n.value().pointer("/metadata/deletionTimestamp").is_some()
    {
        return Err(ApiError::forbidden(format!(
            "unable to create new content in namespace {ns} because it is being terminated"
        )));
    }
    Ok(())
}

fn field_is(s: &Stored, f: &str, v: &str) -> bool {
    s.field(f) == Some(v)
}

/// Kind-specific create steps that read other objects: the Priority admission plugin (a pod's
/// priority from its PriorityClass; one default class).
pub fn create_in_txn(txn: &Txn<'_>, def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => super::priority::admit_new_pod(txn, obj),
        ("scheduling.k8s.io", "priorityclasses") => super::priority::admit_class(txn, obj),
        _ => Ok(()),
    }
}

/// Kind-specific update steps that read other objects or the old version: a pod keeps its
/// priority, a PriorityClass its value and policy, and there stays one default class.
pub fn update_in_txn(
    txn: &Txn<'_>,
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
) -> ApiResult<()> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => {
            super::priority::keep_on_update(old, new);
            Ok(())
        }
        ("scheduling.k8s.io", "priorityclasses") => {
            let causes = super::priority::class_causes(new, Some(old));
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    str_at(new, "/metadata/name"),
                    causes,
                ));
            }
            super::priority::admit_class(txn, new)
        }
        _ => Ok(()),
    }
}

/// Enforces the resourceVersion precondition of an update: a stale one is a 409 Conflict; an
/// absent one is allowed for built-in kinds (unconditional update) and refused for custom ones.
pub fn check_precondition_rv(
    def: &ResourceDef,
    cur: &Stored,
    requested: &str,
    name: &str,
) -> ApiResult<()> {
    if requested.is_empty() {
        if def.is_custom() {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                name,
                vec![(
                    "metadata.resourceVersion".into(),
                    "FieldValueInvalid",
                    "Invalid value: 0x0: must be specified for an update".into(),
                )],
            ));
        }
        return Ok(());
    }
    if requested != cur.rv.to_string() {
        return Err(ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            ApiError::STALE,
        ));
    }
    Ok(())
}

/// Applies the update rules: server-owned metadata is kept, the status subresource splits status
/// from the rest, pods keep their immutable spec, and generation counts spec changes.
pub fn prepare_update(
    def: &ResourceDef,
    old: &Value,
    mut new: Value,
    sub: Option<&str>,
) -> ApiResult<Value> {
    let name = str_at(old, "/metadata/name").to_owned();
    let new_uid = str_at(&new, "/metadata/uid").to_owned();
    if !new_uid.is_empty() && new_uid != str_at(old, "/metadata/uid") {
        return Err(ApiError::conflict(
            &def.group,
            &def.plural,
            &name,
            &format!(
                "Precondition failed: UID in precondition: {new_uid}, UID in object meta: {}",
                str_at(old, "/metadata/uid")
            ),
        ));
    }
    if sub == Some("status") {
        // Only status changes; metadata other than managedFields stays as it was.
        let mut out = old.clone();
        out["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        if let Some(mf) = new.pointer("/metadata/managedFields") {
            out["metadata"]["managedFields"] = mf.clone();
        }
        return Ok(out);
    }
    {
        let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
        let meta = meta_mut(&mut new)?;
        for k in [
            "uid",
            "creationTimestamp",
            "namespace",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old_meta.get(k) {
                Some(v) => {
                    meta.insert(k.into(), v.clone());
                }
                None => {
                    meta.remove(k);
                }
            }
        }
        meta.remove("selfLink");
        // Finalizers cannot be added to an object being deleted.
        if old_meta.get("deletionTimestamp").is_some() {
            let old_f: Vec<&Value> = old_meta
                .get("finalizers")
                .and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            if let Some(new_f) = meta.get("finalizers").and_then(Value::as_array)
                && new_f.iter().any(|f| !old_f.contains(&f))
            {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    &name,
                    vec![(
                        "metadata.finalizers".into(),
                        "FieldValueForbidden",
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    )],
                ));
            }
        }
    }
    if def.status {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
    if def.group.is_empty() && def.plural == "pods" {
        check_pod_update(def, old, &new, &name)?;
    }
    if def.group.is_empty() && def.plural == "namespaces" {
        new["spec"] = old.get("spec").cloned().unwrap_or(Value::Null);
    }
    if tracks_generation(def) && spec_changed(def, old, &new) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        new["metadata"]["generation"] = json!(g + 1);
    }
    Ok(new)
}

/// Returns `v` without null object members: Go decodes an absent field and a null one alike
/// (`creationTimestamp: null` in a template is the zero time either way).
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), without_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = without_nulls(v);
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            if def.status {
                o.remove("status");
            }
        }
        v
    };
    strip(old) != strip(new)
}

fn check_pod_update(def: &ResourceDef, old: &Value, new: &Value, name: &str) -> ApiResult<()> {
    // Upstream allows changing container images, activeDeadlineSeconds, adding tolerations and
    // scheduling gates removal; everything else in spec is immutable (the scheduler binds with
    // pods/binding, not an update).
    let mask = |spec: Option<&Value>| {
        let mut s = spec.cloned().unwrap_or(Value::Null);
        if let Some(o) = s.as_object_mut() {
            for list in ["containers", "initContainers"] {
                if let Some(cs) = o.get_mut(list).and_then(Value::as_array_mut) {
                    for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                        c.remove("image");
                    }
                }
            }
            o.remove("activeDeadlineSeconds");
            o.remove("tolerations");
            o.remove("schedulingGates");
            o.remove("terminationGracePeriodSeconds");
        }
        s
    };
    if mask(old.get("spec")) != mask(new.get("spec")) {
        return Err(ApiError::invalid(&def.group, &def.kind, name, vec![(
            "spec".into(),
            "FieldValueForbidden",
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".into(),
        )]));
    }
    Ok(())
}

/// Returns whether two versions are the same object (an update that changes nothing is not
/// written and keeps its resourceVersion).
pub fn same_object(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = without_nulls(v);
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        v
    };
    strip(old) == strip(new)
}

/// Returns true when an object being deleted has no finalizer left: it goes now.
pub fn deletion_complete(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
        && obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
}

/// Looks up the storage-version definition for a stored object's resource.
pub fn def_for(
    reg: &crate::storage::registry::Registry,
    id: &ResourceId,
) -> Option<Arc<ResourceDef>> {
    reg.storage_def(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_are_checked() {
        assert!(is_dns_subdomain("a.b-c"));
        assert!(!is_dns_subdomain("A"));
        assert!(!is_dns_label("a.b"));
        assert!(is_dns_label("kube-system"));
    }

    #[test]
    fn same_object_ignores_resource_version_and_managed_fields() {
        let a = json!({"metadata": {"name": "x", "resourceVersion": "1"}, "spec": 1});
        let b = json!({"metadata": {"name": "x", "resourceVersion": "2", "managedFields": []}, "spec": 1});
        assert!(same_object(&a, &b));
        assert!(!same_object(
            &a,
            &json!({"metadata": {"name": "x"}, "spec": 2})
        ));
    }
}
