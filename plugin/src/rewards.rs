//! `rewards [TYPE]`: the reward estimates the agents learned and gossiped
//! (`GET /api/v1/rewards`), decayed to now, with the score the extender gives each node now.

use serde_json::Value;

use crate::table::{self, Table, UNKNOWN};

/// The `podType` to ask for: `arg` when it is `<namespace>/<type>`, else `<namespace>/<arg>`.
pub fn pod_type(arg: &str, namespace: &str) -> String {
    if arg.contains('/') {
        arg.to_owned()
    } else {
        format!("{namespace}/{arg}")
    }
}

const COLUMNS: [&str; 7] = ["NODE", "MEAN", "GOOD", "BAD", "EVIDENCE", "SCORE", "AGE"];

fn cells(node: &Value) -> Vec<String> {
    let num = |key: &str, decimals: usize| {
        node[key]
            .as_f64()
            .map_or_else(|| UNKNOWN.to_owned(), |v| format!("{v:.decimals$}"))
    };
    vec![
        node["node"].as_str().unwrap_or(UNKNOWN).to_owned(),
        num("mean", 2),
        num("good", 1),
        num("bad", 1),
        num("evidence", 1),
        num("score", 0),
        node["ageSeconds"]
            .as_f64()
            .map_or_else(|| UNKNOWN.to_owned(), table::age_seconds),
    ]
}

/// One type's table (`GET /api/v1/rewards?podType=...`): a row per node with an estimate.
pub fn type_table(body: &Value) -> Table {
    let mut table = Table::new(&COLUMNS);
    for node in body["nodes"].as_array().into_iter().flatten() {
        table.push(cells(node));
    }
    table
}

/// Every type's table (`GET /api/v1/rewards`), only `namespace`'s types when given.
pub fn all_types_table(body: &Value, namespace: Option<&str>) -> Table {
    let headers: Vec<&str> = std::iter::once("TYPE").chain(COLUMNS).collect();
    let mut table = Table::new(&headers);
    for (ty, nodes) in body["types"].as_object().into_iter().flatten() {
        if namespace.is_some_and(|ns| ty.split_once('/').map(|(n, _)| n) != Some(ns)) {
            continue;
        }
        for node in nodes.as_array().into_iter().flatten() {
            table.push(std::iter::once(ty.clone()).chain(cells(node)).collect());
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, score: u64) -> Value {
        json!({"node": name, "mean": 0.8333, "good": 5.0, "bad": 1.0, "evidence": 6.0, "score": score, "ageSeconds": 4.2})
    }

    #[test]
    fn a_bare_type_is_in_the_namespace() {
        assert_eq!(pod_type("web", "ul"), "ul/web");
        assert_eq!(pod_type("batch/etl", "ul"), "batch/etl");
    }

    #[test]
    fn one_type_has_a_row_per_node() {
        let body = json!({"podType": "ul/web", "halfLifeSeconds": 600.0, "nodes": [node("n1", 8), node("n2", 3)]});
        let text = type_table(&body).render();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows[0], COLUMNS);
        assert_eq!(rows[1], ["n1", "0.83", "5.0", "1.0", "6.0", "8", "4s"]);
        assert_eq!(rows[2][0], "n2");
    }

    #[test]
    fn every_type_lists_its_nodes_and_a_namespace_narrows_the_types() {
        let body = json!({"types": {"batch/etl": [node("n1", 9)], "ul/web": [node("n1", 8), node("n2", 3)]}});
        assert_eq!(all_types_table(&body, None).rows().len(), 3);
        let ul = all_types_table(&body, Some("ul"));
        assert_eq!(ul.rows().len(), 2);
        assert!(ul.rows().iter().all(|r| r[0] == "ul/web"));
    }
}
