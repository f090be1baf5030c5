//! The JSON edge: the REST routes, their Server-Sent Events stream, the wire
//! shapes shared with the MCP tools, and the one error type every edge
//! answers with.

pub mod error;
pub mod extract;
pub mod routes;
pub mod stream;
pub mod wire;

pub use error::ApiError;
