//! `top nodes`: the coordinators' view of every node (`GET /api/v1/nodes`) as a table, like
//! `kubectl top nodes` but from the gossip view, seconds old, with pressure stall (PSI) and RDT
//! columns and how old the figures are.

use serde_json::Value;

use crate::table::{self, Table, UNKNOWN};

/// How a column's figure is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// A 0–1 ratio as a whole percentage.
    Percent,
    /// A 0–1 ratio as a percentage with one decimal (stall shares are small).
    FinePercent,
    /// Bytes.
    Bytes,
    /// Bytes per second.
    BytesPerSecond,
    /// As gossiped.
    Plain,
}

/// The fixed columns: header, the agent's metric, unit.
const COLUMNS: [(&str, &str, Unit); 7] = [
    ("CPU%", "node_cpu_utilization_ratio", Unit::Percent),
    ("MEMORY%", "node_memory_utilization_ratio", Unit::Percent),
    // PSI "some" over the last 10 s: the share of time some task stalled on the resource.
    (
        "PSI-CPU",
        "node_pressure_cpu_some_avg10_ratio",
        Unit::FinePercent,
    ),
    (
        "PSI-MEMORY",
        "node_pressure_memory_some_avg10_ratio",
        Unit::FinePercent,
    ),
    (
        "PSI-IO",
        "node_pressure_io_some_avg10_ratio",
        Unit::FinePercent,
    ),
    ("LLC", "node_rdt_llc_occupancy_bytes", Unit::Bytes),
    (
        "MEMBW",
        "node_rdt_memory_bandwidth_total_bytes_per_second",
        Unit::BytesPerSecond,
    ),
];

/// The mark after a figure older than the coordinator's `--stale-after` (the extender treats it
/// as unknown).
pub const STALE_MARK: &str = "*";

fn format(value: f64, unit: Unit) -> String {
    match unit {
        Unit::Percent => table::percent(value, 0),
        Unit::FinePercent => table::percent(value, 1),
        Unit::Bytes => table::bytes(value),
        Unit::BytesPerSecond => format!("{}/s", table::bytes(value)),
        Unit::Plain => telemesh_core::gossip::schema::format_f64(value),
    }
}

/// The table of `body` (`GET /api/v1/nodes`), with a column for each of `extra` metrics.
/// AGE is the age of the oldest figure shown on the row; STALE counts the node's stale metrics.
pub fn nodes_table(body: &Value, extra: &[String]) -> Table {
    let columns: Vec<(&str, &str, Unit)> = COLUMNS
        .iter()
        .copied()
        .chain(extra.iter().map(|m| (m.as_str(), m.as_str(), Unit::Plain)))
        .collect();
    let headers: Vec<&str> = ["NAME", "STATUS"]
        .into_iter()
        .chain(columns.iter().map(|c| c.0))
        .chain(["AGE", "STALE"])
        .collect();
    let mut table = Table::new(&headers);
    for node in body["nodes"].as_array().into_iter().flatten() {
        let metrics = &node["metrics"];
        let mut oldest: Option<f64> = None;
        let mut row = vec![
            node["name"].as_str().unwrap_or(UNKNOWN).to_owned(),
            node["liveness"].as_str().unwrap_or(UNKNOWN).to_owned(),
        ];
        for (_, metric, unit) in &columns {
            let m = &metrics[*metric];
            let cell = match m["value"].as_f64() {
                Some(v) => {
                    if let Some(age) = m["ageSeconds"].as_f64() {
                        oldest = Some(oldest.map_or(age, |o| o.max(age)));
                    }
                    let mark = if m["stale"] == true { STALE_MARK } else { "" };
                    format!("{}{mark}", format(v, *unit))
                }
                None => UNKNOWN.to_owned(),
            };
            row.push(cell);
        }
        let stale = metrics
            .as_object()
            .map_or(0, |m| m.values().filter(|v| v["stale"] == true).count());
        row.push(oldest.map_or_else(|| UNKNOWN.to_owned(), table::age_seconds));
        row.push(stale.to_string());
        table.push(row);
    }
    table
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn metric(value: f64, age: f64, stale: bool) -> Value {
        json!({"value": value, "ageSeconds": age, "stale": stale, "measuredAtMs": 1})
    }

    #[test]
    fn figures_are_formatted_stale_ones_marked_and_missing_ones_unknown() {
        let body = json!({"synced": true, "nodes": [
            {"name": "n1", "liveness": "live", "metrics": {
                "node_cpu_utilization_ratio": metric(0.423, 1.5, false),
                "node_memory_utilization_ratio": metric(0.5, 0.4, false),
                "node_pressure_cpu_some_avg10_ratio": metric(0.531, 0.4, false),
                "node_rdt_llc_occupancy_bytes": metric(8.0 * 1024.0 * 1024.0, 0.4, false),
                "node_rdt_memory_bandwidth_total_bytes_per_second": metric(2.0 * 1024.0 * 1024.0 * 1024.0, 0.4, false),
                "node_health_metric": metric(-1.0, 90.0, true),
            }},
            {"name": "n2", "liveness": "dead", "metrics": {}},
        ]});
        let t = nodes_table(&body, &["node_health_metric".to_owned()]);
        let text = t.render();
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            lines[0],
            [
                "NAME",
                "STATUS",
                "CPU%",
                "MEMORY%",
                "PSI-CPU",
                "PSI-MEMORY",
                "PSI-IO",
                "LLC",
                "MEMBW",
                "NODE_HEALTH_METRIC",
                "AGE",
                "STALE"
            ]
        );
        assert_eq!(
            lines[1],
            [
                "n1", "live", "42%", "50%", "53.1%", UNKNOWN, UNKNOWN, "8Mi", "2.0Gi/s", "-1*",
                "90s", "1"
            ]
        );
        assert_eq!(lines[2][0..3], ["n2", "dead", UNKNOWN]);
        assert_eq!(lines[2][10..], [UNKNOWN, "0"]);
    }

    #[test]
    fn an_empty_view_is_an_empty_table() {
        assert!(nodes_table(&json!({"nodes": []}), &[]).is_empty());
        assert!(nodes_table(&json!({}), &[]).is_empty());
    }
}
