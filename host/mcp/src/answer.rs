//! The HTTP answers the server writes itself, not rmcp: a sentence in
//! plain text, and the mark that ends a connection after its answer. It
//! must not know when they are given.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};

/// The body of every answer (rmcp's type, so that ours and its mix).
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// `status` with `text`, for a person or an agent to read.
pub(crate) fn plain(status: StatusCode, text: String) -> Response<Body> {
    with_body(status, "text/plain; charset=utf-8", Bytes::from(text))
}

/// `status` with `body` of `content_type`.
pub(crate) fn with_body(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `answer`, after which the server closes the connection.
pub(crate) fn closing(mut answer: Response<Body>) -> Response<Body> {
    answer
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    answer
}
