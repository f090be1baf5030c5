//! `GET /api/openapi.json`: an OpenAPI 3.1 document of every `/api` route
//! the router has (held equal to the router's own list), whose every
//! reference resolves. `.ci/run` also fuzzes the live relay against it
//! (schemathesis, `tests/clients/fuzz`).

use crate::matrix::routes_in_the_router;
use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;

fn references(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("$ref", Value::String(target)) => found.push(target.clone()),
                    _ => references(inner, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| references(i, found)),
        _ => {}
    }
}

#[tokio::test]
async fn the_document_names_every_api_route_and_resolves_every_reference() {
    let app = spawn_app().await;
    app.add_person("alice").await;
    let response = http()
        .get(format!("{}/api/openapi.json", app.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let document: Value = response.json().await.unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(document["servers"][0]["url"], app.url());

    let documented: BTreeSet<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(|method| (method.to_uppercase(), path.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let routed: BTreeSet<(String, String)> = routes_in_the_router()
        .into_iter()
        .filter(|(_, path)| path.starts_with("/api/") && path != "/api/openapi.json")
        .collect();
    assert_eq!(
        documented, routed,
        "the document and the router name the same routes"
    );

    let mut found = Vec::new();
    references(&document, &mut found);
    assert!(found.len() > 50, "{}", found.len());
    for target in found {
        let pointer = target.strip_prefix('#').expect("a local reference");
        assert!(
            document.pointer(pointer).is_some(),
            "{target} does not resolve"
        );
    }

    // Each operation has the error shape under every refusal it may give
    // and as the default; one that takes no body has none of a body's.
    let people = &document["paths"]["/api/people"]["get"]["responses"];
    assert!(
        people["401"].is_object() && people["429"].is_object(),
        "{people}"
    );
    for status in ["413", "415", "422"] {
        assert!(people.get(status).is_none(), "{status}: {people}");
    }
    let send = &document["paths"]["/api/messages"]["post"];
    assert_eq!(
        send["responses"]["422"]["$ref"],
        "#/components/responses/refused422"
    );
    assert_eq!(
        send["responses"]["default"]["$ref"],
        "#/components/responses/refused"
    );
    let body = &send["requestBody"]["content"]["application/json"]["schema"]["$ref"];
    let body = document
        .pointer(body.as_str().unwrap().trim_start_matches('#'))
        .unwrap();
    assert!(body["properties"]["to"].is_object(), "{body}");
    let thread = &document["paths"]["/api/threads/{id}"]["get"]["parameters"];
    let names: Vec<(&str, &str)> = thread
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["in"].as_str().unwrap()))
        .collect();
    assert!(names.contains(&("id", "path")), "{names:?}");
    assert!(names.contains(&("since_id", "query")), "{names:?}");
}
