//! What a provider is built from: the wire protocol a vendor speaks ([`ApiKind`]) and the
//! resolved configuration of one provider ([`ProviderConfig`]; resolving and building it is
//! `select.rs`). Every wire reads it; it refers to none of them.

/// Which wire protocol a vendor speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKind {
    /// OpenAI-compatible `/chat/completions`.
    OpenAi,
    /// Anthropic Messages `/v1/messages`.
    Anthropic,
    /// Gemini `models/<model>:streamGenerateContent`.
    Gemini,
}

impl ApiKind {
    /// The settings spelling (`providers.<vendor>.api`).
    pub fn as_str(self) -> &'static str {
        match self {
            ApiKind::OpenAi => "openai",
            ApiKind::Anthropic => "anthropic",
            ApiKind::Gemini => "gemini",
        }
    }

    /// Parses the settings spelling.
    pub fn parse(s: &str) -> Option<ApiKind> {
        match s {
            "openai" => Some(ApiKind::OpenAi),
            "anthropic" => Some(ApiKind::Anthropic),
            "gemini" => Some(ApiKind::Gemini),
            _ => None,
        }
    }
}

/// A resolved provider configuration. `Debug` masks the API key.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Vendor name (`openai`, `anthropic`, `ollama`, a custom name, …).
    pub vendor: String,
    /// Base URL: for OpenAI-compatible servers up to `/v1` (`/chat/completions` is
    /// appended); for Anthropic the origin (`/v1/messages` is appended); for Gemini up to
    /// `/v1beta` (`/models/<model>:streamGenerateContent` is appended).
    pub base_url: String,
    /// API key or OAuth access token, when the vendor needs one.
    pub api_key: Option<String>,
    /// True when `api_key` is an OAuth access token (always sent as
    /// `Authorization: Bearer`, also to Anthropic and Gemini).
    pub oauth: bool,
    /// Default model id.
    pub model: String,
    /// Wire protocol.
    pub api: ApiKind,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("vendor", &self.vendor)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("oauth", &self.oauth)
            .field("model", &self.model)
            .field("api", &self.api)
            .finish()
    }
}
