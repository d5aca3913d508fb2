//! Unit tests of the chat state machine.
