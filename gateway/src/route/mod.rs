//! Layer 3, routes and forwarding (docs/ARCHITECTURE.md "Gateway layers"): the table that
//! says where each client-callable method goes, built once from the schema and the
//! services of the suite, and the generic unary call that forwards one validated call to
//! its service.

pub mod forward;
pub mod table;
