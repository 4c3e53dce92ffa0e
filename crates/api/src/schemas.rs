//! Schemas the derives cannot infer: enumerations of strings and timestamps, for the fields that
//! the types keep as text, and the items of an event stream.

use utoipa::ToSchema;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

/// A string schema taking one of `values`.
pub(crate) fn one_of(values: &[&str], description: &str) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
        .description(Some(description))
        .build()
}

pub(crate) fn job_state_schema() -> Object {
    one_of(&["queued", "running", "succeeded", "failed", "canceled"], "The job's state.")
}

pub(crate) fn modality_schema() -> Object {
    one_of(&["video", "image", "audio", "music", "speech", "3d"], "What the model produces.")
}

pub(crate) fn field_kind_schema() -> Object {
    one_of(&["text", "textarea", "number", "select", "image-url"], "How a client draws the field.")
}

pub(crate) fn event_type_schema() -> Object {
    one_of(&["job.succeeded", "job.failed", "job.canceled"], "What ended the job.")
}

pub(crate) fn batch_event_type_schema() -> Object {
    one_of(&["batch.completed", "batch.expired", "batch.canceled"], "How the batch ended.")
}

pub(crate) fn timestamp_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
        .description(Some("ISO 8601 UTC with milliseconds, e.g. `2026-11-21T23:14:54.123Z`."))
        .build()
}

pub(crate) fn nullable_timestamp_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([Type::String, Type::Null]))
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
        .description(Some("ISO 8601 UTC with milliseconds; null until it happens."))
        .build()
}

/// One event of a job's stream as the client parses it: `event:`, `id:`, `retry:` and a `data:`
/// line whose JSON is a [`crate::StreamEvent`]. Described with JSON Schema's `contentMediaType`
/// and `contentSchema`, so that a validator can check the JSON inside `data`.
pub struct EventStreamItem;

impl utoipa::PartialSchema for EventStreamItem {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let data = ObjectBuilder::new()
            .schema_type(Type::String)
            .content_media_type("application/json")
            .description(Some("A `StreamEvent` as JSON"))
            .extensions(Some(utoipa::openapi::extensions::Extensions::from_iter([(
                "contentSchema",
                serde_json::json!({"$ref": "#/components/schemas/StreamEvent"}),
            )])));
        ObjectBuilder::new()
            .description(Some(
                "A server-sent event: `progress` while the job runs, then `done` (succeeded) or `error` (failed or \
                 canceled), after which the stream closes. The stream's first block carries only `retry`.",
            ))
            .property("event", one_of(&["progress", "done", "error"], "The event's name."))
            .property(
                "id",
                ObjectBuilder::new().schema_type(Type::String).description(Some("Milliseconds since the epoch.")),
            )
            .property(
                "retry",
                ObjectBuilder::new().schema_type(Type::Integer).description(Some("Reconnection delay, in ms.")),
            )
            .property("data", data)
            .into()
    }
}

impl ToSchema for EventStreamItem {}
