//! `-o json|yaml`: the value a subcommand shows, serialized.

use anyhow::Context as _;
use serde_json::Value;

use crate::cli::Output;

/// `value` as JSON (indented, as kubectl prints) or YAML; `None` for the table format.
pub fn serialize(format: Output, value: &Value) -> anyhow::Result<Option<String>> {
    Ok(match format {
        Output::Table => None,
        Output::Json => Some(serde_json::to_string_pretty(value).context("writing JSON")? + "\n"),
        Output::Yaml => Some(serde_yaml_ng::to_string(value).context("writing YAML")?),
    })
}

/// A `v1` `List` of `items`, as kubectl prints a listing with `-o json|yaml`.
pub fn list(items: Vec<Value>) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn json_and_yaml_carry_the_same_value_and_table_is_left_to_the_caller() {
        let v = list(vec![json!({"a": 1})]);
        let j = serialize(Output::Json, &v).unwrap().unwrap();
        let y = serialize(Output::Yaml, &v).unwrap().unwrap();
        assert_eq!(serde_json::from_str::<Value>(&j).unwrap(), v);
        assert_eq!(serde_yaml_ng::from_str::<Value>(&y).unwrap(), v);
        assert!(serialize(Output::Table, &v).unwrap().is_none());
    }
}
