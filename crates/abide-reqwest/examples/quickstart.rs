//! abide-reqwest in three lines, against an in-process `abide provider` limited to 5/s:
//! 20 messages from 4 tasks, none lost, no 429 storm.
//!
//! ```text
//! cargo run -p abide-reqwest --example quickstart
//! ```

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use abide_core::SystemClock;
use abide_fake::{spawn, ProviderConfig, DEMO_KEY};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cfg = ProviderConfig::from_toml_str("[limits]\nkey_rate = \"5/s\"\nkey_burst = 1\n")?;
    let provider = spawn(cfg, Arc::new(SystemClock), "127.0.0.1:0".parse()?).await?;
    let url = format!("{}/v1/messages", provider.url());

    // The three lines.
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(abide_reqwest::AbideMiddleware::default())
        .build();

    let mut tasks = Vec::new();
    for t in 0..4 {
        let (client, url) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..5 {
                let body = format!(r#"{{"to":"+1555010{t}","text":"hello {i}"}}"#);
                let r = client
                    .post(&url)
                    .bearer_auth(DEMO_KEY)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                match r {
                    Ok(r) => println!("task {t} message {i}: {}", r.status()),
                    Err(e) => println!("task {t} message {i}: {e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let s = provider.stats();
    println!(
        "provider saw {} requests: {} accepted, {} throttled",
        s.requests, s.accepted, s.rejected
    );
    provider.shutdown().await?;
    Ok(())
}
