//! A run of bare `403`s across items is a refused credential: the host pauses and the
//! items refused from then on are deferred, not failed (`session/refusal.rs`).

use super::*;

impl Rig {
    /// A new item sent and answered `status` (no headers), a second after the last.
    fn one(&mut self, status: u16) -> Answer {
        self.clock.advance(secs(1));
        let mut d = self.session.delivery(ItemContext::first(self.wall()));
        assert_eq!(self.until_sent(&mut d), Step::Send);
        self.answer(&mut d, status, &[])
    }
}

fn refused(streak: u32) -> Decision {
    Decision::Deferred(DeferReason::CredentialRefused {
        streak,
        last: "http_403".into(),
    })
}

#[test]
fn five_bare_403s_across_items_pause_the_host_and_defer_instead_of_failing() {
    let mut r = Rig::fast();
    // One refused item says nothing about the others: it fails, the host goes on.
    for _ in 0..4 {
        let a = r.one(403);
        assert_eq!(a.decision, Decision::Failed);
        assert!(!a.credential_refused);
        assert_eq!(r.session.pacer().paused_until(r.mono()), None);
    }
    // The fifth in a row: the credential is refused, not the item.
    let a = r.one(403);
    assert_eq!(
        a.verdict.class,
        VerdictClass::Terminal,
        "what the remote said"
    );
    assert_eq!(a.decision, refused(5), "what we decided");
    assert!(a.credential_refused && a.refusal_began);
    if let Decision::Deferred(why) = &a.decision {
        assert_eq!(why.code(), "credential_refused");
        assert_eq!(
            why.to_string(),
            "credential refused: 5 or more refusals in a row across items (last: http_403)"
        );
    }
    let until = r.session.pacer().paused_until(r.mono()).unwrap();
    assert_eq!(until - r.mono(), secs(10), "refusal_pause");
    // Every other item waits for the host, unsent, instead of being refused in turn.
    let mut other = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(
        r.poll(&mut other),
        Step::HandBack {
            after: secs(10),
            reason: HandBackReason::ProviderPaused
        }
    );
    // After the pause, still refused: deferred again, the pause doubles, no second warning.
    r.clock.advance(secs(10));
    let a = r.one(403);
    assert_eq!(a.decision, refused(5));
    assert!(a.credential_refused && !a.refusal_began);
    let until = r.session.pacer().paused_until(r.mono()).unwrap();
    assert_eq!(until - r.mono(), secs(20));
    // The key works again: the episode ends, a later single 403 is the item's own.
    r.clock.advance(secs(20));
    assert_eq!(r.one(202).decision, Decision::Delivered);
    let a = r.one(403);
    assert_eq!(a.decision, Decision::Failed);
    assert!(!a.credential_refused);
}

#[test]
fn refusals_far_apart_or_broken_by_another_answer_are_the_items_own() {
    let mut r = Rig::fast();
    // Four refusals, an accepted item, four more: never five in a row.
    for status in [403, 403, 403, 403, 202, 403, 403, 403, 403] {
        let a = r.one(status);
        assert!(!a.credential_refused, "{status}");
    }
    // A fifth refusal more than `refusal_span` (60 s) after the last starts a new streak.
    r.clock.advance(secs(61));
    let a = r.one(403);
    assert_eq!(a.decision, Decision::Failed);
    assert!(!a.credential_refused);
}

#[test]
fn requests_sent_before_the_pause_are_deferred_without_growing_it() {
    let mut r = Rig::fast();
    for _ in 0..4 {
        r.one(403);
    }
    // Two requests on the wire at once; the first answer recognises the refusal.
    r.clock.advance(secs(1));
    let mut a = r.session.delivery(ItemContext::first(r.wall()));
    let mut b = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut a), Step::Send);
    assert_eq!(r.until_sent(&mut b), Step::Send);
    r.clock.advance(Duration::from_millis(50));
    assert!(r.answer(&mut a, 403, &[]).refusal_began);
    let until = r.session.pacer().paused_until(r.mono()).unwrap();
    r.clock.advance(Duration::from_millis(50));
    let echo = r.answer(&mut b, 403, &[]);
    assert_eq!(echo.decision, refused(5), "deferred, not failed");
    assert!(!echo.refusal_began);
    assert_eq!(r.session.pacer().paused_until(r.mono()), Some(until));
}

#[test]
fn a_403_classified_as_a_throttle_or_a_zero_streak_never_counts() {
    let mut classify = crate::classify::ClassifyOverrides::default();
    classify.http.insert(403, VerdictClass::Throttle);
    let cfg = SessionConfig {
        classify,
        ..SessionConfig::default()
    };
    let mut r = Rig::new(cfg);
    for _ in 0..6 {
        r.clock.advance(secs(700));
        let mut d = r.session.delivery(ItemContext::first(r.wall()));
        assert_eq!(r.until_sent(&mut d), Step::Send);
        let a = r.answer(&mut d, 403, &[]);
        assert_eq!(a.verdict.class, VerdictClass::Throttle);
        assert!(!a.credential_refused);
        assert!(matches!(a.decision, Decision::Retry { .. }), "{a:?}");
    }
    let mut r = Rig::new(SessionConfig {
        refusal_streak: 0,
        ..SessionConfig::default()
    });
    for _ in 0..6 {
        r.clock.advance(secs(1));
        let mut d = r.session.delivery(ItemContext::first(r.wall()));
        assert_eq!(r.until_sent(&mut d), Step::Send);
        assert_eq!(r.answer(&mut d, 403, &[]).decision, Decision::Failed);
    }
}

#[test]
fn out_of_quota_defers_the_item_and_pauses_the_host_doubling() {
    let mut r = Rig::fast();
    let body = br#"{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}"#;
    let mut pauses = Vec::new();
    for _ in 0..3 {
        let mut d = r.session.delivery(ItemContext::first(r.wall()));
        assert_eq!(r.until_sent(&mut d), Step::Send);
        let h = HeaderMap::new();
        let obs = Observation::Http {
            status: StatusCode::TOO_MANY_REQUESTS,
            headers: &h,
            body,
        };
        let (m, w) = (r.mono(), r.wall());
        let a = d.on_answer(&r.session, m, w, &obs, &mut r.rng);
        assert_eq!(a.verdict.class, VerdictClass::OutOfQuota);
        assert!(matches!(
            a.decision,
            Decision::Deferred(DeferReason::OutOfQuota { .. })
        ));
        assert!(!a.credential_refused, "not a credential");
        let until = r.session.pacer().paused_until(r.mono()).unwrap();
        pauses.push((until - r.mono()).as_secs());
        r.clock.advance(until - r.mono());
    }
    assert_eq!(pauses, [10, 20, 40]);
    // Any other answer ends the episode.
    let a = r.one(202);
    assert_eq!(a.decision, Decision::Delivered);
}
