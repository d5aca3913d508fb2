//! svc-mcp's integration tests: one binary, modules under `tests/suite/` (STYLE.md
//! "Tests"). Every test starts the real `snowpea-svc-mcp` on a temp home and talks to it
//! over its unix socket; real MCP servers come from `tests/mcp-servers/` (npm, PyPI — `.ci/run`
//! installs them) and a deliberately broken one (`faulty.py`). Tests that need a server that
//! is not installed skip with a message saying how to install it.

mod suite;
