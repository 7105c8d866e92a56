//! A webhook receiver the notifier posts to, and targets aimed at it.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;
use skilld::notify::{NotifyConfig, Target};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Value,
    pub raw: Bytes,
}

/// A local webhook receiver answering from a script of statuses (then
/// 200), recording every request.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub async fn start(script: Vec<StatusCode>) -> Self {
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let script = Arc::new(Mutex::new(script.into_iter()));
        let seen = got.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, raw: Bytes| {
                let (seen, script) = (seen.clone(), script.clone());
                async move {
                    let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
                    seen.lock().unwrap().push(Received { headers, body, raw });
                    script.lock().unwrap().next().unwrap_or(StatusCode::OK)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, got }
    }

    pub fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until `n` requests have arrived, then returns them all.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.got().len() < n {
            assert!(
                Instant::now() < deadline,
                "{} of {n} deliveries arrived: {:?}",
                self.got().len(),
                self.got()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.got()
    }
}

pub fn target(url: &str, extra: NotifyConfig) -> Target {
    let config = NotifyConfig {
        name: Some("team".into()),
        url: url.to_owned(),
        secret: Some(SECRET.into()),
        ..extra
    };
    Target::resolve(0, &config, |_| None).unwrap()
}
