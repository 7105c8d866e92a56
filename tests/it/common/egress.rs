//! What the egress tests reach through a run's proxy: an HTTP upstream
//! on 127.0.0.2, the one range they tell the proxy it may reach.

use std::net::SocketAddr;

/// An HTTP upstream on 127.0.0.2 answering `GET /size/N` with N bytes and
/// anything else with the Host it was sent (`host=…`).
pub async fn egress_upstream() -> SocketAddr {
    use axum::extract::Path;
    use axum::http::HeaderMap;
    let app = axum::Router::new()
        .route(
            "/size/{n}",
            axum::routing::get(|Path(n): Path<usize>| async move { "x".repeat(n) }),
        )
        .fallback(|headers: HeaderMap| async move {
            format!(
                "host={}",
                headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("")
            )
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}
