//! The gateway's integration tests: the real `snowpea-gateway` binary on a temp home,
//! talked to over a real WebSocket, with an in-process fake service on the unix socket
//! where a real one would be (STYLE.md "Tests").

mod suite;
