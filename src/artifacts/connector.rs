//! object_store's requests over hyper's client (rustls on ring), already
//! a dependency for webhooks, instead of its default reqwest, whose TLS
//! would build aws-lc.

use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpRequestBody, HttpResponse,
    HttpResponseBody, HttpService,
};
use std::time::Duration;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request may wait for its answer's head (a whole upload of
/// the largest artifact included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

type Client = crate::https::Client<HttpRequestBody>;

/// Makes [`Hyper`] clients for object_store.
#[derive(Debug, Default)]
pub struct Connector;

impl HttpConnector for Connector {
    fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let https = crate::https::connector(http).map_err(|e| object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        })?;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
        Ok(HttpClient::new(Hyper(client)))
    }
}

/// One client, shared by every request of the store.
#[derive(Debug)]
struct Hyper(Client);

#[async_trait::async_trait]
impl HttpService for Hyper {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let answered = tokio::time::timeout(REQUEST_TIMEOUT, self.0.request(req))
            .await
            .map_err(|_| {
                HttpError::new(
                    HttpErrorKind::Timeout,
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 60 s"),
                )
            })?
            .map_err(|e| {
                let kind = if e.is_connect() {
                    HttpErrorKind::Connect
                } else {
                    HttpErrorKind::Request
                };
                HttpError::new(kind, e)
            })?;
        let (parts, body) = answered.into_parts();
        let body = http_body_util::BodyExt::map_err(body, |e| HttpError::new(HttpErrorKind::Interrupted, e));
        Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
    }
}
