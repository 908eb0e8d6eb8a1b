//! abide-tower around hyper-util's client, against an in-process `abide provider` that
//! answers every other request with a 503.
//!
//! ```text
//! cargo run -p abide-tower --example hyper_client
//! ```

use std::sync::Arc;

use abide_core::SystemClock;
use abide_fake::{spawn, ProviderConfig, DEMO_KEY};
use abide_tower::{AbideLayer, Policy};
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{Service, ServiceBuilder, ServiceExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cfg = ProviderConfig::from_toml_str("[behaviour]\nfail_503 = 0.5\n")?;
    let provider = spawn(cfg, Arc::new(SystemClock), "127.0.0.1:0".parse()?).await?;

    // The three lines.
    let policy = Policy::builder().with_max_attempts(3).build()?;
    let hyper = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut client = ServiceBuilder::new()
        .layer(AbideLayer::new(policy))
        .service(hyper);

    for i in 0..4 {
        let req = http::Request::post(format!("{}/v1/messages", provider.url()))
            .header("authorization", format!("Bearer {DEMO_KEY}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(format!(
                r#"{{"to":"+1","text":"{i}"}}"#
            ))))?;
        match client.ready().await?.call(req).await {
            Ok(r) => println!("message {i}: {}", r.status()),
            Err(e) => println!("message {i}: {e}"),
        }
    }
    let s = provider.stats();
    println!(
        "provider saw {} requests, {} accepted",
        s.requests, s.accepted
    );
    provider.shutdown().await?;
    Ok(())
}
