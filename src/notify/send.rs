//! Delivering recorded notifications: claim what is due, post it signed,
//! record how it went, and retry with backoff until it arrives or its
//! attempts run out.

use super::{Shared, Target};
use crate::store::{Attempt, Notification};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use hmac::{KeyInit, Mac};
use http_body_util::Full;
use hyper::http::header;
use std::sync::Arc;
use std::time::Duration;

/// How often the sender looks for due deliveries (retries, and those other
/// instances recorded or left behind) when nothing rings it sooner.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// Deliveries claimed at once.
const BATCH: u32 = 16;
/// How long a claim holds: longer than any attempt may take, so that only
/// an instance that died mid-attempt loses its claim to another.
const LEASE: Duration = Duration::from_secs(120);
/// The first retry's delay; each later one doubles, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(600);

pub(super) struct Sender {
    shared: Arc<Shared>,
    client: Client,
}

/// An HTTP/1 client for `http` and `https` URLs. It follows no redirects:
/// a webhook answers where it was asked.
type Client = crate::https::Client<Full<Bytes>>;

impl Sender {
    pub(super) fn new(shared: Arc<Shared>) -> std::io::Result<Self> {
        let client = crate::https::client()?;
        Ok(Self { shared, client })
    }

    pub(super) async fn run(self) {
        let this = Arc::new(self);
        loop {
            let now = Utc::now();
            let lease_until = now + chrono::Duration::from_std(LEASE).unwrap_or_default();
            match this
                .shared
                .outbox
                .claim_notifications(&this.shared.instance, now, lease_until, BATCH)
                .await
            {
                Ok(due) => {
                    let sends = due.into_iter().map(|n| {
                        let this = this.clone();
                        async move { this.deliver(n).await }
                    });
                    futures_util::future::join_all(sends).await;
                }
                Err(e) => tracing::warn!(error = %e, "cannot claim notifications"),
            }
            let _ = tokio::time::timeout(LOOK_EVERY, this.shared.recorded.notified()).await;
        }
    }

    async fn deliver(&self, n: Notification) {
        let Some(target) = self.shared.targets.iter().find(|t| t.name == n.target) else {
            let error = format!("no [[notify]] named '{}' on this instance", n.target);
            return self.record(&n, Attempt::Failed { status: None, error }).await;
        };
        let attempt = match post(&self.client, target, &n).await {
            Ok(status) => Attempt::Delivered { status },
            Err((status, error)) if n.attempts >= target.max_attempts => Attempt::Failed { status, error },
            Err((status, error)) => Attempt::Retry {
                status,
                error,
                next: Utc::now() + backoff(n.attempts),
            },
        };
        if let Attempt::Failed { error, .. } | Attempt::Retry { error, .. } = &attempt {
            tracing::warn!(target = %target.name, notification = %n.id, attempt = n.attempts, %error,
                "a webhook delivery failed");
        }
        self.record(&n, attempt).await;
    }

    async fn record(&self, n: &Notification, attempt: Attempt) {
        let (outbox, instance) = (&self.shared.outbox, &self.shared.instance);
        if let Err(e) = outbox.record_attempt(n.id, instance, attempt, Utc::now()).await {
            tracing::warn!(notification = %n.id, error = %e, "cannot record a delivery attempt");
        }
    }
}

/// The delay after failed attempt `attempts` (1 for the first).
fn backoff(attempts: u32) -> chrono::Duration {
    let doubled = FIRST_BACKOFF.saturating_mul(1 << attempts.saturating_sub(1).min(20));
    chrono::Duration::from_std(doubled.min(MAX_BACKOFF)).unwrap_or_default()
}

/// One attempt: the HTTP status of a 2xx answer, or the status (if any)
/// and why it failed.
async fn post(client: &Client, target: &Target, n: &Notification) -> Result<u16, (Option<u16>, String)> {
    let body = serde_json::to_vec(&n.payload).map_err(|e| (None, e.to_string()))?;
    let mut request = hyper::Request::post(target.url.clone())
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::USER_AGENT, concat!("skilld/", env!("CARGO_PKG_VERSION")))
        .header("webhook-id", n.id.to_string());
    if let Some(secret) = &target.secret {
        let at = Utc::now();
        request = request
            .header("webhook-timestamp", at.timestamp().to_string())
            .header(
                "webhook-signature",
                signature(secret, &n.id.to_string(), at, &body),
            );
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| (None, e.to_string()))?;
    match tokio::time::timeout(target.timeout, client.request(request)).await {
        Ok(Ok(res)) if res.status().is_success() => Ok(res.status().as_u16()),
        Ok(Ok(res)) => Err((Some(res.status().as_u16()), format!("answered {}", res.status()))),
        Ok(Err(e)) => Err((None, chain(&e))),
        Err(_) => Err((None, format!("timed out: no answer within {:?}", target.timeout))),
    }
}

/// An error with its causes, as `a: b: c`: reqwest's own message alone
/// ("error sending request") does not say what went wrong.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Standard Webhooks' signature: `v1,` and the base64 HMAC-SHA256 of
/// `<id>.<timestamp>.<body>`.
pub fn signature(secret: &[u8], id: &str, at: DateTime<Utc>, body: &[u8]) -> String {
    use base64::Engine;
    // HMAC takes a key of any length: this never fails.
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(format!("{id}.{}.", at.timestamp()).as_bytes());
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn signatures_match_the_standard_webhooks_example() {
        use base64::Engine;
        let secret = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let at = DateTime::from_timestamp(1_614_265_330, 0).unwrap();
        let sig = signature(
            &secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            at,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let secs: Vec<i64> = [1, 2, 3, 4, 30].map(|a| backoff(a).num_seconds()).to_vec();
        assert_eq!(secs, [1, 2, 4, 8, 600]);
    }
}
