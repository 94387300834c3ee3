//! A validator for the subset of JSON Schema that tool input schemas use.
//!
//! Supported keywords: `type` (a name or a list), `properties`, `required`,
//! `additionalProperties` (a boolean or a schema), `items`, `enum`, `const`, `minimum`,
//! `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`, `minItems`,
//! `maxItems`, `uniqueItems`, `minProperties`, `maxProperties`, `pattern` (the `regex`
//! crate's syntax, unanchored as JSON Schema's), `anyOf`, `oneOf`, `allOf`, `not`, and
//! `$ref` to a place in the same schema (`#/$defs/NAME`, `#/definitions/NAME`, `#`). Other
//! keywords are ignored, so a tool's schema never fails to load (the tool still checks what
//! matters to it); [`unsupported_keywords`] lists them for a caller that must enforce a
//! schema fully. A full validator (the `jsonschema` crate) would pull in a URL resolver and
//! dependencies cargo-deny does not allow.

use serde_json::Value;

/// Checks `input` against `schema`; returns every problem found, each naming the path of the
/// offending value (`file_path`, `edits[2].old_string`), empty when the input is valid.
pub fn validate(schema: &Value, input: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check(schema, schema, input, "", &mut problems, 0);
    problems
}

/// The keywords of `schema` (at any depth) this validator does not check and that are not
/// annotations, as `/path: keyword` lines: a caller that must enforce a schema fully (the
/// user's `--json-schema`) refuses one that needs them.
pub fn unsupported_keywords(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    unsupported_at(schema, "", &mut found);
    found.sort();
    found
}

/// Keywords checked here.
const CHECKED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "pattern",
    "$ref",
    "$defs",
    "definitions",
    "minProperties",
    "maxProperties",
    "uniqueItems",
];

/// Keywords that only describe (never make a value invalid).
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "format",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$anchor",
];

fn unsupported_at(schema: &Value, path: &str, found: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    for (key, value) in object {
        if !CHECKED.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
            found.push(format!(
                "{}: {key}",
                if path.is_empty() { "/" } else { path }
            ));
        }
        match key.as_str() {
            "properties" | "$defs" | "definitions" => {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    unsupported_at(sub, &format!("{path}/{key}/{name}"), found);
                }
            }
            "items" | "additionalProperties" | "not" => {
                unsupported_at(value, &format!("{path}/{key}"), found);
            }
            "anyOf" | "oneOf" | "allOf" => {
                for (index, sub) in value.as_array().into_iter().flatten().enumerate() {
                    unsupported_at(sub, &format!("{path}/{key}/{index}"), found);
                }
            }
            _ => {}
        }
    }
}

/// The deepest chain of `$ref`s followed (a schema that refers to itself in a loop stops
/// there).
const MAX_REF_DEPTH: u32 = 32;

/// The schema a local `$ref` (`#`, `#/$defs/NAME`, `#/definitions/NAME`, any JSON
/// pointer into the root) names.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
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

fn check(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: &str,
    problems: &mut Vec<String>,
    depth: u32,
) {
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
            .any(|option| validate_at(root, option, value, path, depth).is_empty())
    {
        problems.push(format!(
            "{} matches none of the allowed forms",
            describe(path)
        ));
    }
    if let Some(Value::Array(options)) = schema.get("oneOf") {
        let matching = options
            .iter()
            .filter(|option| validate_at(root, option, value, path, depth).is_empty())
            .count();
        if matching != 1 {
            problems.push(format!(
                "{} must match exactly one of the allowed forms, matches {matching}",
                describe(path)
            ));
        }
    }
    if let Some(Value::Array(parts)) = schema.get("allOf") {
        for part in parts {
            check(root, part, value, path, problems, depth);
        }
    }
    if let Some(not) = schema.get("not")
        && validate_at(root, not, value, path, depth).is_empty()
    {
        problems.push(format!(
            "{} matches a form that is not allowed",
            describe(path)
        ));
    }
    if let Some(Value::String(reference)) = schema.get("$ref") {
        match resolve(root, reference) {
            Some(target) if depth < MAX_REF_DEPTH => {
                check(root, target, value, path, problems, depth + 1);
            }
            Some(_) => problems.push(format!(
                "{}: the schema's references go deeper than {MAX_REF_DEPTH}",
                describe(path)
            )),
            None => problems.push(format!(
                "{}: the schema refers to {reference}, which it does not define",
                describe(path)
            )),
        }
    }
    match value {
        Value::Object(object) => {
            bound(
                schema,
                "minProperties",
                object.len(),
                path,
                "properties",
                problems,
                true,
            );
            bound(
                schema,
                "maxProperties",
                object.len(),
                path,
                "properties",
                problems,
                false,
            );
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
                    Some(property) => check(root, property, item, &child, problems, depth),
                    None => match schema.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            problems.push(format!("an unexpected parameter `{child}` was given"));
                        }
                        Some(extra @ Value::Object(_)) => {
                            check(root, extra, item, &child, problems, depth);
                        }
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
                    check(
                        root,
                        item_schema,
                        item,
                        &format!("{path}[{index}]"),
                        problems,
                        depth,
                    );
                }
            }
            if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
                for (index, item) in items.iter().enumerate() {
                    if items[..index].contains(item) {
                        problems.push(format!(
                            "{} must not repeat an item, but `{path}[{index}]` repeats one",
                            describe(path)
                        ));
                        break;
                    }
                }
            }
        }
        Value::String(text) => {
            if let Some(Value::String(pattern)) = schema.get("pattern") {
                match regex::Regex::new(pattern) {
                    Ok(regex) if !regex.is_match(text) => problems.push(format!(
                        "{} must match the pattern {pattern:?}, got {text:?}",
                        describe(path)
                    )),
                    Ok(_) => {}
                    Err(error) => problems.push(format!(
                        "{}: the schema's pattern {pattern:?} is not a valid regular expression ({error})",
                        describe(path)
                    )),
                }
            }
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

fn validate_at(root: &Value, schema: &Value, value: &Value, path: &str, depth: u32) -> Vec<String> {
    let mut problems = Vec::new();
    check(root, schema, value, path, &mut problems, depth);
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

    #[test]
    fn composition_patterns_references_and_counts() {
        let schema = json!({
            "type": "object",
            "$defs": {"id": {"type": "string", "pattern": "^[a-z]+-[0-9]+$"}},
            "properties": {
                "ids": {"type": "array", "items": {"$ref": "#/$defs/id"}, "uniqueItems": true},
                "kind": {"oneOf": [{"const": "bug"}, {"const": "task"}]},
                "size": {"allOf": [{"type": "integer"}, {"minimum": 1}], "not": {"const": 13}},
                "tags": {"type": "object", "minProperties": 1, "maxProperties": 2}
            },
            "required": ["ids"]
        });
        check(
            schema.clone(),
            json!({"ids": ["ab-1", "cd-2"], "kind": "bug", "size": 3, "tags": {"a": 1}}),
            &[],
        );
        check(
            schema.clone(),
            json!({"ids": ["ab-1", "AB", "ab-1"], "kind": "epic", "size": 13, "tags": {}}),
            &[
                "`ids[1]` must match the pattern \"^[a-z]+-[0-9]+$\", got \"AB\"",
                "`ids` must not repeat an item, but `ids[2]` repeats one",
                "`kind` must match exactly one of the allowed forms, matches 0",
                "`size` matches a form that is not allowed",
                "`tags` must have at least 1 properties, got 0",
            ],
        );
        check(
            json!({"$ref": "#/$defs/missing"}),
            json!(1),
            &["the input: the schema refers to #/$defs/missing, which it does not define"],
        );
        // A reference loop stops.
        let looped = json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
        assert_eq!(super::validate(&looped, &json!(1)).len(), 1);
        assert_eq!(
            super::unsupported_keywords(&json!({
                "type": "object", "description": "d",
                "properties": {"a": {"type": "string", "contentEncoding": "base64"}},
                "dependentRequired": {}
            })),
            ["/: dependentRequired", "/properties/a: contentEncoding"]
        );
    }
}
