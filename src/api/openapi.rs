//! `GET /api/openapi.json`: the REST API as an OpenAPI 3.1 document. Every
//! schema in it is generated from the type its route reads or answers
//! with (the same `wire` types, through `schemars`), so a field changed in
//! a type changes here too; the list of operations below is held equal to
//! the router's `/api` routes by a test (`tests/relay/openapi.rs`). Every
//! refusal has the one error shape, under each status docs/api.md lists
//! and as the default.

use super::stream::{InboxStreamQuery, StreamQuery};
use crate::state::AppState;
use crate::wire::{self, args, attention, work};
use axum::{Json, extract::State};
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};
use std::sync::LazyLock;

/// A type's schema, as the generator makes it.
type Schemer = fn(&mut SchemaGenerator) -> Schema;

fn inline<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.root_schema_for::<T>()
}

fn named<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// What an operation answers with on success.
enum Answer {
    Json(u16, Schemer),
    Events,
    /// A file's bytes, as a download.
    File,
    Nothing(u16),
}

/// Who may call: the credentials the route group takes.
#[derive(Clone, Copy)]
enum Takes {
    Bearer,
    BearerOrBasic,
    Stream,
}

struct Operation {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    takes: Takes,
    query: Option<Schemer>,
    body: Option<Schemer>,
    answer: Answer,
}

/// An operation that takes no query or body and answers 204, until told
/// otherwise (see [`operations`]).
const fn op(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    takes: Takes,
) -> Operation {
    Operation {
        method,
        path,
        summary,
        takes,
        query: None,
        body: None,
        answer: Answer::Nothing(204),
    }
}

impl Operation {
    const fn query(self, query: Schemer) -> Self {
        Operation {
            query: Some(query),
            ..self
        }
    }

    const fn body(self, body: Schemer) -> Self {
        Operation {
            body: Some(body),
            ..self
        }
    }

    const fn answers(self, answer: Answer) -> Self {
        Operation { answer, ..self }
    }
}

/// Every `/api` route, with the types it reads and answers with.
#[rustfmt::skip] // a table: an operation a line, what it takes and answers the next
fn operations() -> Vec<Operation> {
    use Answer::*;
    use Takes::*;
    vec![
        op("get", "/api/channels", "Channels by latest activity", BearerOrBasic)
            .query(inline::<args::ListChannels>).answers(Json(200, named::<wire::Channels>)),
        op("get", "/api/channels/{channel}/messages", "A channel's messages after since_id", BearerOrBasic)
            .query(inline::<args::GetMessages>).answers(Json(200, named::<wire::MessagePage>)),
        op("post", "/api/channels/{channel}/messages", "Post in a channel", Bearer)
            .body(named::<args::PostMessage>).answers(Json(201, named::<wire::Posted>)),
        op("get", "/api/channels/{channel}/wait", "Wait (up to 50 s) for a channel's next messages", BearerOrBasic)
            .query(inline::<args::WaitForMessage>).answers(Json(200, named::<wire::MessagePage>)),
        op("get", "/api/channels/{channel}/stream", "A channel as Server-Sent Events", Stream)
            .query(inline::<StreamQuery>).answers(Events),
        op("get", "/api/threads/{id}", "A thread's messages", BearerOrBasic)
            .query(inline::<ThreadPath>).answers(Json(200, named::<wire::ThreadMessages>)),
        op("get", "/api/threads/{id}/stream", "A thread as Server-Sent Events", Stream)
            .query(inline::<ThreadStreamQuery>).answers(Events),
        op("get", "/api/messages/{id}", "One message, with its delivery", BearerOrBasic)
            .query(inline::<IdPath>).answers(Json(200, named::<wire::OneMessage>)),
        op("post", "/api/messages", "Send a direct message (and wait for the reply)", Bearer)
            .body(named::<args::SendMessage>).answers(Json(201, named::<wire::Sent>)),
        op("get", "/api/inbox", "Take what waits in your inbox (waiting up to 50 s)", Bearer)
            .query(inline::<args::CheckInbox>).answers(Json(200, named::<wire::Messages>)),
        op("get", "/api/inbox/stream", "Your inbox as Server-Sent Events, each message pushed", Bearer)
            .query(inline::<InboxStreamQuery>).answers(Events),
        op("post", "/api/inbox/lease", "Lease what waits in your inbox to a hook that shows it to your model", Bearer)
            .body(named::<args::LeaseInbox>).answers(Json(200, named::<wire::Messages>)),
        op("get", "/api/me/stream", "Messages to you as they arrive, for the page", Stream)
            .answers(Events),
        op("get", "/api/people", "The team", BearerOrBasic)
            .answers(Json(200, named::<wire::Peers>)),
        op("get", "/api/search", "Search live messages", BearerOrBasic)
            .query(inline::<args::SearchMessages>).answers(Json(200, named::<wire::SearchResults>)),
        op("put", "/api/status", "Set your status line", Bearer)
            .body(named::<args::SetStatus>).answers(Json(200, named::<wire::StatusSet>)),
        op("get", "/api/me/notifications", "Your notification settings", BearerOrBasic)
            .answers(Json(200, named::<attention::Notifications>)),
        op("put", "/api/me/notifications", "Change your notification settings", Bearer)
            .body(named::<attention::ChangeNotifications>).answers(Json(200, named::<attention::Notifications>)),
        op("get", "/api/approvals", "Your agents' permission prompts", BearerOrBasic)
            .query(inline::<attention::ApprovalsQuery>).answers(Json(200, named::<attention::Approvals>)),
        op("post", "/api/approvals", "Ask your person to allow a step", Bearer)
            .body(named::<attention::NewApprovalArgs>).answers(Json(201, named::<attention::ApprovalView>)),
        op("get", "/api/approvals/{id}", "One prompt; with wait, until it is answered", BearerOrBasic)
            .query(inline::<ApprovalPath>).answers(Json(200, named::<attention::ApprovalView>)),
        op("post", "/api/approvals/{id}", "Answer a prompt: allow or deny", Bearer)
            .query(inline::<IdPath>).body(named::<attention::AnswerApproval>).answers(Json(200, named::<attention::ApprovalView>)),
        op("get", "/api/push/key", "The relay's Web Push key", BearerOrBasic)
            .answers(Json(200, named::<attention::PushKeyView>)),
        op("get", "/api/push/subscriptions", "Your browsers subscribed to Web Push", BearerOrBasic)
            .answers(Json(200, named::<attention::Devices>)),
        op("post", "/api/push/subscriptions", "Subscribe a browser to Web Push", Bearer)
            .body(named::<attention::NewDevice>).answers(Json(201, named::<attention::DeviceView>)),
        op("delete", "/api/push/subscriptions/{id}", "Forget a browser", Bearer)
            .query(inline::<IdPath>),
        op("post", "/api/messages/{id}/ack", "Acknowledge a message sent to you: done, blocked or rejected", Bearer)
            .query(inline::<IdPath>).body(named::<args::Acknowledgement>).answers(Json(200, named::<work::Acked>)),
        op("get", "/api/open", "What you owe and are owed: messages that expect a reply or an ack", BearerOrBasic)
            .query(inline::<args::AsPerson>).answers(Json(200, named::<work::OpenView>)),
        op("get", "/api/claims", "Who is working on what", BearerOrBasic)
            .query(inline::<args::ListClaims>).answers(Json(200, named::<work::Claims>)),
        op("post", "/api/claims", "Claim work (409 names the claim in the way)", Bearer)
            .body(named::<args::Claim>).answers(Json(201, named::<work::ClaimMade>)),
        op("get", "/api/messages/{id}/attachments/{n}", "A file a message carries", BearerOrBasic)
            .query(inline::<FilePath>).answers(File),
        op("delete", "/api/claims/{id}", "Release your claim", Bearer)
            .query(inline::<ReleasePath>).answers(Json(200, named::<work::ClaimMade>)),
    ]
}

// The path parameters of routes whose handler reads them apart from their
// query, as the documents describe them.

/// `{id}`.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct IdPath {
    /// The id.
    id: i64,
}

/// `{id}` and the thread page's query.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ThreadPath {
    /// The thread's id.
    id: i64,
    #[serde(flatten)]
    page: args::ThreadPage,
}

/// `{id}` and the approval's query.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ApprovalPath {
    /// The approval's id.
    id: i64,
    #[serde(flatten)]
    query: attention::ApprovalQuery,
}

/// `{id}` and `{n}`: a message's file.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct FilePath {
    /// The message's id.
    id: i64,
    /// The file's place among the message's files: 1, 2, …
    #[schemars(range(min = 1, max = 4))]
    n: u32,
}

/// `{id}` and who releases it.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ReleasePath {
    /// The claim's id.
    id: i64,
    #[serde(flatten)]
    query: args::AsPerson,
}

/// `{id}` and a stream's query.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ThreadStreamQuery {
    /// The thread's id.
    id: i64,
    #[serde(flatten)]
    query: StreamQuery,
}

/// A path parameter's schema, where no query type of the operation names
/// it (a channel posted to, whose name comes from the path): the core's
/// rule for it, so that what the document allows the relay takes.
fn path_schema(name: &str) -> Value {
    match name {
        "channel" => json!({ "type": "string", "pattern": crate::model::CHANNEL_PATTERN }),
        _ => json!({ "type": "string" }),
    }
}

/// A request body as a person would write it, for the operations whose
/// body a reader (or a fuzzer) is least likely to guess: a message to a
/// teammate, a status, an approval asked and answered, a notification
/// setting. Each is held to its argument type by a unit test below.
fn example(method: &str, path: &str) -> Option<Value> {
    Some(match (method, path) {
        ("post", "/api/messages") => json!({
            "to": "bob",
            "body": "Which port does the staging database listen on?",
            "type": "QUESTION",
        }),
        ("put", "/api/status") => json!({ "status": "reviewing the billing migration" }),
        ("post", "/api/approvals") => json!({
            "request_id": "abcde",
            "tool_name": "Bash",
            "description": "Run the test suite",
            "input_preview": "cargo test",
        }),
        ("post", "/api/approvals/{id}") => json!({ "behavior": "allow" }),
        ("post", "/api/messages/{id}/ack") => json!({ "result": "done", "note": "merged in #12" }),
        ("post", "/api/claims") => json!({
            "what": "src/store/**",
            "repo": "github.com/org/app",
            "note": "moving the schema",
        }),
        ("put", "/api/me/notifications") => json!({ "after_seconds": 300 }),
        _ => return None,
    })
}

/// The statuses an operation may answer with, besides its own, and why
/// (those about a body only where it takes one).
const REFUSALS: [(u16, &str); 10] = [
    (400, "malformed input: the message says which field and why"),
    (401, "no credential, or an unknown or revoked one"),
    (
        403,
        "another person's, another site's, or a route this credential may not use",
    ),
    (404, "no such thing (or not yours)"),
    (
        409,
        "in conflict with what is stored (an approval answered already, another \
         person's claim)",
    ),
    (413, "a body larger than the relay takes"),
    (415, "a body that is not JSON"),
    (
        422,
        "a body that looks like it carries a secret: nothing was stored",
    ),
    (429, "a quota ran out: Retry-After says when to try again"),
    (503, "the database cannot be reached just now: Retry-After"),
];

/// One Server-Sent Event of a stream, as a client parses it.
fn event_schema() -> Value {
    json!({
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {
                "type": "string",
                "description": "`message` (or none), `notice`, `delivery`, `resync`: the streams docs/api.md describes",
            },
            "data": { "type": "string", "contentMediaType": "application/json" },
            "id": { "type": "string", "description": "a message's id, for `Last-Event-ID`" },
            "retry": { "type": "integer", "minimum": 0 },
        },
    })
}

/// The document, without its server: the same for every relay, so made
/// once (see [`serve`]).
fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "#/components/schemas/".into())
        .into_generator();
    let mut paths = Map::new();
    for operation in operations() {
        let entry = operation_entry(&operation, &mut generator);
        paths
            .entry(operation.path)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object")
            .insert(operation.method.to_owned(), entry);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "crosstalk",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The REST API of a crosstalk relay: the MCP tools' twins, long-polls and \
                            Server-Sent Events. Every refusal is {\"error\":{\"code\",\"message\"}}.",
        },
        "paths": paths,
        "components": components(generator),
    })
}

/// One operation's entry under its path.
fn operation_entry(operation: &Operation, generator: &mut SchemaGenerator) -> Value {
    let mut entry = json!({
        "summary": operation.summary,
        "operationId": format!(
            "{}{}",
            operation.method,
            operation.path.replace(['/', '{', '}'], "_")
        ),
        "parameters": parameters(operation, generator),
        "responses": responses(operation, generator),
        "security": match operation.takes {
            Takes::Bearer => json!([{ "bearer": [] }]),
            Takes::BearerOrBasic => json!([{ "bearer": [] }, { "basic": [] }]),
            Takes::Stream => json!([{ "bearer": [] }, { "basic": [] }, { "query": [] }]),
        },
    });
    if let Some(body) = operation.body {
        let mut content = json!({ "schema": body(generator) });
        if let Some(example) = example(operation.method, operation.path) {
            content["example"] = example;
        }
        entry["requestBody"] = json!({
            "required": true,
            "content": { "application/json": content },
        });
    }
    entry
}

/// An operation's parameters: its query type's fields (those its path
/// names are path parameters), then any other segment of its path.
fn parameters(operation: &Operation, generator: &mut SchemaGenerator) -> Vec<Value> {
    let mut parameters = Vec::new();
    let in_path = |name: &str| operation.path.contains(&format!("{{{name}}}"));
    if let Some(query) = operation.query {
        let schema = query(generator);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let path = in_path(name);
                let mut property = property.clone();
                let description = property
                    .as_object_mut()
                    .and_then(|p| p.remove("description"));
                let mut parameter = json!({
                    "name": name,
                    "in": if path { "path" } else { "query" },
                    "required": path || required.contains(&name.as_str()),
                    "schema": property,
                });
                if let Some(description) = description {
                    parameter["description"] = description;
                }
                parameters.push(parameter);
            }
        }
    }
    for segment in operation.path.split('/') {
        if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}'))
            && !parameters.iter().any(|p| p["name"] == name)
        {
            parameters.push(json!({
                "name": name, "in": "path", "required": true, "schema": path_schema(name),
            }));
        }
    }
    parameters
}

/// An operation's answers: its own, then the refusals it may give.
fn responses(operation: &Operation, generator: &mut SchemaGenerator) -> Map<String, Value> {
    let mut responses = Map::new();
    match operation.answer {
        Answer::Json(status, schema) => {
            responses.insert(
                status.to_string(),
                json!({
                    "description": "done",
                    "content": { "application/json": { "schema": schema(generator) } },
                }),
            );
        }
        Answer::Events => {
            responses.insert(
                "200".into(),
                json!({
                    "description": "Server-Sent Events: `message` events carry a message's JSON; \
                                    `notice`, `delivery` and `resync` events as docs/api.md says",
                    "content": { "text/event-stream": { "schema": event_schema() } },
                }),
            );
        }
        Answer::File => {
            let bytes = json!({ "schema": { "type": "string", "format": "binary" } });
            responses.insert(
                "200".into(),
                json!({
                    "description": "the file's bytes, as an attachment (Content-Disposition), \
                                    never to be run or sniffed (CSP sandbox, nosniff)",
                    "content": { "text/*": bytes, "application/json": bytes, "image/*": bytes },
                }),
            );
        }
        Answer::Nothing(status) => {
            responses.insert(status.to_string(), json!({ "description": "done" }));
        }
    }
    for (status, why) in REFUSALS {
        // An operation that takes no body never reads one: a body too
        // large, not JSON, or carrying a secret is not its refusal.
        if operation.body.is_none() && matches!(status, 413 | 415 | 422) {
            continue;
        }
        responses.insert(
            status.to_string(),
            json!({ "$ref": format!("#/components/responses/refused{status}"), "description": why }),
        );
    }
    responses.insert(
        "default".into(),
        json!({ "$ref": "#/components/responses/refused" }),
    );
    responses
}

/// The schemas the operations named, the error's, the refusals and the
/// ways to present a credential.
fn components(mut generator: SchemaGenerator) -> Value {
    let mut schemas = generator.take_definitions(true);
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": { "type": "string", "description": "a stable name for the failure" },
                        "message": { "type": "string", "description": "what to change" },
                    },
                },
            },
        }),
    );
    let refused = |why: &str| {
        json!({
            "description": why,
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } },
        })
    };
    let mut responses = Map::new();
    responses.insert("refused".into(), refused("refused: the error says why"));
    for (status, why) in REFUSALS {
        responses.insert(format!("refused{status}"), refused(why));
    }
    json!({
        "schemas": schemas,
        "responses": responses,
        "securitySchemes": {
            "bearer": { "type": "http", "scheme": "bearer", "description": "a person's xtalk_ token" },
            "basic": { "type": "http", "scheme": "basic", "description": "the team page's: the token as the password; reads only" },
            "query": { "type": "apiKey", "in": "query", "name": "token", "description": "streams only, for clients that cannot set headers" },
        },
    })
}

/// `GET /api/openapi.json`: public, like the routes' own refusals.
pub async fn serve(State(state): State<AppState>) -> Json<Value> {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(document);
    let mut document = DOCUMENT.clone();
    document["servers"] = json!([{ "url": state.config.public_url }]);
    Json(document)
}

#[cfg(test)]
mod tests {
    use super::{example, operations};
    use crate::wire::{args, attention};

    #[test]
    fn every_example_is_a_body_its_operation_takes() {
        let parse = |method, path| example(method, path).expect("an example");
        serde_json::from_value::<args::SendMessage>(parse("post", "/api/messages")).unwrap();
        serde_json::from_value::<args::SetStatus>(parse("put", "/api/status")).unwrap();
        serde_json::from_value::<attention::NewApprovalArgs>(parse("post", "/api/approvals"))
            .unwrap();
        serde_json::from_value::<attention::AnswerApproval>(parse("post", "/api/approvals/{id}"))
            .unwrap();
        serde_json::from_value::<attention::ChangeNotifications>(parse(
            "put",
            "/api/me/notifications",
        ))
        .unwrap();
        // Every example belongs to an operation that takes a body.
        for operation in operations() {
            if example(operation.method, operation.path).is_some() {
                assert!(operation.body.is_some(), "{}", operation.path);
            }
        }
    }
}
