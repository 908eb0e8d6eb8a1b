//! The host's limit on requests in flight: set from an advertised concurrency quota,
//! lowered by its refusals (AIMD), released by every way a delivery ends.

use super::*;

/// What `abide provider --key-rate 75/s --key-burst 15 --key-concurrency 6` sends.
const OK: [(&str, &str); 2] = [
    ("ratelimit-policy", r#""key";q=75;w=1, "conc";q=6"#),
    ("ratelimit", r#""key";r=12;t=1, "conc";r=3;t=0"#),
];
/// Its concurrency refusal (with `429`).
const REFUSED: [(&str, &str); 3] = [
    ("retry-after", "1"),
    ("ratelimit-policy", r#""conc";q=6"#),
    ("ratelimit", r#""conc";r=0;t=1"#),
];

fn quota(q: u32) -> [(&'static str, String); 2] {
    [
        (
            "ratelimit-policy",
            format!(r#""key";q=1000;w=1, "conc";q={q}"#),
        ),
        ("ratelimit", r#""key";r=900;t=1, "conc";r=1;t=0"#.into()),
    ]
}

impl Rig {
    fn sent(&mut self) -> Delivery {
        let mut d = self.session.delivery(ItemContext::first(self.wall()));
        assert_eq!(self.until_sent(&mut d), Step::Send);
        d
    }

    fn answer_with(&mut self, d: &mut Delivery, status: u16, h: &[(&str, String)]) -> Answer {
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.answer(d, status, &h)
    }

    /// Teach the session a concurrency quota of `q` with one answered request.
    fn learn(&mut self, q: u32) {
        let mut d = self.sent();
        self.clock.advance(Duration::from_millis(5));
        self.answer_with(&mut d, 200, &quota(q));
    }
}

#[test]
fn no_more_requests_in_flight_than_the_advertised_quota() {
    let mut r = Rig::fast();
    r.learn(3);
    assert_eq!(r.session.in_flight().limit, Some(3));
    let mut on_wire: Vec<Delivery> = (0..3).map(|_| r.sent()).collect();
    let mut fourth = r.session.delivery(ItemContext::first(r.wall()));
    for _ in 0..20 {
        let Step::WaitUntil(at) = r.poll(&mut fourth) else {
            panic!("a fourth request went on the wire");
        };
        assert!(at > r.mono(), "a wait moves time on");
        r.clock.advance(at - r.mono());
    }
    assert_eq!(r.session.in_flight().on_wire, 3);
    let mut done = on_wire.remove(0);
    r.answer_with(&mut done, 200, &quota(3));
    assert_eq!(r.until_sent(&mut fourth), Step::Send);
    let snap = r.session.in_flight();
    assert_eq!((snap.on_wire, snap.held_sends), (3, 1), "{snap:?}");
}

#[test]
fn without_a_concurrency_signal_nothing_is_held() {
    let mut r = Rig::fast();
    let on_wire: Vec<Delivery> = (0..20).map(|_| r.sent()).collect();
    let snap = r.session.in_flight();
    assert_eq!((snap.on_wire, snap.limit, snap.held_sends), (20, None, 0));
    drop(on_wire);
    assert_eq!(r.session.in_flight().on_wire, 0);
}

#[test]
fn a_concurrency_refusal_lowers_the_limit_once_and_leaves_the_rate_alone() {
    let mut r = Rig::fast();
    let mut first = r.sent();
    r.answer(&mut first, 200, &OK);
    assert_eq!(r.session.in_flight().limit, Some(6));
    let rate = r.session.pacer().rate();
    assert!(
        (rate - 0.97 * 75.0).abs() < 1e-9,
        "the key's 75/s is the rate: {rate}"
    );
    let mut wire: Vec<Delivery> = (0..6).map(|_| r.sent()).collect();
    r.clock.advance(Duration::from_millis(60));
    let a = r.answer(&mut wire[0], 429, &REFUSED);
    assert_eq!(a.verdict.class, VerdictClass::Throttle);
    // Its Retry-After is obeyed, by the item and by the host...
    assert_eq!(a.decision, Decision::Retry { after: secs(1) });
    assert_eq!(
        r.session.pacer().paused_until(r.mono()),
        Some(r.mono() + secs(1))
    );
    // ...but the rate is not cut: only the limit on requests in flight (6 × 0.75).
    assert_eq!(r.session.pacer().rate(), rate);
    assert_eq!(r.session.in_flight().limit, Some(4));
    // A second refusal of a request sent before the decrease is an echo.
    r.answer(&mut wire[1], 429, &REFUSED);
    let snap = r.session.in_flight();
    assert_eq!((snap.limit, snap.decreases), (Some(4), 1));
    assert_eq!(r.session.pacer().rate(), rate);
    for d in &mut wire[2..] {
        r.answer(d, 200, &OK);
    }
    // +1 per round of `limit` successes, never above the advertised 6.
    r.clock.advance(secs(1));
    let mut answered = 0;
    while r.session.in_flight().limit == Some(4) {
        let mut d = r.sent();
        r.answer(&mut d, 200, &OK);
        answered += 1;
        assert!(answered < 10, "no increase after {answered} successes");
    }
    assert_eq!(r.session.in_flight().limit, Some(5));
    for _ in 0..100 {
        let mut d = r.sent();
        r.clock.advance(Duration::from_millis(20));
        r.answer(&mut d, 200, &OK);
    }
    assert_eq!(r.session.in_flight().limit, Some(6));
}

#[test]
fn refusals_of_requests_sent_before_the_quota_was_known_are_echoes() {
    let mut r = Rig::fast();
    // A cold start: ten requests on the wire before the first answer says "6 at once".
    let mut wire: Vec<Delivery> = (0..10).map(|_| r.sent()).collect();
    r.clock.advance(Duration::from_millis(60));
    r.answer(&mut wire[0], 200, &OK);
    for d in &mut wire[1..5] {
        r.answer(d, 429, &REFUSED);
    }
    let snap = r.session.in_flight();
    assert_eq!((snap.limit, snap.decreases), (Some(6), 0), "{snap:?}");
}

#[test]
fn an_abandoned_delivery_gives_its_place_back_once() {
    let mut r = Rig::fast();
    r.learn(1);
    // Dropped with its request on the wire (a cancelled future, a shutdown).
    let abandoned = r.sent();
    assert_eq!(r.session.in_flight().on_wire, 1);
    drop(abandoned);
    assert_eq!(r.session.in_flight().on_wire, 0);
    // A clone holds no place: dropping it releases nothing, answering the original does.
    let mut d = r.sent();
    let copy = d.clone();
    drop(copy);
    assert_eq!(r.session.in_flight().on_wire, 1);
    let mut next = r.session.delivery(ItemContext::first(r.wall()));
    assert!(matches!(r.poll(&mut next), Step::WaitUntil(_)));
    drop(next);
    // A transport failure is an answer too; the answered delivery has nothing left to give.
    r.fail(&mut d);
    assert_eq!(r.session.in_flight().on_wire, 0);
    drop(d);
    assert_eq!(r.session.in_flight().on_wire, 0);
    let snap = r.session.in_flight();
    assert_eq!((snap.sends, snap.held_sends), (3, 0), "{snap:?}");
}
