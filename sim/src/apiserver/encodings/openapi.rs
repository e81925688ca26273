//! OpenAPI v3 documents for `/openapi/v3` and `/openapi/v3/<group-version>`, shaped so that
//! kubectl validates and patches through them.
//!
//! What kubectl reads, and so what these documents promise:
//! - client-go `openapi3.Root` parses the index's `paths.<api path>.serverRelativeURL`, then
//!   each group-version document as a `spec3.OpenAPI`;
//! - cli-runtime's `queryParamVerifierV3` looks for a PATCH operation whose
//!   `x-kubernetes-group-version-kind` (a single object) is the applied kind and which declares
//!   the `fieldValidation` query parameter; when found kubectl leaves validation to the server
//!   instead of downloading schemas (so every PATCH of a kind, subresources included, lists it);
//! - kubectl apply (`gvkSupportsPatchOpenAPIV3`) computes a strategic merge patch from the
//!   component schema whose `x-kubernetes-group-version-kind` (a list) holds the kind, when the
//!   kind's PATCH accepts `application/strategic-merge-patch+json` (built-ins only; custom
//!   resources get JSON merge patches, as upstream). Strategic merge reads
//!   `x-kubernetes-patch-merge-key`/`-strategy` on list properties and follows `$ref`/`allOf`.
//!
//! Built-in schemas come from k8s-openapi through schemars' OpenAPI 3.0 settings and are then
//! post-processed: GVK extensions, list kinds and upstream's patch metadata are added. Custom
//! resources wrap the CRD's `openAPIV3Schema` as apiextensions-apiserver does. Output is
//! deterministic (sorted), so the caller can hash and cache it.

use std::collections::BTreeMap;

use k8s_openapi::api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::table::ResourceInfo;
use crate::storage::builtins::{BuiltinType, TypeVisitor, with_type};

/// Prefix of every reference to a component schema.
const SCHEMA_REF: &str = "#/components/schemas/";

/// Returns the API path of a group-version as the OpenAPI v3 index keys it: `api/v1` for the
/// core group, `apis/<group>/<version>` otherwise.
pub fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Returns the `GET /openapi/v3` index: for each `(api path, hash)` pair, e.g.
/// `("apis/apps/v1", "ABC")`, the URL of its document (`/openapi/v3/apis/apps/v1?hash=ABC`).
pub fn v3_index(group_versions: &[(String, String)]) -> Value {
    let sorted: BTreeMap<&str, &str> = group_versions
        .iter()
        .map(|(p, h)| (p.as_str(), h.as_str()))
        .collect();
    let paths: Map<String, Value> = sorted
        .into_iter()
        .map(|(path, hash)| {
            (
                path.to_owned(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}") }),
            )
        })
        .collect();
    json!({ "paths": paths })
}

/// Returns the OpenAPI 3.0 document for `GET /openapi/v3/<api path>`, describing `resources`
/// (normally all of one group-version): their schemas, list kinds, and paths with the
/// operations their verbs and subresources allow.
///
/// Resources with a `schema` are custom resources; others are looked up among the built-in
/// kinds k8s-openapi knows, and unknown ones get an open object schema. An empty `verbs` list
/// means all the standard verbs.
pub fn v3_group_version(resources: &[ResourceInfo]) -> Value {
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    let common = Common {
        status: register::<meta::Status>(&mut generator),
        delete_options: register::<meta::DeleteOptions>(&mut generator),
        patch: register::<meta::Patch>(&mut generator),
        list_meta: register::<meta::ListMeta>(&mut generator),
        object_meta: register::<meta::ObjectMeta>(&mut generator),
    };
    let mut kinds: Vec<(String, Value)> =
        vec![(common.status.clone(), gvk_list("", "v1", "Status"))];
    let mut extra_schemas: Vec<(String, Value)> = Vec::new();
    let mut entries = Vec::with_capacity(resources.len());

    for info in resources {
        let builtin = if info.schema.is_some() {
            None
        } else {
            builtin_schema(&mut generator, &info.group, &info.version, &info.kind)
        };
        let custom = builtin.is_none();
        let (schema, list) = match builtin {
            Some(name) => {
                let list = format!("{name}List");
                let description = format!("{}List is a list of {}.", info.kind, info.kind);
                let schema = list_schema(
                    info,
                    &name,
                    &common,
                    &description,
                    "Items is a list of schema objects.",
                );
                extra_schemas.push((list.clone(), schema));
                (name, list)
            }
            None => {
                let name = rest_friendly_name(&info.group, &info.version, &info.kind);
                let list_kind = format!("{}List", info.kind);
                let list = rest_friendly_name(&info.group, &info.version, &list_kind);
                extra_schemas.push((name.clone(), custom_kind_schema(info, &common)));
                extra_schemas.push((
                    list.clone(),
                    list_schema(
                        info,
                        &name,
                        &common,
                        &format!("{list_kind} is a list of {}", info.kind),
                        &format!(
                            "List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
                            info.plural
                        ),
                    ),
                ));
                (name, list)
            }
        };
        kinds.push((
            schema.clone(),
            gvk_list(&info.group, &info.version, &info.kind),
        ));

        let mut sub = Subresources::default();
        for s in &info.subresources {
            match s.as_str() {
                "status" => sub.status = true,
                "scale" => {
                    let scale = register::<api::autoscaling::v1::Scale>(&mut generator);
                    kinds.push((scale.clone(), gvk_list("autoscaling", "v1", "Scale")));
                    sub.scale = Some(scale);
                }
                "binding" => {
                    let binding = register::<api::core::v1::Binding>(&mut generator);
                    kinds.push((binding.clone(), gvk_list("", "v1", "Binding")));
                    sub.binding = Some(binding);
                }
                "eviction" => {
                    let eviction = register::<api::policy::v1::Eviction>(&mut generator);
                    kinds.push((eviction.clone(), gvk_list("policy", "v1", "Eviction")));
                    sub.eviction = Some(eviction);
                }
                _ => {}
            }
        }
        entries.push(Entry {
            info,
            schema,
            list,
            custom,
            sub,
        });
    }

    let mut schemas = generator.take_definitions(true);
    for (name, schema) in extra_schemas {
        schemas.insert(name, schema);
    }
    for (name, gvk) in kinds {
        if let Some(Value::Object(schema)) = schemas.get_mut(&name) {
            schema.insert("x-kubernetes-group-version-kind".into(), gvk);
        }
    }
    add_patch_metadata(&mut schemas);

    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for entry in &entries {
        add_resource_paths(&mut paths, entry, &common);
    }

    let schemas: BTreeMap<String, Value> = schemas.into_iter().collect();
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "components": { "schemas": schemas },
    })
}

// === schemas ===

/// Names of the meta schemas every document carries.
struct Common {
    status: String,
    delete_options: String,
    patch: String,
    list_meta: String,
    object_meta: String,
}

#[derive(Default)]
struct Subresources {
    status: bool,
    scale: Option<String>,
    binding: Option<String>,
    eviction: Option<String>,
}

/// One resource and the names of its schemas.
struct Entry<'a> {
    info: &'a ResourceInfo,
    schema: String,
    list: String,
    /// Custom (or unknown) resources: no strategic merge patch, scale operations keep the
    /// resource's kind (both as apiextensions-apiserver publishes them).
    custom: bool,
    sub: Subresources,
}

/// Adds `T`'s schema (and everything it references) to the generator; returns its name.
fn register<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// Registers the k8s-openapi type serving `group/version, Kind=kind`, if there is one.
fn builtin_schema(
    generator: &mut SchemaGenerator,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<String> {
    struct Register<'a>(&'a mut SchemaGenerator);
    impl TypeVisitor for Register<'_> {
        type Output = String;
        fn visit<T: BuiltinType>(self) -> String {
            register::<T>(self.0)
        }
    }
    with_type(group, version, kind, Register(generator))
}

/// `util.ToRESTFriendlyName("<group>/<version>/<kind>")`: the group's labels reversed, then
/// version and kind, dot-separated (`com.example.stable.v1.CronTab`).
fn rest_friendly_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    let mut parts: Vec<&str> = Vec::with_capacity(3);
    let group = reversed.join(".");
    if !group.is_empty() {
        parts.push(&group);
    }
    parts.push(version);
    parts.push(kind);
    parts.join(".")
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "kind": kind, "version": version })
}

fn gvk_list(group: &str, version: &str, kind: &str) -> Value {
    Value::Array(vec![gvk(group, version, kind)])
}

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("{SCHEMA_REF}{name}") })
}

/// A reference with a description, in the `allOf` form OpenAPI 3.0 requires for siblings.
fn described_ref(name: &str, description: &str) -> Value {
    json!({ "allOf": [schema_ref(name)], "description": description })
}

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const OBJECT_METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn list_schema(
    info: &ResourceInfo,
    item: &str,
    common: &Common,
    description: &str,
    items_doc: &str,
) -> Value {
    json!({
        "description": description,
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": { "description": API_VERSION_DOC, "type": "string" },
            "items": { "description": items_doc, "type": "array", "items": schema_ref(item) },
            "kind": { "description": KIND_DOC, "type": "string" },
            "metadata": described_ref(&common.list_meta, LIST_METADATA_DOC),
        },
        "x-kubernetes-group-version-kind": gvk_list(&info.group, &info.version, &format!("{}List", info.kind)),
    })
}

/// Wraps a CRD's `openAPIV3Schema` as apiextensions-apiserver's `buildKubeNative` does for v3:
/// `apiVersion`, `kind` and `metadata` (an `ObjectMeta` reference) at the top and in embedded
/// resources. Without a schema the kind is an open object.
fn custom_kind_schema(info: &ResourceInfo, common: &Common) -> Value {
    let Some(Value::Object(mut schema)) = info.schema.clone() else {
        return json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
    };
    add_type_meta(&mut schema, common, None);
    add_embedded_properties(&mut schema, common);
    Value::Object(schema)
}

/// Sets `apiVersion`, `kind` and `metadata` properties; `descriptions` overrides the
/// `apiVersion`/`kind` texts (embedded resources use lower-case ones).
fn add_type_meta(
    schema: &mut Map<String, Value>,
    common: &Common,
    descriptions: Option<(&str, &str)>,
) {
    let (api_version_doc, kind_doc) = descriptions.unwrap_or((API_VERSION_DOC, KIND_DOC));
    let properties = schema.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(properties) = properties {
        properties.insert(
            "apiVersion".into(),
            json!({ "description": api_version_doc, "type": "string" }),
        );
        properties.insert(
            "kind".into(),
            json!({ "description": kind_doc, "type": "string" }),
        );
        properties.insert(
            "metadata".into(),
            described_ref(&common.object_meta, OBJECT_METADATA_DOC),
        );
    }
}

/// `addEmbeddedProperties`: objects marked `x-kubernetes-embedded-resource` get type and object
/// metadata, and require `kind` and `apiVersion`.
fn add_embedded_properties(schema: &mut Map<String, Value>, common: &Common) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(p) = property {
                add_embedded_properties(p, common);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(Value::Object(sub)) = schema.get_mut(key) {
            add_embedded_properties(sub, common);
        }
    }
    if schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        add_type_meta(
            schema,
            common,
            Some((
                "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            )),
        );
        let required = schema.entry("required").or_insert_with(|| json!([]));
        if let Value::Array(required) = required {
            for field in ["kind", "apiVersion"] {
                if !required.iter().any(|r| r == field) {
                    required.push(Value::from(field));
                }
            }
        }
    }
}

/// Strategic-merge and list metadata of one list (or struct) property, as upstream's Go struct
/// tags and `+listType` markers publish it.
struct PatchMeta {
    schema: &'static str,
    property: &'static str,
    strategy: Option<&'static str>,
    merge_key: Option<&'static str>,
    list_type: Option<&'static str>,
    map_keys: &'static [&'static str],
}

const fn merge_map(
    schema: &'static str,
    property: &'static str,
    keys: &'static [&'static str],
) -> PatchMeta {
    PatchMeta {
        schema,
        property,
        strategy: Some("merge"),
        merge_key: Some(keys[0]),
        list_type: Some("map"),
        map_keys: keys,
    }
}

const fn merge_atomic(
    schema: &'static str,
    property: &'static str,
    key: &'static str,
) -> PatchMeta {
    PatchMeta {
        schema,
        property,
        strategy: Some("merge"),
        merge_key: Some(key),
        list_type: Some("atomic"),
        map_keys: &[],
    }
}

/// Patch metadata for the types reachable from the served kinds (upstream `types.go` tags).
const PATCH_METADATA: &[PatchMeta] = &[
    PatchMeta {
        schema: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        property: "finalizers",
        strategy: Some("merge"),
        merge_key: None,
        list_type: Some("set"),
        map_keys: &[],
    },
    merge_map(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        &["uid"],
    ),
    merge_map("io.k8s.api.core.v1.PodSpec", "containers", &["name"]),
    merge_map("io.k8s.api.core.v1.PodSpec", "initContainers", &["name"]),
    merge_map(
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        &["name"],
    ),
    merge_map("io.k8s.api.core.v1.PodSpec", "imagePullSecrets", &["name"]),
    merge_map("io.k8s.api.core.v1.PodSpec", "hostAliases", &["ip"]),
    merge_map("io.k8s.api.core.v1.PodSpec", "schedulingGates", &["name"]),
    merge_map(
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        &["topologyKey", "whenUnsatisfiable"],
    ),
    PatchMeta {
        strategy: Some("merge,retainKeys"),
        ..merge_map("io.k8s.api.core.v1.PodSpec", "volumes", &["name"])
    },
    PatchMeta {
        strategy: Some("merge,retainKeys"),
        ..merge_map("io.k8s.api.core.v1.PodSpec", "resourceClaims", &["name"])
    },
    merge_map("io.k8s.api.core.v1.Container", "env", &["name"]),
    merge_map(
        "io.k8s.api.core.v1.Container",
        "ports",
        &["containerPort", "protocol"],
    ),
    merge_map(
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        &["mountPath"],
    ),
    merge_map(
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        &["devicePath"],
    ),
    merge_map("io.k8s.api.core.v1.EphemeralContainer", "env", &["name"]),
    merge_map(
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        &["containerPort", "protocol"],
    ),
    merge_map(
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        &["mountPath"],
    ),
    merge_map(
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        &["devicePath"],
    ),
    merge_map("io.k8s.api.core.v1.PodStatus", "conditions", &["type"]),
    merge_map("io.k8s.api.core.v1.PodStatus", "podIPs", &["ip"]),
    merge_atomic("io.k8s.api.core.v1.PodStatus", "hostIPs", "ip"),
    PatchMeta {
        strategy: Some("merge,retainKeys"),
        ..merge_map(
            "io.k8s.api.core.v1.PodStatus",
            "resourceClaimStatuses",
            &["name"],
        )
    },
    PatchMeta {
        schema: "io.k8s.api.core.v1.NodeSpec",
        property: "podCIDRs",
        strategy: Some("merge"),
        merge_key: None,
        list_type: Some("set"),
        map_keys: &[],
    },
    merge_map("io.k8s.api.core.v1.NodeStatus", "conditions", &["type"]),
    merge_atomic("io.k8s.api.core.v1.NodeStatus", "addresses", "type"),
    merge_map(
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        &["type"],
    ),
    merge_map(
        "io.k8s.api.core.v1.ServiceSpec",
        "ports",
        &["port", "protocol"],
    ),
    merge_map("io.k8s.api.core.v1.ServiceStatus", "conditions", &["type"]),
    merge_atomic("io.k8s.api.core.v1.ServiceAccount", "secrets", "name"),
    merge_map(
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        "conditions",
        &["type"],
    ),
    PatchMeta {
        schema: "io.k8s.api.apps.v1.DeploymentSpec",
        property: "strategy",
        strategy: Some("retainKeys"),
        merge_key: None,
        list_type: None,
        map_keys: &[],
    },
    merge_map(
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        &["type"],
    ),
    merge_map(
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        &["type"],
    ),
    merge_map(
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        &["type"],
    ),
    merge_map(
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        &["type"],
    ),
    merge_atomic("io.k8s.api.batch.v1.JobStatus", "conditions", "type"),
    merge_map(
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        &["type"],
    ),
    PatchMeta {
        schema: "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
        property: "conditions",
        strategy: None,
        merge_key: None,
        list_type: Some("map"),
        map_keys: &["type"],
    },
];

/// Adds `PATCH_METADATA` to the generated schemas that are present.
fn add_patch_metadata(schemas: &mut Map<String, Value>) {
    for meta in PATCH_METADATA {
        let Some(Value::Object(property)) = schemas
            .get_mut(meta.schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(meta.property))
        else {
            continue;
        };
        // OpenAPI 3.0 ignores siblings of `$ref`; keep the reference in `allOf` instead.
        if let Some(reference) = property.remove("$ref") {
            property.insert("allOf".into(), json!([{ "$ref": reference }]));
        }
        if let Some(key) = meta.merge_key {
            property.insert("x-kubernetes-patch-merge-key".into(), Value::from(key));
        }
        if let Some(strategy) = meta.strategy {
            property.insert("x-kubernetes-patch-strategy".into(), Value::from(strategy));
        }
        if let Some(list_type) = meta.list_type {
            property.insert("x-kubernetes-list-type".into(), Value::from(list_type));
        }
        if !meta.map_keys.is_empty() {
            property.insert("x-kubernetes-list-map-keys".into(), json!(meta.map_keys));
        }
    }
}

// === paths ===

const PATCH_BUILTIN: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];
const PATCH_CUSTOM: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
];
const BODY: &[&str] = &["application/json", "application/yaml"];

const DRY_RUN_DOC: &str = "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed";
const FIELD_MANAGER_DOC: &str = "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.";
const FIELD_VALIDATION_DOC: &str = "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present.";
const FORCE_DOC: &str = "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.";

fn param(name: &str, location: &str, type_: &str, description: &str) -> Value {
    let mut p = json!({
        "name": name,
        "in": location,
        "description": description,
        "schema": { "type": type_, "uniqueItems": true },
    });
    if location == "path" {
        p["required"] = Value::Bool(true);
    }
    p
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut params = vec![
        param("dryRun", "query", "string", DRY_RUN_DOC),
        param("fieldManager", "query", "string", FIELD_MANAGER_DOC),
        param("fieldValidation", "query", "string", FIELD_VALIDATION_DOC),
    ];
    if patch {
        params.push(param("force", "query", "boolean", FORCE_DOC));
    }
    params
}

fn list_params() -> Vec<Value> {
    [
        ("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
        ("continue", "string", "The continue option should be set when retrieving more results from the server."),
        ("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
        ("labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
        ("limit", "integer", "limit is a maximum number of responses to return for a list call."),
        ("resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."),
        ("resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
        ("sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`."),
        ("timeoutSeconds", "integer", "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity."),
        ("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion."),
    ]
    .iter()
    .map(|(name, type_, doc)| param(name, "query", type_, doc))
    .collect()
}

fn delete_params() -> Vec<Value> {
    vec![
        param("dryRun", "query", "string", DRY_RUN_DOC),
        param(
            "gracePeriodSeconds",
            "query",
            "integer",
            "The duration in seconds before the object should be deleted.",
        ),
        param(
            "orphanDependents",
            "query",
            "boolean",
            "Deprecated: please use the PropagationPolicy.",
        ),
        param(
            "propagationPolicy",
            "query",
            "string",
            "Whether and how garbage collection will be performed.",
        ),
    ]
}

/// Media types with a schema reference, for request bodies and responses.
fn content(types: &[&str], schema: &str) -> Value {
    let map: Map<String, Value> = types
        .iter()
        .map(|t| ((*t).to_owned(), json!({ "schema": schema_ref(schema) })))
        .collect();
    Value::Object(map)
}

fn request_body(types: &[&str], schema: &str) -> Value {
    json!({ "content": content(types, schema), "required": true })
}

/// Responses: 200 plus `extra` codes with `schema`, and the common 401.
fn responses(schema: &str, extra: &[(&str, &str)], watch: bool) -> Value {
    let types: &[&str] = if watch {
        &[
            "application/json",
            "application/json;stream=watch",
            "application/yaml",
        ]
    } else {
        &["application/json", "application/yaml"]
    };
    let mut map = Map::new();
    map.insert(
        "200".into(),
        json!({ "description": "OK", "content": content(types, schema) }),
    );
    for (code, description) in extra {
        map.insert(
            (*code).to_owned(),
            json!({ "description": description, "content": content(types, schema) }),
        );
    }
    map.insert("401".into(), json!({ "description": "Unauthorized" }));
    Value::Object(map)
}

/// One operation of a path item.
struct Operation {
    /// `x-kubernetes-action`: list, post, get, put, patch, delete, deletecollection.
    action: &'static str,
    id: String,
    description: String,
    params: Vec<Value>,
    body: Option<Value>,
    responses: Value,
    /// The operation's `x-kubernetes-group-version-kind` (a single object, unlike schemas').
    gvk: Value,
}

impl Operation {
    fn into_json(self, tag: &str) -> Value {
        let mut op = Map::new();
        op.insert("description".into(), Value::from(self.description));
        op.insert("operationId".into(), Value::from(self.id));
        if !self.params.is_empty() {
            op.insert("parameters".into(), Value::Array(self.params));
        }
        if let Some(body) = self.body {
            op.insert("requestBody".into(), body);
        }
        op.insert("responses".into(), self.responses);
        op.insert("tags".into(), json!([tag]));
        op.insert("x-kubernetes-action".into(), Value::from(self.action));
        op.insert("x-kubernetes-group-version-kind".into(), self.gvk);
        Value::Object(op)
    }
}

/// Group part of operation ids and tags: `.k8s.io` dropped, dot-separated words camel-cased
/// (`rbac.authorization.k8s.io` gives `["rbac", "authorization"]`).
fn group_words(group: &str) -> Vec<&str> {
    if group.is_empty() {
        return vec!["core"];
    }
    group
        .strip_suffix(".k8s.io")
        .unwrap_or(group)
        .split(['.', '-'])
        .filter(|w| !w.is_empty())
        .collect()
}

fn title(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

/// Adds a resource's collection, item and subresource paths, as kube-apiserver (built-ins) and
/// apiextensions-apiserver (custom resources) publish them.
fn add_resource_paths(
    paths: &mut BTreeMap<String, Map<String, Value>>,
    entry: &Entry<'_>,
    common: &Common,
) {
    let info = entry.info;
    let kind = info.kind.as_str();
    let has = |verb: &str| info.verbs.is_empty() || info.verbs.iter().any(|v| v == verb);
    let words = group_words(&info.group);
    let gv = format!(
        "{}{}",
        words.iter().map(|w| title(w)).collect::<String>(),
        title(&info.version)
    );
    let tag = format!(
        "{}{}_{}",
        words.first().copied().unwrap_or_default(),
        words.iter().skip(1).map(|w| title(w)).collect::<String>(),
        info.version
    );
    let namespaced = if info.namespaced { "Namespaced" } else { "" };
    let id = |verb: &str, sub: &str| format!("{verb}{gv}{namespaced}{kind}{}", title(sub));

    let prefix = format!("/{}", group_version_path(&info.group, &info.version));
    let collection = if info.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", info.plural)
    } else {
        format!("{prefix}/{}", info.plural)
    };
    let item = format!("{collection}/{{name}}");
    let own = gvk(&info.group, &info.version, kind);
    let patch_types = if entry.custom {
        PATCH_CUSTOM
    } else {
        PATCH_BUILTIN
    };
    let article = if kind.starts_with(['A', 'E', 'I', 'O', 'U']) {
        "an"
    } else {
        "a"
    };
    let created: &[(&str, &str)] = &[("201", "Created"), ("202", "Accepted")];
    let schema = entry.schema.as_str();

    let mut add = |path: &str, method: &str, op: Operation| {
        paths
            .entry(path.to_owned())
            .or_insert_with(|| path_item(path, kind))
            .insert(method.to_owned(), op.into_json(&tag));
    };

    if has("list") {
        let list = |id: String| Operation {
            action: "list",
            id,
            description: format!("list or watch objects of kind {kind}"),
            params: list_params(),
            body: None,
            responses: responses(&entry.list, &[], true),
            gvk: own.clone(),
        };
        add(&collection, "get", list(id("list", "")));
        if info.namespaced {
            add(
                &format!("{prefix}/{}", info.plural),
                "get",
                list(format!("list{gv}{kind}ForAllNamespaces")),
            );
        }
    }
    if has("create") {
        add(
            &collection,
            "post",
            Operation {
                action: "post",
                id: id("create", ""),
                description: format!("create {article} {kind}"),
                params: write_params(false),
                body: Some(request_body(BODY, schema)),
                responses: responses(schema, created, false),
                gvk: own.clone(),
            },
        );
    }
    if has("deletecollection") {
        let mut params = delete_params();
        params.extend(
            list_params()
                .into_iter()
                .filter(|p| p["name"] != "allowWatchBookmarks" && p["name"] != "watch"),
        );
        add(
            &collection,
            "delete",
            Operation {
                action: "deletecollection",
                id: id("deletecollection", ""),
                description: format!("delete collection of {kind}"),
                params,
                body: Some(request_body(BODY, &common.delete_options)),
                responses: responses(&common.status, &[], false),
                gvk: own.clone(),
            },
        );
    }
    if has("get") {
        add(
            &item,
            "get",
            read_op(
                id("read", ""),
                format!("read the specified {kind}"),
                schema,
                &own,
            ),
        );
    }
    if has("update") {
        add(
            &item,
            "put",
            replace_op(
                id("replace", ""),
                format!("replace the specified {kind}"),
                schema,
                &own,
            ),
        );
    }
    if has("patch") {
        add(
            &item,
            "patch",
            patch_op(
                id("patch", ""),
                format!("partially update the specified {kind}"),
                schema,
                patch_types,
                common,
                &own,
            ),
        );
    }
    if has("delete") {
        add(
            &item,
            "delete",
            Operation {
                action: "delete",
                id: id("delete", ""),
                description: format!("delete {article} {kind}"),
                params: delete_params(),
                body: Some(request_body(BODY, &common.delete_options)),
                responses: responses(&common.status, &created[1..], false),
                gvk: own.clone(),
            },
        );
    }

    // Readable and writable subresources; built-in scale operations carry the Scale kind,
    // custom resources' keep the resource's kind (as apiextensions-apiserver publishes them).
    let mut read_write: Vec<(&str, &str, Value)> = Vec::new();
    if entry.sub.status {
        read_write.push(("status", schema, own.clone()));
    }
    if let Some(scale) = &entry.sub.scale {
        let scale_gvk = if entry.custom {
            own.clone()
        } else {
            gvk("autoscaling", "v1", "Scale")
        };
        read_write.push(("scale", scale, scale_gvk));
    }
    for (sub, sub_schema, sub_gvk) in read_write {
        let path = format!("{item}/{sub}");
        add(
            &path,
            "get",
            read_op(
                id("read", sub),
                format!("read {sub} of the specified {kind}"),
                sub_schema,
                &sub_gvk,
            ),
        );
        add(
            &path,
            "put",
            replace_op(
                id("replace", sub),
                format!("replace {sub} of the specified {kind}"),
                sub_schema,
                &sub_gvk,
            ),
        );
        add(
            &path,
            "patch",
            patch_op(
                id("patch", sub),
                format!("partially update {sub} of the specified {kind}"),
                sub_schema,
                patch_types,
                common,
                &sub_gvk,
            ),
        );
    }

    // Create-only subresources of pods.
    let mut create_only: Vec<(&str, &str, Value)> = Vec::new();
    if let Some(binding) = &entry.sub.binding {
        create_only.push(("binding", binding, gvk("", "v1", "Binding")));
    }
    if let Some(eviction) = &entry.sub.eviction {
        create_only.push(("eviction", eviction, gvk("policy", "v1", "Eviction")));
    }
    for (sub, sub_schema, sub_gvk) in create_only {
        add(
            &format!("{item}/{sub}"),
            "post",
            Operation {
                action: "post",
                id: id("create", sub),
                description: format!("create {sub} of {article} {kind}"),
                params: write_params(false),
                body: Some(request_body(BODY, sub_schema)),
                responses: responses(sub_schema, created, false),
                gvk: sub_gvk,
            },
        );
    }
}

fn read_op(id: String, description: String, schema: &str, gvk: &Value) -> Operation {
    Operation {
        action: "get",
        id,
        description,
        params: vec![],
        body: None,
        responses: responses(schema, &[], false),
        gvk: gvk.clone(),
    }
}

fn replace_op(id: String, description: String, schema: &str, gvk: &Value) -> Operation {
    Operation {
        action: "put",
        id,
        description,
        params: write_params(false),
        body: Some(request_body(BODY, schema)),
        responses: responses(schema, &[("201", "Created")], false),
        gvk: gvk.clone(),
    }
}

fn patch_op(
    id: String,
    description: String,
    schema: &str,
    types: &[&str],
    common: &Common,
    gvk: &Value,
) -> Operation {
    Operation {
        action: "patch",
        id,
        description,
        params: write_params(true),
        body: Some(request_body(types, &common.patch)),
        responses: responses(schema, &[("201", "Created")], false),
        gvk: gvk.clone(),
    }
}

/// A path item with the path-level parameters: `name`, `namespace` and `pretty`.
fn path_item(path: &str, kind: &str) -> Map<String, Value> {
    let mut params = Vec::new();
    if path.contains("{name}") {
        params.push(param(
            "name",
            "path",
            "string",
            &format!("name of the {kind}"),
        ));
    }
    if path.contains("{namespace}") {
        params.push(param(
            "namespace",
            "path",
            "string",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    params.push(param(
        "pretty",
        "query",
        "string",
        "If 'true', then the output is pretty printed.",
    ));
    let mut item = Map::new();
    item.insert("parameters".into(), Value::Array(params));
    item
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ALL_VERBS: &[&str] = &[
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];

    fn resource(
        group: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        subresources: &[&str],
    ) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
            verbs: ALL_VERBS.iter().map(|v| (*v).to_owned()).collect(),
            subresources: subresources.iter().map(|s| (*s).to_owned()).collect(),
            ..Default::default()
        }
    }

    fn core_doc() -> Value {
        v3_group_version(&[
            resource("", "Namespace", "namespaces", false, &["status"]),
            resource("", "Node", "nodes", false, &["status"]),
            resource("", "Pod", "pods", true, &["status", "binding", "eviction"]),
            resource("", "Service", "services", true, &["status"]),
            resource("", "ConfigMap", "configmaps", true, &[]),
        ])
    }

    fn widget() -> ResourceInfo {
        ResourceInfo {
            schema: Some(json!({
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "replicas": {"type": "integer"},
                            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                        },
                    },
                },
            })),
            ..resource(
                "example.com",
                "Widget",
                "widgets",
                true,
                &["status", "scale"],
            )
        }
    }

    fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
        &doc["components"]["schemas"][name]
    }

    /// Follows a property as kubectl's `PatchMetaFromOpenAPIV3` does: `allOf[0]`, then `$ref`.
    fn resolve<'a>(doc: &'a Value, mut s: &'a Value) -> &'a Value {
        if let Some(first) = s.get("allOf").and_then(|a| a.get(0)) {
            s = first;
        }
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => schema(doc, r.strip_prefix(SCHEMA_REF).unwrap()),
            None => s,
        }
    }

    /// Walks `path` (`[]` suffix = list element) from a kind schema and returns the last
    /// property's schema before resolution, where patch metadata lives.
    fn property<'a>(doc: &'a Value, kind_schema: &str, path: &[&str]) -> &'a Value {
        let mut current = schema(doc, kind_schema);
        let mut last = current;
        for step in path {
            let (name, element) = step
                .strip_suffix("[]")
                .map_or((*step, false), |n| (n, true));
            last = current["properties"]
                .get(name)
                .unwrap_or_else(|| panic!("no property {name}"));
            current = if element {
                resolve(doc, &last["items"])
            } else {
                resolve(doc, last)
            };
        }
        last
    }

    fn collect_refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => collect_refs(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }

    fn operations(doc: &Value) -> impl Iterator<Item = (&String, &String, &Value)> {
        doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .iter()
                    .filter(|(m, _)| *m != "parameters")
                    .map(move |(m, op)| (path, m, op))
            })
    }

    fn param_names(op: &Value) -> Vec<&str> {
        op["parameters"].as_array().map_or_else(Vec::new, |ps| {
            ps.iter().map(|p| p["name"].as_str().unwrap()).collect()
        })
    }

    #[test]
    fn index_points_at_hashed_server_relative_urls() {
        let index = v3_index(&[
            ("apis/apps/v1".into(), "B2".into()),
            ("api/v1".into(), "A1".into()),
        ]);
        assert_eq!(
            index,
            json!({"paths": {
                "api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=A1"},
                "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=B2"},
            }})
        );
        assert_eq!(group_version_path("", "v1"), "api/v1");
        assert_eq!(group_version_path("apps", "v1"), "apis/apps/v1");
    }

    #[test]
    fn pod_schema_carries_group_version_kind() {
        let doc = core_doc();
        assert_eq!(doc["openapi"], "3.0.0");
        let pod = schema(&doc, "io.k8s.api.core.v1.Pod");
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        assert_eq!(
            schema(&doc, "io.k8s.api.core.v1.PodList")["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "PodList", "version": "v1"}])
        );
        assert_eq!(
            schema(&doc, "io.k8s.api.policy.v1.Eviction")["x-kubernetes-group-version-kind"],
            json!([{"group": "policy", "kind": "Eviction", "version": "v1"}])
        );
        // Only the kind's own schema matches its GVK: kubectl apply picks the first match.
        let matching = doc["components"]["schemas"]
            .as_object()
            .unwrap()
            .values()
            .filter(|s| {
                s["x-kubernetes-group-version-kind"]
                    == json!([{"group": "", "kind": "Pod", "version": "v1"}])
            })
            .count();
        assert_eq!(matching, 1);
    }

    #[test]
    fn pod_spec_lists_carry_upstream_patch_metadata() {
        let doc = core_doc();
        let containers = property(&doc, "io.k8s.api.core.v1.Pod", &["spec", "containers"]);
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        let merge_keys = [
            (&["spec", "initContainers"][..], "name"),
            (&["spec", "ephemeralContainers"], "name"),
            (&["spec", "imagePullSecrets"], "name"),
            (&["spec", "containers[]", "env"], "name"),
            (&["spec", "containers[]", "ports"], "containerPort"),
            (&["spec", "containers[]", "volumeMounts"], "mountPath"),
            (&["spec", "volumes"], "name"),
            (&["status", "conditions"], "type"),
            (&["metadata", "ownerReferences"], "uid"),
        ];
        for (path, key) in merge_keys {
            let p = property(&doc, "io.k8s.api.core.v1.Pod", path);
            assert_eq!(p["x-kubernetes-patch-merge-key"], key, "{path:?}");
        }
        assert_eq!(
            property(&doc, "io.k8s.api.core.v1.Pod", &["spec", "volumes"])["x-kubernetes-patch-strategy"],
            "merge,retainKeys"
        );
        assert_eq!(
            property(&doc, "io.k8s.api.core.v1.Pod", &["metadata", "finalizers"])["x-kubernetes-patch-strategy"],
            "merge"
        );
        assert_eq!(
            property(&doc, "io.k8s.api.core.v1.Service", &["spec", "ports"])["x-kubernetes-patch-merge-key"],
            "port"
        );
        assert_eq!(
            property(&doc, "io.k8s.api.core.v1.Node", &["status", "conditions"])["x-kubernetes-patch-merge-key"],
            "type"
        );
    }

    #[test]
    fn deployment_template_reaches_pod_spec_patch_metadata() {
        let doc = v3_group_version(&[resource(
            "apps",
            "Deployment",
            "deployments",
            true,
            &["status", "scale"],
        )]);
        let env = property(
            &doc,
            "io.k8s.api.apps.v1.Deployment",
            &["spec", "template", "spec", "containers[]", "env"],
        );
        assert_eq!(env["x-kubernetes-patch-merge-key"], "name");
        let strategy = property(&doc, "io.k8s.api.apps.v1.Deployment", &["spec", "strategy"]);
        assert_eq!(strategy["x-kubernetes-patch-strategy"], "retainKeys");
        assert!(
            strategy.get("$ref").is_none(),
            "extensions must not sit beside a $ref"
        );
        let scale =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"];
        assert_eq!(
            scale["x-kubernetes-group-version-kind"],
            json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
        );
    }

    #[test]
    fn pod_patch_declares_field_validation_and_strategic_merge() {
        let doc = core_doc();
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "Pod", "version": "v1"})
        );
        assert_eq!(patch["operationId"], "patchCoreV1NamespacedPod");
        assert_eq!(
            param_names(patch),
            ["dryRun", "fieldManager", "fieldValidation", "force"]
        );
        let content = patch["requestBody"]["content"].as_object().unwrap();
        assert!(content.contains_key("application/strategic-merge-patch+json"));
        assert!(content.contains_key("application/apply-patch+yaml"));
        let path_params = param_names(&doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]);
        assert_eq!(path_params, ["name", "namespace", "pretty"]);
    }

    #[test]
    fn every_patch_operation_declares_field_validation() {
        for doc in [core_doc(), v3_group_version(&[widget()])] {
            let patches: Vec<_> = operations(&doc).filter(|(_, m, _)| *m == "patch").collect();
            assert!(!patches.is_empty());
            for (path, _, op) in patches {
                assert!(param_names(op).contains(&"fieldValidation"), "{path}");
                assert!(op["x-kubernetes-group-version-kind"].is_object(), "{path}");
            }
        }
    }

    #[test]
    fn every_operation_names_its_action_and_kind() {
        let doc = core_doc();
        for (path, method, op) in operations(&doc) {
            assert!(op["x-kubernetes-action"].is_string(), "{method} {path}");
            assert!(
                op["x-kubernetes-group-version-kind"]["kind"].is_string(),
                "{method} {path}"
            );
        }
        let binding = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"];
        assert_eq!(
            binding["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "Binding", "version": "v1"})
        );
        let list_all = &doc["paths"]["/api/v1/pods"]["get"];
        assert_eq!(list_all["operationId"], "listCoreV1PodForAllNamespaces");
    }

    #[test]
    fn cluster_scoped_resources_have_no_namespace_paths() {
        let doc = core_doc();
        let paths = doc["paths"].as_object().unwrap();
        assert!(paths.contains_key("/api/v1/nodes/{name}/status"));
        assert!(!paths.keys().any(|p| p.contains("{namespace}/nodes")));
        assert_eq!(
            param_names(&paths["/api/v1/nodes/{name}"]),
            ["name", "pretty"]
        );
    }

    #[test]
    fn every_ref_resolves_inside_the_document() {
        let docs = [
            core_doc(),
            v3_group_version(&[
                resource(
                    "apps",
                    "Deployment",
                    "deployments",
                    true,
                    &["status", "scale"],
                ),
                resource(
                    "apps",
                    "StatefulSet",
                    "statefulsets",
                    true,
                    &["status", "scale"],
                ),
            ]),
            v3_group_version(&[widget()]),
            v3_group_version(&[resource(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                false,
                &["status"],
            )]),
        ];
        for doc in docs {
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            let mut refs = Vec::new();
            collect_refs(&doc, &mut refs);
            assert!(refs.len() > 10);
            for r in refs {
                let name = r
                    .strip_prefix(SCHEMA_REF)
                    .unwrap_or_else(|| panic!("foreign ref {r}"));
                assert!(schemas.contains_key(name), "dangling ref {r}");
            }
        }
    }

    #[test]
    fn custom_resource_document_wraps_crd_schema() {
        let doc = v3_group_version(&[widget()]);
        let kind = schema(&doc, "com.example.v1.Widget");
        assert_eq!(
            kind["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
        );
        assert_eq!(
            kind["properties"]["spec"]["properties"]["replicas"],
            json!({"type": "integer"})
        );
        assert_eq!(
            kind["properties"]["metadata"]["allOf"],
            json!([{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}])
        );
        assert_eq!(kind["properties"]["kind"]["type"], "string");
        let template = &kind["properties"]["spec"]["properties"]["template"];
        assert!(template["properties"]["metadata"].is_object());
        assert_eq!(template["required"], json!(["kind", "apiVersion"]));
        assert_eq!(
            schema(&doc, "com.example.v1.WidgetList")["properties"]["items"]["items"],
            json!({"$ref": "#/components/schemas/com.example.v1.Widget"})
        );

        let item = "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}";
        let content = doc["paths"][item]["patch"]["requestBody"]["content"]
            .as_object()
            .unwrap();
        assert!(
            !content.contains_key("application/strategic-merge-patch+json"),
            "CRDs take no strategic merge patch"
        );
        assert!(content.contains_key("application/merge-patch+json"));
        let scale = &doc["paths"][format!("{item}/scale")]["patch"];
        assert_eq!(
            scale["x-kubernetes-group-version-kind"],
            json!({"group": "example.com", "kind": "Widget", "version": "v1"})
        );
        assert!(doc["paths"][format!("{item}/status")]["put"].is_object());
        assert!(doc["paths"]["/apis/example.com/v1/widgets"]["get"].is_object());
    }

    #[test]
    fn verbs_limit_the_operations() {
        let review = ResourceInfo {
            verbs: vec!["create".into()],
            ..resource(
                "authentication.k8s.io",
                "TokenReview",
                "tokenreviews",
                false,
                &[],
            )
        };
        let doc = v3_group_version(&[review]);
        let paths = doc["paths"].as_object().unwrap();
        assert_eq!(
            paths.keys().collect::<Vec<_>>(),
            ["/apis/authentication.k8s.io/v1/tokenreviews"]
        );
        let item = paths["/apis/authentication.k8s.io/v1/tokenreviews"]
            .as_object()
            .unwrap();
        assert_eq!(item.keys().collect::<Vec<_>>(), ["parameters", "post"]);
        assert_eq!(
            item["post"]["operationId"],
            "createAuthenticationV1TokenReview"
        );
        assert_eq!(item["post"]["tags"], json!(["authentication_v1"]));
        assert!(schema(&doc, "io.k8s.api.authentication.v1.TokenReview").is_object());
    }

    #[test]
    fn unknown_kind_without_schema_is_an_open_object() {
        let doc = v3_group_version(&[resource("example.io", "Thing", "things", false, &[])]);
        let thing = schema(&doc, "io.example.v1.Thing");
        assert_eq!(thing["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(thing["x-kubernetes-group-version-kind"][0]["kind"], "Thing");
    }

    #[test]
    fn output_does_not_depend_on_resource_order() {
        let mut resources = vec![
            resource("", "Pod", "pods", true, &["status"]),
            resource("", "ConfigMap", "configmaps", true, &[]),
            resource("", "Node", "nodes", false, &["status"]),
        ];
        let first = serde_json::to_string(&v3_group_version(&resources)).unwrap();
        resources.reverse();
        assert_eq!(
            first,
            serde_json::to_string(&v3_group_version(&resources)).unwrap()
        );
    }

    #[test]
    fn rest_friendly_names_reverse_the_group() {
        assert_eq!(
            rest_friendly_name("stable.example.com", "v1", "CronTab"),
            "com.example.stable.v1.CronTab"
        );
        assert_eq!(rest_friendly_name("", "v1", "Thing"), "v1.Thing");
        assert_eq!(
            group_words("rbac.authorization.k8s.io"),
            ["rbac", "authorization"]
        );
    }
}
