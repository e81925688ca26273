//! Label and field selectors with the API server's syntax (k8s.io/apimachinery `labels.Parse`
//! and `fields.ParseSelector`), parsed once per request and matched against stored objects.

use std::collections::BTreeMap;

/// A selector that did not parse; the server answers 400 BadRequest with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelReq {
    /// `key=value` or `key==value`.
    Eq(String, String),
    /// `key!=value`: also true when the key is absent.
    NotEq(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)`: also true when the key is absent.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    NotExists(String),
}

/// A parsed label selector: all requirements must hold. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelReq>);

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_label_req(part)?);
        }
        Ok(Self(reqs))
    }

    /// Returns true when the selector has no requirement.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Returns whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => labels.get(k) == Some(v),
            LabelReq::NotEq(k, v) => labels.get(k) != Some(v),
            LabelReq::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelReq::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
        })
    }

    /// Builds a selector from a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`),
    /// as PodDisruptionBudgets and workloads carry it. `None` means the object selects nothing
    /// (a null selector), an empty object selects everything.
    pub fn from_label_selector_object(
        sel: &serde_json::Value,
    ) -> Result<Option<Self>, SelectorError> {
        if sel.is_null() {
            return Ok(None);
        }
        let mut reqs = Vec::new();
        if let Some(ml) = sel.get("matchLabels").and_then(|m| m.as_object()) {
            for (k, v) in ml {
                let v = v.as_str().ok_or_else(|| {
                    SelectorError(format!("matchLabels value of {k} is not a string"))
                })?;
                reqs.push(LabelReq::Eq(k.clone(), v.to_owned()));
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(|m| m.as_array()) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(|k| k.as_str())
                    .unwrap_or_default()
                    .to_owned();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(|v| v.as_array())
                    .map(|vs| {
                        vs.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let op = e
                    .get("operator")
                    .and_then(|o| o.as_str())
                    .unwrap_or_default();
                reqs.push(match op {
                    "In" => LabelReq::In(key, values),
                    "NotIn" => LabelReq::NotIn(key, values),
                    "Exists" => LabelReq::Exists(key),
                    "DoesNotExist" => LabelReq::NotExists(key),
                    other => {
                        return Err(SelectorError(format!(
                            "{other:?} is not a valid label selector operator"
                        )));
                    }
                });
            }
        }
        Ok(Some(Self(reqs)))
    }

    /// Renders the selector in query syntax (the scale subresource's `status.selector`).
    pub fn to_query(&self) -> String {
        self.0
            .iter()
            .map(|r| match r {
                LabelReq::Eq(k, v) => format!("{k}={v}"),
                LabelReq::NotEq(k, v) => format!("{k}!={v}"),
                LabelReq::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                LabelReq::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                LabelReq::Exists(k) => k.clone(),
                LabelReq::NotExists(k) => format!("!{k}"),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_label_req(part: &str) -> Result<LabelReq, SelectorError> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        validate_label_key(key)?;
        return Ok(LabelReq::NotExists(key.to_owned()));
    }
    for (op, ctor) in [("!=", 1u8), ("==", 0), ("=", 0)] {
        if let Some((k, v)) = part.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            validate_label_key(k)?;
            validate_label_value(v)?;
            return Ok(if ctor == 1 {
                LabelReq::NotEq(k.into(), v.into())
            } else {
                LabelReq::Eq(k.into(), v.into())
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words.as_slice() {
        let rest = rest.trim_start();
        let (negated, list) = if let Some(l) = rest.strip_prefix("notin") {
            (true, l)
        } else if let Some(l) = rest.strip_prefix("in") {
            (false, l)
        } else {
            return Err(SelectorError(format!(
                "unable to parse requirement: found '{rest}', expected: in, notin, =, ==, !=, gt, lt"
            )));
        };
        let list = list.trim();
        let inner = list
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(|| {
                SelectorError(format!(
                    "unable to parse requirement: found '{list}', expected: '('"
                ))
            })?;
        let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
        for v in &values {
            validate_label_value(v)?;
        }
        validate_label_key(key)?;
        if values.iter().all(String::is_empty) {
            return Err(SelectorError(
                "for 'in', 'notin' operators, values set can't be empty".into(),
            ));
        }
        return Ok(if negated {
            LabelReq::NotIn((*key).into(), values)
        } else {
            LabelReq::In((*key).into(), values)
        });
    }
    validate_label_key(part)?;
    Ok(LabelReq::Exists(part.to_owned()))
}

fn validate_label_key(key: &str) -> Result<(), SelectorError> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || prefix.len() > 253 {
                return Err(SelectorError(format!(
                    "invalid label key {key:?}: prefix part must be a DNS subdomain"
                )));
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !is_qualified_name_part(name) {
        return Err(SelectorError(format!(
            "invalid label key {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )));
    }
    Ok(())
}

fn validate_label_value(v: &str) -> Result<(), SelectorError> {
    if v.is_empty() {
        return Ok(());
    }
    if v.len() > 63 || !is_qualified_name_part(v) {
        return Err(SelectorError(format!(
            "invalid label value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )));
    }
    Ok(())
}

fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// One requirement of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldReq {
    /// Field name (`spec.nodeName`).
    pub field: String,
    /// Compared value.
    pub value: String,
    /// True for `!=`.
    pub negated: bool,
}

/// A parsed field selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldReq>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter (`a=b,c!=d`, with `\` escaping `,`, `=`, `!` and `\`).
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_unescaped(text, ',') {
            if part.is_empty() {
                continue;
            }
            let (field, value, negated) = if let Some((f, v)) = split_op(&part, "!=") {
                (f, v, true)
            } else if let Some((f, v)) = split_op(&part, "==") {
                (f, v, false)
            } else if let Some((f, v)) = split_op(&part, "=") {
                (f, v, false)
            } else {
                return Err(SelectorError(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                )));
            };
            reqs.push(FieldReq {
                field: unescape(&field),
                value: unescape(&value),
                negated,
            });
        }
        Ok(Self(reqs))
    }

    /// Returns the value required by an equality on `field`, the kind of requirement the
    /// store indexes watchers by.
    pub fn equality(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|r| !r.negated && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// Returns whether the object's field values satisfy every requirement; `get` returns a
    /// field's value (absent fields compare as the empty string, as upstream).
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| {
            let v = get(&r.field).unwrap_or("");
            (v == r.value) != r.negated
        })
    }
}

/// Splits at unescaped `sep`, keeping escapes for a later unescape.
fn split_unescaped(text: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            cur.push(c);
            if let Some(n) = chars.next() {
                cur.push(n);
            }
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    parts.push(cur);
    parts
}

/// Splits at the first unescaped occurrence of `op`.
fn split_op(part: &str, op: &str) -> Option<(String, String)> {
    let bytes = part.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if part[i..].starts_with(op) {
            // `a!=b` must not be read as `a!` `=` `b`.
            if op == "=" && i > 0 && bytes[i - 1] == b'!' {
                return None;
            }
            return Some((part[..i].to_owned(), part[i + op.len()..].to_owned()));
        }
        i += 1;
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_label_operator_matches_like_upstream() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("missing notin (web)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier in (front)", true),
            ("app=web,tier=back", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&l),
                want,
                "selector {sel:?}"
            );
        }
    }

    #[test]
    fn bad_label_selectors_are_errors() {
        for bad in [
            "app in web",
            "app in ()",
            "-app=x",
            "app=x y",
            "app foo (x)",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn label_selector_object_is_converted() {
        let sel = serde_json::json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]});
        let parsed = LabelSelector::from_label_selector_object(&sel)
            .unwrap()
            .unwrap();
        assert_eq!(parsed.to_query(), "app=web,tier in (a,b)");
        assert!(
            LabelSelector::from_label_selector_object(&serde_json::Value::Null)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn field_selectors_parse_escapes_and_negation() {
        let sel =
            FieldSelector::parse(r"spec.nodeName=node-1,status.phase!=Failed,metadata.name=a\,b")
                .unwrap();
        assert_eq!(sel.0.len(), 3);
        assert_eq!(sel.0[2].value, "a,b");
        assert_eq!(sel.equality("spec.nodeName"), Some("node-1"));
        assert_eq!(sel.equality("status.phase"), None);
        let get = |f: &str| match f {
            "spec.nodeName" => Some("node-1"),
            "status.phase" => Some("Running"),
            "metadata.name" => Some("a,b"),
            _ => None,
        };
        assert!(sel.matches(get));
        assert!(
            !FieldSelector::parse("spec.nodeName=node-2")
                .unwrap()
                .matches(get)
        );
        assert!(FieldSelector::parse("spec.nodeName").is_err());
        // Absent fields compare as empty.
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .unwrap()
                .matches(|_| None)
        );
    }
}
