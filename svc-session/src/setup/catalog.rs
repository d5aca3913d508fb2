//! The data of `setup.catalog` (protocol 1.25.0; reference behaviour §2): vendors, search,
//! browser, tools, gateway, stt and tts (the vendors live in [`super::vendors`]). Ordering rule of every single-choice list (vendors,
//! search, browser, stt, tts): exactly one item is the `default`, and it comes first; the
//! rest follow free-and-keyless, then free with a key or self-hosted, then paid, in table
//! order within each group. `tools` (multi-choice: `default` = on by default) keeps its
//! table order; `gateway` is all off.

use snowpea_proto::session::v1::CatalogItem;

/// Tier of a choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// No cost.
    Free,
    /// Billed by the vendor.
    Paid,
}

/// What a choice needs to work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyNeed {
    /// Nothing.
    NoKey,
    /// A key unlocks more.
    KeyOptional,
    /// An API key or token.
    KeyRequired,
    /// A server the user runs.
    SelfHosted,
}

impl KeyNeed {
    fn as_str(self) -> &'static str {
        match self {
            KeyNeed::NoKey => "no key",
            KeyNeed::KeyOptional => "key optional",
            KeyNeed::KeyRequired => "key required",
            KeyNeed::SelfHosted => "self-hosted",
        }
    }
}

/// 0 free and keyless, 1 free with a key or self-hosted, 2 paid.
fn rank(tier: Tier, key: KeyNeed) -> u8 {
    match (tier, key) {
        (Tier::Free, KeyNeed::NoKey) => 0,
        (Tier::Free, _) => 1,
        (Tier::Paid, _) => 2,
    }
}

/// One row before it is ordered.
#[derive(Debug, Clone)]
pub struct Row {
    /// Catalog id (the value the setting takes).
    pub id: String,
    /// Display name.
    pub label: String,
    /// Tier.
    pub tier: Tier,
    /// Key need.
    pub key: KeyNeed,
    /// One line for the wizard.
    pub description: String,
    /// Usable now (configured, detected, or on).
    pub active: bool,
    /// How to install it, when there is something to install.
    pub install_hint: Option<String>,
    /// `audio.install` can install it.
    pub installable: bool,
    /// Model used when none is chosen, and where it comes from.
    pub default_model: Option<(String, &'static str)>,
}

impl Row {
    /// A row with no install hint and no model.
    pub fn new(id: &str, label: &str, tier: Tier, key: KeyNeed, description: &str) -> Row {
        Row {
            id: id.into(),
            label: label.into(),
            tier,
            key,
            description: description.into(),
            active: true,
            install_hint: None,
            installable: false,
            default_model: None,
        }
    }

    fn into_item(self, default: bool) -> CatalogItem {
        let mut tags = vec![format!(
            "{} · {}",
            match self.tier {
                Tier::Free => "free",
                Tier::Paid => "paid",
            },
            self.key.as_str()
        )];
        if default {
            tags.push("default".into());
        }
        tags.push(if self.active { "active" } else { "inactive" }.into());
        let (default_model, default_model_source) = self
            .default_model
            .map(|(m, s)| (m, s.to_owned()))
            .unwrap_or_default();
        CatalogItem {
            active: self.active,
            default,
            default_model,
            default_model_source,
            description: self.description,
            key: self.key.as_str().into(),
            id: self.id,
            install_hint: self.install_hint,
            installable: self.installable,
            label: self.label,
            recommended: default,
            tags,
            tier: match self.tier {
                Tier::Free => "free",
                Tier::Paid => "paid",
            }
            .into(),
        }
    }
}

/// A single-choice list: `default_id` first (when present, else the first row by rank),
/// then by rank, table order within a rank.
pub fn single_choice(mut rows: Vec<Row>, default_id: &str) -> Vec<CatalogItem> {
    rows.sort_by_key(|r| rank(r.tier, r.key)); // stable
    let at = rows.iter().position(|r| r.id == default_id).unwrap_or(0);
    if !rows.is_empty() {
        let d = rows.remove(at);
        rows.insert(0, d);
    }
    rows.into_iter()
        .enumerate()
        .map(|(i, r)| r.into_item(i == 0))
        .collect()
}

/// `search`: the `web_search` providers, ddgs (free, keyless) the default.
pub fn search() -> Vec<CatalogItem> {
    use KeyNeed::*;
    use Tier::*;
    let rows = vec![
        Row::new("ddgs", "DuckDuckGo", Free, NoKey, "keyless metasearch"),
        Row::new(
            "brave_free",
            "Brave Search (free plan)",
            Free,
            KeyRequired,
            "2,000 queries a month",
        ),
        Row::new(
            "exa_free",
            "Exa (free credits)",
            Free,
            KeyRequired,
            "neural search, free credits",
        ),
        Row::new(
            "keenable_free",
            "Keenable (free)",
            Free,
            KeyRequired,
            "free plan",
        ),
        Row::new(
            "parallel_free",
            "Parallel (free)",
            Free,
            KeyRequired,
            "free plan",
        ),
        Row::new(
            "tavily",
            "Tavily",
            Free,
            KeyRequired,
            "1,000 searches a month free",
        ),
        Row::new(
            "searxng",
            "SearXNG",
            Free,
            SelfHosted,
            "your own SearXNG instance (search.searxng.url)",
        ),
        Row::new(
            "firecrawl_selfhost",
            "Firecrawl (self-hosted)",
            Free,
            SelfHosted,
            "your own Firecrawl server",
        ),
        Row::new("exa", "Exa", Paid, KeyRequired, "neural search"),
        Row::new("keenable", "Keenable", Paid, KeyRequired, "paid plan"),
        Row::new("parallel", "Parallel", Paid, KeyRequired, "paid plan"),
        Row::new(
            "firecrawl",
            "Firecrawl",
            Paid,
            KeyRequired,
            "search and scrape",
        ),
        Row::new(
            "xai_grok",
            "xAI Grok live search",
            Paid,
            KeyRequired,
            "reuses your xAI key",
        ),
    ];
    single_choice(rows, "ddgs")
}

/// `browser`: browser-control providers, the local headless Chromium the default.
pub fn browser() -> Vec<CatalogItem> {
    use KeyNeed::*;
    use Tier::*;
    let mut local = Row::new(
        "local_chromium",
        "Local Chromium (headless)",
        Free,
        NoKey,
        "a Chromium the daemon starts itself",
    );
    local.install_hint = Some("npx playwright install chromium".into());
    let mut host = Row::new(
        "host",
        "Snowpea browser",
        Free,
        NoKey,
        "the Snowpea browser extension drives your own browser",
    );
    host.active = false;
    let mut browserbase = Row::new(
        "browserbase",
        "Browserbase",
        Paid,
        KeyRequired,
        "cloud browsers",
    );
    browserbase.active = false;
    let mut browser_use = Row::new(
        "browser_use",
        "Browser Use cloud",
        Paid,
        KeyRequired,
        "cloud browsers",
    );
    browser_use.active = false;
    single_choice(
        vec![local, host, browserbase, browser_use],
        "local_chromium",
    )
}

/// `tools`: the tool categories; `default` = on by default, `active` = usable in this build.
pub fn tools() -> Vec<CatalogItem> {
    const CATEGORIES: &[(&str, &str, bool, bool, &str)] = &[
        (
            "file",
            "Files (read, write, edit, glob, grep)",
            true,
            true,
            "",
        ),
        (
            "terminal",
            "Terminal (shell, background processes)",
            true,
            true,
            "",
        ),
        ("git", "Git (status, diff, commit)", true, true, ""),
        (
            "web",
            "Web search and extract",
            true,
            true,
            "free providers need no key",
        ),
        (
            "browser",
            "Browser control (headless Chromium)",
            true,
            true,
            "",
        ),
        ("delegate", "Delegate to sub-agents", true, true, ""),
        ("schedule", "Schedule work for later", true, true, ""),
        (
            "memory",
            "Memory (notes that survive a session)",
            true,
            true,
            "",
        ),
        (
            "skills",
            "Skills (loadable instruction packs)",
            true,
            true,
            "",
        ),
        ("todo", "Todo list", true, true, ""),
        ("session-search", "Search past sessions", true, true, ""),
        (
            "clarify",
            "Ask the user a clarifying question",
            true,
            true,
            "",
        ),
        ("cron", "Cron jobs", true, true, ""),
        (
            "media-image",
            "Image generation",
            true,
            false,
            "needs the media MCP server",
        ),
        (
            "media-video",
            "Video generation",
            true,
            false,
            "needs the media MCP server",
        ),
        (
            "media-tts",
            "Text to speech",
            true,
            false,
            "needs the media MCP server",
        ),
        ("vision", "Vision (read images)", false, true, ""),
        (
            "computer-use",
            "Computer use (drive the desktop)",
            false,
            true,
            "",
        ),
        (
            "x-search",
            "X / Twitter search",
            false,
            true,
            "needs an xAI key",
        ),
    ];
    CATEGORIES
        .iter()
        .map(|(id, label, on, active, description)| {
            let mut row = Row::new(id, label, Tier::Free, KeyNeed::NoKey, description);
            row.active = *active;
            row.into_item(*on)
        })
        .collect()
}

/// `gateway`: chat gateways, all off until the user gives a bot token.
pub fn gateway() -> Vec<CatalogItem> {
    [
        ("telegram", "Telegram", "bot token from @BotFather"),
        ("discord", "Discord", "bot token from the developer portal"),
        ("slack", "Slack", "bot token from the Slack app config"),
    ]
    .iter()
    .map(|(id, label, description)| {
        let mut row = Row::new(id, label, Tier::Free, KeyNeed::KeyRequired, description);
        row.active = false;
        row.into_item(false)
    })
    .collect()
}

/// A speech engine row: `usable` = reported by svc-audio; `hint` how to install it.
fn engine(
    id: &str,
    label: &str,
    description: &str,
    usable: &[String],
    hint: Option<String>,
    installable: bool,
) -> Row {
    let mut row = Row::new(id, label, Tier::Free, KeyNeed::NoKey, description);
    row.active = usable.iter().any(|u| u == id);
    if !row.active {
        row.install_hint = hint;
        row.installable = installable;
    }
    row
}

/// Speech choices share this "off" row (nothing pinned: that direction of voice is off).
fn off(label: &str) -> Row {
    Row::new(
        "off",
        label,
        Tier::Free,
        KeyNeed::NoKey,
        "nothing is pinned; Snowpea never falls back to an engine on its own",
    )
}

/// `stt`: speech-to-text engines; `active` = usable on this machine (`usable` from
/// svc-audio's `audio.capabilities`). "off" is the default: voice input is opt-in.
pub fn stt(usable: &[String]) -> Vec<CatalogItem> {
    let rows = vec![
        off("Off — no speech input"),
        engine(
            "whisper",
            "Local whisper",
            "faster-whisper / whisper CLI on PATH",
            usable,
            Some("pip install faster-whisper".into()),
            false,
        ),
        engine(
            "pocketsphinx",
            "PocketSphinx",
            "small offline recogniser",
            usable,
            Some("audio.install {\"engine\":\"pocketsphinx\"}".into()),
            true,
        ),
        engine(
            "command",
            "Custom command",
            "a command template containing {path} (audio.stt.command)",
            usable,
            None,
            false,
        ),
    ];
    single_choice(rows, "off")
}

/// `tts`: text-to-speech engines, like [`stt`].
pub fn tts(usable: &[String]) -> Vec<CatalogItem> {
    let rows = vec![
        off("Off — never speak"),
        engine(
            "espeak-ng",
            "espeak-ng",
            "small, robotic, everywhere",
            usable,
            Some(
                "install the espeak-ng system package (e.g. sudo apt-get install -y espeak-ng)"
                    .into(),
            ),
            false,
        ),
        engine(
            "piper",
            "Piper",
            "local neural voices",
            usable,
            Some("audio.install {\"engine\":\"piper\"}".into()),
            true,
        ),
        engine(
            "command",
            "Custom command",
            "a template containing {text} and {out} (audio.tts.command)",
            usable,
            None,
            false,
        ),
    ];
    single_choice(rows, "off")
}
