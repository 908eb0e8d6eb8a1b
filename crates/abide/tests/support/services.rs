//! PostgreSQL and Redis on loopback for the scale-out tests: a fresh database per test,
//! skipped with `SKIPPED:` when a service is absent, a failure under
//! `ABIDE_REQUIRE_SERVICES=1`.

use std::time::Duration;

use sqlx::Connection;

pub const PG_ADMIN: &str = "postgres://postgres@127.0.0.1:5432/test";
pub const REDIS: &str = "redis://127.0.0.1:6379";

pub fn required() -> bool {
    std::env::var("ABIDE_REQUIRE_SERVICES").as_deref() == Ok("1")
}

/// A fresh database for this test (dropped by [`Db::drop_now`]), or `None` after printing
/// why the test is skipped.
pub struct Db {
    pub name: String,
}

impl Db {
    pub async fn create(test: &str, tag: &str) -> Option<Self> {
        let mut admin = match tokio::time::timeout(
            Duration::from_secs(3),
            sqlx::PgConnection::connect(PG_ADMIN),
        )
        .await
        {
            Ok(Ok(c)) => c,
            other if !required() => {
                println!("SKIPPED: {test}: PostgreSQL at {PG_ADMIN} unreachable ({other:?})");
                return None;
            }
            other => panic!("ABIDE_REQUIRE_SERVICES=1 but PostgreSQL is unreachable: {other:?}"),
        };
        let name = format!("abide_scale_{tag}_{}", std::process::id());
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut admin)
            .await;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap();
        Some(Self { name })
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.name)
    }

    pub async fn drop_now(self) {
        if let Ok(mut admin) = sqlx::PgConnection::connect(PG_ADMIN).await {
            let _ = sqlx::query(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .execute(&mut admin)
            .await;
        }
    }
}

pub fn redis_here(test: &str) -> bool {
    let addr = "127.0.0.1:6379".parse().unwrap();
    match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
        Ok(_) => true,
        Err(e) if !required() => {
            println!("SKIPPED: {test}: no Redis at 127.0.0.1:6379 ({e})");
            false
        }
        Err(e) => panic!("ABIDE_REQUIRE_SERVICES=1 but Redis is unreachable: {e}"),
    }
}
