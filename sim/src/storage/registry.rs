//! The resource registry: which kinds the server serves, under which paths, with which verbs,
//! subresources and selectable fields. Built-in kinds come from [`crate::storage::builtins`];
//! custom resources are added and removed as CustomResourceDefinitions come and go.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::apiserver::encodings::conversion::{self, Conversion};
use crate::storage::builtins::BUILTINS;
pub use crate::storage::builtins::Verbs;

/// Identifies the stored collection of one resource, whatever version it is served in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId {
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name, as in URLs (`pods`).
    pub plural: String,
}

impl ResourceId {
    /// Returns the id of `plural` in `group`.
    pub fn new(group: &str, plural: &str) -> Self {
        Self {
            group: group.to_owned(),
            plural: plural.to_owned(),
        }
    }

    /// Returns the `plural.group` form the API server uses in messages (`deployments.apps`).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// The scale subresource's paths into the object (apps kinds use the fixed `spec.replicas`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// JSON path of the desired replica count, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// JSON path of the observed replica count, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// JSON path of the label selector string, if any.
    pub label_selector: Option<String>,
}

/// Everything the server needs to serve one resource in one version.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// Group, empty for core.
    pub group: String,
    /// Served version.
    pub version: String,
    /// Kind of the objects.
    pub kind: String,
    /// Plural name, used in URLs.
    pub plural: String,
    /// Singular name, lowercase kind.
    pub singular: String,
    /// Short names (`po`, `deploy`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether the status subresource exists (status is then ignored by main-resource writes).
    pub status: bool,
    /// Scale subresource, if any.
    pub scale: Option<ScalePaths>,
    /// The verbs served (reviews and bindings are create-only).
    pub verbs: Verbs,
    /// Extra field selectors beyond metadata.name and metadata.namespace, with the JSON path
    /// each reads (`spec.nodeName` reads `/spec/nodeName`).
    pub selectable_fields: Vec<String>,
    /// The storage version of this resource (conversion between versions is None: only
    /// apiVersion changes, as with a CRD's `conversion: None` strategy).
    pub storage_version: String,
    /// For custom resources: the served CRD version (printer columns, schema).
    pub crd: Option<Arc<CrdVersion>>,
    /// For a kind stored as another group's resource (`events.k8s.io` Events are core Events):
    /// that group and the conversion pair. `selectable_fields` are then the stored resource's.
    pub conversion: Option<&'static Conversion>,
}

/// What a CRD version contributes beyond names: its schema and printer columns.
#[derive(Debug)]
pub struct CrdVersion {
    /// The version's openAPIV3Schema, if given.
    pub schema: Option<Value>,
    /// Compiled schema used to prune, default and validate objects.
    pub compiled: Option<crate::apiserver::crds::schema::CompiledSchema>,
    /// additionalPrinterColumns as given.
    pub printer_columns: Vec<Value>,
}

impl ResourceDef {
    /// Returns the stored-collection id.
    pub fn id(&self) -> ResourceId {
        ResourceId::new(self.storage_group(), &self.plural)
    }

    /// Returns the group the objects are stored under (their own, unless converted).
    pub fn storage_group(&self) -> &str {
        self.conversion.map_or(&self.group, |c| c.storage_group)
    }

    /// Returns the `apiVersion` objects are stored with.
    pub fn storage_api_version(&self) -> String {
        match self.storage_group() {
            "" => self.storage_version.clone(),
            group => format!("{group}/{}", self.storage_version),
        }
    }

    /// Returns whether stored objects are served as they are (no apiVersion change, no
    /// conversion).
    pub fn serves_storage_form(&self) -> bool {
        self.version == self.storage_version && self.conversion.is_none()
    }

    /// Returns the stored selectable field a field selector's `label` reads, if supported.
    pub fn stored_field<'a>(&'a self, label: &'a str) -> Option<&'a str> {
        if let Some(conversion) = self.conversion {
            return (conversion.field_label)(label);
        }
        let supported = label == "metadata.name"
            || (self.namespaced && label == "metadata.namespace")
            || self.selectable_fields.iter().any(|f| f == label);
        supported.then_some(label)
    }

    /// Returns `group/version`, or just the version for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Returns the verbs served on the main resource, as discovery lists them.
    pub fn verbs(&self) -> &'static [&'static str] {
        self.verbs.names()
    }

    /// Returns whether objects of this resource are stored (reviews and bindings are not).
    pub fn is_stored(&self) -> bool {
        self.verbs != Verbs::CreateOnly
    }

    /// Returns the subresource names this resource serves.
    pub fn subresources(&self) -> Vec<&'static str> {
        let mut subs = Vec::new();
        if self.status {
            subs.push("status");
        }
        if self.scale.is_some() {
            subs.push("scale");
        }
        if self.group.is_empty() && self.plural == "pods" {
            subs.push("binding");
            subs.push("eviction");
        }
        subs
    }

    /// Returns true for a resource backed by a CRD.
    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }

    /// Returns whether a field selector on `field` is supported.
    pub fn supports_field(&self, field: &str) -> bool {
        self.stored_field(field).is_some()
    }
}

/// All served resources, keyed by (group, version, plural).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    by_path: HashMap<(String, String, String), Arc<ResourceDef>>,
    /// Group → versions in preference order (first is preferred).
    groups: Vec<(String, Vec<String>)>,
}

impl Registry {
    /// Returns a registry holding the built-in kinds.
    pub fn with_builtins() -> Self {
        let mut reg = Registry::default();
        for bi in BUILTINS {
            let x = &bi.extra;
            reg.insert(ResourceDef {
                group: bi.group.into(),
                version: bi.version.into(),
                kind: bi.kind.into(),
                plural: bi.plural.into(),
                singular: bi.kind.to_ascii_lowercase(),
                short_names: x.short.iter().map(|s| (*s).to_owned()).collect(),
                categories: x.categories.iter().map(|s| (*s).to_owned()).collect(),
                namespaced: bi.namespaced,
                status: x.status,
                scale: x.scale.then(|| ScalePaths {
                    spec_replicas: ".spec.replicas".into(),
                    status_replicas: ".status.replicas".into(),
                    label_selector: None,
                }),
                verbs: x.verbs,
                selectable_fields: x.fields.iter().map(|s| (*s).to_owned()).collect(),
                storage_version: bi.storage_version().into(),
                crd: None,
                conversion: conversion::for_kind(bi.group, bi.version, bi.kind),
            });
        }
        // A converted kind's stored objects carry the stored resource's selectable fields.
        let converted: Vec<Arc<ResourceDef>> = reg
            .by_path
            .values()
            .filter(|d| d.conversion.is_some())
            .cloned()
            .collect();
        for def in converted {
            if let Some(stored) = reg.storage_def(&def.id()) {
                let mut def = (*def).clone();
                def.selectable_fields = stored.selectable_fields.clone();
                reg.insert(def);
            }
        }
        reg
    }

    /// Adds (or replaces) a served resource version.
    pub fn insert(&mut self, def: ResourceDef) {
        let key = (def.group.clone(), def.version.clone(), def.plural.clone());
        match self.groups.iter_mut().find(|(g, _)| *g == def.group) {
            Some((_, versions)) => {
                if !versions.contains(&def.version) {
                    versions.push(def.version.clone());
                    sort_versions(versions);
                }
            }
            None => self
                .groups
                .push((def.group.clone(), vec![def.version.clone()])),
        }
        self.by_path.insert(key, Arc::new(def));
    }

    /// Removes every version of a resource; drops groups and versions left empty.
    pub fn remove_resource(&mut self, group: &str, plural: &str) {
        self.by_path
            .retain(|(g, _, p), _| !(g == group && p == plural));
        let by_path = &self.by_path;
        for (g, versions) in &mut self.groups {
            versions.retain(|v| by_path.keys().any(|(kg, kv, _)| kg == g && kv == v));
        }
        self.groups.retain(|(_, v)| !v.is_empty());
    }

    /// Looks up a resource by its URL coordinates.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.by_path
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
            .cloned()
    }

    /// Looks up a resource by group, version and kind.
    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        self.by_path
            .values()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
            .cloned()
    }

    /// Returns the resource in its storage version, by collection id.
    pub fn storage_def(&self, id: &ResourceId) -> Option<Arc<ResourceDef>> {
        self.by_path
            .values()
            .find(|d| {
                d.group == id.group && d.plural == id.plural && d.version == d.storage_version
            })
            .cloned()
    }

    /// Returns the groups with their versions, preferred version first; the core group first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups = self.groups.clone();
        groups.sort_by_key(|(g, _)| (!g.is_empty(), builtin_group_rank(g), g.clone()));
        groups
    }

    /// Returns the resources served in one group version, sorted by plural name.
    pub fn resources(&self, group: &str, version: &str) -> Vec<Arc<ResourceDef>> {
        let mut defs: Vec<_> = self
            .by_path
            .values()
            .filter(|d| d.group == group && d.version == version)
            .cloned()
            .collect();
        defs.sort_by(|a, b| a.plural.cmp(&b.plural));
        defs
    }
}

fn builtin_group_rank(group: &str) -> usize {
    BUILTINS
        .iter()
        .position(|b| b.group == group)
        .unwrap_or(BUILTINS.len())
}

/// Sorts versions as Kubernetes prefers them: GA before beta before alpha, higher first
/// (v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > anything else).
pub fn sort_versions(versions: &mut [String]) {
    versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
}

fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (stage, n) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    match n.parse::<u64>() {
        Ok(minor) => (stage, major, minor),
        Err(_) => (0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_by_stability_then_number() {
        let mut v: Vec<String> = ["v1alpha1", "v1beta1", "v1", "v2", "v1beta2", "foo"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        sort_versions(&mut v);
        assert_eq!(v, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }

    #[test]
    fn builtins_are_served_with_subresources() {
        let reg = Registry::with_builtins();
        let pods = reg.get("", "v1", "pods").expect("pods served");
        assert_eq!(pods.subresources(), ["status", "binding", "eviction"]);
        let deploy = reg
            .get("apps", "v1", "deployments")
            .expect("deployments served");
        assert_eq!(deploy.subresources(), ["status", "scale"]);
        assert!(reg.get("", "v1", "deployments").is_none());
        assert_eq!(reg.groups()[0].0, "");
    }

    #[test]
    fn removing_the_last_resource_drops_its_group() {
        let mut reg = Registry::with_builtins();
        reg.remove_resource("coordination.k8s.io", "leases");
        assert!(reg.groups().iter().all(|(g, _)| g != "coordination.k8s.io"));
    }
}
