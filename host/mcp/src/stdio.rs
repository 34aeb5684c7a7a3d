//! MCP on stdin/stdout: one session, until the client closes stdin or a
//! signal arrives.
//!
//! Every line from the client is checked before rmcp sees it
//! ([`message`](crate::message), as over HTTP), because rmcp drops a line
//! that is not JSON without a word and answers a malformed request with an
//! error that has no id (so the client waits for its answer forever). Here
//! each bad line gets a JSON-RPC error that says what is wrong, with the
//! request's id as the client wrote it, and the event the NDJSON server
//! records for a bad line. Good lines go to rmcp unchanged; everything
//! written to stdout goes through one writer, a whole line at a time.

use std::sync::Arc;

use envhost_core::Event;
use rmcp::service::{QuitReason, ServerInitializeError};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

use crate::error::ServeError;
use crate::message::{self, Framing};
use crate::session::{Session, Shared};
use crate::stop;

/// The longest line taken from the client, as for NDJSON.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Room in the pipes between the line checker, rmcp and stdout.
const PIPE_BYTES: usize = 256 * 1024;

/// Serves one session on stdin/stdout.
pub(crate) async fn serve(shared: Arc<Shared>) -> Result<String, ServeError> {
    let mut signals = stop::Signals::install()?;
    let (to_rmcp, rmcp_input) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_output, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (errors, error_lines) = mpsc::unbounded_channel();
    tokio::spawn(check_lines(
        tokio::io::stdin(),
        to_rmcp,
        errors,
        Arc::clone(&shared),
    ));
    let writer = tokio::spawn(write_lines(from_rmcp, error_lines, tokio::io::stdout()));
    let session = Session::new(Arc::clone(&shared));
    let stopped = tokio::select! {
        started = rmcp::serve_server(session, (rmcp_input, rmcp_output)) => match started {
            Ok(running) => {
                let stop = running.cancellation_token();
                tokio::select! {
                    quit = running.waiting() => Ok(match quit {
                        Ok(QuitReason::Closed) => "end of input".to_owned(),
                        Ok(QuitReason::JoinError(err)) | Err(err) => {
                            format!("the MCP session failed: {err}")
                        }
                        Ok(_) => "the session was cancelled".to_owned(),
                    }),
                    signal = signals.next() => {
                        shared.cancel.cancel();
                        stop.cancel();
                        Ok(format!("received {signal}"))
                    }
                }
            }
            // The client left before it began.
            Err(ServerInitializeError::ConnectionClosed(_)) => Ok("end of input".to_owned()),
            Err(err) => Err(ServeError::Session(err.to_string())),
        },
        signal = signals.next() => Ok(format!("received {signal}")),
    };
    // Whatever still runs ends now; the caller shuts the environments down.
    shared.cancel.cancel();
    // The last answers reach stdout before the process goes on to stop.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), writer).await;
    stopped
}

/// Reads the client's lines: good ones go to rmcp, bad ones get an error.
/// Ends at the end of input (rmcp then sees its input end).
async fn check_lines(
    input: impl AsyncRead + Unpin,
    mut to_rmcp: DuplexStream,
    errors: mpsc::UnboundedSender<Vec<u8>>,
    shared: Arc<Shared>,
) {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = match read_line(&mut input, &mut line).await {
            Ok(read) => read,
            Err(_) => return,
        };
        let reply = match read {
            Read::End => return,
            Read::TooLong => Some(error_line(
                -32600,
                &format!(
                    "Invalid request: the line is longer than {} MiB; send each message on one line, smaller than that.",
                    MAX_LINE_BYTES >> 20
                ),
            )),
            Read::Line => check(&line),
        };
        match reply {
            None => {
                line.push(b'\n');
                if to_rmcp.write_all(&line).await.is_err() {
                    return;
                }
            }
            Some((message, reply)) => {
                shared.orchestrator.emit(Event::ProtocolError { message });
                if errors.send(reply).is_err() {
                    return;
                }
            }
        }
    }
}

enum Read {
    Line,
    TooLong,
    End,
}

/// One line into `line` (without its newline), never holding more than
/// the cap: a longer line is read to its end and dropped.
async fn read_line(
    input: &mut (impl AsyncBufReadExt + Unpin),
    line: &mut Vec<u8>,
) -> std::io::Result<Read> {
    let mut too_long = false;
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            // A last line without a newline still counts.
            return Ok(if too_long {
                Read::TooLong
            } else if line.is_empty() {
                Read::End
            } else {
                Read::Line
            });
        }
        let (chunk, ends) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if !too_long {
            if line.len() + chunk.len() > MAX_LINE_BYTES {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = ends.unwrap_or(buffer.len());
        input.consume(used);
        if ends.is_some() {
            return Ok(if too_long { Read::TooLong } else { Read::Line });
        }
    }
}

/// `None` for a line rmcp can take (a blank one included, and a
/// notification it cannot parse, which rmcp drops as the protocol asks);
/// otherwise what is wrong and the error line to answer.
fn check(line: &[u8]) -> Option<(String, Vec<u8>)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.trim_ascii().is_empty() {
        return None;
    }
    match message::check(line, Framing::Line, None) {
        Ok(_) => None,
        Err(refusal) if refusal.notification => None,
        Err(refusal) => {
            let mut reply = refusal.to_json();
            reply.push(b'\n');
            Some((refusal.message, reply))
        }
    }
}

fn error_line(code: i64, message: &str) -> (String, Vec<u8>) {
    let reply = json!({
        "jsonrpc": "2.0",
        "id": Value::Null,
        "error": {"code": code, "message": message},
    });
    let mut line = reply.to_string().into_bytes();
    line.push(b'\n');
    (message.to_owned(), line)
}

/// The one writer of stdout: rmcp's lines and the error lines, each whole.
async fn write_lines(
    from_rmcp: DuplexStream,
    mut errors: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: impl AsyncWrite + Unpin,
) {
    let mut from_rmcp = BufReader::with_capacity(64 * 1024, from_rmcp);
    let mut line = Vec::new();
    let mut errors_open = true;
    loop {
        let next = tokio::select! {
            read = from_rmcp.read_until(b'\n', &mut line) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => std::mem::take(&mut line),
            },
            error = errors.recv(), if errors_open => match error {
                Some(error) => error,
                None => {
                    errors_open = false;
                    continue;
                }
            },
        };
        if output.write_all(&next).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> Option<Value> {
        check(line.as_bytes()).map(|(_, reply)| serde_json::from_slice(&reply).unwrap())
    }

    #[test]
    fn good_messages_pass_unchanged() {
        assert!(reply(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_none());
        assert!(reply(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_none());
        assert!(reply("  ").is_none());
    }

    #[test]
    fn bad_lines_get_an_error_that_says_what_is_wrong() {
        let parse = reply("this is not json").unwrap();
        assert_eq!(parse["id"], Value::Null);
        assert_eq!(parse["error"]["code"], -32700);
        assert!(
            parse["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Parse error: the line is not JSON")
        );
        // rmcp answers these itself (see `Session::on_custom_request`).
        let custom = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":3}}"#;
        assert!(reply(custom).is_none());
        let request = reply(r#"{"jsonrpc":"2.0","id":7,"method":5}"#).unwrap();
        assert_eq!(request["id"], 7, "the client learns which request failed");
        assert_eq!(request["error"]["code"], -32600);
        let shape = reply(r#"[1,2]"#).unwrap();
        assert_eq!(shape["error"]["code"], -32600);
    }
}
