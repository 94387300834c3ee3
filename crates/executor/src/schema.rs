//! A validator for the subset of JSON Schema that tool input schemas use.
//!
//! Supported keywords: `type` (a name or a list), `properties`, `required`,
//! `additionalProperties` (a boolean or a schema), `items`, `enum`, `const`, `minimum`,
//! `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`, `minItems`,
//! `maxItems`, `anyOf`. Other keywords (`description`, `default`, `pattern`, `$schema`, ...)
//! are ignored, so a schema never fails to load; the tool itself still checks what matters
//! to it. A full validator (the `jsonschema` crate) would pull in a regex engine and a URL
//! resolver for keywords no tool schema here uses.

use serde_json::Value;

/// Checks `input` against `schema`; returns every problem found, each naming the path of the
/// offending value (`file_path`, `edits[2].old_string`), empty when the input is valid.
pub fn validate(schema: &Value, input: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check(schema, input, "", &mut problems);
    problems
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn describe(path: &str) -> String {
    if path.is_empty() {
        "the input".to_owned()
    } else {
        format!("`{path}`")
    }
}

/// The JSON Schema type name of a value (`integer` for whole numbers).
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(number) if number.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, value: &Value) -> bool {
    let actual = type_name(value);
    expected == actual || (expected == "number" && actual == "integer")
}

fn check(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        // `true` accepts everything, `false` nothing.
        if schema == &Value::Bool(false) {
            problems.push(format!("{} is not allowed", describe(path)));
        }
        return;
    };
    if let Some(expected) = schema.get("type") {
        let names: Vec<&str> = match expected {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|name| type_matches(name, value)) {
            problems.push(format!(
                "{} must be {}, got {}",
                describe(path),
                names.join(" or "),
                type_name(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        problems.push(format!(
            "{} must be one of {}, got {value}",
            describe(path),
            list.join(", ")
        ));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        problems.push(format!(
            "{} must be {constant}, got {value}",
            describe(path)
        ));
    }
    if let Some(Value::Array(options)) = schema.get("anyOf")
        && !options
            .iter()
            .any(|option| validate_at(option, value, path).is_empty())
    {
        problems.push(format!(
            "{} matches none of the allowed forms",
            describe(path)
        ));
    }
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !object.contains_key(name) {
                        problems.push(format!(
                            "the required parameter `{}` is missing",
                            join(path, name)
                        ));
                    }
                }
            }
            for (key, item) in object {
                let child = join(path, key);
                match properties.and_then(|properties| properties.get(key)) {
                    Some(property) => check(property, item, &child, problems),
                    None => match schema.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            problems.push(format!("an unexpected parameter `{child}` was given"));
                        }
                        Some(extra @ Value::Object(_)) => check(extra, item, &child, problems),
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            bound(
                schema,
                "minItems",
                items.len(),
                path,
                "items",
                problems,
                true,
            );
            bound(
                schema,
                "maxItems",
                items.len(),
                path,
                "items",
                problems,
                false,
            );
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{index}]"), problems);
                }
            }
        }
        Value::String(text) => {
            let length = text.chars().count();
            bound(
                schema,
                "minLength",
                length,
                path,
                "characters",
                problems,
                true,
            );
            bound(
                schema,
                "maxLength",
                length,
                path,
                "characters",
                problems,
                false,
            );
        }
        Value::Number(number) => {
            if let Some(number) = number.as_f64() {
                numeric(schema, number, path, problems);
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
}

fn validate_at(schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let mut problems = Vec::new();
    check(schema, value, path, &mut problems);
    problems
}

fn bound(
    schema: &serde_json::Map<String, Value>,
    keyword: &str,
    actual: usize,
    path: &str,
    unit: &str,
    problems: &mut Vec<String>,
    is_min: bool,
) {
    let Some(limit) = schema.get(keyword).and_then(Value::as_u64) else {
        return;
    };
    let actual = actual as u64;
    if (is_min && actual < limit) || (!is_min && actual > limit) {
        let word = if is_min { "at least" } else { "at most" };
        problems.push(format!(
            "{} must have {word} {limit} {unit}, got {actual}",
            describe(path)
        ));
    }
}

fn numeric(
    schema: &serde_json::Map<String, Value>,
    number: f64,
    path: &str,
    problems: &mut Vec<String>,
) {
    let limit = |keyword: &str| schema.get(keyword).and_then(Value::as_f64);
    if let Some(min) = limit("minimum")
        && number < min
    {
        problems.push(format!(
            "{} must be at least {min}, got {number}",
            describe(path)
        ));
    }
    if let Some(max) = limit("maximum")
        && number > max
    {
        problems.push(format!(
            "{} must be at most {max}, got {number}",
            describe(path)
        ));
    }
    if let Some(min) = limit("exclusiveMinimum")
        && number <= min
    {
        problems.push(format!(
            "{} must be greater than {min}, got {number}",
            describe(path)
        ));
    }
    if let Some(max) = limit("exclusiveMaximum")
        && number >= max
    {
        problems.push(format!(
            "{} must be less than {max}, got {number}",
            describe(path)
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::validate;

    fn check(schema: serde_json::Value, input: serde_json::Value, expected: &[&str]) {
        assert_eq!(validate(&schema, &input), expected, "input {input}");
    }

    #[test]
    fn read_like_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "absolute path"},
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "exclusiveMinimum": 0}
            },
            "required": ["file_path"],
            "additionalProperties": false
        });
        check(schema.clone(), json!({"file_path": "a.rs"}), &[]);
        check(
            schema.clone(),
            json!({"file_path": "a.rs", "offset": 3.0}),
            &[],
        );
        check(
            schema.clone(),
            json!({}),
            &["the required parameter `file_path` is missing"],
        );
        check(
            schema.clone(),
            json!({"file_path": 7, "offset": 0, "limit": 0, "path": "x"}),
            &[
                "`file_path` must be string, got integer",
                "`offset` must be at least 1, got 0",
                "`limit` must be greater than 0, got 0",
                "an unexpected parameter `path` was given",
            ],
        );
        check(schema, json!([1]), &["the input must be object, got array"]);
    }

    #[test]
    fn nested_items_enums_and_lengths() {
        let schema = json!({
            "type": "object",
            "properties": {
                "mode": {"enum": ["content", "count"]},
                "edits": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["old_string"],
                    "properties": {"old_string": {"type": "string", "minLength": 1}}
                }},
                "n": {"type": ["integer", "null"], "maximum": 10}
            }
        });
        check(
            schema.clone(),
            json!({"mode": "files", "edits": [{"old_string": ""}, {}], "n": 11}),
            &[
                "`mode` must be one of \"content\", \"count\", got \"files\"",
                "`edits[0].old_string` must have at least 1 characters, got 0",
                "the required parameter `edits[1].old_string` is missing",
                "`n` must be at most 10, got 11",
            ],
        );
        check(
            schema.clone(),
            json!({"edits": [], "n": null}),
            &["`edits` must have at least 1 items, got 0"],
        );
        check(
            schema,
            json!({"n": 2.5}),
            &["`n` must be integer or null, got number"],
        );
    }
}
