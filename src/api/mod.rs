//! The JSON edge: wire shapes shared by the MCP tools and the REST routes,
//! and the one error type every edge answers with.

pub mod error;
pub mod wire;

pub use error::ApiError;
