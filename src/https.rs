//! One way out for every request skilld makes (webhooks, OAuth issuers,
//! upstream MCP servers, Starlark's `fetch`, `skilld install`, artifacts):
//! hyper's client over rustls on ring, trusting the platform's roots, for
//! `https` and plain `http` URLs alike.

use hyper_util::client::legacy::connect::HttpConnector;

/// The connector every client here uses.
pub type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A client sending bodies of type `B` over [`Connector`].
pub type Client<B> = hyper_util::client::legacy::Client<Connector, B>;

/// A client sending bodies of type `B`, over [`connector`].
pub fn client<B>() -> std::io::Result<Client<B>>
where
    B: hyper::body::Body + Send,
    B::Data: Send,
{
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector(HttpConnector::new())?),
    )
}

/// TLS over `http`, which is told to take `https` URLs too; `http`
/// resolves names with `R` (the system's resolver, or addresses checked
/// beforehand). It fails only when the system's roots cannot be loaded.
pub fn connector<R>(
    mut http: HttpConnector<R>,
) -> std::io::Result<hyper_rustls::HttpsConnector<HttpConnector<R>>> {
    http.enforce_http(false);
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_platform_verifier(rustls::crypto::ring::default_provider())?
        .https_or_http()
        .enable_http1()
        .wrap_connector(http))
}
