//! Binds that can never succeed (a wrong or over-long password, an unknown system_id or
//! system_type) suspend the provider naming the field; `ESME_RBINDFAIL` is retried slowly,
//! then suspends. Same tiny SMSC and paused clock as the parent module.

use super::*;

fn with_password(smsc: &Smsc, password: &str) -> SmppTransport {
    let (tx, rx) = mpsc::unbounded_channel();
    smsc.serve(rx);
    let creds = Arc::new(StaticCredentials::new().with("SMSC_PASSWORD", password));
    SmppTransport::with_connector(
        "smsc",
        &cfg(10),
        creds,
        Box::new(Pipes {
            tx,
            refuse: Arc::default(),
        }),
    )
}

#[tokio::test(start_paused = true)]
async fn a_wrong_password_is_refused_once_then_the_provider_is_suspended() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    let t = with_password(&smsc, "hunter2x");
    let r = t.send(&item(0)).await;
    assert!(matches!(r, Response::Transport(TransportFailure::Connect)));
    // An hour of (virtual) time: no second bind, sends fail at once, nothing submitted.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let r = t.send(&item(1)).await;
    assert!(matches!(r, Response::Transport(TransportFailure::Connect)));
    assert_eq!(
        smsc.seen().binds.len(),
        1,
        "bound again after ESME_RINVPASWD"
    );
    assert_eq!((t.stats().binds, t.stats().bind_failures), (0, 1));
    assert!(smsc.seen().keys.is_empty(), "nothing submitted unbound");
    let why = t.suspended().expect("suspended");
    assert!(why.contains("ESME_RINVPASWD"), "{why}");
    assert!(
        why.contains("password_env") && why.contains("SMSC_PASSWORD"),
        "{why}"
    );
    assert!(!why.contains("hunter2x"), "the password is shown: {why}");
}

#[tokio::test(start_paused = true)]
async fn a_password_too_long_for_a_bind_is_never_sent_and_suspends() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    let t = with_password(&smsc, "ninechars");
    let r = t.send(&item(0)).await;
    assert!(matches!(r, Response::Transport(TransportFailure::Connect)));
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(
        smsc.seen().binds.is_empty(),
        "an over-long password was sent"
    );
    let why = t.suspended().expect("suspended");
    assert!(
        why.contains("longer than 8") && why.contains("password_env"),
        "{why}"
    );
    assert!(!why.contains("ninechars"), "{why}");
}

#[tokio::test(start_paused = true)]
async fn an_unknown_system_id_or_system_type_suspends_naming_the_field() {
    for (status, field) in [(0x0F, "system_id"), (0x53, "system_type")] {
        let smsc = Smsc::new(|_| Answer::Status(0));
        smsc.bind_status.store(status, Ordering::SeqCst);
        let t = with_password(&smsc, "s3cret");
        let _ = t.send(&item(0)).await;
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(smsc.seen().binds.len(), 1);
        let why = t.suspended().expect("suspended");
        assert!(why.contains(&format!("fix {field}")), "{why}");
    }
}

#[tokio::test(start_paused = true)]
async fn bind_failed_is_retried_slowly_three_times_then_suspended() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    smsc.bind_status.store(0x0D, Ordering::SeqCst);
    let t = with_password(&smsc, "s3cret");
    let _ = t.send(&item(0)).await;
    assert_eq!(smsc.seen().binds.len(), 1);
    assert!(t.suspended().is_none(), "ESME_RBINDFAIL may pass");
    // Not before 10 s, then not before 20 s more.
    tokio::time::sleep(Duration::from_millis(9_900)).await;
    assert_eq!(smsc.seen().binds.len(), 1, "retried within 10 s");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(smsc.seen().binds.len(), 2);
    tokio::time::sleep(Duration::from_millis(19_800)).await;
    assert_eq!(smsc.seen().binds.len(), 2, "retried within 20 s");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(smsc.seen().binds.len(), 3, "more than three binds");
    let why = t.suspended().expect("suspended after three");
    assert!(
        why.contains("ESME_RBINDFAIL") && why.contains("3 times"),
        "{why}"
    );
}

#[tokio::test(start_paused = true)]
async fn bind_failed_then_accepted_binds_and_sends() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    smsc.bind_status.store(0x0D, Ordering::SeqCst);
    let t = with_password(&smsc, "s3cret");
    let _ = t.send(&item(0)).await;
    smsc.bind_status.store(0, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(11)).await;
    let r = t.send(&item(1)).await;
    assert_eq!(smpp(&r).map(|s| s.0), Some(0), "{r:?}");
    assert!(t.suspended().is_none());
}
