//! `actions [-w]`: WorkloadActions as a table (the CRD's printer columns and the requester),
//! oldest first as the executor takes them.

use jiff::Timestamp;
use kube::ResourceExt as _;
use telemesh_core::action::WorkloadAction;

use crate::table::{self, NONE, Table};

/// Orders actions as they arrived (`spec.receivedAt`, then name), as the executor runs them.
pub fn sort(actions: &mut [WorkloadAction]) {
    actions.sort_by(|a, b| {
        (&a.spec.received_at, a.metadata.name.as_deref())
            .cmp(&(&b.spec.received_at, b.metadata.name.as_deref()))
    });
}

/// An empty table with the columns (NAMESPACE first with `all_namespaces`).
pub fn table(all_namespaces: bool) -> Table {
    let columns = [
        "NAME",
        "METHOD",
        "TARGET",
        "NODE",
        "PHASE",
        "REQUESTER",
        "AGE",
    ];
    if all_namespaces {
        Table::new(
            &std::iter::once("NAMESPACE")
                .chain(columns)
                .collect::<Vec<_>>(),
        )
    } else {
        Table::new(&columns)
    }
}

/// One action's row at `now`.
pub fn row(a: &WorkloadAction, now: Timestamp, all_namespaces: bool) -> Vec<String> {
    let namespace = all_namespaces.then(|| a.namespace().unwrap_or_default());
    namespace
        .into_iter()
        .chain([
            a.name_any(),
            a.spec.method.clone(),
            a.spec.target.clone(),
            a.spec.node.clone().unwrap_or_else(|| NONE.to_owned()),
            a.phase().as_str().to_owned(),
            a.spec.requester.username.clone(),
            table::age_since(a.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
        ])
        .collect()
}

/// The table of `actions` at `now`.
pub fn actions_table(actions: &[WorkloadAction], now: Timestamp, all_namespaces: bool) -> Table {
    let mut t = table(all_namespaces);
    for a in actions {
        t.push(row(a, now, all_namespaces));
    }
    t
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::{Value, json};

    use super::*;

    /// An action as the API server stores it.
    pub(crate) fn action(
        name: &str,
        method: &str,
        received: &str,
        status: Value,
    ) -> WorkloadAction {
        serde_json::from_value(json!({
            "apiVersion": "telemesh.io/v1alpha1", "kind": "WorkloadAction",
            "metadata": {"name": name, "namespace": "ul", "creationTimestamp": "2026-11-25T01:00:00Z"},
            "spec": {"method": method, "params": {"pod": {"namespace": "ul", "name": "web-1"}, "node": {"name": "n3"}},
                     "target": "Pod/web-1", "node": "n3", "requester": {"username": "alice"}, "receivedAt": received},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn rows_show_the_printer_columns_and_the_requester_in_arrival_order() {
        let mut list = vec![
            action(
                "wa-b",
                "Scale",
                "2026-11-25T01:00:02.000000Z",
                json!({"phase": "Running"}),
            ),
            action("wa-a", "Move", "2026-11-25T01:00:01.000000Z", json!(null)),
        ];
        sort(&mut list);
        let now: Timestamp = "2026-11-25T01:05:00Z".parse().unwrap();
        let text = actions_table(&list, now, false).render();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "NAME",
                "METHOD",
                "TARGET",
                "NODE",
                "PHASE",
                "REQUESTER",
                "AGE"
            ]
        );
        assert_eq!(
            rows[1],
            ["wa-a", "Move", "Pod/web-1", "n3", "Pending", "alice", "5m"]
        );
        assert_eq!(rows[2][4], "Running");
        let all = actions_table(&list, now, true);
        assert_eq!(all.rows()[0][0..2], ["ul", "wa-a"]);
    }
}
