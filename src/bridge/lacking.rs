//! The bridge when it cannot reach a relay as started (`CROSSTALK_URL` or
//! `CROSSTALK_TOKEN` unset, or a URL it refuses): it still answers Claude
//! Code, so that what is missing is said where the person and their agent
//! read it (the server's instructions, and every tool call's error) rather
//! than as a closed connection, and on stderr (Claude Code's log). It
//! offers no tools, and exits 1 when its client closes stdin.

use super::bridge_server_info;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
        PaginatedRequestParams, ServerConfig,
    },
    service::RequestContext,
};

#[derive(Clone)]
struct Lacking {
    why: String,
}

/// Serves MCP on stdin/stdout saying `why` the bridge cannot work, until
/// the client closes it; then fails with `why`.
pub(super) async fn serve(why: String) -> anyhow::Result<()> {
    eprintln!("crosstalk bridge: {why}");
    let running = Lacking { why: why.clone() }
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    anyhow::bail!(why)
}

impl ServerHandler for Lacking {
    fn get_info(&self) -> ServerConfig {
        bridge_server_info().with_instructions(format!(
            "crosstalk's bridge is not connected to a relay: {} Tell the user.",
            self.why
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(Vec::new()))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let said = ContentBlock::text(format!("crosstalk is not connected: {}", self.why));
        Ok(CallToolResponse::from(CallToolResult::error(vec![said])))
    }
}
