//! `POST /v1/items/{id}/cancel`: a person withdraws an item before it is sent.

use abide_outbox::{echo, AnyStore, Error, State as ItemState, Store, CANCELLED_REASON};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// `POST /v1/items/{id}/cancel`: `QUEUED`, `PENDING` or `DEFERRED` → `FAILED` with the
/// reason `cancelled`; nothing is sent for it afterwards. `409 not_cancellable` for an
/// item `IN_FLIGHT` (a request may be on the wire: its answer decides) or already final,
/// `404` for an unknown id. Any other error (the database at fault) is returned for the
/// caller to answer as every route does.
pub(crate) async fn cancel_item(
    store: &AnyStore,
    id: &str,
    now: std::time::SystemTime,
) -> Result<Response, Error> {
    Ok(match store.cancel(id, now).await {
        Ok(()) => Json(json!({
            "id": id,
            "state": ItemState::Failed.as_str(),
            "reason": CANCELLED_REASON,
        }))
        .into_response(),
        Err(Error::NotFound(_)) => {
            let body =
                json!({"error": "not_found", "message": format!("no item {}", echo::clip(id))});
            (StatusCode::NOT_FOUND, Json(body)).into_response()
        }
        Err(Error::IllegalTransition(t)) => {
            let why = if t.from == ItemState::InFlight {
                "a sender has claimed it (senders claim a little ahead of the wire, so a \
                 request may or may not be out); its answer decides (see GET /v1/items/{id})"
            } else {
                "it is already final"
            };
            let message = format!(
                "item {} is {}: {why}; only QUEUED, PENDING and DEFERRED items can be cancelled",
                echo::clip(id),
                t.from
            );
            let body =
                json!({"error": "not_cancellable", "state": t.from.as_str(), "message": message});
            (StatusCode::CONFLICT, Json(body)).into_response()
        }
        Err(e) => return Err(e),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::{Duration, SystemTime};

    use abide_outbox::{NewItem, Request};
    use serde_json::Value;

    use super::*;

    async fn answer(store: &AnyStore, id: &str) -> (StatusCode, Value) {
        let r = cancel_item(store, id, SystemTime::UNIX_EPOCH + Duration::from_secs(60))
            .await
            .unwrap();
        let status = r.status();
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn a_waiting_item_is_cancelled_one_on_the_wire_or_final_is_refused_409() {
        let dir = tempfile::tempdir().unwrap();
        let store = AnyStore::connect(dir.path().join("o.db").to_str().unwrap())
            .await
            .unwrap();
        let t0 = SystemTime::UNIX_EPOCH;
        let new = |k: &str| {
            NewItem::new("sms", Request::post_json("/m", json!({ "k": k }))).with_idempotency_key(k)
        };
        let ids: Vec<String> = store
            .enqueue(&[new("a"), new("b")], t0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.id)
            .collect();
        // b on the wire: claimed by a sender.
        let claimed = store
            .claim("sms", "w1", t0, Duration::from_secs(600), 1)
            .await
            .unwrap();
        let (on_wire, waiting) = if claimed[0].id == ids[0] {
            (&ids[0], &ids[1])
        } else {
            (&ids[1], &ids[0])
        };
        let (s, v) = answer(&store, waiting).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(
            (v["state"].as_str(), v["reason"].as_str()),
            (Some("FAILED"), Some("cancelled"))
        );
        let it = store.get(waiting).await.unwrap().unwrap();
        assert_eq!(
            (it.state, it.reason.as_deref()),
            (ItemState::Failed, Some("cancelled"))
        );

        let (s, v) = answer(&store, on_wire).await;
        assert_eq!(s, StatusCode::CONFLICT, "{v}");
        assert_eq!(v["state"], "IN_FLIGHT", "{v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("a sender has claimed it"),
            "{v}"
        );
        assert_eq!(
            store.get(on_wire).await.unwrap().unwrap().state,
            ItemState::InFlight
        );

        let (s, v) = answer(&store, waiting).await;
        assert_eq!(s, StatusCode::CONFLICT, "cancelling twice: {v}");
        assert!(
            v["message"].as_str().unwrap().contains("already final"),
            "{v}"
        );
        let (s, v) = answer(&store, "nope").await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    }
}
