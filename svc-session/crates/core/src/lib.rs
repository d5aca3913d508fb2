//! The core of svc-session (issue 34 "the shape"): what every component above shares and
//! nothing below needs to know about sessions, turns or agents. Today it holds the working
//! folder rule ([`workdir`]); the error vocabulary is its own crate
//! (`snowpea-session-error`) so that the model crate (`snowpea-session-llm`) can use it
//! without depending on the core.

pub mod workdir;

pub use snowpea_session_error as error;
