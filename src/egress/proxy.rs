//! The egress proxy of one networked run: HTTP CONNECT and plain HTTP,
//! on hyper. Every destination is checked by the name the program asked
//! for, resolved here (`resolve.rs`), and connected to at the address
//! that was checked, so a name that changes its answer between the check
//! and the connection (DNS rebinding) gains nothing.
//!
//! Written on hyper rather than taken whole from a proxy crate: the
//! well-kept ones (hudsucker, http-mitm-proxy) connect wherever the
//! request says after their hooks, resolving the name themselves, which
//! is the gap this proxy exists to close.

use super::allow::normalize;
use super::gate::{Gate, Verdict};
use super::ledger::{Ledger, Metered, Outcome};
use super::resolve::Resolver;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

type Body = BoxBody<Bytes, hyper::Error>;

/// How much one run may do through its proxy.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Connections open at once.
    pub connections: usize,
    /// Bytes in and out over the whole run.
    pub bytes: u64,
    /// The longest one connection may stay open.
    pub connection_time: Duration,
    /// The longest a connection to a destination may take to open.
    pub connect_timeout: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            connections: 32,
            bytes: 256 * 1024 * 1024,
            connection_time: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// One run's proxy: what decides, what resolves, what was done.
pub struct RunProxy {
    pub gate: Arc<dyn Gate>,
    pub resolver: Resolver,
    pub bounds: Bounds,
    pub ledger: Arc<Ledger>,
    open: Arc<Semaphore>,
}

impl RunProxy {
    pub fn new(gate: Arc<dyn Gate>, resolver: Resolver, bounds: Bounds) -> Arc<Self> {
        Arc::new(Self {
            open: Arc::new(Semaphore::new(bounds.connections)),
            ledger: Arc::new(Ledger::new(bounds.bytes)),
            gate,
            resolver,
            bounds,
        })
    }

    /// Serves the run's connections on `listener` until `stop`.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, stop: CancellationToken) {
        loop {
            let accepted = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let this = self.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = this.connection(stream, stop.clone()) => {}
                }
            });
        }
    }

    async fn connection(self: Arc<Self>, stream: TcpStream, stop: CancellationToken) {
        let Ok(permit) = self.open.clone().try_acquire_owned() else {
            refuse_busy(stream).await;
            return;
        };
        let held = Arc::new(Held {
            _permit: permit,
            stop,
            until: tokio::time::Instant::now() + self.bounds.connection_time,
        });
        let this = self.clone();
        let service = hyper::service::service_fn(move |req| {
            let (this, held) = (this.clone(), held.clone());
            async move { Ok::<_, std::convert::Infallible>(this.handle(req, held).await) }
        });
        let served = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let _ = tokio::time::timeout(self.bounds.connection_time, served).await;
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>, held: Arc<Held>) -> Response<Body> {
        let result = if req.method() == Method::CONNECT {
            self.tunnel(req, held).await
        } else {
            self.forward(req).await
        };
        result.unwrap_or_else(Refusal::response)
    }

    /// `CONNECT host:port`: checked, resolved, connected, then spliced.
    /// The tunnel outlives the HTTP connection it came on (hyper hands
    /// the socket over), so it keeps that connection's place among the
    /// run's, its deadline and the run's end.
    async fn tunnel(
        self: Arc<Self>,
        req: Request<Incoming>,
        held: Arc<Held>,
    ) -> Result<Response<Body>, Refusal> {
        let (host, port) =
            authority(req.uri(), None).ok_or(Refusal::BadRequest("CONNECT needs host:port".to_owned()))?;
        let mut upstream = self.open_to(&host, port).await?;
        tokio::spawn(async move {
            let Ok(upgraded) = hyper::upgrade::on(req).await else {
                return;
            };
            let mut client = TokioIo::new(upgraded);
            tokio::select! {
                () = held.stop.cancelled() => {}
                () = tokio::time::sleep_until(held.until) => {}
                _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
            }
        });
        Ok(Response::new(empty()))
    }

    /// A plain-HTTP request in absolute form, whose Host must name the
    /// same host as its URI.
    async fn forward(self: Arc<Self>, mut req: Request<Incoming>) -> Result<Response<Body>, Refusal> {
        if req.uri().scheme_str() != Some("http") {
            return Err(Refusal::BadRequest(
                "send http:// requests in absolute form; use CONNECT for https".to_owned(),
            ));
        }
        let (host, port) = authority(req.uri(), Some(80))
            .ok_or_else(|| Refusal::BadRequest("the request names no host".to_owned()))?;
        check_host_header(req.headers(), &host, port)?;
        let upstream = self.open_to(&host, port).await?;
        strip_hop_by_hop(req.headers_mut());
        *req.uri_mut() = origin_form(req.uri());
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
            .await
            .map_err(|e| Refusal::Upstream(format!("{host}:{port}: {e}")))?;
        tokio::spawn(conn);
        let response = sender
            .send_request(req)
            .await
            .map_err(|e| Refusal::Upstream(format!("{host}:{port}: {e}")))?;
        Ok(response.map(BodyExt::boxed))
    }

    /// The checked connection to `host:port`, counted in the ledger.
    async fn open_to(&self, host: &str, port: u16) -> Result<Metered<TcpStream>, Refusal> {
        let key = (host.to_owned(), port);
        if let Some(refused) = self.resolver.refused_literal(host) {
            self.ledger.record(&key, Outcome::Denied);
            return Err(Refusal::Unreachable(refused.to_string()));
        }
        if let Verdict::Deny { by, why } = self.gate.decide(host, port).await {
            self.ledger.record(&key, Outcome::Denied);
            return Err(Refusal::Denied {
                destination: format!("{host}:{port}"),
                by,
                why,
            });
        }
        let addrs = self.resolver.resolve(host, port).await.map_err(|e| {
            self.ledger.record(&key, Outcome::Denied);
            Refusal::Unreachable(e.to_string())
        })?;
        let stream = connect_any(&addrs, self.bounds.connect_timeout)
            .await
            .map_err(|e| Refusal::Upstream(format!("{host}:{port}: {e}")))?;
        self.ledger.record(&key, Outcome::Allowed);
        Ok(Metered {
            inner: stream,
            ledger: self.ledger.clone(),
            at: key,
        })
    }
}

/// What one accepted connection holds until it, and any tunnel opened on
/// it, has ended: its place among the run's connections, the run's end,
/// and its deadline.
struct Held {
    _permit: tokio::sync::OwnedSemaphorePermit,
    stop: CancellationToken,
    until: tokio::time::Instant,
}

/// The first of `addrs` that answers, each within `timeout`.
async fn connect_any(addrs: &[SocketAddr], timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for addr in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = e,
            Err(_) => last = std::io::Error::from(std::io::ErrorKind::TimedOut),
        }
    }
    Err(last)
}

/// The host (normalized) and port a URI names; `default` when it has
/// none, else `None`.
fn authority(uri: &Uri, default: Option<u16>) -> Option<(String, u16)> {
    let authority = uri.authority()?;
    if authority.as_str().contains('@') {
        return None;
    }
    let host = authority.host().trim_start_matches('[').trim_end_matches(']');
    let host = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => normalize(host)?,
    };
    Some((host, authority.port_u16().or(default)?))
}

/// Host must name what the URI names: else a program could ask for an
/// allowed name and have a shared front serve another (domain fronting).
fn check_host_header(headers: &HeaderMap, host: &str, port: u16) -> Result<(), Refusal> {
    let mut values = headers.get_all(header::HOST).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return match headers.get(header::HOST) {
            None => Ok(()),
            Some(_) => Err(Refusal::BadRequest("more than one Host header".to_owned())),
        };
    };
    let stated = value
        .to_str()
        .ok()
        .and_then(|v| v.parse::<Uri>().ok())
        .and_then(|uri| authority(&uri, Some(80)));
    if stated.as_ref() == Some(&(host.to_owned(), port)) {
        Ok(())
    } else {
        Err(Refusal::BadRequest(format!(
            "Host {value:?} does not name {host}:{port}, the request's destination"
        )))
    }
}

/// Headers for this hop only (RFC 9110 §7.6.1), and the proxy's own.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    for name in listed {
        headers.remove(name.as_str());
    }
    for name in [
        "connection",
        "proxy-connection",
        "proxy-authorization",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
    ] {
        headers.remove(name);
    }
}

fn origin_form(uri: &Uri) -> Uri {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    path.parse().unwrap_or_else(|_| Uri::from_static("/"))
}

fn empty() -> Body {
    Full::new(Bytes::new()).map_err(|never| match never {}).boxed()
}

/// The run has as many connections open as it may: answered in plain
/// HTTP, without reading the request.
async fn refuse_busy(mut stream: TcpStream) {
    use tokio::io::AsyncWriteExt;
    let text =
        "this run has as many connections open through skilld's proxy as it may; close one and retry\n";
    let head = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        text.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(text.as_bytes()).await;
}

/// Why the proxy did not take a request somewhere; answered as text a
/// model can act on.
#[derive(Debug)]
enum Refusal {
    BadRequest(String),
    Denied {
        destination: String,
        by: String,
        why: String,
    },
    Unreachable(String),
    Upstream(String),
}

impl Refusal {
    fn response(self) -> Response<Body> {
        let (status, text) = match self {
            Self::BadRequest(what) => (
                StatusCode::BAD_REQUEST,
                format!("skilld's egress proxy: {what}\n"),
            ),
            Self::Denied { destination, by, why } => (
                StatusCode::FORBIDDEN,
                format!(
                    "skilld refused the connection to {destination}: {why} (decided by {by}). \
                     This run reaches the network only through this proxy, so retrying another way \
                     (another port, an IP address, another tool) will not help. \
                     Tell the user what you needed {destination} for; they can allow it.\n"
                ),
            ),
            Self::Unreachable(why) => (
                StatusCode::FORBIDDEN,
                format!("skilld refused the connection: {why}. Retrying another way will not help.\n"),
            ),
            Self::Upstream(why) => (
                StatusCode::BAD_GATEWAY,
                format!("skilld's egress proxy could not reach {why}\n"),
            ),
        };
        let mut response = Response::new(
            Full::new(Bytes::from(text))
                .map_err(|never| match never {})
                .boxed(),
        );
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}
