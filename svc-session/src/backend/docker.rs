//! The `docker` backend.

use std::sync::Arc;

use super::config::DockerConfig;
use super::Backend;
use crate::error::{Error, Result};

/// A session's container.
#[derive(Debug)]
pub struct Docker;

impl Docker {
    /// The backend for `cfg`.
    pub fn create(_cfg: DockerConfig, _mark: Option<String>) -> Result<Arc<dyn Backend>> {
        Err(Error::Unavailable("docker backend: not built yet".into()))
    }
}
