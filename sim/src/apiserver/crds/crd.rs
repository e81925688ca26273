//! CustomResourceDefinitions: validating them, filling their status, and serving their custom
//! resources (every served version, status and scale subresources, printer columns, schema).

use std::sync::Arc;

use serde_json::{Value, json};

use super::schema::CompiledSchema;
use crate::apiserver::requests::error::{ApiError, ApiResult};
use crate::apiserver::server::Server;
use crate::storage::registry::{CrdVersion, ResourceDef, ScalePaths};

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// Validates a CRD and fills in its status (NamesAccepted, Established, acceptedNames,
/// storedVersions), as the apiextensions controllers would.
pub fn prepare(crd: &mut Value) -> ApiResult<()> {
    let name = s(crd, "/metadata/name").to_owned();
    let group = s(crd, "/spec/group").to_owned();
    let plural = s(crd, "/spec/names/plural").to_owned();
    let kind = s(crd, "/spec/names/kind").to_owned();
    let mut causes: Vec<(String, &'static str, String)> = Vec::new();
    let mut require = |field: &str, v: &str| {
        if v.is_empty() {
            causes.push((field.into(), "FieldValueRequired", "Required value".into()));
        }
    };
    require("spec.group", &group);
    require("spec.names.plural", &plural);
    require("spec.names.kind", &kind);
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push((
            "metadata.name".into(),
            "FieldValueInvalid",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = s(crd, "/spec/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push((
            "spec.scope".into(),
            "FieldValueNotSupported",
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push((
            "spec.versions".into(),
            "FieldValueInvalid",
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    let storage: Vec<&Value> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .collect();
    if !versions.is_empty() && storage.len() != 1 {
        causes.push((
            "spec.versions".into(),
            "FieldValueInvalid",
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema")
            && let Err(errs) = CompiledSchema::compile_at(schema, &at)
        {
            for e in errs {
                causes.push((at.clone(), "FieldValueInvalid", e));
            }
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &name,
            causes,
        ));
    }
    let storage_version = storage
        .first()
        .map(|v| s(v, "/name").to_owned())
        .unwrap_or_default();
    let mut names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    if s(&names, "/singular").is_empty() {
        names["singular"] = json!(kind.to_ascii_lowercase());
    }
    if s(&names, "/listKind").is_empty() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    let mut stored_versions: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !stored_versions.iter().any(|v| v == &json!(storage_version)) {
        stored_versions.push(json!(storage_version));
    }
    let now = crate::apiserver::objects::lifecycle::now();
    let condition = |ty: &str, reason: &str, message: &str| json!({"type": ty, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    crd["status"] = json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": names,
        "storedVersions": stored_versions,
    });
    Ok(())
}

/// Serves the CRD's versions (replacing what was served for it before).
pub fn register(server: &Arc<Server>, crd: &Value) {
    let group = s(crd, "/spec/group").to_owned();
    let plural = s(crd, "/spec/names/plural").to_owned();
    let kind = s(crd, "/spec/names/kind").to_owned();
    let singular = match s(crd, "/spec/names/singular") {
        "" => kind.to_ascii_lowercase(),
        x => x.to_owned(),
    };
    let strings = |ptr: &str| -> Vec<String> {
        crd.pointer(ptr)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strings("/spec/names/shortNames");
    let categories = strings("/spec/names/categories");
    let namespaced = s(crd, "/spec/scope") == "Namespaced";
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .map(|v| s(v, "/name").to_owned())
        .unwrap_or_default();
    let mut reg = server.registry.write();
    reg.remove_resource(&group, &plural);
    for v in versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
    {
        let schema = v.pointer("/schema/openAPIV3Schema").cloned();
        let compiled = schema
            .as_ref()
            .and_then(|sc| CompiledSchema::compile(sc).ok());
        if let Some(c) = &compiled
            && !c.skipped_rules().is_empty()
        {
            tracing::warn!(
                crd = %s(crd, "/metadata/name"),
                version = %s(v, "/name"),
                rules = ?c.skipped_rules(),
                "these validation rules use CEL functions the sim cannot evaluate; they are not enforced"
            );
        }
        let scale = v.pointer("/subresources/scale").map(|sc| ScalePaths {
            spec_replicas: s(sc, "/specReplicasPath").to_owned(),
            status_replicas: s(sc, "/statusReplicasPath").to_owned(),
            label_selector: sc
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
        let selectable_fields = v
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                    .map(|p| p.trim_start_matches('.').to_owned())
                    .collect()
            })
            .unwrap_or_default();
        reg.insert(ResourceDef {
            group: group.clone(),
            version: s(v, "/name").to_owned(),
            kind: kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            short_names: short_names.clone(),
            categories: categories.clone(),
            namespaced,
            status: v.pointer("/subresources/status").is_some(),
            scale,
            verbs: crate::storage::registry::Verbs::All,
            selectable_fields,
            storage_version: storage_version.clone(),
            crd: Some(Arc::new(CrdVersion {
                schema,
                compiled,
                printer_columns: v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            })),
            conversion: None,
        });
    }
    drop(reg);
    server.registry_changed();
    tracing::info!(crd = %s(crd, "/metadata/name"), "serving custom resource");
}

/// Stops serving a deleted CRD's resources.
pub fn unregister(server: &Arc<Server>, crd: &Value) {
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    server.registry.write().remove_resource(group, plural);
    server.registry_changed();
}
