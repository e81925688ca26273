//! What the documentation promises users, checked against what ships: the pod spec that makes a
//! linked pod evictable by the Kubernetes descheduler is shown where users read about descheduler
//! mode (docs/agent.md, deploy/README.md) and is exactly the one deploy/descheduler/policy.yaml's header
//! describes. The descheduler end-to-end test proves that affinity is what the descheduler acts on.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Affinity, NodeSelectorRequirement};
use serde_json::Value as Json;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo().join(relative))
        .unwrap_or_else(|e| panic!("reading {relative}: {e}"))
}

/// Returns the fenced YAML blocks of a Markdown text, each with its lines' common indentation
/// removed (blocks inside list items are indented).
fn yaml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, Vec<&str>)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        match &mut current {
            None if trimmed.starts_with("```yaml") => {
                current = Some((line.len() - trimmed.len(), Vec::new()));
            }
            Some((indent, lines)) if trimmed.starts_with("```") => {
                let indent = *indent;
                let text: Vec<&str> = lines
                    .iter()
                    .map(|l| l.get(indent..).unwrap_or(""))
                    .collect();
                blocks.push(text.join("\n"));
                current = None;
            }
            Some((_, lines)) => lines.push(line),
            None => {}
        }
    }
    blocks
}

/// Returns the required node affinity of a pod spec fragment (`spec.affinity.nodeAffinity`).
fn required_terms(pod: &Json) -> Option<Vec<NodeSelectorRequirement>> {
    let affinity: Affinity = serde_json::from_value(pod.pointer("/spec/affinity")?.clone()).ok()?;
    let required = affinity
        .node_affinity?
        .required_during_scheduling_ignored_during_execution?;
    Some(
        required
            .node_selector_terms
            .into_iter()
            .flat_map(|t| t.match_expressions.unwrap_or_default())
            .collect(),
    )
}

/// The affinity the policy file's header comment shows, as a pod spec fragment.
fn policy_header_affinity() -> Vec<NodeSelectorRequirement> {
    let policy = read("deploy/descheduler/policy.yaml");
    let header: Vec<&str> = policy
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#'))
        .skip_while(|l| !l.trim_start().starts_with("affinity:"))
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let indent = header.first().map_or(0, |l| l.len() - l.trim_start().len());
    let text: String = header
        .iter()
        .map(|l| format!("  {}\n", l.get(indent..).unwrap_or("")))
        .collect();
    let pod: Json = serde_yaml_ng::from_str(&format!("spec:\n{text}"))
        .expect("the policy header's affinity is YAML");
    required_terms(&pod).expect("the policy header shows a required node affinity")
}

#[test]
fn descheduler_mode_pod_affinity_is_documented_where_users_read_it() {
    let expected = policy_header_affinity();
    assert_eq!(
        expected,
        vec![NodeSelectorRequirement {
            key: "scheduling-policy".into(),
            operator: "NotIn".into(),
            values: Some(vec!["violating".into()]),
        }],
        "the policy header shows `<policy> NotIn [violating]` for the example policy"
    );
    for doc in ["docs/agent.md", "deploy/README.md"] {
        let shown: Vec<Vec<NodeSelectorRequirement>> = yaml_blocks(&read(doc))
            .iter()
            .filter_map(|block| serde_yaml_ng::from_str::<Json>(block).ok())
            .filter_map(|pod| required_terms(&pod))
            .collect();
        assert_eq!(
            shown,
            vec![expected.clone()],
            "{doc} shows the pod spec snippet descheduler mode needs, once and as the policy says"
        );
    }
}
