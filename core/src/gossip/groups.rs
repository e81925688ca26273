//! Metric groups (schema version 2): a node's metrics packed into a few `M:<prefix>` keys, one
//! per family of names that a collection pass measures together, instead of one `m:<name>` key
//! per metric. Pure: grouping, the value codec and the choice of encoding; no networking.
//!
//! **Why.** Every chitchat key costs each member a key string, a value string and a version in
//! its copy of every other member's state, and a key, a value, a version and a status in every
//! delta that carries it. At 1,000 members an agent held about 32 keys per member, most of its
//! heap. A group holds one stamp for all its metrics (the collection that measured them) and
//! names relative to its prefix, so the state holds a handful of keys per member.
//!
//! **Value.** `<unix ms>;<suffix>=<value>;<suffix>=<value>...`, suffixes sorted, where a
//! metric's full name is the key's prefix followed by its suffix. `M:node_pressure_` =
//! `1767225600123;cpu_some_avg10_ratio=0.12;io_some_avg10_ratio=0`. The prefix is the name up
//! to and including its second `_` (`node_cpu_`), else its first (`node_` for `node_load1`),
//! else empty, written `*`. A group whose value would pass [`MAX_VALUE_LEN`] is split into
//! chunks `M:<prefix>`, `M:<prefix>#1`, ... by whole entries.
//!
//! **Values are exact** (both encodings): each is written in the shortest text that reads back as
//! the same `f64` ([`format_f64`]), so every reader holds the agent's own value bit for bit. They
//! were rounded to 6 significant digits before, which saved bytes but made gossip carry values
//! that were not the node's: a node reporting 1000001 bytes was 1000000 to the coordinators, and
//! a rule `GreaterThan 1000000` was violated for its agent (and for TAS, which reads the node's
//! own figure) but not for the extender. What exactness costs on the wire is measured by
//! `runtime/benches/gossip.rs` (docs/scale.md, "Exact values"). The agent's deadband still holds
//! back small moves, but never one that takes a value across a policy's target
//! (`telemesh_core::policy::targets`), so the value gossip carries is always on the same side of
//! every target as the agent's own.
//!
//! **Rolling upgrades.** Version 1 readers skip `M:` keys as unknown. So a writer packs groups
//! only while no live observer advertises a schema below 2 ([`choose_encoding`]); otherwise it
//! keeps one key per metric, and it moves its metrics from one encoding to the other (writing
//! the new keys, deleting the old) when that changes. Version 2 readers read both, the newer
//! stamp winning when a metric is in both.

use std::collections::BTreeMap;

pub use super::schema::GROUP_PREFIX;
use super::schema::{self, MAX_VALUE_LEN, MetricValue, Role, format_f64};
use crate::metric::MetricName;

/// The schema version that reads metric groups.
pub const GROUPS_SINCE: u32 = 2;

/// How a writer lays out its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricEncoding {
    /// One `m:<name>` key per metric (schema version 1).
    Keys,
    /// `M:<prefix>` keys, one per family (schema version 2).
    Groups,
}

/// Chooses the encoding from the members in view, as `(role, advertised schema version)`:
/// groups, unless a live observer (a reader of metrics) advertises no version or one below
/// [`GROUPS_SINCE`]. Agents do not read each other's metrics, so only observers count.
pub fn choose_encoding(
    members: impl IntoIterator<Item = (Option<Role>, Option<u32>)>,
) -> MetricEncoding {
    let old_reader = members.into_iter().any(|(role, version)| {
        role == Some(Role::Observer) && version.is_none_or(|v| v < GROUPS_SINCE)
    });
    if old_reader {
        MetricEncoding::Keys
    } else {
        MetricEncoding::Groups
    }
}

/// The group prefix of a metric name: up to and including its second `_`, else its first,
/// else empty.
pub fn prefix_of(name: &str) -> &str {
    let mut underscores = name.match_indices('_').map(|(i, _)| i);
    match (underscores.next(), underscores.next()) {
        (_, Some(second)) => &name[..=second],
        (Some(first), None) => &name[..=first],
        (None, None) => "",
    }
}

/// The key of chunk `chunk` of the group with `prefix`.
pub fn group_key(prefix: &str, chunk: usize) -> String {
    let prefix = if prefix.is_empty() { "*" } else { prefix };
    if chunk == 0 {
        format!("{GROUP_PREFIX}{prefix}")
    } else {
        format!("{GROUP_PREFIX}{prefix}#{chunk}")
    }
}

/// Encodes one group's metrics, stamped `at_ms`, into chunk values of at most
/// [`MAX_VALUE_LEN`] bytes. `metrics` must all have `prefix` ([`prefix_of`]).
pub fn encode_group<'a>(
    prefix: &str,
    metrics: impl IntoIterator<Item = (&'a MetricName, f64)>,
    at_ms: u64,
) -> Vec<String> {
    let stamp = at_ms.to_string();
    let mut chunks = Vec::new();
    let mut current = stamp.clone();
    for (name, value) in metrics {
        let suffix = name.as_str().strip_prefix(prefix).unwrap_or(name.as_str());
        let entry = format!(";{suffix}={}", format_f64(value));
        if current.len() + entry.len() > MAX_VALUE_LEN && current.len() > stamp.len() {
            chunks.push(std::mem::replace(&mut current, stamp.clone()));
        }
        current.push_str(&entry);
    }
    if current.len() > stamp.len() {
        chunks.push(current);
    }
    chunks
}

/// Why a group value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// The key's rest is not `<prefix>` or `<prefix>#<chunk>`.
    #[error(
        "metric group key rest {0:?} is malformed; expected a metric name prefix, '*' or prefix#n"
    )]
    BadKey(String),
    /// The value is not `<unix ms>;<suffix>=<value>...`.
    #[error(
        "metric group value {0:?} is malformed; expected <unix ms>;<suffix>=<finite number>;..."
    )]
    BadValue(String),
}

/// The prefix a group key's rest (after `M:`) names ([`schema::group_family`], with the
/// error).
pub fn parse_group_rest(rest: &str) -> Result<&str, GroupError> {
    schema::group_family(rest).ok_or_else(|| GroupError::BadKey(rest.chars().take(64).collect()))
}

/// Decodes a group value under `prefix` into full metric names and stamped values. All or
/// nothing: a malformed entry refuses the whole value.
pub fn decode_group(
    prefix: &str,
    value: &str,
) -> Result<BTreeMap<MetricName, MetricValue>, GroupError> {
    let bad = || GroupError::BadValue(value.chars().take(64).collect());
    let mut parts = value.split(';');
    let stamp = parts.next().unwrap_or("");
    if stamp.is_empty() || !stamp.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let measured_at_ms: u64 = stamp.parse().map_err(|_| bad())?;
    let mut out = BTreeMap::new();
    for entry in parts {
        let (suffix, number) = entry.split_once('=').ok_or_else(bad)?;
        let name = MetricName::new(format!("{prefix}{suffix}")).map_err(|_| bad())?;
        let value: f64 = number.parse().map_err(|_| bad())?;
        if !value.is_finite() || suffix.is_empty() {
            return Err(bad());
        }
        out.insert(
            name,
            MetricValue {
                value,
                measured_at_ms,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn name(s: &str) -> MetricName {
        MetricName::new(s).unwrap()
    }

    #[test]
    fn prefixes_follow_the_second_underscore() {
        assert_eq!(
            prefix_of("node_pressure_cpu_some_avg10_ratio"),
            "node_pressure_"
        );
        assert_eq!(prefix_of("node_load1"), "node_");
        assert_eq!(prefix_of("up"), "");
        assert_eq!(prefix_of("_x_y"), "_x_");
    }

    /// Values cross gossip exactly: what a reader decodes is the agent's value bit for bit,
    /// however many digits it needs (rounded to 6 digits, 1000001 read back as 1000000).
    #[test]
    fn values_read_back_bit_for_bit() {
        let values = [
            1_000_001.0,
            1_999_999_999.0,
            0.123_456_789_123,
            15_987_654_321.0,
            0.1 + 0.2,
            -1.0,
            0.0,
            -0.0,
            1.234_567e-9,
            f64::MAX,
            5e-324,
        ];
        let names: Vec<MetricName> = (0..values.len())
            .map(|i| name(&format!("node_x_{i}")))
            .collect();
        let chunks = encode_group("node_x_", names.iter().zip(values), 1_000);
        let back = decode_group("node_x_", &chunks[0]).unwrap();
        for (n, v) in names.iter().zip(values) {
            assert_eq!(back[n].value.to_bits(), v.to_bits(), "{n}: {}", chunks[0]);
        }
        assert!(chunks[0].contains(";0=1000001;"), "{}", chunks[0]);
    }

    #[test]
    fn groups_round_trip() {
        let metrics = [
            (name("node_pressure_cpu_some_avg10_ratio"), 0.12),
            (name("node_pressure_io_full_avg60_ratio"), 0.0),
        ];
        let chunks = encode_group(
            "node_pressure_",
            metrics.iter().map(|(n, v)| (n, *v)),
            1_000,
        );
        assert_eq!(
            chunks,
            ["1000;cpu_some_avg10_ratio=0.12;io_full_avg60_ratio=0"]
        );
        let back = decode_group("node_pressure_", &chunks[0]).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[&metrics[0].0].value, 0.12);
        assert_eq!(back[&metrics[1].0].measured_at_ms, 1_000);
    }

    #[test]
    fn a_large_group_splits_into_chunks_under_the_cap() {
        let metrics: Vec<(MetricName, f64)> = (0..400)
            .map(|i| {
                (
                    name(&format!("node_textfile_series_number_{i}")),
                    i as f64 + 0.5,
                )
            })
            .collect();
        let chunks = encode_group("node_textfile_", metrics.iter().map(|(n, v)| (n, *v)), 7);
        assert!(chunks.len() > 1);
        let mut all = BTreeMap::new();
        for c in &chunks {
            assert!(c.len() <= MAX_VALUE_LEN);
            all.extend(decode_group("node_textfile_", c).unwrap());
        }
        assert_eq!(all.len(), 400);
        assert_eq!(group_key("node_textfile_", 2), "M:node_textfile_#2");
        assert_eq!(
            parse_group_rest("node_textfile_#2").unwrap(),
            "node_textfile_"
        );
        assert_eq!(parse_group_rest("*").unwrap(), "");
    }

    #[test]
    fn malformed_groups_are_refused_whole() {
        for bad in ["", "x;a=1", "1;a", "1;a=nan", "1;=1", "1;a-b=1", "1;a=1;b"] {
            assert!(decode_group("node_", bad).is_err(), "{bad}");
        }
        for bad in ["", "a#", "a#x", "a b", "#1"] {
            assert!(parse_group_rest(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_old_observer_keeps_one_key_per_metric() {
        use MetricEncoding::*;
        assert_eq!(choose_encoding([]), Groups);
        assert_eq!(choose_encoding([(Some(Role::Agent), Some(1))]), Groups);
        assert_eq!(choose_encoding([(Some(Role::Observer), Some(2))]), Groups);
        assert_eq!(
            choose_encoding([
                (Some(Role::Observer), Some(2)),
                (Some(Role::Observer), Some(1))
            ]),
            Keys
        );
        assert_eq!(choose_encoding([(Some(Role::Observer), None)]), Keys);
    }
}
