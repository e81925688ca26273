//! Gossip key schema: the keys a node publishes in its chitchat key space and their typed values.
//! No networking here; `telemesh_runtime::gossip::member` owns the chitchat instance.
//!
//! | key | value | who writes it |
//! | --- | --- | --- |
//! | `v` | schema version, a decimal `u32` ([`SCHEMA_VERSION`]) | every member, at start |
//! | `role` | `agent` or `observer` | every member, at start |
//! | `leaving` | `1` | a member shutting down cleanly |
//! | `quic` | `<ip>:<port>` where the agent's QUIC server answers | agents with QUIC on |
//! | `m:<metric name>` | `<value>@<unix ms>` ([`MetricValue`]) | agents, while an observer speaks version 1 |
//! | `M:<prefix>` | a group of metrics, `<unix ms>;<suffix>=<value>;...` ([`super::groups`]) | agents (version 2) |
//! | `s:<pod uid>` | a scavenger pod's job, last checkpoint and requests ([`ScavengerPod`]) | agents |
//! | `r:<namespace>/<pod type>` | the type's decayed reward evidence, `<good>,<bad>@<unix ms>` | agents |
//! | `v:<namespace>/<policy>` | the policy's violated strategies | agents |
//!
//! **Age.** A metric's age travels inside its value, `"0.42@1767225600123"`: 14 bytes more per
//! *changed* metric. The alternative, one per-node `ts` key stamped every collection tick, would
//! have to change every tick even when no metric moved past its deadband (or readers could not
//! tell a confirmed value from a stale one), so each node would inject a ~30-byte delta (key,
//! value, version) per tick that every other node must receive: at 1,000 nodes about 30 KB/s of
//! deltas arriving at each node, most of the 40 KB/s budget, for nothing. Stamped values cost
//! only when something changes, and the agent republishes an unchanged value at its refresh
//! period, so `stale_after` above that period means "the agent stopped confirming it". Readers
//! compare stamps with their own clock, so `stale_after` must exceed the nodes' clock skew
//! (NTP keeps it in milliseconds); a stamp from the future counts as age zero. Taking the age
//! from when a reader *saw* a value instead would cost nothing on the wire, but a coordinator
//! that just joined would take hour-old values for fresh ones.
//!
//! **Compatibility.** A key never changes meaning: a new meaning is a new key, and the schema
//! version says which keys a writer knows. Readers
//! ([`NodeState::from_key_values`](super::NodeState::from_key_values)) parse what they know,
//! count and skip the rest, so agents of two versions coexist in a rolling upgrade.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::cells::Cell;
use crate::metric::{InvalidMetricName, MetricName, Sample};
pub use crate::scavenge::ScavengerPod;

/// The schema version this build writes: 2 reads and writes metric groups (`M:` keys,
/// [`super::groups`]).
pub const SCHEMA_VERSION: u32 = 2;

/// Largest value a node publishes or a reader accepts, in bytes. chitchat stops propagating a
/// node's updates when one value nears 64 KiB, so values stay far below that.
pub const MAX_VALUE_LEN: usize = 4096;

/// Largest key a node publishes or a reader accepts, in bytes.
pub const MAX_KEY_LEN: usize = 256;

const SCHEMA_VERSION_KEY: &str = "v";
/// The key of a member's role ([`StateKey::Role`]).
pub const ROLE_KEY: &str = "role";
const LEAVING_KEY: &str = "leaving";
/// The key of an agent's QUIC address ([`StateKey::QuicAddr`]).
pub const QUIC_ADDR_KEY: &str = "quic";
/// The key of the cell a member says it is in ([`StateKey::Cell`]).
pub const CELL_KEY: &str = "cell";
/// The prefix of single metric keys ([`StateKey::Metric`]).
pub const METRIC_PREFIX: &str = "m:";
/// The key prefix of metric groups.
pub const GROUP_PREFIX: &str = "M:";
const REWARD_PREFIX: &str = "r:";
const VIOLATION_PREFIX: &str = "v:";
/// The prefix of scavenger pod keys ([`StateKey::Scavenger`]).
pub const SCAVENGER_PREFIX: &str = "s:";

/// Schema errors: what a writer refuses to publish and why a reader skipped an entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// A key this schema version does not define.
    #[error("gossip key {key:?} is not in schema version {SCHEMA_VERSION}; readers skip it")]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// `m:` followed by something that is not a metric name.
    #[error("gossip key {key:?} does not name a metric: {source}")]
    BadMetricName {
        /// The key.
        key: String,
        /// Why the name is refused.
        #[source]
        source: InvalidMetricName,
    },
    /// A reserved prefix with an empty or unprintable rest.
    #[error(
        "gossip key {key:?} has an empty or unprintable suffix; use printable ASCII without spaces"
    )]
    BadSuffix {
        /// The key.
        key: String,
    },
    /// A key longer than [`MAX_KEY_LEN`].
    #[error(
        "gossip key {key:?} is {len} bytes; keys are capped at {MAX_KEY_LEN} bytes: shorten the name"
    )]
    KeyTooLong {
        /// The key.
        key: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A value longer than [`MAX_VALUE_LEN`].
    #[error(
        "value of gossip key {key} is {len} bytes; values are capped at {MAX_VALUE_LEN} bytes \
         because chitchat stalls a node whose value nears 64 KiB: split or shrink it"
    )]
    ValueTooLarge {
        /// The key.
        key: String,
        /// The value's length in bytes.
        len: usize,
    },
    /// A metric value that is not `<number>@<unix ms>`.
    #[error("metric value {value:?} is malformed; expected <finite number>@<unix milliseconds>")]
    MalformedMetricValue {
        /// The value as received.
        value: String,
    },
    /// A NaN or infinite sample.
    #[error(
        "metric {name} is {value}; collectors drop what they cannot measure instead of publishing it"
    )]
    NonFinite {
        /// The metric.
        name: MetricName,
        /// The value.
        value: f64,
    },
}

/// Results of this module.
pub type Result<T, E = SchemaError> = std::result::Result<T, E>;

impl SchemaError {
    /// A bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownKey { .. } => "unknown_key",
            Self::BadMetricName { .. } => "bad_metric_name",
            Self::BadSuffix { .. } => "bad_suffix",
            Self::KeyTooLong { .. } => "key_too_long",
            Self::ValueTooLarge { .. } => "value_too_large",
            Self::MalformedMetricValue { .. } => "malformed_metric_value",
            Self::NonFinite { .. } => "non_finite",
        }
    }
}

/// One key of a node's gossip key space.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StateKey {
    /// `v`: the schema version the writer speaks.
    SchemaVersion,
    /// `role`: agent or observer.
    Role,
    /// `leaving`: set by a member shutting down cleanly, so peers drop it at once.
    Leaving,
    /// `quic`: the address of the agent's QUIC server (per-pod detail for the coordinator).
    QuicAddr,
    /// `cell`: `<index>/<count>`, the gossip cell a member joined ([`super::cells`]); absent in
    /// the flat mesh, as members before cells wrote nothing.
    Cell,
    /// `m:<name>`: one node metric.
    Metric(MetricName),
    /// `M:<prefix>` or `M:<prefix>#<chunk>`: a group of metrics ([`super::groups`]); holds
    /// the key's rest after `M:`.
    MetricGroup(String),
    /// `r:<rest>`: reserved for rewards; the rest is printable ASCII without spaces.
    Reward(String),
    /// `v:<rest>`: reserved for policy violations; the rest is printable ASCII without spaces.
    Violation(String),
    /// `s:<pod uid>`: one scavenger pod on the node ([`ScavengerPod`]).
    Scavenger(String),
}

// === impl StateKey ===

impl StateKey {
    /// Checks that the key, as written, is at most [`MAX_KEY_LEN`] bytes with a valid suffix.
    pub fn validate(&self) -> Result<()> {
        let key = self.to_string();
        if key.len() > MAX_KEY_LEN {
            return Err(SchemaError::KeyTooLong {
                len: key.len(),
                key,
            });
        }
        match self {
            Self::Reward(rest) | Self::Violation(rest) | Self::Scavenger(rest)
                if !valid_suffix(rest) =>
            {
                Err(SchemaError::BadSuffix { key })
            }
            _ => Ok(()),
        }
    }

    /// Checks a value for this key: at most [`MAX_VALUE_LEN`] bytes.
    pub fn validate_value(&self, value: &str) -> Result<()> {
        if value.len() > MAX_VALUE_LEN {
            return Err(SchemaError::ValueTooLarge {
                key: self.to_string(),
                len: value.len(),
            });
        }
        Ok(())
    }
}

fn valid_suffix(rest: &str) -> bool {
    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_graphic())
}

/// The metric family a group key's rest (after [`GROUP_PREFIX`]) names: `<prefix>` or
/// `<prefix>#<chunk>`, `*` for the names without a family (`""`); `None` when malformed.
pub fn group_family(rest: &str) -> Option<&str> {
    let prefix = match rest.split_once('#') {
        Some((prefix, chunk)) if !chunk.is_empty() && chunk.bytes().all(|b| b.is_ascii_digit()) => {
            prefix
        }
        Some(_) => return None,
        None => rest,
    };
    match prefix {
        "*" => Some(""),
        "" => None,
        p if p
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') =>
        {
            Some(p)
        }
        _ => None,
    }
}

impl fmt::Display for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SchemaVersion => f.write_str(SCHEMA_VERSION_KEY),
            Self::Role => f.write_str(ROLE_KEY),
            Self::Leaving => f.write_str(LEAVING_KEY),
            Self::QuicAddr => f.write_str(QUIC_ADDR_KEY),
            Self::Cell => f.write_str(CELL_KEY),
            Self::Metric(name) => write!(f, "{METRIC_PREFIX}{name}"),
            Self::MetricGroup(rest) => write!(f, "{GROUP_PREFIX}{rest}"),
            Self::Reward(rest) => write!(f, "{REWARD_PREFIX}{rest}"),
            Self::Violation(rest) => write!(f, "{VIOLATION_PREFIX}{rest}"),
            Self::Scavenger(uid) => write!(f, "{SCAVENGER_PREFIX}{uid}"),
        }
    }
}

impl FromStr for StateKey {
    type Err = SchemaError;

    fn from_str(key: &str) -> Result<Self> {
        if key.len() > MAX_KEY_LEN {
            return Err(SchemaError::KeyTooLong {
                key: key.to_owned(),
                len: key.len(),
            });
        }
        let suffix = |rest: &str| {
            if valid_suffix(rest) {
                Ok(rest.to_owned())
            } else {
                Err(SchemaError::BadSuffix {
                    key: key.to_owned(),
                })
            }
        };
        match key {
            SCHEMA_VERSION_KEY => Ok(Self::SchemaVersion),
            ROLE_KEY => Ok(Self::Role),
            LEAVING_KEY => Ok(Self::Leaving),
            QUIC_ADDR_KEY => Ok(Self::QuicAddr),
            CELL_KEY => Ok(Self::Cell),
            _ => {
                if let Some(name) = key.strip_prefix(METRIC_PREFIX) {
                    MetricName::new(name).map(Self::Metric).map_err(|source| {
                        SchemaError::BadMetricName {
                            key: key.to_owned(),
                            source,
                        }
                    })
                } else if let Some(rest) = key.strip_prefix(GROUP_PREFIX) {
                    group_family(rest)
                        .map(|_| Self::MetricGroup(rest.to_owned()))
                        .ok_or_else(|| SchemaError::BadSuffix {
                            key: key.to_owned(),
                        })
                } else if let Some(rest) = key.strip_prefix(REWARD_PREFIX) {
                    suffix(rest).map(Self::Reward)
                } else if let Some(rest) = key.strip_prefix(VIOLATION_PREFIX) {
                    suffix(rest).map(Self::Violation)
                } else if let Some(rest) = key.strip_prefix(SCAVENGER_PREFIX) {
                    suffix(rest).map(Self::Scavenger)
                } else {
                    Err(SchemaError::UnknownKey {
                        key: key.to_owned(),
                    })
                }
            }
        }
    }
}

/// What a member is in the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A node agent: publishes its node's metrics.
    Agent,
    /// A coordinator replica: publishes nothing about nodes; readers skip it.
    Observer,
}

// === impl Role ===

impl Role {
    /// The value of the `role` key.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Observer => "observer",
        }
    }

    pub(crate) fn parse(value: &str) -> Option<Self> {
        match value {
            "agent" => Some(Self::Agent),
            "observer" => Some(Self::Observer),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A published metric value with the wall-clock time it was measured: `<value>@<unix ms>`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricValue {
    /// The value; always finite.
    pub value: f64,
    /// When it was measured, in milliseconds since the Unix epoch (the writer's clock).
    pub measured_at_ms: u64,
}

// === impl MetricValue ===

impl MetricValue {
    /// Stamps a sample value with `measured_at`; refuses NaN and infinities.
    pub fn new(name: &MetricName, value: f64, measured_at: SystemTime) -> Result<Self> {
        if !value.is_finite() {
            return Err(SchemaError::NonFinite {
                name: name.clone(),
                value,
            });
        }
        Ok(Self {
            value,
            measured_at_ms: unix_ms(measured_at),
        })
    }

    /// Returns when the value was measured.
    pub fn measured_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.measured_at_ms)
    }

    /// Returns the value's age at `now`; a stamp ahead of `now` (clock skew) has age zero.
    pub fn age(&self, now: SystemTime) -> Duration {
        Duration::from_millis(unix_ms(now).saturating_sub(self.measured_at_ms))
    }

    /// Returns the value if it is at most `stale_after` old at `now`; older ones count as unknown.
    pub fn fresh(&self, now: SystemTime, stale_after: Duration) -> Option<f64> {
        (self.age(now) <= stale_after).then_some(self.value)
    }
}

impl fmt::Display for MetricValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", format_f64(self.value), self.measured_at_ms)
    }
}

impl FromStr for MetricValue {
    type Err = SchemaError;

    fn from_str(s: &str) -> Result<Self> {
        let malformed = || SchemaError::MalformedMetricValue {
            value: s.chars().take(64).collect(),
        };
        let (value, at) = s.rsplit_once('@').ok_or_else(malformed)?;
        let value: f64 = value.parse().map_err(|_| malformed())?;
        // u64 parsing refuses signs other than '+', spaces and empty strings.
        let measured_at_ms: u64 = at.parse().map_err(|_| malformed())?;
        if !value.is_finite() || at.starts_with('+') {
            return Err(malformed());
        }
        Ok(Self {
            value,
            measured_at_ms,
        })
    }
}

/// Formats a finite f64 in the fewest characters that parse back to the same bits: Rust's
/// shortest round-trip digits, positional (`0.42`, `17`) or exponential (`1e21`, `1.5e-7`),
/// whichever is shorter.
pub fn format_f64(v: f64) -> String {
    let positional = format!("{v}");
    let exponential = format!("{v:e}");
    if exponential.len() < positional.len() {
        exponential
    } else {
        positional
    }
}

/// Milliseconds since the Unix epoch; times before it count as zero.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Returns the `(key, value)` to publish for `sample` measured at `at` as its own `m:` key.
pub fn metric_entry(sample: &Sample, at: SystemTime) -> Result<(String, String)> {
    let value = published_value(sample, at)?;
    Ok((
        StateKey::Metric(sample.name.clone()).to_string(),
        value.to_string(),
    ))
}

/// Returns `sample` as published at `at`: its name checked as a key, its value finite (and
/// exact: [`super::groups`], "Values are exact") and within [`MAX_VALUE_LEN`] as a `m:` value.
pub fn published_value(sample: &Sample, at: SystemTime) -> Result<MetricValue> {
    let key = StateKey::Metric(sample.name.clone());
    key.validate()?;
    let value = MetricValue::new(&sample.name, sample.value, at)?;
    key.validate_value(&value.to_string())?;
    Ok(value)
}

/// Returns the entries every member publishes when it starts: schema version, role, and its
/// cell unless it is in the flat mesh (readers there may predate the key).
pub fn identity_entries(role: Role, cell: Cell) -> Vec<(String, String)> {
    let mut entries = vec![
        (
            StateKey::SchemaVersion.to_string(),
            SCHEMA_VERSION.to_string(),
        ),
        (StateKey::Role.to_string(), role.as_str().to_owned()),
    ];
    if !cell.cells().is_flat() {
        entries.push((StateKey::Cell.to_string(), cell.to_string()));
    }
    entries
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn name(s: &str) -> MetricName {
        MetricName::new(s).unwrap()
    }

    #[test]
    fn keys_round_trip() {
        let keys = [
            StateKey::SchemaVersion,
            StateKey::Role,
            StateKey::Leaving,
            StateKey::Cell,
            StateKey::Metric(name("node_cpu_utilization_ratio")),
            StateKey::Metric(name("a:b_c")),
            StateKey::Reward("web/node-1".into()),
            StateKey::Violation("high-cpu".into()),
            StateKey::Scavenger("6f1e2d3c-4b5a-4d3c-8b1a-0f9e8d7c6b5a".into()),
        ];
        for key in keys {
            let text = key.to_string();
            assert_eq!(text.parse::<StateKey>().unwrap(), key, "{text}");
        }
        assert_eq!(StateKey::Metric(name("x")).to_string(), "m:x");
        assert_eq!(StateKey::SchemaVersion.to_string(), "v");
        assert_eq!(StateKey::QuicAddr.to_string(), "quic");
        assert_eq!(StateKey::Violation("p".into()).to_string(), "v:p");
    }

    #[test]
    fn bad_keys_are_refused_with_a_reason() {
        let cases = [
            ("ts", "unknown_key"),
            ("m:", "bad_metric_name"),
            ("m:1cpu", "bad_metric_name"),
            ("r:", "bad_suffix"),
            ("v:has space", "bad_suffix"),
            ("V", "unknown_key"),
        ];
        for (key, kind) in cases {
            assert_eq!(key.parse::<StateKey>().unwrap_err().kind(), kind, "{key}");
        }
        let long = format!("m:{}", "a".repeat(MAX_KEY_LEN));
        assert_eq!(long.parse::<StateKey>().unwrap_err().kind(), "key_too_long");
        let key = StateKey::Metric(name(&"a".repeat(MAX_KEY_LEN)));
        assert_eq!(key.validate().unwrap_err().kind(), "key_too_long");
    }

    /// A small deterministic generator, so the property tests need no extra dependency.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn metric_values_round_trip_bit_for_bit() {
        let mut specials = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            0.42,
            1e21,
            1.5e-7,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
            5e-324,
            123_456_789.0,
        ];
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let v = f64::from_bits(rng.next());
            if v.is_finite() {
                specials.push(v);
            }
            specials.push((rng.next() % 1_000_000) as f64 / 1000.0);
        }
        for (i, v) in specials.into_iter().enumerate() {
            let mv = MetricValue {
                value: v,
                measured_at_ms: rng.next() % 4_000_000_000_000 + i as u64,
            };
            let text = mv.to_string();
            let back: MetricValue = text.parse().unwrap();
            assert_eq!(back.value.to_bits(), v.to_bits(), "{text}");
            assert_eq!(back.measured_at_ms, mv.measured_at_ms);
            assert!(text.len() <= 24 + 1 + 20, "{text}");
        }
    }

    #[test]
    fn values_use_the_shorter_notation() {
        assert_eq!(format_f64(0.42), "0.42");
        assert_eq!(format_f64(17.0), "17");
        assert_eq!(format_f64(1e21), "1e21");
        assert_eq!(format_f64(1.5e-7), "1.5e-7");
        assert_eq!(format_f64(-0.0), "-0");
        let v = MetricValue {
            value: 0.42,
            measured_at_ms: 1_767_225_600_123,
        };
        assert_eq!(v.to_string(), "0.42@1767225600123");
    }

    #[test]
    fn malformed_metric_values_are_refused() {
        for bad in [
            "", "1", "@1", "1@", "x@1", "1@x", "NaN@1", "inf@1", "1@-1", "1@+1", "1@1.5", "1@ 1",
        ] {
            assert!(bad.parse::<MetricValue>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn non_finite_samples_are_not_published() {
        let s = Sample {
            name: name("x"),
            value: f64::NAN,
        };
        assert_eq!(
            metric_entry(&s, SystemTime::now()).unwrap_err().kind(),
            "non_finite"
        );
    }
}
