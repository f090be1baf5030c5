//! Every tool's schemas, as a client lists them, are portable: no type
//! arrays, no `anyOf` with null, no `$ref`, and a description on every
//! field, with limits where the core has them.

use crate::support::spawn_app;
use serde_json::Value;

/// What a portable client would refuse in `schema`, at `path`.
fn lint(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let Value::Object(object) = schema else {
        return;
    };
    if object.get("type").is_some_and(Value::is_array) {
        problems.push(format!("{path}: a type array {}", object["type"]));
    }
    for key in ["$ref", "$defs", "nullable"] {
        if object.contains_key(key) {
            problems.push(format!("{path}: {key}"));
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = object.get(key) {
            if branches
                .iter()
                .any(|b| b.get("type") == Some(&Value::from("null")))
            {
                problems.push(format!("{path}: {key} with null"));
            }
            for (n, branch) in branches.iter().enumerate() {
                lint(branch, &format!("{path}.{key}[{n}]"), problems);
            }
        }
    }
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (name, property) in properties {
            let at = format!("{path}.{name}");
            if property
                .get("description")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                problems.push(format!("{at}: no description"));
            }
            lint(property, &at, problems);
        }
    }
    if let Some(items) = object.get("items") {
        lint(items, &format!("{path}[]"), problems);
    }
}

#[tokio::test]
async fn every_tool_schema_is_portable_and_described() {
    let app = spawn_app().await;
    let token = app.add_person("alice").await;
    let agent = app.mcp(&token).await;
    let tools = agent.client.list_all_tools().await.unwrap();
    assert!(tools.len() >= 10, "{} tools", tools.len());
    let mut problems = Vec::new();
    for tool in &tools {
        assert!(
            tool.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{}",
            tool.name
        );
        let input = Value::Object(tool.input_schema.as_ref().clone());
        lint(&input, &format!("{} input", tool.name), &mut problems);
        if let Some(output) = &tool.output_schema {
            lint(
                &Value::Object(output.as_ref().clone()),
                &format!("{} output", tool.name),
                &mut problems,
            );
        }
    }
    assert!(
        problems.is_empty(),
        "not portable:\n{}",
        problems.join("\n")
    );

    // Limits as the core applies them: a wait or a page above its
    // largest is read as the largest (the description says which), so
    // the schema bounds only what is refused; the patterns the REST
    // document carries are left out of tools (src/mcp/schema.rs).
    let schema = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        Value::Object(tool.input_schema.as_ref().clone())
    };
    let inbox = schema("check_inbox");
    let timeout = &inbox["properties"]["timeout_seconds"];
    assert_eq!(timeout["minimum"], 0.0);
    assert!(timeout.get("maximum").is_none(), "{timeout}");
    assert!(
        timeout["description"].as_str().unwrap().contains("50"),
        "{timeout}"
    );
    let limit = &schema("get_messages")["properties"]["limit"];
    assert!(
        limit["description"].as_str().unwrap().contains("500"),
        "{limit}"
    );
    for tool in &tools {
        let text = Value::Object(tool.input_schema.as_ref().clone()).to_string();
        assert!(!text.contains("\"pattern\""), "{}: {text}", tool.name);
    }
    let send = schema("send_message");
    assert_eq!(send["required"], serde_json::json!(["to", "body"]));
}
