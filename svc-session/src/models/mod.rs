//! The `Models` component: `session.setModel`, `session.setEffort` and the model, vendor and
//! effort of every model call (issue 16 "Model and effort"). It owns no table: the pins live
//! on the session row (`provider`/`model` for the model pin, `effort`).
//!
//! * [`routing`] — the one precedence function and model references;
//! * [`effort`] — tiers, the effort rule, clamping and the wire values.
//!
//! Both methods emit `model.changed{provider, model, effort, effortSource, efforts}`, and the
//! change takes effect at the session's next model call (the running one keeps its model).

use std::sync::Arc;

use serde_json::Value;
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use crate::events::EventLog;
use crate::session::{Session, Sessions};
use crate::store::sessions::SessionRow;
use snowpea_session_error::{Error, Result};
use snowpea_session_llm::provider::{ProviderError, Providers, SharedProvider};

use snowpea_session_llm::{effort, routing};

use routing::{ModelRef, RouteInputs};

/// The settings documents routing reads: the effective (project over global) one, and the
/// global and project ones apart (their `models.default` are two precedence levels).
#[derive(Debug, Clone, Default)]
pub struct SettingsDocs {
    /// Project merged over global.
    pub effective: Value,
    /// `$SNOWPEA_HOME/settings.json`.
    pub global: Value,
    /// `<workdir>/.snowpea/settings.json`.
    pub project: Value,
}

/// What a model call of a session uses.
#[derive(Clone)]
pub struct InEffect {
    /// The provider to call.
    pub provider: SharedProvider,
    /// Its vendor.
    pub vendor: String,
    /// The model id sent (the routed model, else the provider's default).
    pub model: String,
    /// The effort and how it was decided.
    pub effort: effort::Effort,
}

impl std::fmt::Debug for InEffect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InEffect")
            .field("vendor", &self.vendor)
            .field("model", &self.model)
            .field("effort", &self.effort)
            .finish()
    }
}

/// The `Models` component (module doc).
pub struct Models {
    home: Home,
    log: EventLog,
    sessions: Arc<Sessions>,
    providers: Providers,
}

impl std::fmt::Debug for Models {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Models").finish_non_exhaustive()
    }
}

fn models_default(doc: &Value) -> Option<&str> {
    doc.pointer("/models/default")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

impl Models {
    /// The component over the sessions it pins, choosing providers with `providers`.
    pub fn new(home: Home, log: EventLog, sessions: Arc<Sessions>, providers: Providers) -> Self {
        Models {
            home,
            log,
            sessions,
            providers,
        }
    }

    /// The settings of `workdir` (an unreadable document is an error naming it).
    pub fn settings(&self, workdir: &std::path::Path) -> anyhow::Result<SettingsDocs> {
        let global = snowpea_common::settings::load_file(&self.home.settings_path())?;
        let project =
            snowpea_common::settings::load_file(&workdir.join(".snowpea").join("settings.json"))?;
        let mut effective = global.clone();
        snowpea_common::settings::deep_merge(&mut effective, &project);
        Ok(SettingsDocs {
            effective,
            global,
            project,
        })
    }

    fn parse(&self, settings: &Value, reference: &str) -> std::result::Result<ModelRef, String> {
        routing::parse_ref(settings, reference, &|v| {
            self.providers.is_configured(settings, v)
        })
    }

    /// The routing candidates of `row` (a `models.default` that names nothing configured is
    /// skipped with a warning).
    pub fn inputs(&self, docs: &SettingsDocs, row: &SessionRow) -> RouteInputs {
        let default_of = |doc: &Value, which: &str| {
            let r = models_default(doc)?;
            match self.parse(&docs.effective, r) {
                Ok(m) => Some(m),
                Err(e) => {
                    tracing::warn!(session_id = %row.id, "{which} models.default ignored: {e}");
                    None
                }
            }
        };
        RouteInputs {
            explicit: None,
            agent: None,
            session: Some(ModelRef {
                vendor: row.provider.clone(),
                model: row.model.clone(),
            }),
            project: default_of(&docs.project, "project"),
            global: default_of(&docs.global, "global"),
        }
    }

    /// The provider, model and effort of `row`'s next model call.
    pub fn in_effect(
        &self,
        docs: &SettingsDocs,
        row: &SessionRow,
    ) -> std::result::Result<InEffect, (ProviderError, String)> {
        self.in_effect_with(docs, row, None, None)
    }

    /// [`Models::in_effect`] with the two strongest routing inputs (issue 19): `explicit`, a
    /// per-call override (`agent.spawn{model}`), and `agent`, the model assignment of the
    /// session's agent definition (`inherit` = none). A reference that names nothing
    /// configured is skipped with a warning (the next input decides).
    pub fn in_effect_with(
        &self,
        docs: &SettingsDocs,
        row: &SessionRow,
        explicit: Option<&str>,
        agent: Option<&str>,
    ) -> std::result::Result<InEffect, (ProviderError, String)> {
        let mut inputs = self.inputs(docs, row);
        let parse = |which: &str, r: Option<&str>| {
            let r = r
                .map(str::trim)
                .filter(|r| !r.is_empty() && *r != "inherit")?;
            match self.parse(&docs.effective, r) {
                Ok(m) => Some(m),
                Err(e) => {
                    tracing::warn!(session_id = %row.id, "{which} model {r:?} ignored: {e}");
                    None
                }
            }
        };
        inputs.explicit = parse("override", explicit);
        inputs.agent = parse("agent", agent);
        let chosen = routing::route(&inputs)
            .map(|(_, r)| r.clone())
            .unwrap_or_default();
        let provider = self.providers.select(
            &docs.effective,
            chosen.vendor.as_deref(),
            chosen.model.as_deref(),
        )?;
        let vendor = provider.vendor().to_owned();
        let model = chosen
            .model
            .clone()
            .unwrap_or_else(|| provider.default_model().to_owned());
        let effort = effort::resolve(&docs.effective, row.effort.as_deref(), &vendor, &model);
        Ok(InEffect {
            provider,
            vendor,
            model,
            effort,
        })
    }

    /// `(vendor, model, effort)` now in effect for `session`, for `model.changed` and the
    /// replies: from the provider when one can be chosen, else from the routed choice.
    pub(crate) fn now_in_effect(
        &self,
        session: &Session,
    ) -> Result<(Option<String>, Option<String>, effort::Effort)> {
        let row = session.row();
        let docs = self
            .settings(&session.workdir())
            .map_err(|e| Error::invalid("settings", format!("{e:#}")))?;
        Ok(match self.in_effect(&docs, &row) {
            Ok(e) => (Some(e.vendor), Some(e.model), e.effort),
            Err(_) => {
                let inputs = self.inputs(&docs, &row);
                let chosen = routing::route(&inputs)
                    .map(|(_, r)| r.clone())
                    .unwrap_or_default();
                let effort = effort::resolve(
                    &docs.effective,
                    row.effort.as_deref(),
                    chosen.vendor.as_deref().unwrap_or_default(),
                    chosen.model.as_deref().unwrap_or_default(),
                );
                (chosen.vendor, chosen.model, effort)
            }
        })
    }

    /// Emits `model.changed` for what is now in effect and publishes `sessions.changed`.
    async fn announce(
        &self,
        session: &Session,
        vendor: &Option<String>,
        model: &Option<String>,
        e: &effort::Effort,
    ) -> Result<()> {
        self.log
            .event_to_committed(
                session,
                &pb::ModelChangedEvent {
                    provider: vendor.clone(),
                    model: model.clone(),
                    effort: e.effort.map(str::to_owned),
                    effort_source: Some(e.source.to_owned()),
                    efforts: e.efforts.iter().map(|t| (*t).to_owned()).collect(),
                    ..Default::default()
                },
            )
            .await?;
        self.sessions.changed(session, "model");
        Ok(())
    }

    /// `session.setModel`: pins the session to a reference (a profile id, `vendor:model` or a
    /// bare vendor) or clears the pin (null, `""`, `inherit`); a reference naming no
    /// configured vendor is `invalid_params` on `params.model`. Emits `model.changed`.
    pub async fn set_model(
        &self,
        p: pb::SessionSetModelParams,
    ) -> Result<pb::SessionSetModelResult> {
        let session = self.sessions.get(&p.session_id)?;
        let pin = if routing::clears_pin(p.model.as_deref()) {
            ModelRef::default()
        } else {
            let docs = self
                .settings(&session.workdir())
                .map_err(|e| Error::invalid("params.model", format!("settings: {e:#}")))?;
            let reference = p.model.as_deref().unwrap_or_default();
            self.parse(&docs.effective, reference)
                .map_err(|e| Error::invalid("params.model", e))?
        };
        let pinned = !pin.is_empty();
        session.update(|r| {
            r.provider = pin.vendor.clone();
            r.model = pin.model.clone();
        });
        self.sessions.save(&session);
        let (vendor, model, e) = self.now_in_effect(&session)?;
        self.announce(&session, &vendor, &model, &e).await?;
        tracing::info!(session_id = %session.id, ?vendor, ?model, pinned, "model pin changed");
        Ok(pb::SessionSetModelResult {
            model,
            pinned,
            provider: vendor,
        })
    }

    /// `session.setEffort`: pins `low|medium|high|max` or clears the pin (null); the reply
    /// and `model.changed` carry the effective effort, clamped to the model's tiers.
    pub async fn set_effort(
        &self,
        p: pb::SessionSetEffortParams,
    ) -> Result<pb::SessionSetEffortResult> {
        let pin = match p.effort.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(e) => Some(effort::parse(e).ok_or_else(|| {
                Error::invalid(
                    "params.effort",
                    format!("must be low, medium, high, max or null, not {e:?}"),
                )
            })?),
        };
        let session = self.sessions.get(&p.session_id)?;
        session.update(|r| r.effort = pin.map(str::to_owned));
        self.sessions.save(&session);
        let (vendor, model, e) = self.now_in_effect(&session)?;
        self.announce(&session, &vendor, &model, &e).await?;
        Ok(pb::SessionSetEffortResult {
            effort: e.effort.map(str::to_owned),
            effort_source: e.source.to_owned(),
            efforts: e.efforts.iter().map(|t| (*t).to_owned()).collect(),
            pinned: e.pinned.map(str::to_owned),
            session_id: session.id.clone(),
        })
    }
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
