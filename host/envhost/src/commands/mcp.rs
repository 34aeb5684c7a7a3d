//! `envhost mcp`: the MCP front end, on stdio or streamable HTTP.

use std::process::ExitCode;

use envhost_mcp::{HttpLimits, HttpSettings};
use envhost_runtime::{Host, Stopped};

use crate::cli::McpArgs;

pub(crate) fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let http = http_settings(&args);
    let mut settings = args
        .session
        .settings(if http.is_some() { "mcp-http" } else { "mcp" });
    // On stdio, stderr may be a pipe nobody drains (see `serve`).
    settings.plugin_output_to_stderr = http.is_some() || settings.verbose;
    let served = envhost_mcp::Settings {
        yield_after: settings
            .yield_after
            .unwrap_or(envhost_mcp::DEFAULT_YIELD_AFTER),
        structured_content: args.structured_content,
        ..envhost_mcp::Settings::default()
    };
    let host = Host::start(settings)?;
    match envhost_mcp::serve(&host, served, http) {
        Ok(stopped) => Ok(super::stop(host, stopped)),
        Err(err) => {
            host.stop(Stopped::Failed(format!("the MCP server failed: {err}")));
            Err(err.into())
        }
    }
}

fn http_settings(args: &McpArgs) -> Option<HttpSettings> {
    let address = args.http?;
    let default = HttpLimits::default();
    Some(HttpSettings {
        address,
        token_file: args.token_file.clone(),
        allowed_origins: args.allow_origin.clone(),
        limits: HttpLimits {
            max_connections: args.max_connections.unwrap_or(default.max_connections),
            header_timeout: args.header_timeout.unwrap_or(default.header_timeout),
            max_sessions: args.max_sessions.unwrap_or(default.max_sessions),
            session_idle_timeout: args
                .session_idle_timeout
                .unwrap_or(default.session_idle_timeout),
        },
    })
}
