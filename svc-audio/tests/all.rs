//! svc-audio's integration tests: one binary, modules under `tests/suite/` (STYLE.md
//! "Tests"). Every test starts the real `snowpea-svc-audio` on a temp home and talks to it
//! over its unix socket. Tests that need a real engine (espeak-ng, pocketsphinx, sox) skip
//! with a message saying how to install it; `.ci/run` installs them, so CI runs them all.

mod suite;
