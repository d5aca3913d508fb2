//! The logic of svc-mcp's gRPC services, one type per family: [`mcp::McpApi`] (`mcp.*`) and
//! [`tools::ToolsApi`] (the internal tool rpcs of svc-session). The trait impls in
//! [`crate::rpc`] only delegate to them.

pub mod mcp;
pub mod tools;
