//! Tool schemas every client can take.
//!
//! schemars writes JSON Schema 2020-12 as Rust sees a type: an `Option<T>`
//! field is `"type": ["string", "null"]` (or an `anyOf` with a null
//! branch), a nested type is a `$ref` into `$defs`, an integer carries a
//! Rust `format` such as `uint32`. Clients that take the OpenAPI subset of
//! JSON Schema (Gemini's among them) refuse those. So every tool's input and
//! output schema is rewritten once, when the tools are made:
//!
//! - an optional field is a field of one type that is simply not in
//!   `required` (the type already says whether it is);
//! - `$ref`s are inlined and `$defs` and `$schema` dropped;
//! - only the formats OpenAPI knows (`int32`, `int64`, `float`, `double`,
//!   `date-time`) are kept; a `null` default is dropped;
//! - `pattern`s are dropped: they are there for the REST API's document
//!   (`/api/openapi.json`), which a fuzzer holds the relay to; in a tool's
//!   schema they would cost every agent's context hundreds of tokens for
//!   what the descriptions already say, and regex dialects differ.
//!
//! `tests/relay/schemas.rs` walks every schema the relay lists and fails on
//! anything a portable client would refuse.

use rmcp::model::JsonObject;
use serde_json::{Map, Value};

/// How deep `$ref`s are followed: the relay's types are shallow, and a
/// recursive type must not loop.
const MAX_DEPTH: usize = 8;

/// `schema`, portable.
pub fn portable(schema: &JsonObject) -> JsonObject {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut root = schema.clone();
    root.remove("$defs");
    root.remove("$schema");
    match simplify(Value::Object(root), &defs, 0) {
        Value::Object(object) => object,
        _ => schema.clone(),
    }
}

fn simplify(value: Value, defs: &Map<String, Value>, depth: usize) -> Value {
    let Value::Object(mut object) = value else {
        return value;
    };
    // A reference: the definition, with this object's own keys on top
    // (a field's description wins over the type's).
    if let Some(Value::String(reference)) = object.remove("$ref")
        && depth < MAX_DEPTH
    {
        let name = reference.trim_start_matches("#/$defs/");
        if let Some(Value::Object(definition)) = defs.get(name) {
            let mut merged = definition.clone();
            merged.extend(object);
            return simplify(Value::Object(merged), defs, depth + 1);
        }
    }
    // `["string", "null"]`: the one type that is not null.
    if let Some(Value::Array(types)) = object.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if kept.len() == 1 {
            object.insert("type".into(), kept[0].clone());
        }
    }
    // `anyOf: [X, {"type": "null"}]`: X, with this object's own keys.
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = object.get(key) {
            let kept: Vec<Value> = branches
                .iter()
                .filter(|b| b.get("type").is_none_or(|t| t != "null"))
                .cloned()
                .collect();
            if kept.len() == 1 {
                object.remove(key);
                let mut only = match simplify(kept[0].clone(), defs, depth + 1) {
                    Value::Object(only) => only,
                    _ => Map::new(),
                };
                only.extend(object);
                return simplify(Value::Object(only), defs, depth + 1);
            }
            object.insert(key.into(), Value::Array(kept));
        }
    }
    if object.get("default") == Some(&Value::Null) {
        object.remove("default");
    }
    if object.get("pattern").is_some_and(Value::is_string) {
        object.remove("pattern");
    }
    if let Some(Value::String(format)) = object.get("format")
        && !matches!(
            format.as_str(),
            "int32" | "int64" | "float" | "double" | "date-time"
        )
    {
        object.remove("format");
    }
    for (key, child) in object.iter_mut() {
        match key.as_str() {
            "properties" => {
                if let Value::Object(properties) = child {
                    for property in properties.values_mut() {
                        *property = simplify(property.take(), defs, depth);
                    }
                }
            }
            "items" | "additionalProperties" => *child = simplify(child.take(), defs, depth),
            "anyOf" | "oneOf" | "allOf" => {
                if let Value::Array(branches) = child {
                    for branch in branches.iter_mut() {
                        *branch = simplify(branch.take(), defs, depth);
                    }
                }
            }
            _ => {}
        }
    }
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn optional_fields_refs_and_rust_formats_become_portable() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "limit": { "type": ["integer", "null"], "format": "uint32", "minimum": 0, "description": "How many" },
                "peer": { "anyOf": [{ "$ref": "#/$defs/Peer" }, { "type": "null" }], "description": "Who" },
                "peers": { "type": "array", "items": { "$ref": "#/$defs/Peer" } }
            },
            "$defs": { "Peer": { "type": "object", "description": "A teammate", "properties": { "handle": { "type": "string", "description": "Their handle" } } } }
        });
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        let portable = Value::Object(portable(&schema));
        assert_eq!(
            portable,
            json!({
                "type": "object",
                "properties": {
                    "limit": { "type": "integer", "minimum": 0, "description": "How many" },
                    "peer": { "type": "object", "description": "Who", "properties": { "handle": { "type": "string", "description": "Their handle" } } },
                    "peers": { "type": "array", "items": { "type": "object", "description": "A teammate", "properties": { "handle": { "type": "string", "description": "Their handle" } } } }
                }
            })
        );
    }
}
