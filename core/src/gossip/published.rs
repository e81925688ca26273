//! What an agent has published of its metrics, in which encoding ([`MetricEncoding`]), and the
//! key writes that a publication, a removal or a move between encodings takes. Pure: the member
//! applies the writes to its chitchat key space.

use std::collections::{BTreeMap, BTreeSet};

use super::groups::{self, MetricEncoding};
use super::schema::{MetricValue, StateKey};
use crate::metric::MetricName;

/// One change to the member's own key space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Set a key to a value.
    Set(String, String),
    /// Delete a key.
    Delete(String),
}

/// The metrics an agent has published, and how.
#[derive(Debug, Default)]
pub struct Published {
    encoding: Option<MetricEncoding>,
    values: BTreeMap<MetricName, MetricValue>,
    /// Chunks written per group prefix, in the groups encoding.
    chunks: BTreeMap<String, usize>,
}

// === impl Published ===

impl Published {
    /// The encoding in force, once something was published.
    pub fn encoding(&self) -> Option<MetricEncoding> {
        self.encoding
    }

    /// Publishes `updates` in `encoding`; when the encoding changed, moves every metric
    /// published so far to it (its keys written, the other encoding's deleted).
    pub fn publish(
        &mut self,
        encoding: MetricEncoding,
        updates: impl IntoIterator<Item = (MetricName, MetricValue)>,
    ) -> Vec<Write> {
        let mut writes = Vec::new();
        let mut touched = BTreeSet::new();
        for (name, value) in updates {
            if encoding == MetricEncoding::Keys {
                writes.push(Write::Set(
                    StateKey::Metric(name.clone()).to_string(),
                    value.to_string(),
                ));
            }
            touched.insert(groups::prefix_of(name.as_str()).to_owned());
            self.values.insert(name, value);
        }
        match (self.encoding.replace(encoding), encoding) {
            (Some(old), new) if old != new => {
                tracing::info!(from = ?old, to = ?new, metrics = self.values.len(), "moving published metrics to another gossip encoding");
                return self.move_to(new);
            }
            (_, MetricEncoding::Keys) => {}
            (_, MetricEncoding::Groups) => {
                for prefix in touched {
                    self.write_group(&prefix, &mut writes);
                }
            }
        }
        writes
    }

    /// Stops publishing `names`.
    pub fn remove(&mut self, names: &[MetricName]) -> Vec<Write> {
        let mut touched = BTreeSet::new();
        for name in names {
            if self.values.remove(name).is_some() {
                touched.insert(groups::prefix_of(name.as_str()).to_owned());
            }
        }
        if self.encoding == Some(MetricEncoding::Groups) {
            let mut writes = Vec::new();
            for prefix in touched {
                self.write_group(&prefix, &mut writes);
            }
            return writes;
        }
        names
            .iter()
            .map(|name| Write::Delete(StateKey::Metric(name.clone()).to_string()))
            .collect()
    }

    /// Every metric written anew in `to`, the other encoding's keys deleted.
    fn move_to(&mut self, to: MetricEncoding) -> Vec<Write> {
        let mut writes = Vec::new();
        match to {
            MetricEncoding::Keys => {
                for (prefix, chunks) in std::mem::take(&mut self.chunks) {
                    for chunk in 0..chunks {
                        writes.push(Write::Delete(groups::group_key(&prefix, chunk)));
                    }
                }
                for (name, value) in &self.values {
                    writes.push(Write::Set(
                        StateKey::Metric(name.clone()).to_string(),
                        value.to_string(),
                    ));
                }
            }
            MetricEncoding::Groups => {
                let prefixes: BTreeSet<String> = self
                    .values
                    .keys()
                    .map(|n| groups::prefix_of(n.as_str()).to_owned())
                    .collect();
                for name in self.values.keys() {
                    writes.push(Write::Delete(StateKey::Metric(name.clone()).to_string()));
                }
                for prefix in prefixes {
                    self.write_group(&prefix, &mut writes);
                }
            }
        }
        writes
    }

    /// Writes the group with `prefix` from the values held, stamped with the newest of them,
    /// and deletes chunks it no longer needs.
    fn write_group(&mut self, prefix: &str, writes: &mut Vec<Write>) {
        let members: Vec<(&MetricName, &MetricValue)> = self
            .values
            .iter()
            .filter(|(n, _)| groups::prefix_of(n.as_str()) == prefix)
            .collect();
        let stamp = members
            .iter()
            .map(|(_, v)| v.measured_at_ms)
            .max()
            .unwrap_or(0);
        let chunks =
            groups::encode_group(prefix, members.iter().map(|(n, v)| (*n, v.value)), stamp);
        let before = self.chunks.get(prefix).copied().unwrap_or(0);
        for (i, value) in chunks.iter().enumerate() {
            writes.push(Write::Set(groups::group_key(prefix, i), value.clone()));
        }
        for i in chunks.len()..before {
            writes.push(Write::Delete(groups::group_key(prefix, i)));
        }
        if chunks.is_empty() {
            self.chunks.remove(prefix);
        } else {
            self.chunks.insert(prefix.to_owned(), chunks.len());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::gossip::NodeState;

    fn m(name: &str, value: f64, at: u64) -> (MetricName, MetricValue) {
        (
            MetricName::new(name).unwrap(),
            MetricValue {
                value,
                measured_at_ms: at,
            },
        )
    }

    /// Applies writes to a key space, as chitchat would.
    fn apply(space: &mut BTreeMap<String, String>, writes: Vec<Write>) {
        for w in writes {
            match w {
                Write::Set(k, v) => {
                    space.insert(k, v);
                }
                Write::Delete(k) => {
                    space.remove(&k);
                }
            }
        }
    }

    fn read(space: &BTreeMap<String, String>) -> NodeState {
        NodeState::from_key_values(space.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    #[test]
    fn groups_hold_a_family_under_one_key() {
        let mut p = Published::default();
        let mut space = BTreeMap::new();
        apply(
            &mut space,
            p.publish(
                MetricEncoding::Groups,
                [
                    m("node_cpu_utilization_ratio", 0.5, 10),
                    m("node_load1", 2.0, 10),
                    m("node_load5", 1.0, 10),
                ],
            ),
        );
        assert_eq!(space.keys().collect::<Vec<_>>(), ["M:node_", "M:node_cpu_"]);
        apply(
            &mut space,
            p.publish(MetricEncoding::Groups, [m("node_load1", 3.0, 20)]),
        );
        assert_eq!(space["M:node_"], "20;load1=3;load5=1");
        let state = read(&space);
        assert_eq!(state.metrics.len(), 3);
        apply(
            &mut space,
            p.remove(&[MetricName::new("node_cpu_utilization_ratio").unwrap()]),
        );
        assert_eq!(space.keys().collect::<Vec<_>>(), ["M:node_"]);
    }

    #[test]
    fn a_change_of_encoding_moves_every_metric() {
        let mut p = Published::default();
        let mut space = BTreeMap::new();
        let first = [
            m("node_cpu_utilization_ratio", 0.5, 10),
            m("node_load1", 2.0, 10),
        ];
        apply(&mut space, p.publish(MetricEncoding::Groups, first.clone()));
        // An old observer appears: one key per metric, groups deleted.
        apply(
            &mut space,
            p.publish(MetricEncoding::Keys, [m("node_load1", 4.0, 20)]),
        );
        assert_eq!(
            space.keys().collect::<Vec<_>>(),
            ["m:node_cpu_utilization_ratio", "m:node_load1"]
        );
        assert_eq!(space["m:node_load1"], "4@20");
        assert_eq!(read(&space).metrics.len(), 2);
        // It leaves: back to groups, keys deleted.
        apply(&mut space, p.publish(MetricEncoding::Groups, []));
        assert_eq!(space.keys().collect::<Vec<_>>(), ["M:node_", "M:node_cpu_"]);
        let state = read(&space);
        assert_eq!(state.metrics[&first[1].0].value, 4.0);
        assert_eq!(p.encoding(), Some(MetricEncoding::Groups));
    }

    #[test]
    fn readers_take_the_newer_stamp_when_a_metric_is_in_both_encodings() {
        let state = NodeState::from_key_values([
            ("m:node_load1", "1@30"),
            ("M:node_", "20;load1=2;load5=3"),
        ]);
        let load1 = &state.metrics[&MetricName::new("node_load1").unwrap()];
        assert_eq!((load1.value, load1.measured_at_ms), (1.0, 30));
        assert_eq!(state.skipped, Default::default());
    }
}
