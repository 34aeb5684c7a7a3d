//! Running one request on the orchestrator from the async server: on the
//! blocking pool (the orchestrator and the environments are synchronous),
//! with the client's cancellation and progress.
//!
//! - A client's `notifications/cancelled` sets the request's own cancel
//!   flag (a child of the host's), which the environment treats as the
//!   host's cancellation; a command that is still running after that is
//!   interrupted as its timeout would interrupt it.
//! - While the request runs, a client that sent a progress token gets a
//!   notification every few seconds saying what runs and for how long.

use std::sync::Arc;
use std::time::{Duration, Instant};

use envhost_core::{CancelFlag, Control, ControlRequest, Orchestrator, Outcome, text};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::arguments::Request;

/// Where progress goes, if the client asked for it.
pub(crate) struct Progress {
    /// The client.
    pub(crate) peer: Peer<RoleServer>,
    /// The token the client sent with the request.
    pub(crate) token: ProgressToken,
    /// How often.
    pub(crate) every: Duration,
}

/// A request's task ended without an answer (it panicked or was dropped).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallFailed {
    #[error("the request failed inside the host: {0}")]
    Request(tokio::task::JoinError),
    #[error("interrupting the cancelled command failed inside the host: {0}")]
    Interrupt(tokio::task::JoinError),
}

/// Runs `request`; `cancelled` fires when the client cancels it (or the
/// connection ends). `host` is the host's cancel flag.
pub(crate) async fn run(
    orchestrator: &Arc<Orchestrator>,
    host: &CancelFlag,
    request: Request,
    cancelled: CancellationToken,
    progress: Option<Progress>,
) -> Result<Outcome, CallFailed> {
    let started = Instant::now();
    let stop = host.child();
    let what = describe(&request);
    let environment = request.environment().to_owned();
    let job = {
        let orchestrator = Arc::clone(orchestrator);
        let stop = stop.clone();
        tokio::task::spawn_blocking(move || match &request {
            Request::Command(command) => orchestrator.execute_with_cancel(command, &stop),
            Request::Control(control) => orchestrator.control_with_cancel(control, &stop),
        })
    };
    tokio::pin!(job);
    let mut ticks = progress
        .as_ref()
        .map(|p| tokio::time::interval_at(tokio::time::Instant::now() + p.every, p.every));
    let mut was_cancelled = false;
    let outcome = loop {
        tokio::select! {
            joined = &mut job => break joined.map_err(CallFailed::Request)?,
            () = cancelled.cancelled(), if !was_cancelled => {
                was_cancelled = true;
                stop.cancel();
            }
            _ = tick(&mut ticks) => {
                if let Some(progress) = &progress {
                    let elapsed = started.elapsed();
                    let message = format!(
                        "{environment}: {what} for {}",
                        text::duration(Duration::from_secs(elapsed.as_secs()))
                    );
                    let params = ProgressNotificationParam::new(
                        progress.token.clone(),
                        elapsed.as_secs_f64().floor(),
                    )
                    .with_message(message);
                    // A client that is gone is found out by the transport.
                    let _ = progress.peer.notify_progress(params).await;
                }
            }
        }
    };
    if was_cancelled && outcome.running {
        return interrupt(orchestrator, host, environment).await;
    }
    Ok(outcome)
}

/// Stops the command still running in `environment` after its call was
/// cancelled: the same ladder as a timeout.
async fn interrupt(
    orchestrator: &Arc<Orchestrator>,
    host: &CancelFlag,
    environment: String,
) -> Result<Outcome, CallFailed> {
    let orchestrator = Arc::clone(orchestrator);
    let host = host.clone();
    tokio::task::spawn_blocking(move || {
        orchestrator.control_with_cancel(
            &ControlRequest {
                environment,
                control: Control::Interrupt,
                id: None,
            },
            &host,
        )
    })
    .await
    .map_err(CallFailed::Interrupt)
}

async fn tick(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// What runs, for a progress message.
fn describe(request: &Request) -> String {
    match request {
        Request::Command(command) => {
            let first = command.command.lines().next().unwrap_or("");
            let shown: String = first.chars().take(60).collect();
            let cut = if shown.len() < command.command.len() {
                "…"
            } else {
                ""
            };
            format!("`{shown}{cut}` running")
        }
        Request::Control(control) => match control.control {
            Control::Wait { .. } | Control::Input { .. } => {
                "waiting for the running command".into()
            }
            Control::Interrupt => "interrupting the running command".into(),
            Control::Restart => "restarting".into(),
            Control::Close => "closing the instance".into(),
        },
    }
}
