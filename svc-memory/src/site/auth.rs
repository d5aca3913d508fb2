//! Who may use site memory, and whose profile a call touches (spec `site.*`).
//!
//! `site.get`, `site.put`, `site.mark`, `site.markPart`: browser host clients only — a
//! connection whose `system.hello` said `clientKind: "browser"` with a `clientId`; the
//! profile is that clientId. `site.list`, `site.delete`: a browser client sees its own
//! profile (naming another with `hostToolsFrom` is `unauthorized`); any other client must
//! name one with `hostToolsFrom` (`invalid_params` when it does not).

use snowpea_common::context::CallContext;

use crate::error::{Error, Result};

fn browser_id(ctx: &CallContext) -> Option<&str> {
    match (ctx.client_kind.as_deref(), ctx.client_id.as_deref()) {
        (Some("browser"), Some(id)) if !id.is_empty() => Some(id),
        _ => None,
    }
}

/// The profile of a browser host caller; `unauthorized` for anyone else.
pub fn host_profile(ctx: &CallContext) -> Result<String> {
    browser_id(ctx).map(str::to_owned).ok_or_else(|| {
        Error::Unauthorized(
            "site memory is for browser host clients (clientKind 'browser' with a clientId) only"
                .into(),
        )
    })
}

/// The profile `site.list`/`site.delete` act on.
pub fn named_profile(ctx: &CallContext, host_tools_from: Option<&str>) -> Result<String> {
    let named = host_tools_from.map(str::trim).filter(|s| !s.is_empty());
    match (browser_id(ctx), named) {
        (Some(own), None) => Ok(own.to_owned()),
        (Some(own), Some(n)) if n == own => Ok(own.to_owned()),
        (Some(_), Some(_)) => Err(Error::Unauthorized(
            "a browser client may only name its own profile".into(),
        )),
        (None, Some(n)) if ctx.client_kind.as_deref() == Some("browser") => {
            // A browser connection without a clientId has no profile of its own.
            let _ = n;
            Err(Error::Unauthorized(
                "a browser client needs a clientId to use site memory".into(),
            ))
        }
        (None, Some(n)) => Ok(n.to_owned()),
        (None, None) => Err(Error::invalid(
            "params.hostToolsFrom",
            "is required from a non-browser client: name the browser profile (its clientId)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(kind: Option<&str>, id: Option<&str>) -> CallContext {
        CallContext {
            connection_id: Some("c1".into()),
            client_id: id.map(Into::into),
            client_kind: kind.map(Into::into),
            instance_id: None,
        }
    }

    #[test]
    fn only_browser_hosts_use_their_profile() {
        assert_eq!(
            host_profile(&ctx(Some("browser"), Some("p1"))).unwrap(),
            "p1"
        );
        for c in [
            ctx(Some("tui"), Some("t1")),
            ctx(Some("browser"), None),
            ctx(None, None),
        ] {
            assert!(
                matches!(host_profile(&c), Err(Error::Unauthorized(_))),
                "{c:?}"
            );
        }
    }

    #[test]
    fn list_and_delete_callers() {
        let b = ctx(Some("browser"), Some("p1"));
        assert_eq!(named_profile(&b, None).unwrap(), "p1");
        assert_eq!(named_profile(&b, Some("p1")).unwrap(), "p1");
        assert!(matches!(
            named_profile(&b, Some("p2")),
            Err(Error::Unauthorized(_))
        ));
        let ui = ctx(Some("desktop"), Some("d1"));
        assert_eq!(named_profile(&ui, Some("p2")).unwrap(), "p2");
        match named_profile(&ui, None) {
            Err(Error::InvalidParams { field, .. }) => assert_eq!(field, "params.hostToolsFrom"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            named_profile(&ctx(Some("browser"), None), Some("p1")),
            Err(Error::Unauthorized(_))
        ));
    }
}
