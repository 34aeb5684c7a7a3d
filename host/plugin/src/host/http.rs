//! Outgoing HTTP (`wasi:http/outgoing-handler` and `wasi:http/types`),
//! linked for every plugin: wasmtime-wasi-http's implementation, behind
//! the host's own `handle`, which refuses every request the plugin's
//! `allowed-hosts` do not allow before anything is connected.
//!
//! `handle` reads the request's scheme and authority, reduces them to one
//! canonical destination (`grants::network`: a user name, an odd port, a
//! numeric host that is no dotted quad is refused), checks it against the
//! grants, and writes the canonical form back into the request, so the
//! client connects to exactly what was checked. A refused request fails
//! with `http-request-denied`, and the host notes one line for the agent's
//! response naming the destination and the grant that would allow it.
//!
//! Every request is bounded ([`RequestCalls`]): at most
//! [`MAX_REQUESTS_IN_FLIGHT`] per plugin (`connection-limit-reached` past
//! it), connect, first-byte and between-bytes timeouts within the time the
//! call has left, and nothing — not the connection, not the response body
//! — outlives the call that sent it, its cancellation, or the instance
//! (the resource table drops the rest). Bodies are read by the plugin in
//! chunks into its own memory; the host keeps only hyper's buffer of each
//! connection. DNS answers are not pinned: a granted name resolves as the
//! machine resolves it.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::p2::bindings::LinkOptions;
use wasmtime_wasi_http::p2::bindings::http::outgoing_handler;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::types::{HostFutureIncomingResponse, HostOutgoingRequest};
use wasmtime_wasi_http::p2::{HttpResult, bindings};
use wasmtime_wasi_http::{
    Error, RequestOptions, WasiBody, WasiHttp, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

use crate::grants::network::{self, Destination};
use crate::host::WASI_VERSION;
use crate::limits::{MAX_REQUESTS_IN_FLIGHT, RequestCalls};
use crate::plugin_text;
use crate::state::HostState;

/// Largest chunk of a request body the host takes from the plugin at once
/// (wasmtime-wasi-http's default is 1 MiB, buffered per request).
const BODY_CHUNK: usize = 64 * 1024;

/// Links `wasi:http/types` (wasmtime-wasi-http's) and
/// `wasi:http/outgoing-handler` (the host's `handle`).
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let options = LinkOptions::default();
    bindings::sync::http::types::add_to_linker::<HostState, WasiHttp>(
        linker,
        &options.into(),
        HostState::http,
    )?;
    let mut handler = linker.instance(&format!("wasi:http/outgoing-handler@{WASI_VERSION}"))?;
    handler.func_wrap(
        "handle",
        |mut store,
         (request, options): (
            Resource<HostOutgoingRequest>,
            Option<Resource<RequestOptions>>,
        )| {
            let answer = match handle(store.data_mut(), request, options) {
                Ok(response) => Ok(response),
                Err(err) => Err(err.downcast()?),
            };
            Ok((answer,))
        },
    )?;
    Ok(())
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let (ctx, table, requests) = self.http_parts();
        WasiHttpCtxView {
            ctx,
            table,
            hooks: requests,
        }
    }
}

/// `outgoing-handler.handle`: checked, then wasmtime-wasi-http's.
fn handle(
    state: &mut HostState,
    request: Resource<HostOutgoingRequest>,
    options: Option<Resource<RequestOptions>>,
) -> HttpResult<Resource<HostFutureIncomingResponse>> {
    let (scheme, authority) = {
        let asked = state.table().get(&request)?;
        let scheme = asked.scheme.as_ref().map(|scheme| match scheme {
            Scheme::Http => "http".to_owned(),
            Scheme::Https => "https".to_owned(),
            Scheme::Other(other) => other.clone(),
        });
        (scheme, asked.authority.clone().unwrap_or_default())
    };
    let destination = match Destination::of_request(scheme.as_deref(), &authority) {
        Ok(destination) => destination,
        Err(why) => {
            let shown = format!("{}://{authority}", scheme.as_deref().unwrap_or("https"));
            return refuse(
                state,
                request,
                &shown,
                &why.to_string(),
                ErrorCode::HttpRequestDenied,
            );
        }
    };
    if let Err(refused) = state.grants().allows_request(&destination) {
        return refuse(
            state,
            request,
            &destination.to_string(),
            &refused.to_string(),
            ErrorCode::HttpRequestDenied,
        );
    }
    let watch = state.budget().watch();
    let Some(slot) = state.requests().start(watch) else {
        let why = format!(
            "it already has {MAX_REQUESTS_IN_FLIGHT} requests in flight, the most a plugin may have at once; it can send this one when one of them has ended"
        );
        return refuse(
            state,
            request,
            &destination.to_string(),
            &why,
            ErrorCode::ConnectionLimitReached,
        );
    };
    // What the client connects to is what was checked.
    let asked = state.table().get_mut(&request)?;
    asked.scheme = Some(match destination.scheme {
        network::Scheme::Http => Scheme::Http,
        network::Scheme::Https => Scheme::Https,
    });
    asked.authority = Some(destination.authority());
    state.requests().arm(slot);
    let sent = outgoing_handler::Host::handle(&mut state.http(), request, options);
    // Still armed when wasmtime-wasi-http refused the request itself.
    drop(state.requests().take_armed());
    sent
}

/// Refuses a request: it is dropped, the agent's response gets a line
/// saying why, and the plugin gets `code`.
fn refuse(
    state: &mut HostState,
    request: Resource<HostOutgoingRequest>,
    destination: &str,
    why: &str,
    code: ErrorCode,
) -> HttpResult<Resource<HostFutureIncomingResponse>> {
    // Dropped here, so refused requests do not pile up in the table.
    state.table().delete(request)?;
    let plugin = state.grants().plugin.clone();
    state.output().note(format!(
        "[envhost] refused an HTTP request to {} from plugin {plugin}: {why}",
        plugin_text::line(&truncated(destination))
    ));
    Err(code.into())
}

/// A destination the plugin wrote, short enough for one line.
fn truncated(text: &str) -> String {
    const SHOWN: usize = 200;
    match text.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The client's hooks: every request sent within its call's bounds.
impl WasiHttpHooks for RequestCalls {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), Error>> + Send>,
                    ),
                    Error,
                >,
            > + Send,
    > {
        // Only `GuardedHttp::handle` arms a slot: anything else is refused.
        let Some(slot) = self.take_armed() else {
            return Box::new(async { Err(Error::HttpRequestDenied) });
        };
        let slot = Arc::new(slot);
        let options = bounded(options, slot.remaining());
        Box::new(async move {
            let sent = slot
                .within(wasmtime_wasi_http::default_send_request(
                    request,
                    Some(options),
                ))
                .await
                .ok_or(Error::ConnectionTimeout)?;
            let (response, connection) = sent?;
            let connection = async move {
                slot.within(connection)
                    .await
                    .unwrap_or(Err(Error::ConnectionTerminated))
            };
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(connection) as Box<dyn Future<Output = Result<(), Error>> + Send>,
            ))
        })
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK
    }
}

/// The plugin's timeouts, none longer than the call's time left less a
/// margin, so that a request that times out does so while the plugin can
/// still answer.
fn bounded(asked: Option<RequestOptions>, remaining: Duration) -> RequestOptions {
    let margin = (remaining / 10).min(Duration::from_secs(1));
    let left = remaining.saturating_sub(margin);
    let within = |timeout: Option<Duration>| Some(timeout.map_or(left, |t| t.min(left)));
    let asked = asked.unwrap_or_default();
    RequestOptions {
        connect_timeout: within(asked.connect_timeout),
        first_byte_timeout: within(asked.first_byte_timeout),
        between_bytes_timeout: within(asked.between_bytes_timeout),
    }
}
