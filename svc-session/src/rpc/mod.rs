//! gRPC implementations of the `snowpea.session.v1` services this process serves, one
//! file per service: [`session`] (`SessionService`), [`approval`] (`ApprovalService`),
//! [`tool`] (`ToolService`), [`checkpoint`] (`CheckpointService`), [`usage`] (`UsageService`), [`file`] (`FileService`), [`llm`] (`LlmService`), [`web`] (`WebService`). Methods not implemented here answer the generated default
//! (`UNIMPLEMENTED` → `not_implemented` at the gateway). Spans, timing and outcome
//! codes come from the shared call layer in `snowpea_common::calls` (installed by `serve`).

pub mod approval;
pub mod checkpoint;
pub mod file;
pub mod internal;
pub mod llm;
pub mod session;
pub mod tool;
pub mod usage;
pub mod web;
