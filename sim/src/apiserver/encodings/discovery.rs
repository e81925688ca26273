//! Discovery documents: the legacy per-group lists and the aggregated `apidiscovery.k8s.io/v2`
//! form, chosen by the Accept header as kube-apiserver does.

use serde_json::{Value, json};

use crate::storage::registry::{Registry, ResourceDef};

/// Which discovery form the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// APIVersions / APIGroupList / APIResourceList.
    Legacy,
    /// APIGroupDiscoveryList in the given apidiscovery version (`v2` or `v2beta1`).
    Aggregated(&'static str),
}

impl DiscoveryFormat {
    /// Reads the Accept header: the first aggregated form offered wins, else legacy.
    pub fn from_accept(accept: &str) -> Self {
        for part in accept.split(',') {
            if part.contains("as=APIGroupDiscoveryList") && part.contains("g=apidiscovery.k8s.io") {
                if part.contains("v=v2beta1") {
                    return Self::Aggregated("v2beta1");
                }
                if part.contains("v=v2") {
                    return Self::Aggregated("v2");
                }
            }
        }
        Self::Legacy
    }

    /// Returns the response Content-Type.
    pub fn content_type(self) -> String {
        match self {
            Self::Legacy => "application/json".into(),
            Self::Aggregated(v) => {
                format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList")
            }
        }
    }
}

/// `GET /api`, legacy form.
pub fn core_versions(server_addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_addr}]
    })
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `GET /apis`, legacy form.
pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_entry(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>`.
pub fn group(reg: &Registry, group: &str) -> Option<Value> {
    reg.groups()
        .iter()
        .find(|(g, _)| g == group && !g.is_empty())
        .map(|(g, vs)| {
            let mut e = group_entry(g, vs);
            e["kind"] = json!("APIGroup");
            e["apiVersion"] = json!("v1");
            e
        })
}

/// Extra subresource entries: (name, group, version, kind, verbs).
fn subresource_entries(
    def: &ResourceDef,
) -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    String,
    Vec<&'static str>,
)> {
    let mut subs = Vec::new();
    for sub in def.subresources() {
        match sub {
            "status" => subs.push((
                "status",
                "",
                "",
                def.kind.clone(),
                vec!["get", "patch", "update"],
            )),
            "scale" => subs.push((
                "scale",
                "autoscaling",
                "v1",
                "Scale".into(),
                vec!["get", "patch", "update"],
            )),
            "binding" => subs.push(("binding", "", "v1", "Binding".into(), vec!["create"])),
            "eviction" => subs.push((
                "eviction",
                "policy",
                "v1",
                "Eviction".into(),
                vec!["create"],
            )),
            _ => {}
        }
    }
    subs
}

/// `GET /api/v1` or `/apis/<group>/<version>`, legacy form. None if the group version is not served.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = reg.resources(group, version);
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for def in &defs {
        let mut r = json!({
            "name": def.plural,
            "singularName": def.singular,
            "namespaced": def.namespaced,
            "kind": def.kind,
            "verbs": def.verbs(),
        });
        if !def.short_names.is_empty() {
            r["shortNames"] = json!(def.short_names);
        }
        if !def.categories.is_empty() {
            r["categories"] = json!(def.categories);
        }
        resources.push(r);
        for (sub, g, v, kind, verbs) in subresource_entries(def) {
            let mut s = json!({"name": format!("{}/{sub}", def.plural), "singularName": "", "namespaced": def.namespaced, "kind": kind, "verbs": verbs});
            if !v.is_empty() {
                s["group"] = json!(g);
                s["version"] = json!(v);
            }
            resources.push(s);
        }
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn aggregated_resource(def: &ResourceDef) -> Value {
    let mut r = json!({
        "resource": def.plural,
        "responseKind": {"group": def.group, "version": def.version, "kind": def.kind},
        "scope": if def.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": def.singular,
        "verbs": def.verbs(),
    });
    if !def.short_names.is_empty() {
        r["shortNames"] = json!(def.short_names);
    }
    if !def.categories.is_empty() {
        r["categories"] = json!(def.categories);
    }
    let subs: Vec<Value> = subresource_entries(def)
        .into_iter()
        .map(|(sub, g, v, kind, verbs)| {
            let (g, v) = if v.is_empty() { (def.group.as_str(), def.version.as_str()) } else { (g, v) };
            json!({"subresource": sub, "responseKind": {"group": g, "version": v, "kind": kind}, "verbs": verbs})
        })
        .collect();
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

/// `GET /api` (core only) or `/apis` (every other group), aggregated form.
pub fn aggregated(reg: &Registry, core: bool, version: &str) -> Value {
    let items: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = reg
                        .resources(g, v)
                        .iter()
                        .map(|d| aggregated_resource(d))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let meta = if g.is_empty() {
                json!({"creationTimestamp": null})
            } else {
                json!({"name": g, "creationTimestamp": null})
            };
            json!({"metadata": meta, "versions": vs})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_selects_aggregated_discovery() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            DiscoveryFormat::from_accept(kubectl),
            DiscoveryFormat::Aggregated("v2")
        );
        assert_eq!(
            DiscoveryFormat::from_accept("application/json"),
            DiscoveryFormat::Legacy
        );
    }

    #[test]
    fn core_resource_list_has_subresources_with_their_kinds() {
        let reg = Registry::with_builtins();
        let list = resource_list(&reg, "", "v1").expect("core served");
        let names: Vec<&str> = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"pods/eviction"));
        let eviction = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == "pods/eviction");
        assert_eq!(eviction.map(|e| e["group"].clone()), Some(json!("policy")));
    }

    #[test]
    fn aggregated_lists_groups_with_scope() {
        let reg = Registry::with_builtins();
        let doc = aggregated(&reg, false, "v2");
        let apps = doc["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["metadata"]["name"] == "apps")
            .cloned();
        let apps = apps.unwrap_or_default();
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["resource"] == "deployments")
            .cloned()
            .unwrap_or_default();
        assert_eq!(deploy["scope"], "Namespaced");
        assert_eq!(deploy["subresources"][1]["responseKind"]["kind"], "Scale");
    }
}
