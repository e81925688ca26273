//! What Telemesh ships, read from the workspace for tests that install it as a user would: the
//! plain manifests, `deploy/manifests/telemesh.yaml` (the chart rendered; what `kubectl apply
//! -f` installs). Test helpers: they panic, naming the file, when it cannot be read.

use serde_json::Value;

/// Every document of `deploy/manifests/telemesh.yaml`.
pub fn manifests() -> Vec<Value> {
    let path =
        crate::control_plane::binaries::workspace_root().join("deploy/manifests/telemesh.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| {
            serde::Deserialize::deserialize(d)
                .unwrap_or_else(|e| panic!("a document of {}: {e}", path.display()))
        })
        .filter(|d: &Value| !d.is_null())
        .collect()
}

/// The object of `kind` named `name` among `docs` ([`manifests`]).
pub fn object<T: serde::de::DeserializeOwned>(docs: &[Value], kind: &str, name: &str) -> T {
    let doc = docs
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/manifests/telemesh.yaml"));
    serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{kind} {name}: {e}"))
}
