//! GraphQL APIs: throttles sent with `200` and an error list.
//!
//! - **Shopify** GraphQL Admin API: an error whose `extensions.code` is `"THROTTLED"`; the
//!   response's `extensions.cost` carries `requestedQueryCost` and `throttleStatus`
//!   (`maximumAvailable`, `currentlyAvailable`, `restoreRate` points per second). The
//!   query fits again after (requested − available) ÷ restoreRate seconds.
//!   Source: <https://shopify.dev/docs/api/usage/limits#graphql-admin-api-rate-limits>
//!   and <https://shopify.dev/docs/api/admin-graphql#rate-limits>.
//! - **GitHub** GraphQL API: an error whose `type` is `"RATE_LIMITED"` (the primary limit's
//!   `x-ratelimit-*` headers still say when it resets).
//!   Source: <https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api>.

use serde_json::Value;

use super::finding::{BodyDelay, Finding};

/// A throttle in a GraphQL error list, with Shopify's cost-model delay when given.
pub fn find(json: &Value) -> Option<Finding> {
    let errors = json.get("errors")?.as_array()?;
    let code_is =
        |e: &Value, want: &str| e.pointer("/extensions/code").and_then(Value::as_str) == Some(want);
    if errors.iter().any(|e| code_is(e, "THROTTLED")) {
        return Some(Finding {
            delay: shopify_cost_delay(json),
            ..Finding::throttle("graphql_throttled")
        });
    }
    if errors
        .iter()
        .any(|e| e.get("type").and_then(Value::as_str) == Some("RATE_LIMITED"))
    {
        return Some(Finding::throttle("graphql_rate_limited"));
    }
    None
}

/// Shopify's wait until the throttled query fits: (requestedQueryCost − currentlyAvailable)
/// ÷ restoreRate seconds (zero when it already fits). `None` without a usable cost (no
/// cost block, a non-positive restore rate); unreadable numbers are an unreadable delay.
pub fn shopify_cost_delay(json: &Value) -> Option<BodyDelay> {
    let cost = json.pointer("/extensions/cost")?;
    let requested = cost.get("requestedQueryCost")?;
    let status = cost.get("throttleStatus")?;
    let available = status.get("currentlyAvailable")?;
    let rate = status.get("restoreRate")?;
    let raw = format!(
        "requestedQueryCost={} currentlyAvailable={} restoreRate={}",
        super::finding::cut(&requested.to_string()),
        super::finding::cut(&available.to_string()),
        super::finding::cut(&rate.to_string()),
    );
    let (Some(requested), Some(available), Some(rate)) =
        (requested.as_f64(), available.as_f64(), rate.as_f64())
    else {
        return Some(BodyDelay::Unreadable { raw });
    };
    if !(rate.is_finite() && rate > 0.0) {
        return Some(BodyDelay::Unreadable { raw });
    }
    let missing = (requested - available).max(0.0);
    // A huge cost over a tiny rate is a very long wait (capped later), not an error.
    let secs = (missing / rate).min(f64::MAX);
    match super::super::duration::from_secs_f64(secs) {
        Some(delay) => Some(BodyDelay::Given { delay, raw }),
        None => Some(BodyDelay::Unreadable { raw }),
    }
}

/// The example of Shopify's documentation: 101 points asked, 40 available, 50 per second.
#[cfg(test)]
pub(crate) const SHOPIFY_EXAMPLE: &str = r#"{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/rate-limits"}}],"extensions":{"cost":{"requestedQueryCost":101,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":40,"restoreRate":50.0}}}}"#;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn shopify_example_waits_for_the_missing_points() {
        let json: Value = serde_json::from_str(SHOPIFY_EXAMPLE).unwrap();
        let f = find(&json).unwrap();
        assert_eq!(f.tail, "graphql_throttled");
        match f.delay {
            Some(BodyDelay::Given { delay, raw }) => {
                let ms = delay.as_secs_f64() * 1000.0;
                assert!((ms - 1220.0).abs() < 1.0, "{delay:?}");
                assert!(raw.contains("restoreRate=50.0"), "{raw}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cost_edge_cases() {
        let with = |req: &str, avail: &str, rate: &str| {
            let s = format!(
                r#"{{"extensions":{{"cost":{{"requestedQueryCost":{req},"throttleStatus":{{"currentlyAvailable":{avail},"restoreRate":{rate}}}}}}}}}"#
            );
            shopify_cost_delay(&serde_json::from_str(&s).unwrap())
        };
        assert!(
            matches!(with("10", "50", "50"), Some(BodyDelay::Given { delay, .. }) if delay == Duration::ZERO)
        );
        assert!(matches!(
            with("10", "0", "0"),
            Some(BodyDelay::Unreadable { .. })
        ));
        assert!(matches!(
            with("10", "0", "-5"),
            Some(BodyDelay::Unreadable { .. })
        ));
        assert!(matches!(
            with("\"x\"", "0", "1"),
            Some(BodyDelay::Unreadable { .. })
        ));
        assert!(matches!(
            with("1e300", "0", "1e-300"),
            Some(BodyDelay::Given { .. })
        ));
    }

    #[test]
    fn other_graphql_errors_are_no_throttle() {
        for body in [
            r#"{"errors":[{"message":"Field 'x' doesn't exist","extensions":{"code":"undefinedField"}}]}"#,
            r#"{"errors":[{"message":"rate THROTTLED in text only"}]}"#,
            r#"{"errors":"THROTTLED"}"#,
            r#"{"data":{"shop":{"name":"x"}},"extensions":{"cost":{"requestedQueryCost":1}}}"#,
        ] {
            let json: Value = serde_json::from_str(body).unwrap();
            assert_eq!(find(&json), None, "{body}");
        }
        let gh: Value = serde_json::from_str(
            r#"{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for user ID 1."}]}"#,
        )
        .unwrap();
        assert_eq!(find(&gh).unwrap().tail, "graphql_rate_limited");
    }
}
