//! Reading an `ExtenderArgs` body in one pass, borrowing from it, and keeping only what the
//! verbs need: the pod's identity and policy label, and the candidate nodes' names. In full-node
//! mode each Node stays raw JSON (`&RawValue`): the filter echoes survivors back byte for byte
//! instead of building and re-serializing k8s-openapi objects, and a node's name is found by a
//! short scan of its first keys (`metadata` comes first in what the scheduler writes). That keeps
//! full-node calls close to the cost of merely validating the body. A nodeCacheCapable body's
//! names array, thousands of short strings, is scanned by hand (`names_body`, the rest of the
//! body still read by serde_json); any body the scan does not take, serde_json reads whole.
//!
//! Top-level keys are matched in any case ([`key_is`]); nested Kubernetes objects use their
//! exact camelCase keys, as the scheduler writes them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use telemesh_core::extender::{Key, key_is};
use telemesh_core::policy::POLICY_LINK_LABEL;

/// The parts of the pod the extender uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PodInfo<'a> {
    /// `metadata.namespace`.
    pub namespace: Cow<'a, str>,
    /// `metadata.name`.
    pub name: Cow<'a, str>,
    /// `metadata.uid`.
    pub uid: Cow<'a, str>,
    /// The `telemetry-policy` label, if any.
    pub policy: Option<Cow<'a, str>>,
    /// Every label, in body order (the pod's type is read from them).
    pub labels: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// The controlling owner's kind and name, if any (the pod's type when no label names it).
    pub controller: Option<(Cow<'a, str>, Cow<'a, str>)>,
}

// === impl PodInfo ===

impl<'a> PodInfo<'a> {
    /// The same parts of a whole Pod (preempt's request carries one), borrowed from it.
    pub fn of(pod: &'a Pod) -> Self {
        let m = &pod.metadata;
        let text = |s: &'a Option<String>| Cow::Borrowed(s.as_deref().unwrap_or_default());
        let labels = m.labels.as_ref();
        PodInfo {
            namespace: text(&m.namespace),
            name: text(&m.name),
            uid: text(&m.uid),
            policy: labels
                .and_then(|l| l.get(POLICY_LINK_LABEL))
                .map(|v| Cow::Borrowed(v.as_str())),
            labels: labels
                .into_iter()
                .flatten()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), Cow::Borrowed(v.as_str())))
                .collect(),
            controller: m
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| {
                    (
                        Cow::Borrowed(o.kind.as_str()),
                        Cow::Borrowed(o.name.as_str()),
                    )
                }),
        }
    }

    /// What workload actions' placement rule looks at.
    pub fn facts(&self) -> telemesh_core::action::placement::PodFacts<'_> {
        use telemesh_core::action::placement::{CONTROLLER_REVISION_HASH, POD_TEMPLATE_HASH};
        telemesh_core::action::placement::PodFacts {
            namespace: &self.namespace,
            name: &self.name,
            controller: self
                .controller
                .as_ref()
                .map(|(kind, name)| (kind.as_ref(), name.as_ref())),
            template_hash: self
                .labels
                .iter()
                .find(|(k, _)| k == POD_TEMPLATE_HASH || k == CONTROLLER_REVISION_HASH)
                .map(|(_, v)| v.as_ref()),
        }
    }

    /// Returns the pod's type, `<namespace>/<type>`, exactly as
    /// [`telemesh_core::reward::pod_type()`] reads it from the whole Pod: that function is given
    /// a Pod holding only the parts it looks at (namespace, name, labels, controller).
    pub fn pod_type(&self) -> String {
        let owner = self.controller.as_ref().map(|(kind, name)| OwnerReference {
            kind: kind.to_string(),
            name: name.to_string(),
            controller: Some(true),
            ..OwnerReference::default()
        });
        let pod = Pod {
            metadata: ObjectMeta {
                namespace: (!self.namespace.is_empty()).then(|| self.namespace.to_string()),
                name: Some(self.name.to_string()),
                labels: Some(
                    self.labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                owner_references: owner.map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        telemesh_core::reward::pod_type(&pod)
    }
}

/// One candidate node of a full-node request.
#[derive(Debug, Clone)]
pub struct RawNode<'a> {
    /// `metadata.name`.
    pub name: Cow<'a, str>,
    /// The Node object as received.
    pub raw: &'a RawValue,
}

/// A candidate's name in a nodeCacheCapable request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeName<'a> {
    /// Borrowed from the body, where it was written without escapes (serde_json borrows a string
    /// only then, and refuses raw control characters): `"` + this + `"` is its JSON, so the reply
    /// copies it back without looking at its bytes.
    Verbatim(&'a str),
    /// Decoded from escapes, or taken from a parsed object: written back through the encoder.
    Decoded(Cow<'a, str>),
}

// === impl NodeName ===

impl std::ops::Deref for NodeName<'_> {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        match self {
            Self::Verbatim(s) => s,
            Self::Decoded(s) => s,
        }
    }
}

/// The candidate nodes.
#[derive(Debug, Clone)]
pub enum Candidates<'a> {
    /// nodeCacheCapable: names only.
    Names(Vec<NodeName<'a>>),
    /// Full Node objects.
    Nodes(Vec<RawNode<'a>>),
}

// === impl Candidates ===

impl Candidates<'_> {
    /// Number of candidates.
    pub fn len(&self) -> usize {
        match self {
            Self::Names(n) => n.len(),
            Self::Nodes(n) => n.len(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`th candidate's name.
    #[inline]
    pub fn name(&self, i: usize) -> &str {
        match self {
            Self::Names(n) => &n[i],
            Self::Nodes(n) => &n[i].name,
        }
    }

    /// Every candidate's name, in order.
    pub fn names(&self) -> Vec<&str> {
        (0..self.len()).map(|i| self.name(i)).collect()
    }
}

/// A filter or prioritize request.
#[derive(Debug, Clone)]
pub struct Args<'a> {
    /// The pod (empty when the request had none).
    pub pod: PodInfo<'a>,
    /// The candidates.
    pub candidates: Candidates<'a>,
}

/// Why a body was refused; the message goes in the reply's `Error`.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not JSON, or not the shape of ExtenderArgs.
    #[error(
        "malformed ExtenderArgs body: {0}; send the JSON kube-scheduler sends (Pod, Nodes or NodeNames)"
    )]
    Json(#[from] serde_json::Error),
    /// Neither `Nodes` nor `NodeNames`.
    #[error(
        "ExtenderArgs names no candidate nodes: set Nodes (nodeCacheCapable: false) or NodeNames (nodeCacheCapable: true)"
    )]
    NoCandidates,
    /// A Node without `metadata.name`.
    #[error("Nodes.items[{0}] has no metadata.name")]
    UnnamedNode(usize),
}

/// Parses a filter or prioritize body.
pub fn parse_args(body: &[u8]) -> Result<Args<'_>, ParseError> {
    // One UTF-8 check of the whole body (word at a time over ASCII) instead of one per string:
    // a nodeCacheCapable body is thousands of short names. A body that is not UTF-8 goes to
    // `from_slice` for serde_json's own error.
    let raw: RawArgs<'_> = match std::str::from_utf8(body) {
        Ok(text) => match names_body(text) {
            Some(raw) => raw,
            None => serde_json::from_str(text)?,
        },
        Err(_) => serde_json::from_slice(body)?,
    };
    let candidates = match (raw.node_names, raw.nodes) {
        (Some(names), _) => Candidates::Names(names),
        (None, Some(nodes)) => {
            let mut out = Vec::with_capacity(nodes.len());
            for (i, raw) in nodes.into_iter().enumerate() {
                let name = node_name(raw).ok_or(ParseError::UnnamedNode(i))?;
                out.push(RawNode { name, raw });
            }
            Candidates::Nodes(out)
        }
        (None, None) => return Err(ParseError::NoCandidates),
    };
    Ok(Args {
        pod: raw.pod.unwrap_or_default(),
        candidates,
    })
}

/// A nodeCacheCapable body read with its names array scanned by hand: `None` for anything
/// else (a full-node body, a name with an escape, anything malformed), which serde_json then
/// reads as before, errors and all. Same answer as serde_json's wherever it answers
/// (`the_names_scan_reads_what_serde_reads`).
///
/// Why by hand: at 5,000 names serde_json spends about 370 instructions a name (callgrind:
/// its string scan, the sequence protocol, the list growing), sonic-rs 0.5 about 255 in the
/// same setting (x86-64 baseline, no AVX2 at build time), this scan about 60: eight bytes a
/// step, looking for a quote, a backslash or a control character at once. Everything else in
/// the body (the pod, unknown keys) is still read by serde_json, value by value.
fn names_body(text: &str) -> Option<RawArgs<'_>> {
    let bytes = text.as_bytes();
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut out = RawArgs {
        pod: None,
        nodes: None,
        node_names: None,
    };
    at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return None;
    }
    loop {
        // A key: a string without escapes (serde_json reads any other).
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let end = string_end(bytes, at + 1)?;
        let key = text.get(at + 1..end)?;
        at = skip_ws(bytes, end + 1);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(bytes, at + 1);
        if key_is(key, "NodeNames") && bytes.get(at) == Some(&b'[') {
            let (names, end) = scan_names(text, at)?;
            out.node_names = Some(names);
            at = end;
        } else if key_is(key, "Pod") {
            let (pod, end) = one_value::<Option<PodWire<'_>>>(text, at)?;
            out.pod = pod.map(PodWire::info);
            at = end;
        } else if key_is(key, "Nodes") || key_is(key, "NodeNames") {
            // Full-node mode, or names that are not an array: serde_json's to read.
            let (null, end) = one_value::<Option<IgnoredAny>>(text, at)?;
            if null.is_some() {
                return None;
            }
            if key_is(key, "Nodes") {
                out.nodes = None;
            } else {
                out.node_names = None;
            }
            at = end;
        } else {
            let (_, end) = one_value::<IgnoredAny>(text, at)?;
            at = end;
        }
        at = skip_ws(bytes, at);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    // Only whitespace may follow, and there must be names to have read.
    (skip_ws(bytes, at + 1) == bytes.len() && out.node_names.is_some()).then_some(out)
}

/// One JSON value of type `T` read by serde_json from `text[at..]`, and where it ends.
fn one_value<'a, T: Deserialize<'a>>(text: &'a str, at: usize) -> Option<(T, usize)> {
    let mut values = serde_json::Deserializer::from_str(text.get(at..)?).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, at + values.byte_offset()))
}

/// The names of the array opening at `text[at]` (`[`), each verbatim, and where it ends; `None`
/// when an element is not a string free of escapes and control characters. Split first by
/// quotes alone, then checked whole: with no backslash or control character anywhere in the
/// array (what kube-scheduler writes), every closing quote was the first after its opening
/// one. Otherwise (a pretty-printed body's line breaks, an escape) it is split again with
/// each string checked as it is read.
fn scan_names(text: &str, at: usize) -> Option<(Vec<NodeName<'_>>, usize)> {
    let (names, end) = split_names(text, at, next_quote)?;
    let plain = text.as_bytes()[at..end]
        .iter()
        // A fold, not `all`: no early exit, so it runs many bytes per instruction.
        .fold(true, |ok, &b| ok & (b >= 0x20) & (b != b'\\'));
    if plain {
        return Some((names, end));
    }
    split_names(text, at, string_end)
}

/// The strings of the array opening at `text[at]`, each ending where `end_of` says.
fn split_names(
    text: &str,
    at: usize,
    end_of: fn(&[u8], usize) -> Option<usize>,
) -> Option<(Vec<NodeName<'_>>, usize)> {
    let bytes = text.as_bytes();
    // Room for the names at once: a name on the wire is its quotes, a comma and, for node
    // names, seldom fewer than 20 characters; past it the list grows as it reads.
    let mut names = Vec::with_capacity(((bytes.len() - at) / 24).min(MAX_NAMES_AHEAD));
    let mut at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b']') {
        return Some((names, at + 1));
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let end = end_of(bytes, at + 1)?;
        names.push(NodeName::Verbatim(text.get(at + 1..end)?));
        at = skip_ws(bytes, end + 1);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b']') => return Some((names, at + 1)),
            _ => return None,
        }
    }
}

/// Eight bytes at a time (SWAR): `ONES` × a byte is that byte in every lane.
const ONES: u64 = u64::from_ne_bytes([0x01; 8]);

/// The high bit of every lane.
const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);

/// The lanes of `w` below `n` (n ≤ 128), flagged by their high bit: exact up to the first such
/// lane (borrows only carry upward), which is the one wanted.
#[inline]
fn lanes_below(w: u64, n: u8) -> u64 {
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH
}

/// The eight bytes at `at` as a little-endian word, if there are eight.
#[inline]
fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let mut word = [0; 8];
    word.copy_from_slice(bytes.get(at..at + 8)?);
    Some(u64::from_le_bytes(word))
}

/// The first quote at or after `at`.
#[inline]
fn next_quote(bytes: &[u8], mut at: usize) -> Option<usize> {
    while let Some(w) = word_at(bytes, at) {
        let hits = lanes_below(w ^ (ONES * u64::from(b'"')), 1);
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = bytes.get(at..)?;
    rest.iter().position(|&b| b == b'"').map(|i| at + i)
}

/// At most this many names are made room for before reading them (Kubernetes supports 5,000
/// nodes).
const MAX_NAMES_AHEAD: usize = 1 << 14;

/// The first byte at or after `at` that is not JSON whitespace.
#[inline]
fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = bytes.get(at) {
        at += 1;
    }
    at
}

/// The closing quote of the string whose first byte is `bytes[at]`; `None` when a backslash
/// or a control character comes first (serde_json's to read or refuse), or the input ends.
#[inline]
fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    while let Some(w) = word_at(bytes, at) {
        let hits = lanes_below(w ^ (ONES * u64::from(b'"')), 1)
            | lanes_below(w ^ (ONES * u64::from(b'\\')), 1)
            | lanes_below(w, 0x20);
        if hits != 0 {
            let first = at + (hits.trailing_zeros() / 8) as usize;
            return (bytes[first] == b'"').then_some(first);
        }
        at += 8;
    }
    loop {
        match *bytes.get(at)? {
            b'"' => return Some(at),
            b'\\' => return None,
            b if b < 0x20 => return None,
            _ => at += 1,
        }
    }
}

struct RawArgs<'a> {
    pod: Option<PodInfo<'a>>,
    nodes: Option<Vec<&'a RawValue>>,
    node_names: Option<Vec<NodeName<'a>>>,
}

impl<'de> Deserialize<'de> for RawArgs<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawArgs<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an ExtenderArgs object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = RawArgs {
                    pod: None,
                    nodes: None,
                    node_names: None,
                };
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    if key_is(&key, "Pod") {
                        out.pod = map.next_value::<Option<PodWire<'de>>>()?.map(PodWire::info);
                    } else if key_is(&key, "Nodes") {
                        out.nodes = map
                            .next_value::<Option<NodeListWire<'de>>>()?
                            .map(|l| l.items);
                    } else if key_is(&key, "NodeNames") {
                        out.node_names = map.next_value::<Option<Vec<NodeName<'de>>>>()?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

// Only `parse_args` deserializes names, and only from JSON: `Verbatim` relies on serde_json
// lending a string only when the body has it without escapes or control characters.
impl<'de: 'a, 'a> Deserialize<'de> for NodeName<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Key::deserialize(d)?.0 {
            Cow::Borrowed(s) => NodeName::Verbatim(s),
            decoded => NodeName::Decoded(decoded),
        })
    }
}

/// A string borrowed from the body when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Key::deserialize(d).map(|k| Str(k.0))
    }
}

#[derive(Deserialize)]
struct PodWire<'a> {
    #[serde(borrow, default)]
    metadata: Option<PodMeta<'a>>,
}

#[derive(Deserialize)]
struct PodMeta<'a> {
    #[serde(borrow, default)]
    namespace: Option<Str<'a>>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    uid: Option<Str<'a>>,
    #[serde(borrow, default)]
    labels: Option<Labels<'a>>,
    #[serde(borrow, default, rename = "ownerReferences")]
    owner_references: Option<Vec<OwnerWire<'a>>>,
}

#[derive(Deserialize)]
struct OwnerWire<'a> {
    #[serde(borrow, default)]
    kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(default)]
    controller: Option<bool>,
}

impl<'a> PodWire<'a> {
    fn info(self) -> PodInfo<'a> {
        let Some(m) = self.metadata else {
            return PodInfo::default();
        };
        let text = |s: Option<Str<'a>>| s.map(|s| s.0).unwrap_or_default();
        let labels = m.labels.unwrap_or_default();
        let controller = m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .find(|o| o.controller == Some(true))
            .map(|o| (text(o.kind), text(o.name)));
        PodInfo {
            namespace: text(m.namespace),
            name: text(m.name),
            uid: text(m.uid),
            policy: labels.policy,
            labels: labels.all,
            controller,
        }
    }
}

/// A pod's labels, borrowed, with the `telemetry-policy` label picked out.
#[derive(Default)]
struct Labels<'a> {
    policy: Option<Cow<'a, str>>,
    all: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Labels<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Labels<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of labels")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Labels::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    let value = map.next_value::<Str<'de>>()?.0;
                    if key == POLICY_LINK_LABEL {
                        out.policy = Some(value.clone());
                    }
                    out.all.push((key, value));
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

struct NodeListWire<'a> {
    items: Vec<&'a RawValue>,
}

impl<'de> Deserialize<'de> for NodeListWire<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NodeListWire<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a NodeList object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    if key == "items" {
                        items = map
                            .next_value::<Option<Items<'de>>>()?
                            .map(|i| i.0)
                            .unwrap_or_default();
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(NodeListWire { items })
            }
        }
        d.deserialize_map(V)
    }
}

/// A JSON array of objects, each kept raw.
struct Items<'a>(Vec<&'a RawValue>);

impl<'de> Deserialize<'de> for Items<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Items<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of Node objects")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(64));
                while let Some(raw) = seq.next_element::<&'de RawValue>()? {
                    if !raw.get().starts_with('{') {
                        return Err(de::Error::invalid_type(
                            de::Unexpected::Other("a non-object item"),
                            &"a Node object",
                        ));
                    }
                    out.push(raw);
                }
                Ok(Items(out))
            }
        }
        d.deserialize_seq(V)
    }
}

/// A Node's `metadata.name`: a scan of its first keys, falling back to a parse when the name
/// has escapes or the scan cannot tell.
fn node_name(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    if let Some(name) = scan::nested_plain_string(text, &["metadata", "name"]) {
        return Some(Cow::Borrowed(name));
    }
    #[derive(Deserialize)]
    struct Named<'a> {
        #[serde(borrow)]
        metadata: Option<Meta<'a>>,
    }
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow)]
        name: Option<Str<'a>>,
    }
    let named: Named<'_> = serde_json::from_str(text).ok()?;
    named.metadata?.name.map(|s| s.0)
}

/// A minimal scanner over JSON text that is already known to be valid (it came out of a
/// `RawValue`): find a nested field without building anything, skipping only the values of the
/// keys before it (the scheduler writes `metadata` first and `name` first in it, so a node's
/// name is found in its first few dozen bytes).
mod scan {
    /// The string at `path` (object keys from the top), if it has no escapes.
    pub fn nested_plain_string<'a>(text: &'a str, path: &[&str]) -> Option<&'a str> {
        let b = text.as_bytes();
        let mut i = 0;
        for field in path {
            i = field_value(text, i, field)?;
        }
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let end = string_end(b, i)?;
        let inner = &text[i + 1..end - 1];
        (!inner.contains('\\')).then_some(inner)
    }

    /// Where the value of `field` starts in the object starting at (or after blanks from) `i`.
    fn field_value(text: &str, i: usize, field: &str) -> Option<usize> {
        let b = text.as_bytes();
        let mut i = skip_ws(b, i);
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i += 1;
        loop {
            i = skip_ws(b, i);
            match b.get(i)? {
                b'}' => return None,
                b',' => {
                    i += 1;
                    continue;
                }
                b'"' => {}
                _ => return None,
            }
            let key_end = string_end(b, i)?;
            let key = &text[i + 1..key_end - 1];
            i = skip_ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            if key == field {
                return Some(i);
            }
            i = value_end(b, i)?;
        }
    }

    fn skip_ws(b: &[u8], mut i: usize) -> usize {
        while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            i += 1;
        }
        i
    }

    /// The index just past the string starting at `i` (which is `"`).
    fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
        i += 1;
        loop {
            match b.get(i)? {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
    }

    /// The index just past the value starting at `i`.
    fn value_end(b: &[u8], i: usize) -> Option<usize> {
        match b.get(i)? {
            b'"' => string_end(b, i),
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut j = i;
                loop {
                    match b.get(j)? {
                        b'"' => {
                            j = string_end(b, j)?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.checked_sub(1)?;
                            if depth == 0 {
                                return Some(j + 1);
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
            }
            _ => {
                let mut j = i;
                while !matches!(
                    b.get(j),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                ) {
                    j += 1;
                }
                Some(j)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// What serde_json alone reads from `text`, as the scan's result would be compared.
    fn by_serde(text: &str) -> Option<(Option<PodInfo<'_>>, Vec<NodeName<'_>>)> {
        let raw: RawArgs<'_> = serde_json::from_str(text).ok()?;
        if raw.nodes.is_some() {
            return None;
        }
        Some((raw.pod, raw.node_names?))
    }

    /// A JSON string of `s`, escaped or not.
    fn json_string(s: &str) -> String {
        serde_json::to_string(s).unwrap()
    }

    /// An ExtenderArgs-like body: the pod, `Nodes`, the names and an unknown key in any order
    /// and case, with any whitespace, names of any text (escaped where JSON needs it), some
    /// written in `\\u` escapes throughout.
    fn body() -> impl Strategy<Value = String> {
        let escaped = "[a-z]{1,5}".prop_map(|n| {
            let escapes: String = n.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
            format!("\"{escapes}\"")
        });
        let name = prop_oneof![4 => any::<String>().prop_map(|n| json_string(&n)), 1 => escaped];
        let names =
            proptest::collection::vec(name, 0..8).prop_map(|v| format!("[{}]", v.join(",")));
        let names = prop_oneof![names, Just("null".to_owned()), Just("7".to_owned())];
        let pod = prop_oneof![
            Just(r#"{"metadata":{"name":"p","namespace":"ns","labels":{"telemetry-policy":"pol"}}}"#.to_owned()),
            Just("null".to_owned()),
            Just(r#"{"metadata":{"name":"p\u00e9","ownerReferences":[{"kind":"ReplicaSet","name":"r","controller":true}]}}"#.to_owned()),
        ];
        let nodes = prop_oneof![
            Just("null".to_owned()),
            Just(r#"{"items":[{"metadata":{"name":"a"}}]}"#.to_owned())
        ];
        let key = |k: &'static str| {
            prop_oneof![
                Just(k.to_owned()),
                Just(k.to_lowercase()),
                Just(k.to_uppercase())
            ]
        };
        let ws = prop_oneof![Just(""), Just(" "), Just("\n  "), Just("\t\r\n")];
        (
            (key("Pod"), pod),
            (key("Nodes"), nodes),
            (key("NodeNames"), names),
            prop_oneof![
                Just(None),
                Just(Some(r#""Other":[1,2.5e3,{"a":null},true]"#.to_owned()))
            ],
            ws,
            any::<bool>(),
        )
            .prop_map(
                |((pk, pod), (nk, nodes), (ak, names), other, ws, reverse)| {
                    let mut fields = vec![
                        format!("{ws}\"{pk}\"{ws}:{ws}{pod}"),
                        format!("\"{nk}\":{ws}{nodes}"),
                        format!("\"{ak}\"{ws}:{names}{ws}"),
                    ];
                    fields.extend(other);
                    if reverse {
                        fields.reverse();
                    }
                    format!("{ws}{{{}}}{ws}", fields.join(&format!("{ws},{ws}")))
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Where the scan answers, serde_json reads the same pod and names; where it does not,
        /// the body is one serde_json must read (full-node, escapes, no names array).
        #[test]
        fn the_names_scan_reads_what_serde_reads(text in body()) {
            match names_body(&text) {
                Some(raw) => {
                    let (pod, names) = by_serde(&text).expect("serde reads what the scan read");
                    prop_assert_eq!(raw.pod, pod);
                    prop_assert_eq!(raw.node_names, Some(names));
                    prop_assert!(raw.nodes.is_none());
                }
                None => {
                    let needs_serde = by_serde(&text).is_none_or(|(_, names)| {
                        names.iter().any(|n| matches!(n, NodeName::Decoded(_)))
                    });
                    prop_assert!(needs_serde, "the scan passed over a plain names body: {}", text);
                }
            }
        }

        /// Cut anywhere, a body is refused by both or read alike.
        #[test]
        fn a_cut_body_is_read_as_serde_reads_it(text in body(), cut in any::<prop::sample::Index>()) {
            let cut = cut.index(text.len() + 1);
            let Some(text) = text.get(..cut) else { return Ok(()) };
            if let Some(raw) = names_body(text) {
                let (pod, names) = by_serde(text).expect("serde reads what the scan read");
                prop_assert_eq!(raw.pod, pod);
                prop_assert_eq!(raw.node_names, Some(names));
            }
        }
    }

    #[test]
    fn a_plain_names_body_is_scanned() {
        let text = r#"{"Pod":{"metadata":{"name":"p","labels":{"telemetry-policy":"pol"}}},"Nodes":null,"NodeNames":["n1", "n2"]}"#;
        let raw = names_body(text).expect("scanned");
        assert_eq!(raw.pod.and_then(|p| p.policy).as_deref(), Some("pol"));
        let names = raw.node_names.unwrap();
        assert_eq!(names, [NodeName::Verbatim("n1"), NodeName::Verbatim("n2")]);
    }

    #[test]
    fn the_quote_search_finds_the_first_quote() {
        for (s, end) in [
            ("abc\"", Some(3)),
            ("abcdefghijklmnop\"x\"", Some(16)),
            ("abcdefg\\\"", Some(8)),
            ("abcdefgh", None),
            ("", None),
        ] {
            assert_eq!(next_quote(s.as_bytes(), 0), end, "{s:?}");
        }
    }

    #[test]
    fn the_scan_stops_at_escapes_and_control_characters() {
        for (s, end) in [
            ("abc\"", Some(3)),
            ("abcdefghijklmnop\"", Some(16)),
            ("abcdefgh\\\"\"", None),
            ("abc\u{1}defgh\"", None),
            ("ab\u{e9}cdefghijk\"", Some(13)),
            ("abcdefgh", None),
            ("", None),
        ] {
            assert_eq!(string_end(s.as_bytes(), 0), end, "{s:?}");
        }
    }

    #[test]
    fn names_mode_borrows_and_reads_the_policy_label() {
        let body = br#"{"Pod":{"metadata":{"name":"p","namespace":"ns","uid":"u","labels":{"app":"x","telemetry-policy":"pol"}},"spec":{"containers":[]}},"Nodes":null,"NodeNames":["n1","n\u00e9"]}"#;
        let args = parse_args(body).unwrap();
        assert_eq!(args.pod.policy.as_deref(), Some("pol"));
        assert_eq!(args.pod.namespace, "ns");
        assert!(matches!(args.pod.namespace, Cow::Borrowed(_)));
        assert_eq!(args.candidates.names(), ["n1", "né"]);
        // Only the name written without escapes is verbatim: the reply copies it as it is.
        let Candidates::Names(names) = &args.candidates else {
            panic!("names mode: {:?}", args.candidates)
        };
        assert_eq!(names[0], NodeName::Verbatim("n1"));
        assert!(matches!(names[1], NodeName::Decoded(_)));
    }

    #[test]
    fn full_mode_keeps_nodes_raw_and_finds_their_names() {
        let body = br#"{"pod":{"metadata":{"name":"p"}},"NODES":{"metadata":{},"items":[
            {"metadata":{"name":"a","labels":{"name":"not-this"}},"status":{}},
            { "kind" : "Node", "spec" : {"x":[1,{"name":"no"}]}, "metadata" : { "uid":"1", "name" : "b" } },
            {"metadata":{"name":"c\"q"}}]}}"#;
        let args = parse_args(body).unwrap();
        assert_eq!(args.candidates.names(), ["a", "b", "c\"q"]);
        assert_eq!(args.pod.policy, None);
        let Candidates::Nodes(nodes) = &args.candidates else {
            panic!("full mode")
        };
        assert!(nodes[0].raw.get().starts_with(r#"{"metadata":{"name":"a""#));
    }

    #[test]
    fn bad_bodies_are_errors() {
        for body in [
            &b""[..],
            b"null",
            b"{",
            b"[]",
            br#"{"Pod":{}}"#,
            br#"{"NodeNames":[1]}"#,
            br#"{"Nodes":{"items":[1]}}"#,
            br#"{"Nodes":{"items":[{"metadata":{}}]}}"#,
            br#"{"Pod":{"metadata":{"labels":{"telemetry-policy":3}}},"NodeNames":[]}"#,
        ] {
            assert!(
                parse_args(body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
