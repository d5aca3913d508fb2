//! Suite-level tests: the real supervisor, gateway and services on temp homes, driven over
//! the real WebSocket (issue 2 "Done means").

mod suite;
