mod approvals;
mod crash;
mod grpcurl;
mod handshake;
mod jsonrpc;
mod lifecycle;
mod resume;
mod turn;
