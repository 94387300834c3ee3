//! Canonical JSON: the same value always prints the same bytes, whatever the key order.

use serde_json::Value;

/// `value` with the keys of every object sorted, recursively (arrays keep their order). Used to
/// compare requests (cassette matching) and tool inputs (the repeated-call guard) independently
/// of the key order the model or the serializer chose.
pub fn canonical_json(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key.clone(), canonical_json(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical_json).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::canonical_json;

    #[test]
    fn key_order_does_not_matter() {
        let a = json!({"b": 1, "a": {"d": [2, {"y": 1, "x": 0}], "c": 3}});
        let b = json!({"a": {"c": 3, "d": [2, {"x": 0, "y": 1}]}, "b": 1});
        assert_eq!(
            canonical_json(&a).to_string(),
            canonical_json(&b).to_string()
        );
        assert_eq!(
            canonical_json(&a).to_string(),
            r#"{"a":{"c":3,"d":[2,{"x":0,"y":1}]},"b":1}"#
        );
    }
}
