//! Patch application with the API server's semantics: JSON merge patch (RFC 7386), JSON patch (RFC 6902),
//! strategic merge patch for built-in kinds, and server-side apply with managedFields.
//!
//! Everything here is pure: functions take JSON values and return new ones, with no I/O and no
//! shared state. How a list (or map) merges is asked of a [`ListMeta`]: [`BuiltinListMeta`] carries
//! the `patchMergeKey`/`patchStrategy` and `+listType`/`+listMapKey` tags of k8s.io/api for the
//! built-in kinds, [`SchemaListMeta`] reads `x-kubernetes-list-type` from a CRD's schema.
//!
//! Strategic merge patch follows k8s.io/apimachinery/pkg/util/strategicpatch, including its list
//! ordering: items the patch names are placed by the patch (or by `$setElementOrder`), items only
//! the server has keep their place relative to them, and new items without `$setElementOrder` come
//! before the server-only items that follow them, as upstream's `mergeSortedSlice` does.
//!
//! Server-side apply follows sigs.k8s.io/structured-merge-diff (merge, ownership, pruning of
//! dropped fields, conflicts) and the API server's field manager (`before-first-apply`, stripped
//! metadata fields, entry order, conflict messages), on plain JSON instead of typed values.
//!
//! Where this differs from upstream, on purpose:
//! - Strategic merge patch: `$patch: merge` in a map is accepted as a plain merge (upstream
//!   answers 500); `$patch: replace` and values the original lacks are cleaned of directives and
//!   nulls (upstream copies them raw and lets typed decoding drop them);
//!   `$deleteFromPrimitiveList` on an absent list does nothing (upstream sets the list to the
//!   deletion list). Errors upstream answers with 500 are 400 here.
//! - Apply and update tracking work without schema types: object fields with children are never
//!   members in an apply set (upstream marks entries of `map[string]Struct` maps with `.`); a
//!   field that appears in an update is recorded with `.` unless [`ListMeta::always_present`] says
//!   the typed zero object has it; managers of other API versions are not converted; the
//!   `last-applied-configuration` upgrade path and the cap of ten update entries are left out;
//!   reset fields (status on the main resource) are the caller's to drop.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

const ERR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
const ERR_LIST_OF_LISTS: &str = "lists of lists are not supported";

const APPLY: &str = "Apply";
const UPDATE: &str = "Update";
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The message the API server answers a strategic merge patch on a custom resource with.
pub const STRATEGIC_MERGE_UNSUPPORTED: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a patch could not be applied. Each variant maps to the HTTP status the API server answers with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// 400: the patch document is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 422: the patch is well formed but does not apply (for example a JSON patch `test` that failed).
    #[error("{0}")]
    Invalid(String),
    /// 409: server-side apply would take fields other managers own with a different value.
    #[error("{message}")]
    Conflict {
        /// The message upstream writes: `Apply failed with 1 conflict: conflict with "x" using apps/v1: .spec.replicas`.
        message: String,
        /// One entry per conflicting field, in the order of the message.
        conflicts: Vec<FieldConflict>,
    },
    /// 415: a strategic merge patch on a kind without patch metadata (custom resources).
    #[error("{0}")]
    UnsupportedMediaType(String),
}

/// One field that server-side apply could not take without `force`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The manager that owns the field.
    pub manager: String,
    /// That manager's operation: `Apply` or `Update`.
    pub operation: String,
    /// The API version of that manager's entry.
    pub api_version: String,
    /// The subresource of that manager's entry, if any.
    pub subresource: Option<String>,
    /// The field path as upstream prints it: `.spec.containers[name="web"].image`.
    pub field: String,
    /// The cause message: `conflict with "kubectl-client-side-apply" using apps/v1`.
    pub message: String,
}

impl PatchError {
    /// Returns the HTTP status code the API server answers this error with.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::Invalid(_) => 422,
            Self::Conflict { .. } => 409,
            Self::UnsupportedMediaType(_) => 415,
        }
    }

    /// Returns the `metav1.Status` reason for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "BadRequest",
            Self::Invalid(_) => "Invalid",
            Self::Conflict { .. } => "Conflict",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
        }
    }

    /// Returns the `details` of the `Status` object, if the error has any: for apply conflicts,
    /// `{"causes":[{"reason":"FieldManagerConflict","message":...,"field":...}]}`.
    pub fn details(&self) -> Option<Value> {
        match self {
            Self::Conflict { conflicts, .. } => {
                let causes: Vec<Value> = conflicts
                    .iter()
                    .map(|c| json!({"reason": "FieldManagerConflict", "message": c.message, "field": c.field}))
                    .collect();
                Some(json!({ "causes": causes }))
            }
            _ => None,
        }
    }

    /// Returns the 415 error a strategic merge patch on a custom resource gets.
    pub fn strategic_merge_unsupported() -> Self {
        Self::UnsupportedMediaType(STRATEGIC_MERGE_UNSUPPORTED.to_owned())
    }
}

fn bad(message: impl Into<String>) -> PatchError {
    PatchError::BadRequest(message.into())
}

// ---------------------------------------------------------------------------------------------
// List metadata
// ---------------------------------------------------------------------------------------------

/// How a list merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole (the default).
    Atomic,
    /// An associative list: elements are matched by these key fields (`patchMergeKey`, `x-kubernetes-list-map-keys`).
    MergeByKeys(Vec<String>),
    /// A list of primitives merged as a set (`metadata.finalizers`).
    Set,
}

/// Tells how the list (or map) at a field path merges.
///
/// A path is the object field names from the root with list indices left out, e.g.
/// `["spec", "template", "spec", "containers", "env"]`; a map entry's key counts as a field name.
pub trait ListMeta {
    /// Returns how the list at `path` merges for strategic merge patch.
    fn list_kind(&self, path: &[&str]) -> ListKind;

    /// Returns how the list at `path` merges for server-side apply (`+listType`/`+listMapKey`),
    /// which differs from [`ListMeta::list_kind`] where the SSA keys differ from the patch merge key.
    fn apply_list_kind(&self, path: &[&str]) -> ListKind {
        self.list_kind(path)
    }

    /// Returns whether the map (or struct) at `path` is atomic for server-side apply
    /// (`x-kubernetes-map-type: atomic`, `+structType=atomic`, `+mapType=atomic`).
    fn map_is_atomic(&self, _path: &[&str]) -> bool {
        false
    }

    /// Returns the schema default of a list-map key field, used when an element of the list at
    /// `path` leaves `key` out (container and service ports default `protocol` to `TCP`).
    fn key_default(&self, _path: &[&str], _key: &str) -> Option<Value> {
        None
    }

    /// Returns whether the field at `path` exists in every typed object of the kind, even an
    /// empty one (a non-pointer struct such as `spec`, or a list without `omitempty` such as
    /// `containers`): an update then never records the field itself as added, as upstream,
    /// which compares against a typed zero object, does not.
    fn always_present(&self, _path: &[&str]) -> bool {
        false
    }
}

/// The list kinds of `metadata` (ObjectMeta), which every kind shares.
fn object_meta_list_kind(rest: &[&str]) -> Option<ListKind> {
    match rest {
        ["finalizers"] => Some(ListKind::Set),
        ["ownerReferences"] => Some(ListKind::MergeByKeys(vec!["uid".to_owned()])),
        _ => None,
    }
}

#[derive(Debug, Clone)]
struct ListRule {
    path: Vec<&'static str>,
    smp: ListKind,
    ssa: ListKind,
    protocol_default: bool,
}

/// The patch metadata of a built-in kind (k8s.io/api tags), for strategic merge patch and apply.
#[derive(Debug, Clone)]
pub struct BuiltinListMeta {
    rules: Vec<ListRule>,
    atomic_maps: Vec<Vec<&'static str>>,
    always_present_paths: Vec<Vec<&'static str>>,
}

fn keys(names: &[&str]) -> ListKind {
    ListKind::MergeByKeys(names.iter().map(|s| (*s).to_owned()).collect())
}

fn join(prefix: &[&'static str], rest: &[&'static str]) -> Vec<&'static str> {
    prefix.iter().chain(rest).copied().collect()
}

impl BuiltinListMeta {
    /// Returns the patch metadata of a built-in kind, or `None` for a kind it does not know
    /// (a custom resource: the caller answers a strategic merge patch with 415).
    pub fn for_kind(group: &str, kind: &str) -> Option<Self> {
        if !crate::storage::builtins::is_builtin_kind(group, kind) {
            return None;
        }
        let mut m = Self {
            rules: Vec::new(),
            atomic_maps: Vec::new(),
            always_present_paths: Vec::new(),
        };
        m.always_present_paths.push(vec!["spec"]);
        m.always_present_paths.push(vec!["status"]);
        match (group, kind) {
            ("", "Pod") => {
                m.pod_spec(&["spec"]);
                m.merge(&["status", "conditions"], &["type"]);
                m.merge(&["status", "podIPs"], &["ip"]);
                m.merge(&["status", "hostIPs"], &["ip"]);
                m.merge(&["status", "resourceClaimStatuses"], &["name"]);
            }
            ("", "PodTemplate") => {
                m.always_present_paths.push(vec!["template"]);
                m.pod_template(&["template"]);
            }
            ("", "ReplicationController") => m.pod_template(&["spec", "template"]),
            ("apps", "Deployment") => {
                m.workload(&["spec"]);
                m.always_present_paths.push(vec!["spec", "strategy"]);
            }
            ("apps", "StatefulSet" | "DaemonSet") => {
                m.workload(&["spec"]);
                m.always_present_paths.push(vec!["spec", "updateStrategy"]);
            }
            ("apps", "ReplicaSet") => m.workload(&["spec"]),
            ("batch", "Job") => {
                m.pod_template(&["spec", "template"]);
                m.atomic_maps.push(vec!["spec", "selector"]);
                // SMP merges Job conditions by type; SSA treats them as atomic (+listType=atomic).
                m.rule(
                    &["status", "conditions"],
                    keys(&["type"]),
                    ListKind::Atomic,
                    false,
                );
            }
            ("batch", "CronJob") => {
                m.always_present_paths.push(vec!["spec", "jobTemplate"]);
                m.always_present_paths
                    .push(vec!["spec", "jobTemplate", "spec"]);
                m.object_meta(&["spec", "jobTemplate", "metadata"]);
                m.pod_template(&["spec", "jobTemplate", "spec", "template"]);
                m.atomic_maps
                    .push(vec!["spec", "jobTemplate", "spec", "selector"]);
            }
            ("", "Service") => {
                m.rule(
                    &["spec", "ports"],
                    keys(&["port"]),
                    keys(&["port", "protocol"]),
                    true,
                );
                m.atomic_maps.push(vec!["spec", "selector"]);
                m.merge(&["status", "conditions"], &["type"]);
            }
            ("", "Node") => {
                m.merge(&["status", "conditions"], &["type"]);
                m.merge(&["status", "addresses"], &["type"]);
                m.rule(&["spec", "podCIDRs"], ListKind::Set, ListKind::Set, false);
            }
            ("", "ServiceAccount") => m.merge(&["secrets"], &["name"]),
            ("", "Namespace" | "PersistentVolumeClaim")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("autoscaling", "HorizontalPodAutoscaler") => {
                m.merge(&["status", "conditions"], &["type"])
            }
            ("policy", "PodDisruptionBudget") => {
                m.merge(&["status", "conditions"], &["type"]);
                m.atomic_maps.push(vec!["spec", "selector"]);
            }
            _ => {}
        }
        Some(m)
    }

    fn rule(
        &mut self,
        path: &[&'static str],
        smp: ListKind,
        ssa: ListKind,
        protocol_default: bool,
    ) {
        self.rules.push(ListRule {
            path: path.to_vec(),
            smp,
            ssa,
            protocol_default,
        });
    }

    fn merge(&mut self, path: &[&'static str], key: &[&str]) {
        self.rule(path, keys(key), keys(key), false);
    }

    fn object_meta(&mut self, prefix: &[&'static str]) {
        self.always_present_paths.push(prefix.to_vec());
        self.rule(
            &join(prefix, &["finalizers"]),
            ListKind::Set,
            ListKind::Set,
            false,
        );
        self.merge(&join(prefix, &["ownerReferences"]), &["uid"]);
    }

    /// Deployments, replica sets, stateful sets and daemon sets: a pod template, a label selector
    /// and conditions merged by type.
    fn workload(&mut self, spec: &[&'static str]) {
        self.pod_template(&join(spec, &["template"]));
        self.atomic_maps.push(join(spec, &["selector"]));
        self.merge(&["status", "conditions"], &["type"]);
    }

    fn pod_template(&mut self, template: &[&'static str]) {
        self.always_present_paths.push(template.to_vec());
        self.object_meta(&join(template, &["metadata"]));
        let spec = join(template, &["spec"]);
        self.always_present_paths.push(spec.clone());
        self.pod_spec(&spec);
    }

    fn pod_spec(&mut self, spec: &[&'static str]) {
        self.always_present_paths.push(join(spec, &["containers"]));
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            let c = join(spec, &[list]);
            self.merge(&c, &["name"]);
            self.rule(
                &join(&c, &["ports"]),
                keys(&["containerPort"]),
                keys(&["containerPort", "protocol"]),
                true,
            );
            self.merge(&join(&c, &["env"]), &["name"]);
            self.merge(&join(&c, &["volumeMounts"]), &["mountPath"]);
            self.merge(&join(&c, &["volumeDevices"]), &["devicePath"]);
            self.rule(
                &join(&c, &["resources", "claims"]),
                ListKind::Atomic,
                keys(&["name"]),
                false,
            );
        }
        self.merge(&join(spec, &["volumes"]), &["name"]);
        self.merge(&join(spec, &["imagePullSecrets"]), &["name"]);
        self.merge(&join(spec, &["hostAliases"]), &["ip"]);
        self.rule(
            &join(spec, &["topologySpreadConstraints"]),
            keys(&["topologyKey"]),
            keys(&["topologyKey", "whenUnsatisfiable"]),
            false,
        );
        self.merge(&join(spec, &["resourceClaims"]), &["name"]);
        self.merge(&join(spec, &["schedulingGates"]), &["name"]);
        self.atomic_maps.push(join(spec, &["nodeSelector"]));
    }

    fn find(&self, path: &[&str]) -> Option<&ListRule> {
        self.rules.iter().find(|r| r.path.as_slice() == path)
    }
}

impl ListMeta for BuiltinListMeta {
    fn list_kind(&self, path: &[&str]) -> ListKind {
        if let ["metadata", rest @ ..] = path
            && let Some(kind) = object_meta_list_kind(rest)
        {
            return kind;
        }
        self.find(path).map_or(ListKind::Atomic, |r| r.smp.clone())
    }

    fn apply_list_kind(&self, path: &[&str]) -> ListKind {
        if let ["metadata", rest @ ..] = path
            && let Some(kind) = object_meta_list_kind(rest)
        {
            return kind;
        }
        self.find(path).map_or(ListKind::Atomic, |r| r.ssa.clone())
    }

    fn map_is_atomic(&self, path: &[&str]) -> bool {
        self.atomic_maps.iter().any(|p| p.as_slice() == path)
    }

    fn key_default(&self, path: &[&str], key: &str) -> Option<Value> {
        match self.find(path) {
            Some(r) if r.protocol_default && key == "protocol" => Some(json!("TCP")),
            _ => None,
        }
    }

    fn always_present(&self, path: &[&str]) -> bool {
        self.always_present_paths
            .iter()
            .any(|p| p.as_slice() == path)
    }
}

/// The list metadata of a custom resource, read from its CRD's `openAPIV3Schema`.
///
/// `x-kubernetes-list-type: map` merges by `x-kubernetes-list-map-keys`, `set` as a set, and
/// `atomic` (or no type) atomically; `x-kubernetes-map-type: atomic` makes a map atomic. `metadata`
/// follows ObjectMeta whatever the schema says.
#[derive(Debug, Clone)]
pub struct SchemaListMeta {
    schema: Value,
}

impl SchemaListMeta {
    /// Returns the list metadata of a CRD schema (JSONSchemaProps as JSON: `properties`, `items`,
    /// `additionalProperties`). A `Null` schema knows only ObjectMeta's lists.
    pub fn from_openapi(schema: &Value) -> Self {
        let schema = schema.get("openAPIV3Schema").unwrap_or(schema).clone();
        Self { schema }
    }

    /// Returns the schema of the field at `path`, stepping through list items on the way.
    fn resolve(&self, path: &[&str]) -> Option<&Value> {
        let mut cur = &self.schema;
        for seg in path {
            cur = items_of(cur);
            if let Some(p) = cur.get("properties").and_then(|p| p.get(*seg)) {
                cur = p;
            } else if let Some(ap) = cur.get("additionalProperties").filter(|v| v.is_object()) {
                cur = ap;
            } else {
                return None;
            }
        }
        Some(cur)
    }
}

/// Returns the schema of a list's items (repeatedly, for lists of lists), or the schema itself.
fn items_of(mut schema: &Value) -> &Value {
    while let Some(items) = schema.get("items").filter(|v| v.is_object()) {
        schema = items;
    }
    schema
}

impl ListMeta for SchemaListMeta {
    fn list_kind(&self, path: &[&str]) -> ListKind {
        if let ["metadata", rest @ ..] = path {
            return object_meta_list_kind(rest).unwrap_or(ListKind::Atomic);
        }
        let Some(s) = self.resolve(path) else {
            return ListKind::Atomic;
        };
        match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => {
                let keys: Vec<String> = s
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::MergeByKeys(keys)
                }
            }
            Some("set") => ListKind::Set,
            _ => ListKind::Atomic,
        }
    }

    fn map_is_atomic(&self, path: &[&str]) -> bool {
        if path.first() == Some(&"metadata") {
            return false;
        }
        self.resolve(path)
            .and_then(|s| s.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            .is_some_and(|t| t == "atomic")
    }

    fn key_default(&self, path: &[&str], key: &str) -> Option<Value> {
        let s = self.resolve(path)?;
        items_of(s)
            .get("properties")?
            .get(key)?
            .get("default")
            .cloned()
    }
}

// ---------------------------------------------------------------------------------------------
// JSON merge patch and JSON patch
// ---------------------------------------------------------------------------------------------

/// Returns `target` with an RFC 7386 JSON merge patch applied: objects merge recursively, `null`
/// deletes, anything else (arrays included) replaces. Key order is kept.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut doc = target.clone();
    json_patch::merge(&mut doc, patch);
    doc
}

/// Returns `target` with an RFC 6902 JSON patch applied.
///
/// A patch that is not an array of objects is a 400; an operation that does not apply (a failed
/// `test`, a missing path, an unknown `op`) is a 422, as the API server answers (which says only
/// `the server rejected our request ...`: `verbs::json_patch_error`; the reason here is for
/// logs).
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Some(ops) = patch.as_array() else {
        return Err(bad(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            telemesh_core::go::json_type(patch)
        )));
    };
    if let Some(op) = ops.iter().find(|op| !op.is_object()) {
        return Err(bad(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            telemesh_core::go::json_type(op)
        )));
    }
    let parsed: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::Invalid(format!("invalid JSON patch: {e}")))?;
    let mut doc = target.clone();
    json_patch::patch(&mut doc, &parsed.0).map_err(|e| PatchError::Invalid(e.to_string()))?;
    Ok(doc)
}

// ---------------------------------------------------------------------------------------------
// Strategic merge patch
// ---------------------------------------------------------------------------------------------

/// Returns `target` with a strategic merge patch applied, lists merging as `meta` says.
///
/// Supports `null` deletion, `$patch: replace|delete|merge`, `$deleteFromPrimitiveList/<field>`,
/// `$setElementOrder/<field>` and `$retainKeys`; directives never reach the output. A patch that
/// is not a JSON object, or a malformed directive, is a 400; a list of lists is a 422.
pub fn strategic_merge_patch(
    target: &Value,
    patch: &Value,
    meta: &dyn ListMeta,
) -> Result<Value, PatchError> {
    let Value::Object(p) = patch else {
        return Err(bad(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            telemesh_core::go::json_type(patch)
        )));
    };
    let original = match target {
        Value::Object(o) => o.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(bad(format!(
                "the object to patch is not an object: {}",
                telemesh_core::go::json_type(other)
            )));
        }
    };
    let smp = Smp { meta };
    let mut path = Vec::new();
    Ok(Value::Object(smp.merge_map(original, p, &mut path)?))
}

struct Smp<'a> {
    meta: &'a dyn ListMeta,
}

fn list_kind_at(meta: &dyn ListMeta, path: &[String], apply: bool) -> ListKind {
    let names: Vec<&str> = path.iter().map(String::as_str).collect();
    if apply {
        meta.apply_list_kind(&names)
    } else {
        meta.list_kind(&names)
    }
}

/// Returns whether `item` matches `other` on every key (a missing key matches a missing key, as
/// Go's map lookup does).
fn key_match(item: &Value, other: &Value, keys: &[String]) -> bool {
    match (item.as_object(), other.as_object()) {
        (Some(a), Some(b)) => keys.iter().all(|k| a.get(k) == b.get(k)),
        _ => false,
    }
}

/// Returns the position of `item` in `list`: by key for maps, by value otherwise.
fn index_of(list: &[Value], item: &Value, keys: Option<&[String]>) -> Option<usize> {
    match keys {
        Some(k) => list.iter().position(|v| key_match(v, item, k)),
        None => list.iter().position(|v| v == item),
    }
}

fn no_merge_key(item: &Value, keys: &[String]) -> PatchError {
    bad(format!(
        "map: {item} does not contain declared merge key: {}",
        keys.join(",")
    ))
}

fn require_keys(item: &Value, keys: &[String]) -> Result<(), PatchError> {
    match item.as_object() {
        Some(m) if keys.iter().all(|k| m.contains_key(k)) => Ok(()),
        Some(_) => Err(no_merge_key(item, keys)),
        None => Err(bad(format!(
            "expected a map, but received a {}",
            telemesh_core::go::json_type(item)
        ))),
    }
}

/// Returns `v` with every `null` member of every object removed.
fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

#[derive(PartialEq, Eq, Clone, Copy, Debug)]
enum JsonType {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

fn json_type(v: &Value) -> JsonType {
    match v {
        Value::Null => JsonType::Null,
        Value::Bool(_) => JsonType::Bool,
        Value::Number(_) => JsonType::Number,
        Value::String(_) => JsonType::String,
        Value::Array(_) => JsonType::Array,
        Value::Object(_) => JsonType::Object,
    }
}

/// Sorts `items` (stably) by their position in `order`; items not in it go last.
fn sort_by_order(items: &mut [Value], order: &[Value], keys: Option<&[String]>) {
    items.sort_by_key(|v| index_of(order, v, keys).unwrap_or(usize::MAX));
}

/// Upstream's `mergeSortedSlice`: inserts the server-only items (`left`) into the patch items
/// (`right`), an item of `left` going first only when both are in `server_order` and it is earlier.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    keys: Option<&[String]>,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_of(server_order, l, keys), index_of(server_order, r, keys)),
                (Some(a), Some(b)) if a < b
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// Upstream's `normalizeElementOrder`: the patch items in patch order, the server-only items in
/// server order, merged.
fn normalize_element_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    keys: Option<&[String]>,
) -> Vec<Value> {
    sort_by_order(&mut patch_items, patch_order, keys);
    sort_by_order(&mut server_only, server_order, keys);
    merge_sorted(server_only, patch_items, server_order, keys)
}

/// Splits `merged` into the items present in `by` and the others.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    keys: Option<&[String]>,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut inside = Vec::new();
    let mut outside = Vec::new();
    for v in merged {
        if let Some(k) = keys {
            require_keys(&v, k)?;
        }
        if index_of(by, &v, keys).is_some() {
            inside.push(v);
        } else {
            outside.push(v);
        }
    }
    Ok((inside, outside))
}

fn is_delete_directive(v: &Value) -> bool {
    v.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

/// Upstream's `validatePatchWithSetOrderList`: the patch items must appear in the
/// `$setElementOrder` list, in the same relative order.
fn validate_set_order(
    patch_list: &[Value],
    order: &[Value],
    keys: Option<&[String]>,
) -> Result<(), PatchError> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<&Value> = match keys {
        Some(_) => patch_list
            .iter()
            .filter(|v| !is_delete_directive(v))
            .collect(),
        None => patch_list.iter().collect(),
    };
    let (mut pi, mut oi) = (0, 0);
    while pi < non_delete.len() && oi < order.len() {
        if non_delete[pi].get(DIRECTIVE).is_some() {
            pi += 1;
            continue;
        }
        let equal = match keys {
            Some(k) => {
                require_keys(non_delete[pi], k)?;
                require_keys(&order[oi], k)?;
                key_match(non_delete[pi], &order[oi], k)
            }
            None => non_delete[pi] == &order[oi],
        };
        if equal {
            pi += 1;
        }
        oi += 1;
    }
    if pi < non_delete.len() && oi >= order.len() {
        return Err(bad(format!(
            "The order in patch list:\n{}\n doesn't match {} list:\n{}\n",
            Value::Array(patch_list.to_vec()),
            SET_ELEMENT_ORDER.trim_end_matches('/'),
            Value::Array(order.to_vec())
        )));
    }
    Ok(())
}

impl Smp<'_> {
    fn kind(&self, path: &[String]) -> ListKind {
        list_kind_at(self.meta, path, false)
    }

    /// Upstream's `mergeMap`.
    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        patch: &Map<String, Value>,
        path: &mut Vec<String>,
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(d) = patch.get(DIRECTIVE) {
            match d.as_str() {
                Some("replace") => {
                    let mut p = patch.clone();
                    p.shift_remove(DIRECTIVE);
                    return self.merge_map(Map::new(), &p, path);
                }
                Some("delete") => return Ok(Map::new()),
                // Upstream rejects `merge` in a map; merging is what a map does anyway.
                Some("merge") => {}
                _ => {
                    return Err(bad(format!(
                        "unknown patch type: {d} in map: {}",
                        Value::Object(patch.clone())
                    )));
                }
            }
        }
        if let Some(rk) = patch.get(RETAIN_KEYS) {
            let Some(list) = rk.as_array() else {
                return Err(bad(ERR_RETAIN_KEYS));
            };
            let listed = |k: &str| list.iter().any(|x| x.as_str() == Some(k));
            for (k, v) in patch {
                let directive = k == DIRECTIVE
                    || k == RETAIN_KEYS
                    || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
                    || k.starts_with(SET_ELEMENT_ORDER);
                if !v.is_null() && !directive && !listed(k) {
                    return Err(bad(ERR_RETAIN_KEYS));
                }
            }
            original.retain(|k, _| listed(k));
        }

        // Ordered lists the original lacks are inserted where the patch has them, below.
        let mut ordered: BTreeMap<&str, Option<Value>> = BTreeMap::new();
        for (key, order) in patch {
            let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) else {
                continue;
            };
            let Some(order) = order.as_array() else {
                return Err(bad(ERR_SET_ELEMENT_ORDER));
            };
            path.push(field.to_owned());
            let done = self.set_element_order(&original, patch, field, order, path);
            path.pop();
            if let Some(list) = done? {
                if original.contains_key(field) {
                    original.insert(field.to_owned(), list);
                    ordered.insert(field, None);
                } else {
                    ordered.insert(field, Some(list));
                }
            }
        }

        for (key, pv) in patch {
            if key == DIRECTIVE
                || key == RETAIN_KEYS
                || key.starts_with(SET_ELEMENT_ORDER)
                || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            {
                continue;
            }
            if let Some(pending) = ordered.get_mut(key.as_str()) {
                if let Some(list) = pending.take() {
                    original.insert(key.clone(), list);
                }
                continue;
            }
            if pv.is_null() {
                original.shift_remove(key);
                continue;
            }
            path.push(key.clone());
            let result = match original.get_mut(key) {
                Some(slot) => {
                    let old = std::mem::take(slot);
                    self.merge_value(old, pv, path).map(|v| *slot = v)
                }
                None => self.sanitize(pv, path).map(|v| {
                    original.insert(key.clone(), v);
                }),
            };
            path.pop();
            result?;
        }

        for (key, pv) in patch {
            let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else {
                continue;
            };
            let Some(del) = pv.as_array() else {
                return Err(bad(ERR_PRIMITIVE_LIST));
            };
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|v| !del.contains(v));
            }
        }
        Ok(original)
    }

    fn merge_value(
        &self,
        old: Value,
        pv: &Value,
        path: &mut Vec<String>,
    ) -> Result<Value, PatchError> {
        match (old, pv) {
            (Value::Object(o), Value::Object(p)) => Ok(Value::Object(self.merge_map(o, p, path)?)),
            (Value::Array(o), Value::Array(p)) => Ok(Value::Array(self.merge_list(o, p, path)?.0)),
            (_, pv) => self.sanitize(pv, path),
        }
    }

    /// Returns a patch value with no original to merge into: directives applied, nulls dropped.
    fn sanitize(&self, v: &Value, path: &mut Vec<String>) -> Result<Value, PatchError> {
        match v {
            Value::Object(m) => Ok(Value::Object(self.merge_map(Map::new(), m, path)?)),
            Value::Array(a) => Ok(Value::Array(self.merge_list(Vec::new(), a, path)?.0)),
            other => Ok(other.clone()),
        }
    }

    /// Processes `$setElementOrder/<field>` with the field's patch list. Returns the ordered list,
    /// or `None` when neither the original nor the patch has the field.
    fn set_element_order(
        &self,
        original: &Map<String, Value>,
        patch: &Map<String, Value>,
        field: &str,
        order: &[Value],
        path: &mut Vec<String>,
    ) -> Result<Option<Value>, PatchError> {
        let kind = self.kind(path);
        let as_list = |v: Option<&Value>| match v {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a.clone())),
            Some(other) => Err(bad(format!(
                "expected a slice, but received a {}",
                telemesh_core::go::json_type(other)
            ))),
        };
        let orig = as_list(original.get(field))?;
        let plist = as_list(patch.get(field))?;
        let keys = match &kind {
            ListKind::MergeByKeys(k) => Some(k.as_slice()),
            _ => None,
        };
        if let Some(p) = &plist {
            validate_set_order(p, order, keys)?;
        }
        let (merged, server_order) = match (orig, plist) {
            (Some(o), None) => (o.clone(), o),
            (None, Some(p)) => (self.merge_list(Vec::new(), &p, path)?.0, Vec::new()),
            (Some(o), Some(p)) => self.merge_list(o, &p, path)?,
            (None, None) => return Ok(None),
        };
        let result = if kind == ListKind::Atomic {
            merged
        } else {
            let (inside, outside) = partition(merged, order, keys)?;
            normalize_element_order(inside, outside, order, &server_order, keys)
        };
        Ok(Some(Value::Array(result)))
    }

    /// Upstream's `mergeSlice`. Returns the merged list and the server order upstream's
    /// `$setElementOrder` handling sees: the original list after in-place deletions and appends.
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: &[Value],
        path: &mut Vec<String>,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        let kind = self.kind(path);
        if kind == ListKind::Atomic {
            return Ok((patch.iter().map(strip_nulls).collect(), original));
        }
        if original.is_empty() && patch.is_empty() {
            return Ok((original, Vec::new()));
        }
        let mut element = None;
        for v in original.iter().chain(patch) {
            let t = json_type(v);
            if t == JsonType::Array {
                return Err(PatchError::Invalid(ERR_LIST_OF_LISTS.to_owned()));
            }
            match element {
                None => element = Some(t),
                Some(e) if e != t => {
                    return Err(bad(format!(
                        "list element types are not identical: {}",
                        Value::Array(original.iter().chain(patch).cloned().collect())
                    )));
                }
                Some(_) => {}
            }
        }
        if element != Some(JsonType::Object) {
            let mut both: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for v in original.iter().chain(patch) {
                if !both.contains(v) {
                    both.push(v.clone());
                }
            }
            let (inside, outside) = partition(both, patch, None)?;
            let merged = normalize_element_order(inside, outside, patch, &original, None);
            return Ok((merged, original));
        }
        let ListKind::MergeByKeys(keys) = kind else {
            return Err(bad(format!(
                "cannot merge lists without merge key for {}",
                path.join(".")
            )));
        };

        // Special elements first: `$patch: delete` removes a matching item in place (shifting the
        // rest left, as Go's append does), `$patch: replace` replaces the list.
        let n = original.len();
        let mut arr = original;
        let mut live = n;
        let mut replace = false;
        let mut plain: Vec<&Value> = Vec::new();
        for item in patch {
            match item.get(DIRECTIVE) {
                None => plain.push(item),
                Some(d) => match d.as_str() {
                    Some("delete") => {
                        require_keys(item, &keys)?;
                        // One directive deletes one matching item (upstream's deleteMatchingEntry).
                        if let Some(k) = arr[..live].iter().position(|v| key_match(v, item, &keys))
                        {
                            arr[k..live].rotate_left(1);
                            live -= 1;
                        }
                    }
                    Some("replace") => replace = true,
                    Some("merge") => {
                        return Err(bad("merging lists cannot yet be specified in the patch"));
                    }
                    _ => return Err(bad(format!("unknown patch type: {d} in map: {item}"))),
                },
            }
        }
        if replace {
            let mut items = Vec::with_capacity(plain.len());
            for p in &plain {
                items.push(self.sanitize(p, path)?);
            }
            return Ok((items, arr));
        }
        let kept: Vec<Value> = arr[..live].to_vec();
        let mut merged = kept.clone();
        for p in &plain {
            require_keys(p, &keys)?;
            let Some(pm) = p.as_object() else { continue };
            if let Some(i) = merged.iter().position(|v| key_match(v, p, &keys)) {
                let Value::Object(old) = std::mem::take(&mut merged[i]) else {
                    continue;
                };
                merged[i] = Value::Object(self.merge_map(old, pm, path)?);
            } else {
                let v = Value::Object(self.merge_map(Map::new(), pm, path)?);
                if merged.len() < n {
                    arr[merged.len()] = v.clone();
                }
                merged.push(v);
            }
        }
        let patch_items: Vec<Value> = plain.iter().map(|p| (*p).clone()).collect();
        let (inside, outside) = partition(merged, &patch_items, Some(&keys))?;
        let result = normalize_element_order(inside, outside, &patch_items, &kept, Some(&keys));
        Ok((result, arr))
    }
}

// ---------------------------------------------------------------------------------------------
// Field sets (structured-merge-diff's fieldpath, FieldsV1 encoding)
// ---------------------------------------------------------------------------------------------

/// One step of a field path.
#[derive(Debug, Clone)]
enum PathElement {
    /// `f:name`: an object field.
    Field(String),
    /// `k:{"name":"web"}`: an associative list item, by its keys (sorted by name).
    Key(Vec<(String, Value)>),
    /// `v:"x"`: a set item.
    Value(Value),
    /// `i:0`: a list item by index (never produced here, read for completeness).
    Index(i64),
}

fn value_rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

/// structured-merge-diff's total order on values: numbers < strings < bools < lists < maps < null.
fn value_cmp(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (fx, fy) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            fx.partial_cmp(&fy)
                .unwrap_or(Ordering::Equal)
                .then_with(|| x.to_string().cmp(&y.to_string()))
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let c = value_cmp(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut xs: Vec<(&String, &Value)> = x.iter().collect();
            let mut ys: Vec<(&String, &Value)> = y.iter().collect();
            xs.sort_by(|p, q| p.0.cmp(q.0));
            ys.sort_by(|p, q| p.0.cmp(q.0));
            for ((kx, vx), (ky, vy)) in xs.iter().zip(&ys) {
                let c = kx.cmp(ky).then_with(|| value_cmp(vx, vy));
                if c != Ordering::Equal {
                    return c;
                }
            }
            xs.len().cmp(&ys.len())
        }
        _ => value_rank(a).cmp(&value_rank(b)),
    }
}

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            Self::Field(_) => 0,
            Self::Key(_) => 1,
            Self::Value(_) => 2,
            Self::Index(_) => 3,
        }
    }

    /// Returns the FieldsV1 key: `f:name`, `k:{"name":"web"}`, `v:"x"`, `i:0`.
    fn encode(&self) -> String {
        match self {
            Self::Field(n) => format!("f:{n}"),
            Self::Key(kv) => {
                let m: Map<String, Value> = kv.iter().cloned().collect();
                format!("k:{}", Value::Object(m))
            }
            Self::Value(v) => format!("v:{v}"),
            Self::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<Self> {
        if let Some(n) = s.strip_prefix("f:") {
            return Some(Self::Field(n.to_owned()));
        }
        if let Some(k) = s.strip_prefix("k:") {
            let Value::Object(m) = serde_json::from_str(k).ok()? else {
                return None;
            };
            let mut kv: Vec<(String, Value)> = m.into_iter().collect();
            kv.sort_by(|a, b| a.0.cmp(&b.0));
            return Some(Self::Key(kv));
        }
        if let Some(v) = s.strip_prefix("v:") {
            return serde_json::from_str(v).ok().map(Self::Value);
        }
        s.strip_prefix("i:")
            .and_then(|i| i.parse().ok())
            .map(Self::Index)
    }

    /// Returns the element as upstream prints paths: `.name`, `[name="web"]`, `[="x"]`, `[0]`.
    fn display(&self) -> String {
        match self {
            Self::Field(n) => format!(".{n}"),
            Self::Key(kv) => {
                let parts: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            Self::Value(v) => format!("[={v}]"),
            Self::Index(i) => format!("[{i}]"),
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Field(a), Self::Field(b)) => a.cmp(b),
            (Self::Key(a), Self::Key(b)) => a.len().cmp(&b.len()).then_with(|| {
                for ((ka, va), (kb, vb)) in a.iter().zip(b) {
                    let c = ka.cmp(kb).then_with(|| value_cmp(va, vb));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                Ordering::Equal
            }),
            (Self::Value(a), Self::Value(b)) => value_cmp(a, b),
            (Self::Index(a), Self::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

fn path_display(path: &[PathElement]) -> String {
    path.iter().map(PathElement::display).collect()
}

/// A set of field paths: a path is a member when it is owned itself; children hold deeper paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    fn from_paths(paths: &[&[&str]]) -> Self {
        let mut s = Self::default();
        for p in paths {
            let path: Vec<PathElement> = p
                .iter()
                .map(|n| PathElement::Field((*n).to_owned()))
                .collect();
            s.insert(&path);
        }
        s
    }

    fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Self::is_empty)
    }

    fn union(&self, other: &Self) -> Self {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Returns the paths of `self` that are not paths of `other` (path by path, not by prefix).
    fn difference(&self, other: &Self) -> Self {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(o) => child.difference(o),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(pe.clone(), rest);
            }
        }
        Self { members, children }
    }

    fn intersection(&self, other: &Self) -> Self {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let both = child.intersection(o);
                if !both.is_empty() {
                    children.insert(pe.clone(), both);
                }
            }
        }
        Self { members, children }
    }

    /// Upstream's `EnsureNamedFieldsAreMembers`: a field with owned children is owned itself.
    fn with_fields_as_members(&self) -> Self {
        let mut out = Self {
            members: self.members.clone(),
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            if matches!(pe, PathElement::Field(_)) {
                out.members.insert(pe.clone());
            }
            out.children
                .insert(pe.clone(), child.with_fields_as_members());
        }
        out
    }

    /// Appends every path, members before children, in order (upstream's `Set.Iterate`).
    fn paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(p);
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.paths(prefix, out);
            prefix.pop();
        }
    }

    /// Returns the FieldsV1 JSON of the set.
    fn to_fields_v1(&self) -> Value {
        Value::Object(self.emit(false))
    }

    fn emit(&self, dot: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if dot {
            out.insert(".".to_owned(), json!({}));
        }
        let mut members = self.members.iter().peekable();
        let mut children = self
            .children
            .iter()
            .filter(|(_, c)| !c.is_empty())
            .peekable();
        loop {
            let order = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(m), Some((pe, _))) => (*m).cmp(pe),
            };
            match order {
                Ordering::Less => {
                    if let Some(m) = members.next() {
                        out.insert(m.encode(), json!({}));
                    }
                }
                Ordering::Greater => {
                    if let Some((pe, c)) = children.next() {
                        out.insert(pe.encode(), Value::Object(c.emit(false)));
                    }
                }
                Ordering::Equal => {
                    members.next();
                    if let Some((pe, c)) = children.next() {
                        out.insert(pe.encode(), Value::Object(c.emit(true)));
                    }
                }
            }
        }
        out
    }

    /// Reads a FieldsV1 object; keys it cannot read are skipped.
    fn from_fields_v1(v: &Value) -> Self {
        let mut s = Self::default();
        let Some(m) = v.as_object() else { return s };
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let Some(pe) = PathElement::decode(k) else {
                continue;
            };
            match child.as_object() {
                Some(c) if !c.is_empty() => {
                    if c.contains_key(".") {
                        s.members.insert(pe.clone());
                    }
                    let sub = Self::from_fields_v1(child);
                    if !sub.is_empty() {
                        s.children.insert(pe, sub);
                    }
                }
                _ => {
                    s.members.insert(pe);
                }
            }
        }
        s
    }
}

/// The fields the API server never records in managedFields (its `stripMetaManager`).
fn strip_set() -> FieldSet {
    FieldSet::from_paths(&[
        &["apiVersion"],
        &["kind"],
        &["metadata"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "creationTimestamp"],
        &["metadata", "selfLink"],
        &["metadata", "uid"],
        &["metadata", "clusterName"],
        &["metadata", "generation"],
        &["metadata", "managedFields"],
        &["metadata", "resourceVersion"],
    ])
}

// ---------------------------------------------------------------------------------------------
// Walking values with list metadata (structured-merge-diff's typed operations on JSON)
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Comparison {
    added: FieldSet,
    modified: FieldSet,
    removed: FieldSet,
}

struct Walker<'a> {
    meta: &'a dyn ListMeta,
    names: Vec<String>,
    path: Vec<PathElement>,
}

impl<'a> Walker<'a> {
    fn new(meta: &'a dyn ListMeta) -> Self {
        Self {
            meta,
            names: Vec::new(),
            path: Vec::new(),
        }
    }

    fn names(&self) -> Vec<&str> {
        self.names.iter().map(String::as_str).collect()
    }

    fn list_kind(&self) -> ListKind {
        list_kind_at(self.meta, &self.names, true)
    }

    fn atomic_map(&self) -> bool {
        self.meta.map_is_atomic(&self.names())
    }

    fn push_field(&mut self, name: &str) {
        self.names.push(name.to_owned());
        self.path.push(PathElement::Field(name.to_owned()));
    }

    fn pop_field(&mut self) {
        self.names.pop();
        self.path.pop();
    }

    /// Returns the path element of a list item, or `None` when it has none (atomic list, a
    /// missing key without default, an item that is not an object).
    fn item_pe(&self, item: &Value, kind: &ListKind) -> Option<PathElement> {
        match kind {
            ListKind::MergeByKeys(keys) => {
                let m = item.as_object()?;
                let mut kv = Vec::with_capacity(keys.len());
                for k in keys {
                    let v = match m.get(k).filter(|v| !v.is_null()) {
                        Some(v) => v.clone(),
                        None => self.meta.key_default(&self.names(), k)?,
                    };
                    kv.push((k.clone(), v));
                }
                kv.sort_by(|a, b| a.0.cmp(&b.0));
                Some(PathElement::Key(kv))
            }
            ListKind::Set => Some(PathElement::Value(item.clone())),
            ListKind::Atomic => None,
        }
    }

    fn index_items<'v>(
        &self,
        list: &'v [Value],
        kind: &ListKind,
    ) -> Option<Vec<(PathElement, &'v Value)>> {
        list.iter()
            .map(|v| self.item_pe(v, kind).map(|pe| (pe, v)))
            .collect()
    }

    // --- field sets of applied configurations ---

    /// Returns the fields an applied configuration sets (upstream's `ToFieldSet`).
    fn field_set(&mut self, config: &Value) -> Result<FieldSet, String> {
        let mut set = FieldSet::default();
        if let Value::Object(m) = config {
            self.field_set_of_map(m, &mut set)?;
        }
        Ok(set)
    }

    fn field_set_of_map(
        &mut self,
        m: &Map<String, Value>,
        set: &mut FieldSet,
    ) -> Result<(), String> {
        for (k, v) in m {
            self.push_field(k);
            let r = self.field_set_of_value(v, set);
            self.pop_field();
            r?;
        }
        Ok(())
    }

    fn field_set_of_value(&mut self, v: &Value, set: &mut FieldSet) -> Result<(), String> {
        match v {
            Value::Object(m) if !m.is_empty() && !self.atomic_map() => {
                self.field_set_of_map(m, set)
            }
            Value::Array(a) => {
                let kind = self.list_kind();
                if kind == ListKind::Atomic {
                    set.insert(&self.path);
                    return Ok(());
                }
                let mut seen = BTreeSet::new();
                for (i, item) in a.iter().enumerate() {
                    let pe = match self.item_pe(item, &kind) {
                        Some(pe) => pe,
                        None => return Err(self.item_error(i, item, &kind)),
                    };
                    if !seen.insert(pe.clone()) {
                        return Err(format!(
                            "{}: duplicate entries for key {}",
                            path_display(&self.path),
                            pe.display()
                        ));
                    }
                    self.path.push(pe);
                    let r = match (item, &kind) {
                        (Value::Object(m), ListKind::MergeByKeys(_)) => {
                            self.field_set_of_map(m, set)
                        }
                        _ => Ok(()),
                    };
                    set.insert(&self.path);
                    self.path.pop();
                    r?;
                }
                Ok(())
            }
            _ => {
                set.insert(&self.path);
                Ok(())
            }
        }
    }

    fn item_error(&self, i: usize, item: &Value, kind: &ListKind) -> String {
        let what = match (kind, item.as_object()) {
            (ListKind::MergeByKeys(keys), Some(m)) => {
                let missing = keys
                    .iter()
                    .find(|k| m.get(*k).is_none_or(Value::is_null))
                    .map_or("", String::as_str);
                format!(
                    "associative list with keys has an element that omits key field {missing:?} (and doesn't have default value)"
                )
            }
            _ => format!("expected map, got {}", telemesh_core::go::json_type(item)),
        };
        format!("{}: element {i}: {what}", path_display(&self.path))
    }

    // --- comparison ---

    fn compare_values(&mut self, lhs: &Value, rhs: &Value) -> Comparison {
        let mut out = Comparison::default();
        self.compare(Some(lhs), Some(rhs), &mut out);
        out
    }

    fn compare(&mut self, l: Option<&Value>, r: Option<&Value>, out: &mut Comparison) {
        if l.is_none() && r.is_none() {
            return;
        }
        let obj = |v: Option<&Value>| matches!(v, None | Some(Value::Object(_)));
        let arr = |v: Option<&Value>| matches!(v, None | Some(Value::Array(_)));
        let empty = |v: Option<&Value>| match v {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => true,
        };
        if obj(l) && obj(r) && !(empty(l) && empty(r)) && !self.atomic_map() {
            let empty_map = Map::new();
            let lm = l.and_then(Value::as_object).unwrap_or(&empty_map);
            let rm = r.and_then(Value::as_object).unwrap_or(&empty_map);
            for (k, lv) in lm {
                self.push_field(k);
                self.compare(Some(lv), rm.get(k), out);
                self.pop_field();
            }
            for (k, rv) in rm {
                if !lm.contains_key(k) {
                    self.push_field(k);
                    self.compare(None, Some(rv), out);
                    self.pop_field();
                }
            }
            self.item_hook(l, r, out);
            return;
        }
        if arr(l) && arr(r) && !(empty(l) && empty(r)) {
            let kind = self.list_kind();
            let la = l.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            let ra = r.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            if kind != ListKind::Atomic
                && let (Some(li), Some(ri)) =
                    (self.index_items(la, &kind), self.index_items(ra, &kind))
            {
                let mut rmap: BTreeMap<&PathElement, &Value> = BTreeMap::new();
                for (pe, v) in &ri {
                    rmap.entry(pe).or_insert(v);
                }
                let mut seen: BTreeSet<&PathElement> = BTreeSet::new();
                for (pe, lv) in &li {
                    if !seen.insert(pe) {
                        continue;
                    }
                    self.path.push(pe.clone());
                    self.compare(Some(lv), rmap.get(pe).copied(), out);
                    self.path.pop();
                }
                for (pe, rv) in &ri {
                    if !seen.insert(pe) {
                        continue;
                    }
                    self.path.push(pe.clone());
                    self.compare(None, Some(rv), out);
                    self.path.pop();
                }
                self.item_hook(l, r, out);
                return;
            }
        }
        match (l, r) {
            (None, Some(_)) => out.added.insert(&self.path),
            (Some(_), None) => out.removed.insert(&self.path),
            (Some(a), Some(b)) if a != b => out.modified.insert(&self.path),
            _ => {}
        }
    }

    /// Records a map, list or list item that appeared or went away as a whole.
    fn item_hook(&self, l: Option<&Value>, r: Option<&Value>, out: &mut Comparison) {
        let own_item = matches!(
            self.path.last(),
            Some(PathElement::Key(_) | PathElement::Value(_))
        );
        if !own_item && self.meta.always_present(&self.names()) {
            return;
        }
        match (l, r) {
            (None, Some(_)) => out.added.insert(&self.path),
            (Some(_), None) => out.removed.insert(&self.path),
            _ => {}
        }
    }

    // --- merging an applied configuration ---

    fn merge(&mut self, l: &Value, r: &Value) -> Value {
        match (l, r) {
            (Value::Object(lm), Value::Object(rm))
                if (!lm.is_empty() || !rm.is_empty()) && !self.atomic_map() =>
            {
                let mut out = Map::new();
                for (k, lv) in lm {
                    match rm.get(k) {
                        None => {
                            out.insert(k.clone(), lv.clone());
                        }
                        Some(Value::Null) => {}
                        Some(rv) => {
                            self.push_field(k);
                            let v = self.merge(lv, rv);
                            self.pop_field();
                            out.insert(k.clone(), v);
                        }
                    }
                }
                for (k, rv) in rm {
                    if !lm.contains_key(k) && !rv.is_null() {
                        out.insert(k.clone(), strip_nulls(rv));
                    }
                }
                Value::Object(out)
            }
            (Value::Array(la), Value::Array(ra)) if !(la.is_empty() && ra.is_empty()) => {
                let kind = self.list_kind();
                if kind == ListKind::Atomic {
                    return strip_nulls(r);
                }
                match self.merge_lists(la, ra, &kind) {
                    Some(items) => Value::Array(items),
                    None => strip_nulls(r),
                }
            }
            _ => strip_nulls(r),
        }
    }

    fn merge_item(&mut self, l: Option<&Value>, r: Option<&Value>) -> Option<Value> {
        match (l, r) {
            (Some(l), Some(r)) => Some(self.merge(l, r)),
            (Some(l), None) => Some(l.clone()),
            (None, Some(r)) => Some(strip_nulls(r)),
            (None, None) => None,
        }
    }

    /// structured-merge-diff's list merge: the configuration's order for the items it names,
    /// the live items it does not name kept in place around them.
    fn merge_lists(&mut self, la: &[Value], ra: &[Value], kind: &ListKind) -> Option<Vec<Value>> {
        let lhs = self.index_items(la, kind)?;
        let rhs_all = self.index_items(ra, kind)?;
        let mut observed_r: BTreeMap<PathElement, &Value> = BTreeMap::new();
        let mut rhs: Vec<PathElement> = Vec::new();
        for (pe, v) in rhs_all {
            if !observed_r.contains_key(&pe) {
                observed_r.insert(pe.clone(), v);
                rhs.push(pe);
            }
        }
        // Duplicated live items are not merged with the configuration (upstream marks them nil).
        let mut observed_l: BTreeMap<PathElement, Option<&Value>> = BTreeMap::new();
        for (pe, v) in &lhs {
            observed_l
                .entry(pe.clone())
                .and_modify(|e| *e = None)
                .or_insert(Some(*v));
        }
        let shared: Vec<PathElement> = rhs
            .iter()
            .filter(|pe| observed_l.contains_key(*pe))
            .cloned()
            .collect();
        let mut shared = shared.into_iter();
        let mut next_shared = shared.next();
        let mut merged_rhs: BTreeSet<PathElement> = BTreeSet::new();
        let mut out = Vec::with_capacity(la.len().max(ra.len()));
        let (mut li, mut ri) = (0, 0);
        while li < lhs.len() || ri < rhs.len() {
            if li < lhs.len() && ri < rhs.len() {
                let pe = &lhs[li].0;
                if *pe == rhs[ri] {
                    merged_rhs.insert(pe.clone());
                    let lchild = observed_l.get(pe).copied().flatten();
                    let rchild = observed_r.get(pe).copied();
                    out.extend(self.merge_item(lchild, rchild));
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if observed_r.contains_key(pe) && next_shared.as_ref().is_some_and(|n| n != pe) {
                    li += 1;
                    continue;
                }
            }
            if li < lhs.len() {
                let pe = &lhs[li].0;
                if !observed_r.contains_key(pe) {
                    out.extend(self.merge_item(Some(lhs[li].1), None));
                    li += 1;
                    continue;
                } else if merged_rhs.contains(pe) {
                    li += 1;
                    continue;
                }
            }
            if ri < rhs.len() {
                let pe = rhs[ri].clone();
                merged_rhs.insert(pe.clone());
                let lchild = observed_l.get(&pe).copied().flatten();
                let rchild = observed_r.get(&pe).copied();
                out.extend(self.merge_item(lchild, rchild));
                ri += 1;
                if next_shared.as_ref() == Some(&pe) {
                    next_shared = shared.next();
                }
            }
        }
        Some(out)
    }

    // --- pruning ---

    /// Removes every member of `set` (with what is under it) from `v`.
    fn remove_items(&mut self, v: &mut Value, set: &FieldSet) {
        match v {
            Value::Object(m) => {
                for pe in &set.members {
                    if let PathElement::Field(k) = pe {
                        m.shift_remove(k);
                    }
                }
                for (pe, child) in &set.children {
                    if let PathElement::Field(k) = pe
                        && let Some(cv) = m.get_mut(k)
                    {
                        self.names.push(k.clone());
                        self.remove_items(cv, child);
                        self.names.pop();
                    }
                }
            }
            Value::Array(a) => {
                let kind = self.list_kind();
                if kind == ListKind::Atomic {
                    return;
                }
                a.retain(|item| {
                    self.item_pe(item, &kind)
                        .is_none_or(|pe| !set.members.contains(&pe))
                });
                if set.children.is_empty() {
                    return;
                }
                for item in a.iter_mut() {
                    if let Some(pe) = self.item_pe(item, &kind)
                        && let Some(child) = set.children.get(&pe)
                    {
                        self.remove_items(item, child);
                    }
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// managedFields
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct ManagedEntry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    set: FieldSet,
}

impl ManagedEntry {
    /// Returns whether this entry is the manager identity given: appliers are one entry whatever
    /// the API version, updaters one per API version (upstream's `BuildManagerIdentifier`).
    fn is(
        &self,
        manager: &str,
        operation: &str,
        api_version: &str,
        subresource: Option<&str>,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
            && (operation == APPLY || self.api_version == api_version)
    }

    /// Returns the manager as conflict messages print it: `"kubectl" using apps/v1`.
    fn printed(&self) -> String {
        let mut s = Value::String(self.manager.clone()).to_string();
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {}", Value::String(sub.clone())));
        }
        if self.operation == UPDATE {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn sort_key(&self) -> (&str, &str, &str, &str, &str) {
        (
            &self.operation,
            self.time.as_deref().unwrap_or_default(),
            &self.manager,
            &self.api_version,
            self.subresource.as_deref().unwrap_or_default(),
        )
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        if !self.manager.is_empty() {
            m.insert("manager".to_owned(), json!(self.manager));
        }
        m.insert("operation".to_owned(), json!(self.operation));
        if !self.api_version.is_empty() {
            m.insert("apiVersion".to_owned(), json!(self.api_version));
        }
        if let Some(t) = &self.time {
            m.insert("time".to_owned(), json!(t));
        }
        m.insert("fieldsType".to_owned(), json!("FieldsV1"));
        m.insert("fieldsV1".to_owned(), self.set.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".to_owned(), json!(s));
        }
        Value::Object(m)
    }
}

fn str_field(m: &Map<String, Value>, key: &str) -> String {
    m.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn decode_entries(entries: &[Value]) -> Vec<ManagedEntry> {
    entries
        .iter()
        .filter_map(Value::as_object)
        .filter(|e| {
            e.get("fieldsType")
                .and_then(Value::as_str)
                .is_none_or(|t| t == "FieldsV1")
        })
        .map(|e| ManagedEntry {
            manager: str_field(e, "manager"),
            operation: str_field(e, "operation"),
            api_version: str_field(e, "apiVersion"),
            time: e.get("time").and_then(Value::as_str).map(str::to_owned),
            subresource: e
                .get("subresource")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            set: e
                .get("fieldsV1")
                .map(FieldSet::from_fields_v1)
                .unwrap_or_default(),
        })
        .filter(|e| !e.set.is_empty())
        .collect()
}

fn managed_fields_of(obj: &Value) -> Option<&Vec<Value>> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
}

fn decode_managed_fields(obj: &Value) -> Vec<ManagedEntry> {
    managed_fields_of(obj)
        .map(|a| decode_entries(a))
        .unwrap_or_default()
}

/// Returns `obj` (an empty object for anything that is not an object) without `metadata.managedFields`.
fn without_managed_fields(obj: &Value) -> Value {
    let mut v = if obj.is_object() {
        obj.clone()
    } else {
        json!({})
    };
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.shift_remove("managedFields");
    }
    v
}

/// Writes the entries into `metadata.managedFields`, sorted as the API server sorts them
/// (operation, time, manager, apiVersion, subresource); no entries removes the field.
fn set_managed_fields(obj: &mut Value, mut entries: Vec<ManagedEntry>) {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let Some(o) = obj.as_object_mut() else { return };
    if entries.is_empty() {
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.shift_remove("managedFields");
        }
        return;
    }
    let list = Value::Array(entries.iter().map(ManagedEntry::to_json).collect());
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Some(m) = meta.as_object_mut() {
        m.insert("managedFields".to_owned(), list);
    }
}

/// Returns the 409 for the fields other managers own, with upstream's message.
fn conflict_error(entries: &[ManagedEntry], conflicts: &[(usize, FieldSet)]) -> PatchError {
    let mut sorted: Vec<&(usize, FieldSet)> = conflicts.iter().collect();
    sorted.sort_by(|a, b| {
        let (x, y) = (&entries[a.0], &entries[b.0]);
        (&x.manager, &x.operation, &x.api_version, &x.subresource).cmp(&(
            &y.manager,
            &y.operation,
            &y.api_version,
            &y.subresource,
        ))
    });
    let mut out = Vec::new();
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (i, set) in sorted {
        let e = &entries[*i];
        let mut paths = Vec::new();
        set.paths(&mut Vec::new(), &mut paths);
        let printed = e.printed();
        let fields: Vec<String> = paths.iter().map(|p| path_display(p)).collect();
        for field in &fields {
            out.push(FieldConflict {
                manager: e.manager.clone(),
                operation: e.operation.clone(),
                api_version: e.api_version.clone(),
                subresource: e.subresource.clone(),
                field: field.clone(),
                message: format!("conflict with {printed}"),
            });
        }
        groups.push((printed, fields));
    }
    let message = if let [c] = out.as_slice() {
        format!("Apply failed with 1 conflict: {}: {}", c.message, c.field)
    } else {
        let mut lines = Vec::new();
        for (printed, fields) in &groups {
            lines.push(format!("conflicts with {printed}:"));
            lines.extend(fields.iter().map(|f| format!("- {f}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            out.len(),
            lines.join("\n")
        )
    };
    PatchError::Conflict {
        message,
        conflicts: out,
    }
}

// ---------------------------------------------------------------------------------------------
// Server-side apply and update tracking
// ---------------------------------------------------------------------------------------------

/// How a server-side apply request is made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// The `fieldManager` of the request.
    pub manager: String,
    /// The `force` flag: take conflicting fields from their owners.
    pub force: bool,
    /// The RFC 3339 timestamp recorded as the entry's `time`.
    pub now: String,
    /// The API version of the endpoint (`apps/v1`); the applied object must have it.
    pub api_version: String,
    /// The subresource applied to (`status`), if any.
    pub subresource: Option<String>,
}

fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

/// Returns the object a server-side apply produces, with `metadata.managedFields` updated.
///
/// With no current object the result is the applied configuration (nulls dropped) plus its
/// managedFields entry. Otherwise the configuration is merged into the current object (associative
/// lists by key), fields the manager applied last time and no longer applies are removed unless
/// another manager owns them, and fields other managers own with a different value are a 409
/// unless `opts.force`, which takes them over. An object without managedFields first gets a
/// `before-first-apply` entry owning all its fields, as upstream does.
pub fn apply(
    current: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions,
    meta: &dyn ListMeta,
) -> Result<Value, PatchError> {
    if opts.manager.is_empty() {
        return Err(bad("fieldManager is required for apply requests"));
    }
    let Some(config_map) = applied.as_object() else {
        return Err(bad(format!(
            "error decoding YAML: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            telemesh_core::go::json_type(applied)
        )));
    };
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(bad("metadata.managedFields must be nil"));
    }
    let version = config_map
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if version != opts.api_version {
        return Err(bad(format!(
            "Incorrect version specified in apply patch. Specified patch version: {version}, expected: {}",
            opts.api_version
        )));
    }
    let kind = config_map
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let live_kind = current
        .and_then(|c| c.get("kind"))
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty());
    if kind.is_empty() || live_kind.is_some_and(|k| k != kind) {
        return Err(bad(format!(
            "invalid object type: {}",
            gvk_string(version, kind)
        )));
    }

    let sub = opts.subresource.as_deref().filter(|s| !s.is_empty());
    let mut walker = Walker::new(meta);
    let live = current.map_or_else(|| json!({}), without_managed_fields);
    let mut entries = current.map(decode_managed_fields).unwrap_or_default();
    if current.is_some() && entries.is_empty() {
        let cmp = walker.compare_values(&json!({}), &live);
        let set = cmp.modified.union(&cmp.added).difference(&strip_set());
        entries.push(ManagedEntry {
            manager: BEFORE_FIRST_APPLY.to_owned(),
            operation: UPDATE.to_owned(),
            api_version: opts.api_version.clone(),
            time: Some(opts.now.clone()),
            subresource: sub.map(str::to_owned),
            set,
        });
    }

    let config = without_managed_fields(applied);
    let new_set = walker.field_set(&config).map_err(|e| {
        let ns = config
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = config
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        bad(format!(
            "failed to create typed patch object ({ns}/{name}; {}): {e}",
            gvk_string(version, kind)
        ))
    })?;
    let mut merged = walker.merge(&live, &config);

    let me = match entries
        .iter()
        .position(|e| e.is(&opts.manager, APPLY, &opts.api_version, sub))
    {
        Some(i) => i,
        None => {
            entries.push(ManagedEntry {
                manager: opts.manager.clone(),
                operation: APPLY.to_owned(),
                api_version: opts.api_version.clone(),
                time: None,
                subresource: sub.map(str::to_owned),
                set: FieldSet::default(),
            });
            entries.len() - 1
        }
    };
    let last_set = std::mem::replace(&mut entries[me].set, new_set);
    entries[me].api_version = opts.api_version.clone();

    if !last_set.is_empty() {
        // Never prune the object's identity, whoever owns it.
        let mut owned = strip_set();
        for e in &entries {
            owned = owned.union(&e.set);
        }
        let remove = last_set
            .with_fields_as_members()
            .difference(&owned.with_fields_as_members());
        walker.remove_items(&mut merged, &remove);
    }

    let cmp = walker.compare_values(&live, &merged);
    let changed = cmp.modified.union(&cmp.added);
    let conflicts: Vec<(usize, FieldSet)> = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != me)
        .map(|(i, e)| (i, e.set.intersection(&changed)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    if !opts.force && !conflicts.is_empty() {
        return Err(conflict_error(&entries, &conflicts));
    }
    for (i, c) in &conflicts {
        entries[*i].set = entries[*i].set.difference(c);
    }
    for (i, e) in entries.iter_mut().enumerate() {
        if i != me {
            e.set = e.set.difference(&cmp.removed);
        }
    }
    entries[me].set = entries[me].set.difference(&strip_set());
    if merged != live || entries[me].time.is_none() {
        entries[me].time = Some(opts.now.clone());
    }
    set_managed_fields(&mut merged, entries);
    Ok(merged)
}

/// Returns `new` with managedFields updated for a non-apply write (operation `Update`) by `manager`.
///
/// The fields that changed from `old` to `new` (added or modified) become `manager`'s and leave
/// every other entry; removed fields leave every entry; entries left empty are dropped. The
/// manager's entry gets `operation_time` only when it took fields. Like upstream, managedFields
/// sent in `new` replace `old`'s, and `[{}]` resets them. An empty `manager` records nothing and
/// returns `new` as it is (the caller already wrote the managedFields, e.g. for apply).
pub fn record_update(
    old: &Value,
    new: &Value,
    manager: &str,
    operation_time: &str,
    api_version: &str,
    meta: &dyn ListMeta,
) -> Value {
    record_update_with_subresource(old, new, manager, None, operation_time, api_version, meta)
}

/// Returns `new` with managedFields updated for a non-apply write to a subresource (`status`):
/// as [`record_update`], with the entry's `subresource` set and the managedFields of `old`
/// always used (a subresource write cannot set them).
pub fn record_update_with_subresource(
    old: &Value,
    new: &Value,
    manager: &str,
    subresource: Option<&str>,
    operation_time: &str,
    api_version: &str,
    meta: &dyn ListMeta,
) -> Value {
    if manager.is_empty() {
        return new.clone();
    }
    let sub = subresource.filter(|s| !s.is_empty());
    let mut entries = match (sub, managed_fields_of(new)) {
        (None, Some(a)) if a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty) => {
            Vec::new()
        }
        (None, Some(a)) if !a.is_empty() => {
            let sent = decode_entries(a);
            if sent.is_empty() {
                decode_managed_fields(old)
            } else {
                sent
            }
        }
        _ => decode_managed_fields(old),
    };
    let old_live = without_managed_fields(old);
    let mut new_live = without_managed_fields(new);
    let mut walker = Walker::new(meta);
    let cmp = walker.compare_values(&old_live, &new_live);
    let changed = cmp.modified.union(&cmp.added);
    for e in &mut entries {
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }
    let taken = changed.difference(&strip_set());
    if !taken.is_empty() {
        match entries
            .iter()
            .position(|e| e.is(manager, UPDATE, api_version, sub))
        {
            Some(i) => {
                entries[i].set = entries[i].set.union(&taken);
                entries[i].time = Some(operation_time.to_owned());
            }
            None => entries.push(ManagedEntry {
                manager: manager.to_owned(),
                operation: UPDATE.to_owned(),
                api_version: api_version.to_owned(),
                time: Some(operation_time.to_owned()),
                subresource: sub.map(str::to_owned),
                set: taken,
            }),
        }
    }
    set_managed_fields(&mut new_live, entries);
    new_live
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Asserts two values are equal, key order included.
    fn same(actual: &Value, expected: &Value) {
        assert_eq!(
            serde_json::to_string_pretty(actual).unwrap(),
            serde_json::to_string_pretty(expected).unwrap()
        );
    }

    fn builtin(group: &str, kind: &str) -> BuiltinListMeta {
        BuiltinListMeta::for_kind(group, kind).unwrap()
    }

    /// The patch metadata of upstream's strategicpatch test type `MergeItem`.
    struct MergeItemMeta;

    impl ListMeta for MergeItemMeta {
        fn list_kind(&self, path: &[&str]) -> ListKind {
            match path.last() {
                Some(&"mergingList") => ListKind::MergeByKeys(vec!["name".to_owned()]),
                Some(&"mergingIntList") => ListKind::Set,
                _ => ListKind::Atomic,
            }
        }
    }

    fn smp(original: Value, patch: Value) -> Result<Value, PatchError> {
        strategic_merge_patch(&original, &patch, &MergeItemMeta)
    }

    fn opts(manager: &str, api_version: &str, now: &str) -> ApplyOptions {
        ApplyOptions {
            manager: manager.to_owned(),
            force: false,
            now: now.to_owned(),
            api_version: api_version.to_owned(),
            subresource: None,
        }
    }

    fn fields_of(obj: &Value, manager: &str) -> Value {
        managed_fields_of(obj)
            .unwrap()
            .iter()
            .find(|e| e["manager"] == manager)
            .map(|e| e["fieldsV1"].clone())
            .unwrap_or(Value::Null)
    }

    fn configmap(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": data})
    }

    // --- errors ---

    #[test]
    fn errors_map_to_http_status_and_reason() {
        let cases = [
            (PatchError::BadRequest("x".into()), 400, "BadRequest"),
            (PatchError::Invalid("x".into()), 422, "Invalid"),
            (
                PatchError::Conflict {
                    message: "x".into(),
                    conflicts: vec![],
                },
                409,
                "Conflict",
            ),
            (
                PatchError::strategic_merge_unsupported(),
                415,
                "UnsupportedMediaType",
            ),
        ];
        for (err, status, reason) in cases {
            assert_eq!(err.http_status(), status);
            assert_eq!(err.reason(), reason);
        }
        assert_eq!(
            PatchError::strategic_merge_unsupported().to_string(),
            STRATEGIC_MERGE_UNSUPPORTED
        );
    }

    // --- JSON merge patch and JSON patch ---

    #[test]
    fn merge_patch_follows_rfc7386_and_keeps_key_order() {
        let target = json!({"a": "b", "c": {"d": "e", "f": "g"}, "list": [1, 2]});
        let patch = json!({"a": "z", "c": {"f": null}, "list": [3], "new": 1});
        same(
            &merge_patch(&target, &patch),
            &json!({"a": "z", "c": {"d": "e"}, "list": [3], "new": 1}),
        );
    }

    #[test]
    fn json_patch_applies_operations_in_order() {
        let target = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1}});
        let patch = json!([
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "copy", "from": "/spec/replicas", "path": "/spec/copy"},
            {"op": "remove", "path": "/metadata/labels/a"},
            {"op": "test", "path": "/spec/replicas", "value": 3}
        ]);
        let out = json_patch(&target, &patch).unwrap();
        same(
            &out,
            &json!({"metadata": {"labels": {"b": "2"}}, "spec": {"replicas": 3, "copy": 3}}),
        );
    }

    #[test]
    fn json_patch_failed_test_is_invalid() {
        let patch = json!([{"op": "test", "path": "/spec/replicas", "value": 5}]);
        let err = json_patch(&json!({"spec": {"replicas": 1}}), &patch).unwrap_err();
        assert_eq!(err.http_status(), 422);
        assert_eq!(err.reason(), "Invalid");
    }

    #[test]
    fn json_patch_on_a_missing_path_is_invalid() {
        let patch = json!([{"op": "remove", "path": "/spec/nope"}]);
        assert_eq!(
            json_patch(&json!({"spec": {}}), &patch)
                .unwrap_err()
                .http_status(),
            422
        );
        let unknown_op = json!([{"op": "frobnicate", "path": "/spec"}]);
        assert_eq!(
            json_patch(&json!({"spec": {}}), &unknown_op)
                .unwrap_err()
                .http_status(),
            422
        );
    }

    #[test]
    fn json_patch_that_is_not_an_array_is_bad_request() {
        let err =
            json_patch(&json!({}), &json!({"op": "add", "path": "/a", "value": 1})).unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert_eq!(
            json_patch(&json!({}), &json!(["add"]))
                .unwrap_err()
                .http_status(),
            400
        );
    }

    // --- strategic merge patch: maps ---

    #[test]
    fn smp_patch_that_is_not_an_object_is_bad_request() {
        let err = strategic_merge_patch(&json!({}), &json!([1]), &MergeItemMeta).unwrap_err();
        assert_eq!(err.http_status(), 400);
    }

    #[test]
    fn smp_null_deletes_a_key() {
        let out = smp(
            json!({"simpleMap": {"key1": 1, "key2": 1}, "name": "a"}),
            json!({"simpleMap": {"key2": null}}),
        );
        same(
            &out.unwrap(),
            &json!({"simpleMap": {"key1": 1}, "name": "a"}),
        );
    }

    #[test]
    fn smp_patch_replace_in_a_map_replaces_the_map() {
        // Upstream: "add key and delete all keys from map".
        let out = smp(
            json!({"name": 1, "value": 1}),
            json!({"other": "a", "$patch": "replace"}),
        );
        same(&out.unwrap(), &json!({"other": "a"}));
    }

    #[test]
    fn smp_patch_delete_in_a_map_leaves_it_empty() {
        // Upstream: "delete map from nested map".
        let out = smp(
            json!({"simpleMap": {"key1": 1, "key2": 1}}),
            json!({"simpleMap": {"$patch": "delete"}}),
        );
        same(&out.unwrap(), &json!({"simpleMap": {}}));
    }

    #[test]
    fn smp_patch_merge_in_a_map_is_a_plain_merge() {
        let out = smp(
            json!({"simpleMap": {"key1": 1}}),
            json!({"simpleMap": {"$patch": "merge", "key2": 2}}),
        );
        same(&out.unwrap(), &json!({"simpleMap": {"key1": 1, "key2": 2}}));
    }

    #[test]
    fn smp_unknown_patch_directive_is_bad_request() {
        let err = smp(
            json!({"simpleMap": {}}),
            json!({"simpleMap": {"$patch": "explode"}}),
        )
        .unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert!(
            err.to_string()
                .starts_with("unknown patch type: \"explode\""),
            "{err}"
        );
    }

    #[test]
    fn smp_type_change_replaces_the_value() {
        let out = smp(
            json!({"value": {"a": 1}, "other": [1]}),
            json!({"value": "x", "other": {"b": null, "c": 1}}),
        );
        same(&out.unwrap(), &json!({"value": "x", "other": {"c": 1}}));
    }

    #[test]
    fn smp_retain_keys_clears_keys_not_listed() {
        let meta = builtin("apps", "Deployment");
        let target = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let out = strategic_merge_patch(&target, &patch, &meta).unwrap();
        same(&out, &json!({"spec": {"strategy": {"type": "Recreate"}}}));
    }

    #[test]
    fn smp_retain_keys_rejects_patch_keys_not_listed() {
        let patch =
            json!({"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": {}}});
        let err = smp(json!({"strategy": {}}), patch).unwrap_err();
        assert_eq!(
            err,
            PatchError::BadRequest("invalid patch format of retainKeys".into())
        );
    }

    // --- strategic merge patch: lists ---

    #[test]
    fn env_entries_merge_by_name() {
        let pod = json!({"spec": {"containers": [{"name": "web", "image": "a",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}});
        let patch = json!({"spec": {"containers": [{"name": "web", "env": [{"name": "B", "value": "3"}]}]}});
        let out = strategic_merge_patch(&pod, &patch, &builtin("", "Pod")).unwrap();
        same(
            &out,
            &json!({"spec": {"containers": [{"name": "web", "image": "a",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]}]}}),
        );
    }

    #[test]
    fn container_ports_merge_by_container_port() {
        let pod = json!({"spec": {"containers": [{"name": "web",
            "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}]}]}});
        let patch = json!({"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 80, "name": "http"}]}]}});
        let out = strategic_merge_patch(&pod, &patch, &builtin("", "Pod")).unwrap();
        same(
            &out["spec"]["containers"][0]["ports"],
            &json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 443}]),
        );
    }

    #[test]
    fn service_ports_merge_by_port() {
        let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
        let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}});
        let out = strategic_merge_patch(&svc, &patch, &builtin("", "Service")).unwrap();
        same(
            &out["spec"]["ports"],
            &json!([{"port": 80, "targetPort": 9090}, {"port": 443}]),
        );
    }

    #[test]
    fn cronjob_template_containers_merge_by_name() {
        let cj = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "job", "image": "v1", "command": ["run"]}]}}}}}});
        let patch = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "job", "image": "v2"}]}}}}}});
        let out = strategic_merge_patch(&cj, &patch, &builtin("batch", "CronJob")).unwrap();
        same(
            &out["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"],
            &json!([{"name": "job", "image": "v2", "command": ["run"]}]),
        );
    }

    #[test]
    fn atomic_lists_are_replaced() {
        let pod = json!({"spec": {"tolerations": [{"key": "a"}], "containers": [{"name": "web", "args": ["x", "y"]}]}});
        let patch = json!({"spec": {"tolerations": [{"key": "b", "value": null}],
            "containers": [{"name": "web", "args": ["z"]}]}});
        let out = strategic_merge_patch(&pod, &patch, &builtin("", "Pod")).unwrap();
        same(
            &out,
            &json!({"spec": {"tolerations": [{"key": "b"}], "containers": [{"name": "web", "args": ["z"]}]}}),
        );
    }

    #[test]
    fn smp_merges_scalar_sets_without_duplicates() {
        // Upstream: "unique scalars when merging lists".
        let out = smp(
            json!({"mergingIntList": [1, 2]}),
            json!({"mergingIntList": [2, 3]}),
        );
        same(&out.unwrap(), &json!({"mergingIntList": [1, 2, 3]}));
    }

    #[test]
    fn smp_new_list_items_go_before_server_only_items() {
        // Without $setElementOrder upstream's mergeSortedSlice places items the server does not
        // know before the server-only items: finalizers [a, b] + [c, a] is [c, a, b].
        let meta = builtin("", "Pod");
        let target = json!({"metadata": {"finalizers": ["a", "b"], "ownerReferences": [{"uid": "1", "name": "x"}]}});
        let patch = json!({"metadata": {"finalizers": ["c", "a"], "ownerReferences": [{"uid": "2", "name": "y"}]}});
        let out = strategic_merge_patch(&target, &patch, &meta).unwrap();
        same(
            &out,
            &json!({"metadata": {"finalizers": ["c", "a", "b"],
                "ownerReferences": [{"uid": "2", "name": "y"}, {"uid": "1", "name": "x"}]}}),
        );
    }

    #[test]
    fn smp_preserves_the_patch_order_of_shared_items() {
        // Upstream: "preserve the order from the patch in a merging list" (1 and 2).
        let original =
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]});
        let out = smp(
            original.clone(),
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}, {"name": 2, "other": "x"}]}),
        );
        same(
            &out.unwrap(),
            &json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"},
                {"name": 2, "value": "b", "other": "x"}]}),
        );
        let out = smp(
            original,
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}]}),
        );
        same(
            &out.unwrap(),
            &json!({"mergingList": [{"name": 2, "value": "b"}, {"name": 3, "value": "c"}, {"name": 1, "value": "a"}]}),
        );
        let out = smp(
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [3, 1]}),
        );
        same(&out.unwrap(), &json!({"mergingIntList": [2, 3, 1]}));
    }

    #[test]
    fn smp_patch_delete_removes_one_matching_element_per_directive() {
        // Upstream: "de-duplicate entries in a merging list" and "delete all duplicate entries".
        let original = json!({"mergingList": [{"name": 1}, {"name": 1}, {"name": 2, "value": "a"}, {"name": 3}, {"name": 3}]});
        let out = smp(
            original.clone(),
            json!({"mergingList": [{"name": 1, "$patch": "delete"}, {"name": 3, "$patch": "delete"}]}),
        );
        same(
            &out.unwrap(),
            &json!({"mergingList": [{"name": 1}, {"name": 2, "value": "a"}, {"name": 3}]}),
        );
        let twice = json!({"mergingList": [
            {"name": 1, "$patch": "delete"}, {"name": 1, "$patch": "delete"},
            {"name": 3, "$patch": "delete"}, {"name": 3, "$patch": "delete"}]});
        same(
            &smp(original, twice).unwrap(),
            &json!({"mergingList": [{"name": 2, "value": "a"}]}),
        );
    }

    #[test]
    fn smp_patch_replace_element_replaces_the_list() {
        // Upstream: "delete all items from merging list".
        let original = json!({"mergingList": [{"name": 1}, {"name": 2}]});
        same(
            &smp(
                original.clone(),
                json!({"mergingList": [{"$patch": "replace"}]}),
            )
            .unwrap(),
            &json!({"mergingList": []}),
        );
        let out = smp(
            original,
            json!({"mergingList": [{"$patch": "replace"}, {"name": 3, "value": null}]}),
        );
        same(&out.unwrap(), &json!({"mergingList": [{"name": 3}]}));
    }

    #[test]
    fn smp_patch_merge_in_a_list_is_bad_request() {
        let err = smp(
            json!({"mergingList": []}),
            json!({"mergingList": [{"$patch": "merge"}]}),
        )
        .unwrap_err();
        assert_eq!(
            err,
            PatchError::BadRequest("merging lists cannot yet be specified in the patch".into())
        );
    }

    #[test]
    fn smp_missing_merge_key_is_bad_request() {
        // Upstream: "missing merge key should error out".
        let err = smp(
            json!({"mergingList": [{"name": 1, "value": "a"}]}),
            json!({"mergingList": [{"value": "b"}]}),
        )
        .unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert!(
            err.to_string()
                .contains("does not contain declared merge key: name"),
            "{err}"
        );
    }

    #[test]
    fn smp_lists_of_lists_are_invalid() {
        let err = smp(
            json!({"mergingIntList": [[1]]}),
            json!({"mergingIntList": [[2]]}),
        )
        .unwrap_err();
        assert_eq!(
            err,
            PatchError::Invalid("lists of lists are not supported".into())
        );
    }

    #[test]
    fn smp_delete_from_primitive_list_removes_values() {
        // Upstream: "delete items in lists of scalars" and "add and delete items in lists of scalars".
        let out = smp(
            json!({"mergingIntList": [1, 2, 3, 4]}),
            json!({"$setElementOrder/mergingIntList": [1, 2], "$deleteFromPrimitiveList/mergingIntList": [3]}),
        );
        same(&out.unwrap(), &json!({"mergingIntList": [1, 2, 4]}));
        let out = smp(
            json!({"mergingIntList": [1, 2, 3, 4]}),
            json!({"$setElementOrder/mergingIntList": [1, 2, 4], "$deleteFromPrimitiveList/mergingIntList": [3],
                "mergingIntList": [4]}),
        );
        same(&out.unwrap(), &json!({"mergingIntList": [1, 2, 4]}));
        let meta = builtin("", "Pod");
        let target = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        same(
            &strategic_merge_patch(&target, &patch, &meta).unwrap(),
            &json!({"metadata": {"finalizers": ["b"]}}),
        );
    }

    #[test]
    fn smp_set_element_order_orders_the_merged_list() {
        // Upstream: "merge lists of maps" (three-way result).
        let current = json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 2, "other": "b"}]});
        let patch = json!({
            "$setElementOrder/mergingList": [{"name": 4}, {"name": 1}, {"name": 2}, {"name": 3}],
            "mergingList": [{"name": 4, "value": 4}, {"name": 3, "value": 3}]
        });
        same(
            &smp(current, patch).unwrap(),
            &json!({"mergingList": [{"name": 4, "value": 4}, {"name": 1, "other": "a"},
                {"name": 2, "value": 2, "other": "b"}, {"name": 3, "value": 3}]}),
        );
        // Upstream: "add field to map in merging list with conflict" (three-way result).
        let current = json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 3, "value": 2, "other": "b"}]});
        let patch = json!({
            "$setElementOrder/mergingList": [{"name": 1}, {"name": 2}],
            "mergingList": [{"name": 1, "value": 1}, {"name": 2, "value": 2}]
        });
        same(
            &smp(current, patch).unwrap(),
            &json!({"mergingList": [{"name": 1, "other": "a", "value": 1}, {"name": 2, "value": 2},
                {"name": 3, "value": 2, "other": "b"}]}),
        );
    }

    #[test]
    fn smp_set_element_order_with_a_deletion_keeps_server_only_items_in_place() {
        // Upstream: "add map and delete map from merging list" (three-way and two-way results).
        let patch = json!({
            "$setElementOrder/mergingList": [{"name": 2}, {"name": 3}],
            "mergingList": [{"name": 3}, {"name": 1, "$patch": "delete"}]
        });
        let current = json!({"mergingList": [{"name": 1}, {"name": 2, "other": "b"}, {"name": 4, "other": "c"}]});
        same(
            &smp(current, patch.clone()).unwrap(),
            &json!({"mergingList": [{"name": 2, "other": "b"}, {"name": 4, "other": "c"}, {"name": 3}]}),
        );
        let original = json!({"mergingList": [{"name": 1}, {"name": 2}]});
        same(
            &smp(original, patch).unwrap(),
            &json!({"mergingList": [{"name": 2}, {"name": 3}]}),
        );
    }

    #[test]
    fn smp_set_element_order_sorts_a_list_the_patch_does_not_change() {
        // Upstream: "$setElementOrder contains item that is not present in the int list to be merged".
        let out = smp(
            json!({"mergingIntList": [1, 3]}),
            json!({"$setElementOrder/mergingIntList": [3, 2, 1]}),
        );
        same(&out.unwrap(), &json!({"mergingIntList": [3, 1]}));
    }

    #[test]
    fn smp_set_element_order_that_contradicts_the_patch_is_bad_request() {
        // Upstream: "should check if order in $setElementOrder and patch list match".
        let patch = json!({
            "$setElementOrder/mergingList": [{"name": 1}, {"name": 2}, {"name": 3}],
            "mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]
        });
        let err = smp(
            json!({"mergingList": [{"name": 1}, {"name": 3}, {"name": 2}]}),
            patch,
        )
        .unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert!(err.to_string().contains("doesn't match"), "{err}");
    }

    #[test]
    fn smp_directives_and_nulls_never_reach_the_output() {
        let pod = json!({"spec": {"containers": [{"name": "web", "image": "nginx"}]}});
        let patch = json!({
            "metadata": {"annotations": {"gone": null, "kept": "1"}},
            "spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "web"}],
                "containers": [{
                    "name": "sidecar", "image": "busybox", "resources": null,
                    "$setElementOrder/env": [{"name": "A"}],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "$patch": "delete"}]
                }]
            }
        });
        let out = strategic_merge_patch(&pod, &patch, &builtin("", "Pod")).unwrap();
        same(
            &out,
            &json!({
                "spec": {"containers": [
                    {"name": "sidecar", "image": "busybox", "env": [{"name": "A", "value": "1"}]},
                    {"name": "web", "image": "nginx"}
                ]},
                "metadata": {"annotations": {"kept": "1"}}
            }),
        );
    }

    // --- list metadata ---

    #[test]
    fn builtin_list_meta_knows_pod_template_lists() {
        let d = builtin("apps", "Deployment");
        let c = ["spec", "template", "spec", "containers"];
        let key = |k: &[&str]| ListKind::MergeByKeys(k.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(d.list_kind(&c), key(&["name"]));
        assert_eq!(d.list_kind(&[&c[..], &["env"]].concat()), key(&["name"]));
        assert_eq!(
            d.list_kind(&[&c[..], &["volumeMounts"]].concat()),
            key(&["mountPath"])
        );
        assert_eq!(
            d.list_kind(&[&c[..], &["ports"]].concat()),
            key(&["containerPort"])
        );
        assert_eq!(
            d.apply_list_kind(&[&c[..], &["ports"]].concat()),
            key(&["containerPort", "protocol"])
        );
        assert_eq!(
            d.key_default(&[&c[..], &["ports"]].concat(), "protocol"),
            Some(json!("TCP"))
        );
        assert_eq!(d.list_kind(&[&c[..], &["args"]].concat()), ListKind::Atomic);
        assert_eq!(
            d.list_kind(&["spec", "template", "spec", "volumes"]),
            key(&["name"])
        );
        assert_eq!(
            d.apply_list_kind(&["spec", "template", "spec", "topologySpreadConstraints"]),
            key(&["topologyKey", "whenUnsatisfiable"])
        );
        assert_eq!(
            d.list_kind(&["spec", "template", "metadata", "finalizers"]),
            ListKind::Set
        );
        assert_eq!(d.list_kind(&["metadata", "finalizers"]), ListKind::Set);
        assert_eq!(d.list_kind(&["metadata", "ownerReferences"]), key(&["uid"]));
        assert_eq!(d.list_kind(&["status", "conditions"]), key(&["type"]));
        assert!(d.map_is_atomic(&["spec", "selector"]));
        assert!(d.map_is_atomic(&["spec", "template", "spec", "nodeSelector"]));
        assert!(!d.map_is_atomic(&["metadata", "labels"]));

        let cj = builtin("batch", "CronJob");
        assert_eq!(
            cj.list_kind(&[
                "spec",
                "jobTemplate",
                "spec",
                "template",
                "spec",
                "initContainers"
            ]),
            key(&["name"])
        );
        let job = builtin("batch", "Job");
        assert_eq!(job.list_kind(&["status", "conditions"]), key(&["type"]));
        assert_eq!(
            job.apply_list_kind(&["status", "conditions"]),
            ListKind::Atomic
        );
        let node = builtin("", "Node");
        assert_eq!(node.list_kind(&["status", "addresses"]), key(&["type"]));
        assert_eq!(
            builtin("", "Service").apply_list_kind(&["spec", "ports"]),
            key(&["port", "protocol"])
        );
        assert_eq!(
            builtin("", "ConfigMap").list_kind(&["metadata", "finalizers"]),
            ListKind::Set
        );
        assert!(BuiltinListMeta::for_kind("example.com", "Widget").is_none());
        assert!(BuiltinListMeta::for_kind("apps", "Widget").is_none());
    }

    fn widget_schema() -> Value {
        json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": {"type": "object", "properties": {
                    "port": {"type": "integer"},
                    "protocol": {"type": "string", "default": "TCP"},
                    "rules": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
            "groups": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "members": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object"}}}}}
        }}}}})
    }

    #[test]
    fn schema_list_meta_reads_list_types_from_a_crd_schema() {
        let m = SchemaListMeta::from_openapi(&widget_schema());
        let key = |k: &[&str]| ListKind::MergeByKeys(k.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(m.list_kind(&["spec", "ports"]), key(&["port", "protocol"]));
        assert_eq!(m.list_kind(&["spec", "ports", "rules"]), ListKind::Set);
        assert_eq!(m.list_kind(&["spec", "tags"]), ListKind::Set);
        assert_eq!(m.list_kind(&["spec", "args"]), ListKind::Atomic);
        assert_eq!(m.list_kind(&["spec", "unknown"]), ListKind::Atomic);
        assert_eq!(
            m.list_kind(&["spec", "groups", "admins", "members"]),
            key(&["name"])
        );
        assert_eq!(m.list_kind(&["metadata", "finalizers"]), ListKind::Set);
        assert_eq!(m.list_kind(&["metadata", "ownerReferences"]), key(&["uid"]));
        assert!(m.map_is_atomic(&["spec", "selector"]));
        assert!(!m.map_is_atomic(&["spec", "groups"]));
        assert_eq!(
            m.key_default(&["spec", "ports"], "protocol"),
            Some(json!("TCP"))
        );
        assert_eq!(m.key_default(&["spec", "ports"], "port"), None);

        let inner = SchemaListMeta::from_openapi(&widget_schema()["openAPIV3Schema"]);
        assert_eq!(inner.list_kind(&["spec", "tags"]), ListKind::Set);

        let bare = SchemaListMeta::from_openapi(&Value::Null);
        assert_eq!(bare.list_kind(&["metadata", "finalizers"]), ListKind::Set);
        assert_eq!(bare.list_kind(&["spec", "items"]), ListKind::Atomic);
        assert!(!bare.map_is_atomic(&["spec"]));
    }

    // --- field sets ---

    #[test]
    fn fields_v1_round_trips_in_upstream_order() {
        let v = json!({
            "f:metadata": {"f:finalizers": {".": {}, "v:\"a\"": {}}, "f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {
                "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:ports": {
                    "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}
        });
        same(&FieldSet::from_fields_v1(&v).to_fields_v1(), &v);
        // Keys come out sorted whatever order they were read in.
        let unsorted = json!({"f:spec": {"f:b": {}, "f:a": {}}});
        same(
            &FieldSet::from_fields_v1(&unsorted).to_fields_v1(),
            &json!({"f:spec": {"f:a": {}, "f:b": {}}}),
        );
    }

    // --- server-side apply ---

    #[test]
    fn apply_creates_the_object_with_managed_fields() {
        let applied = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}, "finalizers": ["example.com/f"]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                    {"name": "web", "image": "nginx", "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}]}
                ]}}}
        });
        let out = apply(
            None,
            &applied,
            &opts("kubectl", "apps/v1", "2024-01-01T00:00:00Z"),
            &builtin("apps", "Deployment"),
        )
        .unwrap();
        let mut expected = applied.clone();
        expected["metadata"]["managedFields"] = json!([{
            "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": "2024-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:finalizers": {"v:\"example.com/f\"": {}}, "f:labels": {"f:app": {}}},
                "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                        ".": {},
                        "f:env": {"k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}}},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }}
            }
        }]);
        same(&out, &expected);
    }

    #[test]
    fn apply_removes_fields_the_manager_dropped() {
        let meta = builtin("", "ConfigMap");
        let mut first = configmap(json!({"x": "1", "y": "2"}));
        first["metadata"]["labels"] = json!({"a": "1", "b": "2"});
        let live = apply(
            None,
            &first,
            &opts("mgr", "v1", "2024-01-01T00:00:01Z"),
            &meta,
        )
        .unwrap();
        let mut second = configmap(json!({"x": "1"}));
        second["metadata"]["labels"] = json!({"a": "1"});
        let out = apply(
            Some(&live),
            &second,
            &opts("mgr", "v1", "2024-01-01T00:00:02Z"),
            &meta,
        )
        .unwrap();
        same(
            &out,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "labels": {"a": "1"}, "managedFields": [{
                    "manager": "mgr", "operation": "Apply", "apiVersion": "v1", "time": "2024-01-01T00:00:02Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:a": {}}}}}]},
                "data": {"x": "1"}}),
        );
        // Dropping every label removes the labels map the manager created.
        let third = configmap(json!({"x": "1"}));
        let out = apply(
            Some(&out),
            &third,
            &opts("mgr", "v1", "2024-01-01T00:00:03Z"),
            &meta,
        )
        .unwrap();
        same(
            &out["metadata"],
            &json!({"name": "cm", "managedFields": [{
            "manager": "mgr", "operation": "Apply", "apiVersion": "v1", "time": "2024-01-01T00:00:03Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}}}]}),
        );
    }

    #[test]
    fn apply_keeps_dropped_fields_another_manager_owns() {
        let meta = builtin("", "ConfigMap");
        let live = apply(
            None,
            &configmap(json!({"x": "1", "y": "2"})),
            &opts("a", "v1", "2024-01-01T00:00:01Z"),
            &meta,
        )
        .unwrap();
        let live = apply(
            Some(&live),
            &configmap(json!({"y": "2"})),
            &opts("b", "v1", "2024-01-01T00:00:02Z"),
            &meta,
        )
        .unwrap();
        let out = apply(
            Some(&live),
            &configmap(json!({"x": "1"})),
            &opts("a", "v1", "2024-01-01T00:00:03Z"),
            &meta,
        )
        .unwrap();
        same(&out["data"], &json!({"x": "1", "y": "2"}));
        same(&fields_of(&out, "a"), &json!({"f:data": {"f:x": {}}}));
        same(&fields_of(&out, "b"), &json!({"f:data": {"f:y": {}}}));
        // a's last apply changed nothing in the object (y stays, b owns it), so a keeps its
        // first time, as upstream does for a no-op apply: entries sort by time.
        let managers: Vec<&str> = managed_fields_of(&out)
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["a", "b"]);
        assert_eq!(
            out["metadata"]["managedFields"][0]["time"],
            "2024-01-01T00:00:01Z"
        );
    }

    #[test]
    fn apply_removes_list_items_and_set_values_the_manager_dropped() {
        let meta = builtin("", "Pod");
        let pod = |containers: Value, finalizers: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": finalizers},
                "spec": {"containers": containers}})
        };
        let first = pod(
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]),
            json!(["f1", "f2"]),
        );
        let live = apply(None, &first, &opts("mgr", "v1", "t1"), &meta).unwrap();
        let second = pod(json!([{"name": "a", "image": "x"}]), json!(["f1"]));
        let out = apply(Some(&live), &second, &opts("mgr", "v1", "t2"), &meta).unwrap();
        same(
            &out["spec"],
            &json!({"containers": [{"name": "a", "image": "x"}]}),
        );
        same(&out["metadata"]["finalizers"], &json!(["f1"]));
    }

    fn deployment_owned_by_csa(replicas: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "managedFields": [{
                "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "apps/v1",
                "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:replicas": {}}}
            }]},
            "spec": {"replicas": replicas}
        })
    }

    fn deployment_config(replicas: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": replicas}})
    }

    #[test]
    fn apply_conflicts_without_force() {
        let live = deployment_owned_by_csa(3);
        let err = apply(
            Some(&live),
            &deployment_config(5),
            &opts("kubectl", "apps/v1", "2024-01-02T00:00:00Z"),
            &builtin("apps", "Deployment"),
        )
        .unwrap_err();
        assert_eq!(err.http_status(), 409);
        assert_eq!(err.reason(), "Conflict");
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
        );
        same(
            &err.details().unwrap(),
            &json!({"causes": [{"reason": "FieldManagerConflict",
                "message": "conflict with \"kubectl-client-side-apply\" using apps/v1", "field": ".spec.replicas"}]}),
        );
    }

    #[test]
    fn apply_with_force_takes_ownership() {
        let live = deployment_owned_by_csa(3);
        let mut o = opts("kubectl", "apps/v1", "2024-01-02T00:00:00Z");
        o.force = true;
        let out = apply(
            Some(&live),
            &deployment_config(5),
            &o,
            &builtin("apps", "Deployment"),
        )
        .unwrap();
        assert_eq!(out["spec"]["replicas"], 5);
        same(
            &out["metadata"]["managedFields"],
            &json!([
                {"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": "2024-01-02T00:00:00Z",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "apps/v1",
                    "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}
            ]),
        );
    }

    #[test]
    fn apply_with_the_same_value_shares_ownership() {
        let live = deployment_owned_by_csa(3);
        let out = apply(
            Some(&live),
            &deployment_config(3),
            &opts("kubectl", "apps/v1", "2024-01-02T00:00:00Z"),
            &builtin("apps", "Deployment"),
        )
        .unwrap();
        same(
            &fields_of(&out, "kubectl"),
            &json!({"f:spec": {"f:replicas": {}}}),
        );
        same(
            &fields_of(&out, "kubectl-client-side-apply"),
            &json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:replicas": {}}}),
        );
        // The shared field stays when one owner stops applying it.
        let dropped = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"paused": true}});
        let out = apply(
            Some(&out),
            &dropped,
            &opts("kubectl", "apps/v1", "2024-01-03T00:00:00Z"),
            &builtin("apps", "Deployment"),
        )
        .unwrap();
        same(&out["spec"], &json!({"replicas": 3, "paused": true}));
    }

    #[test]
    fn apply_reports_every_conflict_grouped_by_manager() {
        let live = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "managedFields": [
                {"manager": "b", "operation": "Apply", "apiVersion": "apps/v1", "time": "2024-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}, "f:minReadySeconds": {}}}},
                {"manager": "a", "operation": "Update", "apiVersion": "apps/v1", "time": "2024-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
            ]},
            "spec": {"replicas": 1, "paused": false, "minReadySeconds": 0}
        });
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "paused": true, "minReadySeconds": 5}});
        let err = apply(
            Some(&live),
            &config,
            &opts("c", "apps/v1", "t"),
            &builtin("apps", "Deployment"),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\" using apps/v1:\n- .spec.replicas\nconflicts with \"b\":\n- .spec.minReadySeconds\n- .spec.paused"
        );
        let PatchError::Conflict { conflicts, .. } = err else {
            panic!("not a conflict")
        };
        assert_eq!(conflicts.len(), 3);
        assert_eq!(conflicts[1].message, "conflict with \"b\"");
        assert_eq!(conflicts[1].field, ".spec.minReadySeconds");
    }

    #[test]
    fn apply_conflict_paths_name_list_items_by_key() {
        let meta = builtin("apps", "Deployment");
        let deploy = |image: &str| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}})
        };
        let live = record_update(
            &json!({}),
            &deploy("v1"),
            "kubectl-create",
            "t1",
            "apps/v1",
            &meta,
        );
        let err = apply(
            Some(&live),
            &deploy("v2"),
            &opts("ci", "apps/v1", "t2"),
            &meta,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using apps/v1: .spec.template.spec.containers[name=\"web\"].image"
        );
    }

    #[test]
    fn apply_merges_associative_lists_by_key() {
        let meta = builtin("", "Pod");
        let pod = |containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
        let live = apply(
            None,
            &pod(json!([{"name": "a", "image": "a1"}])),
            &opts("x", "v1", "t1"),
            &meta,
        )
        .unwrap();
        let live = apply(
            Some(&live),
            &pod(json!([{"name": "b", "image": "b1"}])),
            &opts("y", "v1", "t2"),
            &meta,
        )
        .unwrap();
        same(
            &live["spec"]["containers"],
            &json!([{"name": "a", "image": "a1"}, {"name": "b", "image": "b1"}]),
        );
        let out = apply(
            Some(&live),
            &pod(json!([{"name": "a", "image": "a2"}])),
            &opts("x", "v1", "t3"),
            &meta,
        )
        .unwrap();
        same(
            &out["spec"]["containers"],
            &json!([{"name": "a", "image": "a2"}, {"name": "b", "image": "b1"}]),
        );
        same(
            &fields_of(&out, "y"),
            &json!({"f:spec": {"f:containers": {"k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}}}}),
        );
        // The configuration's order wins for the items it names; others keep their place.
        let both = pod(json!([{"name": "b", "image": "b1"}, {"name": "a", "image": "a2"}]));
        let out = apply(Some(&out), &both, &opts("x", "v1", "t4"), &meta).unwrap();
        same(
            &out["spec"]["containers"],
            &json!([{"name": "b", "image": "b1"}, {"name": "a", "image": "a2"}]),
        );
    }

    #[test]
    fn apply_that_changes_nothing_keeps_the_object_as_it_was() {
        let meta = builtin("", "ConfigMap");
        let config = configmap(json!({"x": "1"}));
        let live = apply(
            None,
            &config,
            &opts("mgr", "v1", "2024-01-01T00:00:01Z"),
            &meta,
        )
        .unwrap();
        let again = apply(
            Some(&live),
            &config,
            &opts("mgr", "v1", "2024-01-01T00:00:09Z"),
            &meta,
        )
        .unwrap();
        same(&again, &live);
    }

    #[test]
    fn apply_to_an_object_without_managed_fields_starts_with_before_first_apply() {
        let meta = builtin("", "ConfigMap");
        let live = configmap(json!({"x": "1", "y": "1"}));
        let err = apply(
            Some(&live),
            &configmap(json!({"x": "2"})),
            &opts("mgr", "v1", "t"),
            &meta,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.x"
        );
        let out = apply(
            Some(&live),
            &configmap(json!({"x": "1"})),
            &opts("mgr", "v1", "t"),
            &meta,
        )
        .unwrap();
        same(&fields_of(&out, "mgr"), &json!({"f:data": {"f:x": {}}}));
        same(
            &fields_of(&out, "before-first-apply"),
            &json!({"f:data": {".": {}, "f:x": {}, "f:y": {}}}),
        );
    }

    #[test]
    fn apply_to_a_subresource_records_it() {
        let meta = builtin("apps", "Deployment");
        let live = apply(
            None,
            &deployment_config(1),
            &opts("kubectl", "apps/v1", "t1"),
            &meta,
        )
        .unwrap();
        let mut o = opts("controller", "apps/v1", "t2");
        o.subresource = Some("status".to_owned());
        let status = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        let out = apply(Some(&live), &status, &o, &meta).unwrap();
        same(
            &out["metadata"]["managedFields"][1],
            &json!({"manager": "controller", "operation": "Apply", "apiVersion": "apps/v1", "time": "t2",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Available\"}": {".": {}, "f:status": {}, "f:type": {}}}}},
                "subresource": "status"}),
        );
    }

    #[test]
    fn apply_rejects_malformed_configurations() {
        let meta = builtin("apps", "Deployment");
        let o = opts("kubectl", "apps/v1", "t");
        let mut with_mf = deployment_config(1);
        with_mf["metadata"]["managedFields"] = json!([]);
        assert_eq!(
            apply(None, &with_mf, &o, &meta).unwrap_err(),
            PatchError::BadRequest("metadata.managedFields must be nil".into())
        );
        let mut old_version = deployment_config(1);
        old_version["apiVersion"] = json!("apps/v1beta1");
        assert_eq!(
            apply(None, &old_version, &o, &meta)
                .unwrap_err()
                .to_string(),
            "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
        );
        let mut no_kind = deployment_config(1);
        no_kind.as_object_mut().unwrap().shift_remove("kind");
        assert_eq!(
            apply(None, &no_kind, &o, &meta).unwrap_err().to_string(),
            "invalid object type: apps/v1, Kind="
        );
        let live =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let mut wrong_kind = deployment_config(1);
        wrong_kind["kind"] = json!("StatefulSet");
        assert_eq!(
            apply(Some(&live), &wrong_kind, &o, &meta)
                .unwrap_err()
                .http_status(),
            400
        );
        assert_eq!(
            apply(None, &json!([1]), &o, &meta)
                .unwrap_err()
                .http_status(),
            400
        );
        assert_eq!(
            apply(
                None,
                &deployment_config(1),
                &opts("", "apps/v1", "t"),
                &meta
            )
            .unwrap_err()
            .to_string(),
            "fieldManager is required for apply requests"
        );

        let pod_meta = builtin("", "Pod");
        let po = opts("kubectl", "v1", "t");
        let pod = |containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
        let err = apply(None, &pod(json!([{"image": "x"}])), &po, &pod_meta).unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert!(err.to_string().contains(".spec.containers: element 0: associative list with keys has an element that omits key field \"name\""), "{err}");
        let err = apply(
            None,
            &pod(json!([{"name": "a"}, {"name": "a"}])),
            &po,
            &pod_meta,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .ends_with(".spec.containers: duplicate entries for key [name=\"a\"]"),
            "{err}"
        );
    }

    #[test]
    fn apply_on_a_custom_resource_uses_the_schema() {
        let meta = SchemaListMeta::from_openapi(&widget_schema());
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"ports": [{"port": 80}], "tags": ["a"], "selector": {"k": "v"}}});
        let out = apply(None, &widget, &opts("mgr", "example.com/v1", "t"), &meta).unwrap();
        same(
            &fields_of(&out, "mgr"),
            &json!({"f:spec": {
                "f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}},
                "f:selector": {},
                "f:tags": {"v:\"a\"": {}}
            }}),
        );
        // A second applier adding a tag and a port merges with the first.
        let more = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"ports": [{"port": 81}], "tags": ["b"]}});
        let out = apply(
            Some(&out),
            &more,
            &opts("other", "example.com/v1", "t"),
            &meta,
        )
        .unwrap();
        same(
            &out["spec"],
            &json!({"ports": [{"port": 80}, {"port": 81}], "tags": ["a", "b"], "selector": {"k": "v"}}),
        );
    }

    // --- update tracking ---

    #[test]
    fn record_update_on_create_owns_every_field() {
        let new = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "1", "generation": 1,
                "creationTimestamp": "2024-01-01T00:00:00Z", "labels": {"app": "web"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}
        });
        let out = record_update(
            &json!({}),
            &new,
            "kubectl-create",
            "2024-01-01T00:00:00Z",
            "apps/v1",
            &builtin("apps", "Deployment"),
        );
        let mut expected = new.clone();
        expected["metadata"]["managedFields"] = json!([{
            "manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "time": "2024-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}
                }}
            }
        }]);
        same(&out, &expected);
    }

    #[test]
    fn record_update_on_a_custom_resource_owns_the_spec_itself() {
        let meta = SchemaListMeta::from_openapi(&widget_schema());
        let new = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"tags": ["a"]}});
        let out = record_update(
            &json!({}),
            &new,
            "kubectl-create",
            "t",
            "example.com/v1",
            &meta,
        );
        same(
            &fields_of(&out, "kubectl-create"),
            &json!({"f:spec": {".": {}, "f:tags": {".": {}, "v:\"a\"": {}}}}),
        );
    }

    #[test]
    fn record_update_moves_changed_fields_to_the_writer() {
        let meta = builtin("", "ConfigMap");
        let created = record_update(
            &json!({}),
            &configmap(json!({"x": "1", "y": "1"})),
            "creator",
            "t1",
            "v1",
            &meta,
        );
        let mut changed = created.clone();
        changed["data"]["x"] = json!("2");
        changed["data"]["z"] = json!("3");
        let out = record_update(&created, &changed, "editor", "t2", "v1", &meta);
        same(
            &out["metadata"]["managedFields"],
            &json!([
                {"manager": "creator", "operation": "Update", "apiVersion": "v1", "time": "t1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}, "f:y": {}}}},
                {"manager": "editor", "operation": "Update", "apiVersion": "v1", "time": "t2", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:x": {}, "f:z": {}}}}
            ]),
        );
        // The editor's next write adds to its entry; the creator keeps only the data map itself.
        let mut again = out.clone();
        again["data"]["y"] = json!("9");
        again["data"].as_object_mut().unwrap().shift_remove("x");
        let out = record_update(&out, &again, "editor", "t3", "v1", &meta);
        same(
            &out["metadata"]["managedFields"],
            &json!([{"manager": "creator", "operation": "Update", "apiVersion": "v1", "time": "t1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {}}},
                {"manager": "editor", "operation": "Update", "apiVersion": "v1", "time": "t3", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:y": {}, "f:z": {}}}}]),
        );
    }

    #[test]
    fn record_update_tracks_list_items_by_key() {
        let meta = builtin("", "Pod");
        let pod = |image: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]}})
        };
        let created = record_update(&json!({}), &pod("v1"), "creator", "t1", "v1", &meta);
        let out = record_update(&created, &pod("v2"), "kubelet", "t2", "v1", &meta);
        same(
            &fields_of(&out, "creator"),
            &json!({"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:name": {},
                "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}}),
        );
        same(
            &fields_of(&out, "kubelet"),
            &json!({"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:image": {}}}}}),
        );
    }

    #[test]
    fn record_update_drops_entries_left_empty_and_removed_fields() {
        let meta = builtin("", "ConfigMap");
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "managedFields": [
            {"manager": "a", "operation": "Update", "apiVersion": "v1", "time": "t1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:x": {}}}},
            {"manager": "b", "operation": "Apply", "apiVersion": "v1", "time": "t1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:y": {}}}}
        ]}, "data": {"x": "1", "y": "1"}});
        let mut new = live.clone();
        new["data"] = json!({"x": "2"});
        let out = record_update(&live, &new, "c", "t2", "v1", &meta);
        same(
            &out["metadata"]["managedFields"],
            &json!([{"manager": "c", "operation": "Update", "apiVersion": "v1", "time": "t2", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:x": {}}}}]),
        );
    }

    #[test]
    fn record_update_without_changes_keeps_entries() {
        let meta = builtin("", "ConfigMap");
        let created = record_update(
            &json!({}),
            &configmap(json!({"x": "1"})),
            "creator",
            "t1",
            "v1",
            &meta,
        );
        let out = record_update(&created, &created, "other", "t2", "v1", &meta);
        same(&out, &created);
        // An empty manager records nothing: the caller wrote managedFields itself.
        let mut changed = created.clone();
        changed["data"]["x"] = json!("2");
        same(
            &record_update(&created, &changed, "", "t2", "v1", &meta),
            &changed,
        );
    }

    #[test]
    fn record_update_honours_managed_fields_sent_by_the_client() {
        let meta = builtin("", "ConfigMap");
        let created = record_update(
            &json!({}),
            &configmap(json!({"x": "1"})),
            "creator",
            "t1",
            "v1",
            &meta,
        );
        // `[{}]` resets them: only this write's fields are recorded.
        let mut reset = created.clone();
        reset["metadata"]["managedFields"] = json!([{}]);
        reset["data"]["y"] = json!("2");
        let out = record_update(&created, &reset, "writer", "t2", "v1", &meta);
        same(
            &out["metadata"]["managedFields"],
            &json!([{"manager": "writer", "operation": "Update", "apiVersion": "v1", "time": "t2", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:y": {}}}}]),
        );
        // Entries sent by the client replace the stored ones.
        let mut sent = created.clone();
        sent["metadata"]["managedFields"] = json!([{"manager": "someone", "operation": "Apply", "apiVersion": "v1",
            "time": "t0", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}}}]);
        let out = record_update(&created, &sent, "writer", "t2", "v1", &meta);
        assert_eq!(fields_of(&out, "someone"), json!({"f:data": {"f:x": {}}}));
        assert_eq!(fields_of(&out, "creator"), Value::Null);
        // A subresource write cannot set them.
        let out = record_update_with_subresource(
            &created,
            &sent,
            "writer",
            Some("status"),
            "t2",
            "v1",
            &meta,
        );
        assert_eq!(
            fields_of(&out, "creator"),
            json!({"f:data": {".": {}, "f:x": {}}})
        );
    }

    #[test]
    fn record_update_on_a_subresource_records_it() {
        let meta = builtin("apps", "Deployment");
        let live = deployment_config(1);
        let mut new = live.clone();
        new["status"] = json!({"replicas": 1});
        let out = record_update_with_subresource(
            &live,
            &new,
            "kcm",
            Some("status"),
            "t",
            "apps/v1",
            &meta,
        );
        same(
            &out["metadata"]["managedFields"],
            &json!([{"manager": "kcm", "operation": "Update", "apiVersion": "apps/v1", "time": "t", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:replicas": {}}}, "subresource": "status"}]),
        );
    }
}
