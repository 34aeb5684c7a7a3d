//! The host's own `wasi:io/streams` blocking operations (`blocking-read`,
//! `blocking-skip`, `blocking-write-and-flush`,
//! `blocking-write-zeroes-and-flush`, `blocking-flush`, `blocking-splice`)
//! in place of wasmtime-wasi's synchronous ones, which wait as long as the
//! stream makes them. Files and captured output never make them wait; HTTP
//! bodies do (a request body written before the request is sent has no
//! reader, a response body from a server that stalls has no data). These
//! do the same with wasmtime-wasi-io's own futures, but never past the
//! call's deadline nor past the host's cancellation
//! ([`limits::wait_within`](crate::limits)), as `poll` does.

use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi_io::bindings::wasi::io::streams::{
    Host as StreamsHost, HostInputStream, HostOutputStream, StreamError as WitStreamError,
};
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream, StreamError};

use crate::host::WASI_VERSION;
use crate::limits::wait_within;
use crate::state::HostState;

/// Replaces wasmtime-wasi's blocking stream operations in `linker` (which
/// must allow shadowing).
pub(crate) fn shadow(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let mut streams = linker.instance(&format!("wasi:io/streams@{WASI_VERSION}"))?;
    streams.func_wrap(
        "[method]input-stream.blocking-read",
        |mut store, (stream, len): (Resource<DynInputStream>, u64)| {
            let state = store.data_mut();
            let watch = state.budget().watch();
            let read = wait_within(
                watch,
                <ResourceTable as HostInputStream>::blocking_read(state.table(), stream, len),
            )?;
            Ok((answer(state.table(), read)?,))
        },
    )?;
    streams.func_wrap(
        "[method]input-stream.blocking-skip",
        |mut store, (stream, len): (Resource<DynInputStream>, u64)| {
            let state = store.data_mut();
            let watch = state.budget().watch();
            let skipped = wait_within(
                watch,
                <ResourceTable as HostInputStream>::blocking_skip(state.table(), stream, len),
            )?;
            Ok((answer(state.table(), skipped)?,))
        },
    )?;
    streams.func_wrap(
        "[method]output-stream.blocking-write-and-flush",
        |mut store, (stream, bytes): (Resource<DynOutputStream>, Vec<u8>)| {
            let state = store.data_mut();
            let watch = state.budget().watch();
            let written = wait_within(
                watch,
                <ResourceTable as HostOutputStream>::blocking_write_and_flush(
                    state.table(),
                    stream,
                    bytes,
                ),
            )?;
            Ok((answer(state.table(), written)?,))
        },
    )?;
    streams.func_wrap(
        "[method]output-stream.blocking-write-zeroes-and-flush",
        |mut store, (stream, len): (Resource<DynOutputStream>, u64)| {
            let state = store.data_mut();
            let watch = state.budget().watch();
            let written = wait_within(
                watch,
                <ResourceTable as HostOutputStream>::blocking_write_zeroes_and_flush(
                    state.table(),
                    stream,
                    len,
                ),
            )?;
            Ok((answer(state.table(), written)?,))
        },
    )?;
    streams.func_wrap(
        "[method]output-stream.blocking-flush",
        |mut store, (stream,): (Resource<DynOutputStream>,)| {
            let state = store.data_mut();
            let watch = state.budget().watch();
            let flushed = wait_within(
                watch,
                <ResourceTable as HostOutputStream>::blocking_flush(state.table(), stream),
            )?;
            Ok((answer(state.table(), flushed)?,))
        },
    )?;
    streams.func_wrap(
        "[method]output-stream.blocking-splice",
        |mut store, (dst, src, len): (Resource<DynOutputStream>, Resource<DynInputStream>, u64)| {
            let state = store.data_mut();
            let watch = state.budget().watch();
            let spliced = wait_within(
                watch,
                <ResourceTable as HostOutputStream>::blocking_splice(state.table(), dst, src, len),
            )?;
            Ok((answer(state.table(), spliced)?,))
        },
    )?;
    Ok(())
}

/// A stream operation's result as the WIT returns it (a trap stays a
/// trap).
fn answer<T>(
    table: &mut ResourceTable,
    result: Result<T, StreamError>,
) -> wasmtime::Result<Result<T, WitStreamError>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(err) => Ok(Err(table.convert_stream_error(err)?)),
    }
}
