//! Store TTLs, as `store.ttl` of LangGraph's `langgraph.json` sets them: the TTL of items put without
//! one, whether reads restart an item's TTL, and how often expired items are swept from the database.
//! Expired items are invisible at once; the sweep reclaims their rows.

use std::time::Duration;

use serde_json::Value;
use weft_graph::store::TtlConfig;

use crate::error::ServerError;

/// The deployment's store TTL settings (`store.ttl` of `langgraph.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct StoreTtlConfig {
    /// The TTL of items put without one, in minutes (`default_ttl`); none: such items never expire.
    pub default_ttl: Option<f64>,
    /// Whether reads (get, search) restart the TTL of the items they return when the request does not
    /// say (`refresh_on_read`; true by default).
    pub refresh_on_read: bool,
    /// How often expired items are deleted (`sweep_interval_minutes`; 5 minutes by default).
    pub sweep_interval: Duration,
}

impl Default for StoreTtlConfig {
    fn default() -> Self {
        Self { default_ttl: None, refresh_on_read: true, sweep_interval: Duration::from_secs(5 * 60) }
    }
}

impl StoreTtlConfig {
    /// Reads `store.ttl` of a `langgraph.json` document; none when it has no such object.
    pub fn from_langgraph_json(config: &Value) -> Result<Option<Self>, ServerError> {
        let Some(ttl) = config.get("store").and_then(|c| c.get("ttl")) else { return Ok(None) };
        if ttl.is_null() {
            return Ok(None);
        }
        if !ttl.is_object() {
            return Err(ServerError::StoreTtlConfig("store.ttl must be an object".into()));
        }
        let invalid = |what: &str| ServerError::StoreTtlConfig(format!("store.ttl.{what}"));
        let mut parsed = Self::default();
        if let Some(minutes) = ttl.get("default_ttl").filter(|s| !s.is_null()) {
            let minutes = minutes.as_f64().filter(|m| m.is_finite() && *m > 0.0);
            parsed.default_ttl =
                Some(minutes.ok_or_else(|| invalid("default_ttl must be a positive number of minutes"))?);
        }
        if let Some(refresh) = ttl.get("refresh_on_read").filter(|s| !s.is_null()) {
            parsed.refresh_on_read =
                refresh.as_bool().ok_or_else(|| invalid("refresh_on_read must be true or false"))?;
        }
        if let Some(minutes) = ttl.get("sweep_interval_minutes").filter(|s| !s.is_null()) {
            let every = minutes
                .as_f64()
                .filter(|m| *m >= 0.0)
                .and_then(|m| Duration::try_from_secs_f64(m * 60.0).ok());
            parsed.sweep_interval =
                every.ok_or_else(|| invalid("sweep_interval_minutes must be a number of minutes"))?;
        }
        Ok(Some(parsed))
    }

    /// The settings the store is built with.
    pub(crate) fn store_config(&self) -> TtlConfig {
        let default_ttl = self.default_ttl.and_then(|m| Duration::try_from_secs_f64(m * 60.0).ok());
        TtlConfig { default_ttl, refresh_on_read: self.refresh_on_read }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn langgraph_json_settings_are_read_and_checked() {
        let config = json!({"store": {"ttl": {
            "default_ttl": 10080, "refresh_on_read": false, "sweep_interval_minutes": 60
        }}});
        let parsed = StoreTtlConfig::from_langgraph_json(&config).unwrap().unwrap();
        assert_eq!(parsed.default_ttl, Some(10080.0));
        assert!(!parsed.refresh_on_read);
        assert_eq!(parsed.sweep_interval, Duration::from_secs(3600));
        let store = parsed.store_config();
        assert_eq!(store.default_ttl, Some(Duration::from_secs(10080 * 60)));
        assert!(!store.refresh_on_read);

        assert_eq!(StoreTtlConfig::from_langgraph_json(&json!({"graphs": {}})).unwrap(), None);
        assert_eq!(StoreTtlConfig::from_langgraph_json(&json!({"store": {}})).unwrap(), None);
        let defaults = StoreTtlConfig::from_langgraph_json(&json!({"store": {"ttl": {}}})).unwrap().unwrap();
        assert_eq!(defaults, StoreTtlConfig::default());
        for bad in [
            json!({"store": {"ttl": 5}}),
            json!({"store": {"ttl": {"default_ttl": -1}}}),
            json!({"store": {"ttl": {"default_ttl": "ten"}}}),
            json!({"store": {"ttl": {"refresh_on_read": "yes"}}}),
            json!({"store": {"ttl": {"sweep_interval_minutes": -3}}}),
        ] {
            let err = StoreTtlConfig::from_langgraph_json(&bad).unwrap_err();
            assert!(matches!(err, ServerError::StoreTtlConfig(_)), "{bad}: {err}");
        }
    }
}
