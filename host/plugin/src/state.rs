//! What a plugin's store holds: its WASI context (opened as far as granted),
//! its resource table (and with it the files it opened, the program
//! sessions it started and the HTTP requests it sent), its output, its
//! limits and the budget of the call in progress.
//!
//! The host-side implementations of the WIT interfaces (`host`) and the
//! sandbox work on this state; it must not know the interfaces itself.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::WasiHttpCtx;

use crate::grants::Grants;
use crate::guest_io::GuestOutput;
use crate::limits::{CallBudget, OpenFiles, PluginLimiter, RESOURCE_TABLE_LIMIT, RequestCalls};
use crate::live_call::LiveCall;

/// Everything a plugin's store holds. Dropping it (a trap, a restart,
/// shutdown) drops its resource table, and with it every file and program
/// session the plugin still had.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: PluginLimiter,
    open_files: OpenFiles,
    output: GuestOutput,
    budget: CallBudget,
    grants: Arc<Grants>,
    /// Program sessions alive in `table`.
    sessions: usize,
    /// The command in progress, when it may outlive the agent's wait.
    live_call: Option<Arc<LiveCall>>,
    http: WasiHttpCtx,
    /// Outgoing HTTP requests in flight, and the calls they belong to.
    requests: RequestCalls,
}

impl HostState {
    /// The state of a fresh store: `memory_limit` bytes in all, at most
    /// `open_files` files open at once.
    pub(crate) fn new(
        wasi: WasiCtx,
        memory_limit: usize,
        open_files: usize,
        output: GuestOutput,
        grants: Arc<Grants>,
    ) -> Self {
        let mut table = ResourceTable::new();
        table.set_max_capacity(RESOURCE_TABLE_LIMIT);
        HostState {
            wasi,
            table,
            limiter: PluginLimiter::new(memory_limit),
            open_files: OpenFiles::new(open_files),
            output,
            budget: CallBudget::default(),
            grants,
            sessions: 0,
            live_call: None,
            http: WasiHttpCtx::new(),
            requests: RequestCalls::default(),
        }
    }

    pub fn output(&self) -> &GuestOutput {
        &self.output
    }

    pub fn grants(&self) -> Arc<Grants> {
        Arc::clone(&self.grants)
    }

    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    pub(crate) fn open_files(&mut self) -> &mut OpenFiles {
        &mut self.open_files
    }

    pub(crate) fn session_count(&self) -> usize {
        self.sessions
    }

    pub(crate) fn session_started(&mut self) {
        self.sessions += 1;
    }

    pub(crate) fn session_ended(&mut self) {
        self.sessions = self.sessions.saturating_sub(1);
    }

    /// The time the current call may still take.
    pub(crate) fn budget(&self) -> &CallBudget {
        &self.budget
    }

    /// The current call's budget, to spend or re-arm.
    pub(crate) fn budget_mut(&mut self) -> &mut CallBudget {
        &mut self.budget
    }

    /// The limiter wasmtime consults on every grow.
    pub(crate) fn limiter(&mut self) -> &mut PluginLimiter {
        &mut self.limiter
    }

    /// The command in progress, when it may outlive the agent's wait.
    pub(crate) fn live_call(&self) -> Option<Arc<LiveCall>> {
        self.live_call.clone()
    }

    /// Sets (or clears) the command that may outlive the agent's wait.
    pub(crate) fn set_live_call(&mut self, call: Option<Arc<LiveCall>>) {
        self.live_call = call;
    }

    /// Outgoing HTTP requests in flight, and the calls they belong to.
    pub(crate) fn requests(&mut self) -> &mut RequestCalls {
        &mut self.requests
    }

    /// What wasmtime-wasi-http works on: its context, the table, and the
    /// request bounds as its hooks.
    pub(crate) fn http_parts(
        &mut self,
    ) -> (&mut WasiHttpCtx, &mut ResourceTable, &mut RequestCalls) {
        (&mut self.http, &mut self.table, &mut self.requests)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
