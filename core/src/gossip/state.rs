//! One node's state as a reader understands it: its gossip keys ([`StateKey`]) read into
//! typed values, metrics from `m:` keys and metric groups ([`super::groups`]) alike.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::cells::Cell;
use super::groups;
use super::schema::{MAX_VALUE_LEN, MetricValue, Role, ScavengerPod, StateKey};
use crate::metric::MetricName;

/// Entries a reader skipped, counted rather than fatal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Keys this schema version does not know (newer writers, typos, oversize keys).
    pub unknown_keys: u32,
    /// Known keys whose value did not parse or exceeded [`MAX_VALUE_LEN`].
    pub malformed_values: u32,
}

/// One node's state as a reader understands it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeState {
    /// The writer's schema version, if it published one.
    pub schema_version: Option<u32>,
    /// The writer's role, if published and known.
    pub role: Option<Role>,
    /// Whether the member announced it is shutting down.
    pub leaving: bool,
    /// Where its QUIC server answers, if it runs one.
    pub quic_addr: Option<std::net::SocketAddr>,
    /// The gossip cell it joined; `None` in the flat mesh.
    pub cell: Option<Cell>,
    /// Its metrics with their measurement times.
    pub metrics: BTreeMap<MetricName, MetricValue>,
    /// Reserved `r:` entries, unparsed (key without prefix → value).
    pub rewards: BTreeMap<String, String>,
    /// Reserved `v:` entries, unparsed (key without prefix → value).
    pub violations: BTreeMap<String, String>,
    /// Scavenger pods on the node, by pod uid.
    pub scavengers: BTreeMap<String, ScavengerPod>,
    /// What was skipped while reading.
    pub skipped: Skipped,
}

// === impl NodeState ===

impl NodeState {
    /// Reads a node's key-values: parses what this schema knows, counts and skips unknown keys
    /// and malformed values, never fails.
    pub fn from_key_values<'a>(key_values: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut state = Self::default();
        for (key, value) in key_values {
            let Ok(key) = key.parse::<StateKey>() else {
                state.skipped.unknown_keys += 1;
                continue;
            };
            if !state.read(key, value) {
                state.skipped.malformed_values += 1;
            }
        }
        state
    }

    /// Stores one entry; returns false when the value is malformed.
    fn read(&mut self, key: StateKey, value: &str) -> bool {
        if value.len() > MAX_VALUE_LEN {
            return false;
        }
        match key {
            StateKey::SchemaVersion => value
                .parse()
                .ok()
                .filter(|_| !value.starts_with('+'))
                .map(|v| self.schema_version = Some(v))
                .is_some(),
            StateKey::Role => Role::parse(value).map(|r| self.role = Some(r)).is_some(),
            StateKey::Leaving => {
                self.leaving = true;
                true
            }
            StateKey::QuicAddr => value.parse().map(|a| self.quic_addr = Some(a)).is_ok(),
            StateKey::Cell => value.parse().map(|c| self.cell = Some(c)).is_ok(),
            StateKey::Metric(name) => value
                .parse::<MetricValue>()
                .map(|v| self.insert_newer(name, v))
                .is_ok(),
            StateKey::MetricGroup(rest) => groups::parse_group_rest(&rest)
                .ok()
                .and_then(|prefix| groups::decode_group(prefix, value).ok())
                .map(|metrics| {
                    for (name, v) in metrics {
                        self.insert_newer(name, v);
                    }
                })
                .is_some(),
            StateKey::Reward(rest) => {
                self.rewards.insert(rest, value.to_owned());
                true
            }
            StateKey::Violation(rest) => {
                self.violations.insert(rest, value.to_owned());
                true
            }
            StateKey::Scavenger(uid) => value
                .parse::<ScavengerPod>()
                .map(|pod| {
                    self.scavengers.insert(uid, pod);
                })
                .is_ok(),
        }
    }

    /// Keeps `v` for `name` unless a newer stamp is already there (a metric may be in both a
    /// `m:` key and a group while its writer moves between encodings).
    fn insert_newer(&mut self, name: MetricName, v: MetricValue) {
        match self.metrics.get_mut(&name) {
            Some(old) if old.measured_at_ms > v.measured_at_ms => {}
            Some(old) => *old = v,
            None => {
                self.metrics.insert(name, v);
            }
        }
    }

    /// Whether this is a node agent (readers building a cluster view keep only these).
    pub fn is_agent(&self) -> bool {
        self.role == Some(Role::Agent)
    }

    /// Returns the metric a policy names, by full name or without its `node_` prefix.
    pub fn metric(&self, policy_name: &str) -> Option<&MetricValue> {
        if let Some(v) = MetricName::new(policy_name)
            .ok()
            .and_then(|n| self.metrics.get(&n))
        {
            return Some(v);
        }
        self.metrics
            .iter()
            .find(|(name, _)| name.answers_to(policy_name))
            .map(|(_, v)| v)
    }

    /// Returns the metrics at most `stale_after` old at `now`; older ones count as unknown.
    pub fn fresh_metrics(
        &self,
        now: SystemTime,
        stale_after: Duration,
    ) -> impl Iterator<Item = (&MetricName, f64)> {
        self.metrics
            .iter()
            .filter_map(move |(name, v)| v.fresh(now, stale_after).map(|v| (name, v)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::gossip::cells::Cells;
    use crate::gossip::schema::{SCHEMA_VERSION, identity_entries, metric_entry};
    use crate::metric::Sample;

    fn name(s: &str) -> MetricName {
        MetricName::new(s).unwrap()
    }

    #[test]
    fn the_quic_address_and_scavengers_are_read() {
        let state = NodeState::from_key_values([("quic", "127.0.0.1:7443"), ("m:x", "1@2")]);
        assert_eq!(state.quic_addr, Some("127.0.0.1:7443".parse().unwrap()));
        let state = NodeState::from_key_values([("quic", "not an address")]);
        assert_eq!((state.quic_addr, state.skipped.malformed_values), (None, 1));
        let state = NodeState::from_key_values([("s:u1", "ns/job@5@250@1024"), ("s:u2", "junk")]);
        assert_eq!(state.scavengers["u1"].job, "ns/job");
        assert_eq!(state.scavengers["u1"].checkpoint_ms, 5);
        assert_eq!(
            (state.scavengers.len(), state.skipped.malformed_values),
            (1, 1)
        );
    }

    #[test]
    fn reader_ignores_unknown_keys_and_counts_malformed_values() {
        let kvs = [
            ("v", "2"),
            ("role", "agent"),
            ("m:node_cpu_utilization_ratio", "0.5@1000"),
            ("m:node_memory_ratio", "garbage"),
            ("m:bad-name", "1@1"),
            ("x:from_a_newer_agent", "whatever"),
            ("r:web", "0.9"),
            ("v:high-cpu", "{}"),
        ];
        let state = NodeState::from_key_values(kvs);
        assert_eq!(state.schema_version, Some(2));
        assert!(state.is_agent());
        assert_eq!(state.metrics.len(), 1);
        assert_eq!(state.metric("cpu_utilization_ratio").unwrap().value, 0.5);
        assert_eq!(state.rewards["web"], "0.9");
        assert_eq!(state.violations["high-cpu"], "{}");
        assert_eq!(
            state.skipped,
            Skipped {
                unknown_keys: 2,
                malformed_values: 1
            }
        );
    }

    #[test]
    fn reader_refuses_oversize_values_and_unknown_roles() {
        let big = format!("1@{}", "1".repeat(MAX_VALUE_LEN));
        let state =
            NodeState::from_key_values([("m:x", big.as_str()), ("role", "scheduler"), ("v", "-1")]);
        assert!(state.metrics.is_empty());
        assert_eq!(state.role, None);
        assert_eq!(state.schema_version, None);
        assert_eq!(state.skipped.malformed_values, 3);
    }

    #[test]
    fn written_entries_read_back() {
        let at = UNIX_EPOCH + Duration::from_millis(1_767_225_600_123);
        let samples = [
            Sample {
                name: name("node_cpu_utilization_ratio"),
                value: 0.25,
            },
            Sample {
                name: name("node_psi_cpu_some_ratio"),
                value: 1e-9,
            },
        ];
        let mut entries = identity_entries(Role::Agent, Cells::FLAT.of("n"));
        for s in &samples {
            entries.push(metric_entry(s, at).unwrap());
        }
        let state = NodeState::from_key_values(entries.iter().map(|(k, v)| (&**k, &**v)));
        assert_eq!(state.schema_version, Some(SCHEMA_VERSION));
        assert_eq!(state.skipped, Skipped::default());
        for s in &samples {
            let v = state.metrics[&s.name];
            assert_eq!(v.value, s.value);
            assert_eq!(v.measured_at(), at);
        }
    }

    #[test]
    fn stale_metrics_count_as_unknown() {
        let at = UNIX_EPOCH + Duration::from_secs(1_000);
        let state = NodeState::from_key_values([("m:a", "1@1000000"), ("m:b", "2@990000")]);
        let fresh: Vec<_> = state
            .fresh_metrics(at + Duration::from_secs(5), Duration::from_secs(10))
            .collect();
        assert_eq!(fresh, vec![(&name("a"), 1.0)]);
        // A stamp from a clock ahead of ours is age zero, not an error.
        assert_eq!(
            state.metrics[&name("a")].age(at - Duration::from_secs(3)),
            Duration::ZERO
        );
    }
}
