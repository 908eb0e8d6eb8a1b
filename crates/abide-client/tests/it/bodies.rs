//! Throttles told only by the body, through the in-process driver: a 200 that says
//! `THROTTLED` is waited out and sent again, an out-of-quota 429 stops at once, and a
//! user's rule from the builder applies (and is checked by `build`).

use abide_client::{drive, StopReason};
use abide_core::{BodyRule, VerdictClass};

use crate::script::{clock, get, policy, Script};

const THROTTLED: &str = r#"{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":101,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":40,"restoreRate":50.0}}}}"#;

#[tokio::test]
async fn a_200_that_says_throttled_is_waited_out_and_sent_again() {
    let clock = clock();
    let p = policy(&clock).build().unwrap();
    let script = Script::new([(200, None), (200, None)]).with_bodies([THROTTLED, "{}"]);
    let (status, _) = drive(&p, get(&p), script.clone()).await.unwrap();
    assert_eq!((status.as_u16(), script.sent()), (200, 2));
}

#[tokio::test]
async fn out_of_quota_stops_after_one_request() {
    let clock = clock();
    let p = policy(&clock).build().unwrap();
    let body = r#"{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","code":"insufficient_quota"}}"#;
    let script = Script::new([(429, None)]).with_bodies([body]);
    let e = drive(&p, get(&p), script.clone()).await.unwrap_err();
    assert_eq!(e.reason, StopReason::OutOfQuota, "{e}");
    assert_eq!(script.sent(), 1);
}

fn busy_rule(json: &str) -> BodyRule {
    BodyRule {
        name: Some("busy".into()),
        json: json.into(),
        equals: "BUSY".into(),
        verdict: VerdictClass::Throttle,
        delay_json: Some("/wait".into()),
        status: vec![200],
    }
}

#[tokio::test]
async fn a_body_rule_from_the_builder_applies_and_a_bad_one_is_refused() {
    let clock = clock();
    let p = policy(&clock)
        .with_body_rule(busy_rule("/state"))
        .build()
        .unwrap();
    let script =
        Script::new([(200, None), (200, None)]).with_bodies([r#"{"state":"BUSY","wait":"2s"}"#]);
    let (status, _) = drive(&p, get(&p), script.clone()).await.unwrap();
    assert_eq!((status.as_u16(), script.sent()), (200, 2));

    let e = policy(&clock)
        .with_body_rule(busy_rule("state"))
        .build()
        .unwrap_err();
    assert_eq!(e.setting, "classify");
    assert!(e.to_string().contains("classify.body.busy.json"), "{e}");
}
