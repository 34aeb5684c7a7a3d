//! One MCP session: the `ServerHandler` a client talks to, written by hand
//! because the tool list comes from the environments at start.
//!
//! Every session shares the host's environments ([`Shared`]); each keeps
//! the screen it last showed, so that a result shows the sections that
//! changed since. Over stdio there is one session; over HTTP one per
//! client session (a stateless request gets a session of its own, and so
//! the whole screen).

use std::sync::{Arc, Mutex, PoisonError};

use envhost_core::{CancelFlag, Event, Orchestrator, RequestId, Screen};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode,
    Implementation, InitializeRequestParams, InitializeResult, ListToolsResult, NumberOrString,
    PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::arguments::{self, Call};
use crate::call::{self, Progress};
use crate::message;
use crate::result;
use crate::settings::Settings;
use crate::tools::{self, ToolSet};

/// What every session shares: the environments, the host's cancel flag,
/// the settings and the tool list.
pub(crate) struct Shared {
    pub(crate) orchestrator: Arc<Orchestrator>,
    pub(crate) cancel: CancelFlag,
    pub(crate) settings: Settings,
    pub(crate) tools: ToolSet,
    instructions: String,
}

impl Shared {
    /// Describes the environments (once: the tool list never changes).
    pub(crate) fn new(
        orchestrator: Arc<Orchestrator>,
        cancel: CancelFlag,
        settings: Settings,
    ) -> Arc<Shared> {
        let tools = ToolSet::new(&orchestrator.describe(), settings.yield_after);
        for skipped in &tools.skipped {
            eprintln!("envhost: {skipped}");
        }
        let instructions = tools.instructions(settings.yield_after);
        Arc::new(Shared {
            orchestrator,
            cancel,
            settings,
            tools,
            instructions,
        })
    }
}

/// One client's session.
pub(crate) struct Session {
    shared: Arc<Shared>,
    /// The screen this session was last shown.
    seen: Mutex<Option<Screen>>,
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>) -> Session {
        Session {
            shared,
            seen: Mutex::new(None),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Option<Screen>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A bad call, recorded as the NDJSON server records a bad line.
    fn refused(&self, message: String) -> CallToolResponse {
        self.shared.orchestrator.emit(Event::ProtocolError {
            message: message.clone(),
        });
        result::refusal(&message).into()
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("envhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.shared.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let shared = &self.shared;
        let Some(kind) = shared.tools.find(&request.name) else {
            let message = format!(
                "Unknown tool: {}. The tools are: {}.",
                tools::shown(&request.name),
                shared.tools.names().join(", ")
            );
            shared.orchestrator.emit(Event::ProtocolError {
                message: message.clone(),
            });
            return Err(ErrorData::invalid_params(message, None));
        };
        let call = match arguments::parse(
            &request.name,
            kind,
            request.arguments.as_ref(),
            Some(request_id(&context.id)),
            shared.settings.yield_after,
        ) {
            Ok(call) => call,
            Err(bad) => return Ok(self.refused(bad.to_string())),
        };
        let request = match call {
            Call::Screen => {
                let orchestrator = Arc::clone(&shared.orchestrator);
                let screen = tokio::task::spawn_blocking(move || orchestrator.screen())
                    .await
                    .map_err(|err| ErrorData::internal_error(err.to_string(), None))?;
                let answer = result::screen(&screen);
                *self.seen() = Some(screen);
                return Ok(answer.into());
            }
            Call::Run(request) => request,
        };
        let environment = request.environment().to_owned();
        let progress = context.meta.get_progress_token().map(|token| Progress {
            peer: context.peer.clone(),
            token,
            every: shared.settings.progress_every,
        });
        let outcome = call::run(
            &shared.orchestrator,
            &shared.cancel,
            request,
            context.ct.clone(),
            progress,
        )
        .await
        .map_err(|failed| ErrorData::internal_error(failed.to_string(), None))?;
        let mut seen = self.seen();
        let answer = result::outcome(
            &environment,
            &outcome,
            seen.as_ref(),
            shared.settings.structured_content,
        );
        *seen = Some(outcome.screen);
        Ok(answer.into())
    }

    /// rmcp hands over a request it could not parse as one it knows (a
    /// `tools/call` whose `name` is a number): say what is wrong with it,
    /// or that the method is unknown, instead of a bare method name.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let CustomRequest { method, params, .. } = request;
        let problem = match method.as_str() {
            "tools/call" => params_problem::<CallToolRequestParams>(params),
            "tools/list" => params_problem::<PaginatedRequestParams>(params),
            "initialize" => params_problem::<InitializeRequestParams>(params),
            _ => {
                let message = message::unknown_method(&method);
                self.shared.orchestrator.emit(Event::ProtocolError {
                    message: message.clone(),
                });
                return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, message, None));
            }
        };
        let message = format!("Invalid params for {method}: {problem}.");
        self.shared.orchestrator.emit(Event::ProtocolError {
            message: message.clone(),
        });
        Err(ErrorData::invalid_params(message, None))
    }
}

/// What is wrong with `params` for a request that takes a `T`.
fn params_problem<T: DeserializeOwned>(params: Option<Value>) -> String {
    match serde_json::from_value::<T>(params.unwrap_or_else(|| Value::Object(Default::default()))) {
        Err(err) => err.to_string(),
        Ok(_) => "they do not fit the request".to_owned(),
    }
}

/// The client's JSON-RPC id, kept for the record.
fn request_id(id: &NumberOrString) -> RequestId {
    match id {
        NumberOrString::Number(number) => RequestId::from(*number),
        NumberOrString::String(text) => RequestId::from(text.as_ref()),
    }
}
