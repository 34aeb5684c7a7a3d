//! Replies: what goes back, one line per answer.

use std::io::{self, Write};

use envhost_core::{ProducedFile, RequestId, Screen};
use serde::Serialize;
use serde::ser::SerializeMap;

use crate::files;

/// An answer to one line.
#[derive(Debug, Clone)]
pub enum Reply<'a> {
    /// The answer to a command.
    Response {
        /// The request's `id`, echoed.
        id: Option<&'a RequestId>,
        /// The command's output.
        output: &'a str,
        /// Whether it succeeded.
        success: bool,
        /// The command is still running (sent only when true).
        running: bool,
        /// Files it created or changed in the project (sent only when
        /// there are some).
        files: &'a [ProducedFile],
        /// The screen after it.
        screen: &'a Screen,
    },
    /// The answer to a screen request.
    Screen {
        /// The request's `id`, echoed.
        id: Option<&'a RequestId>,
        /// The screen after it.
        screen: &'a Screen,
    },
    /// The answer to a line that is not a valid request.
    Error {
        /// The request's `id`, echoed.
        id: Option<&'a RequestId>,
        /// What was wrong, and what to send instead.
        message: &'a str,
    },
    /// A valid file request that could not be done: an `error` line with a
    /// one-word `reason` for programs besides the message.
    Refused {
        /// The request's `id`, echoed.
        id: Option<&'a RequestId>,
        /// What was wrong, and what to do instead.
        message: &'a str,
        /// One word: `not_found`, `is_directory`, `outside_project`, ...
        reason: &'a str,
    },
    /// The answer to `read_file`: a chunk of the file.
    File {
        /// The request's `id`, echoed.
        id: Option<&'a RequestId>,
        /// The path, as the request gave it.
        path: &'a str,
        /// The file's size when the chunk was read.
        size: u64,
        /// Where the chunk starts.
        offset: u64,
        /// The chunk's bytes (sent as base64).
        content: &'a [u8],
        /// Whether the chunk reaches the end of the file.
        eof: bool,
    },
    /// The answer to `write_file`.
    FileWritten {
        /// The request's `id`, echoed.
        id: Option<&'a RequestId>,
        /// The path, as the request gave it.
        path: &'a str,
        /// Bytes written so far (the file's size once complete).
        size: u64,
        /// Whether the file is in place (false while more chunks are expected).
        complete: bool,
    },
}

#[derive(Serialize)]
struct ResponseBody<'a> {
    output: &'a str,
    success: bool,
    /// Present only while the command runs: absent means it has ended.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    running: bool,
    /// Present only when the command created or changed files.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    files: Vec<WireFile<'a>>,
}

/// One of the files a command produced, as the wire names it.
#[derive(Serialize)]
struct WireFile<'a> {
    path: &'a str,
    size: u64,
    media_type: &'a str,
}

/// Serialises a screen as a JSON object whose keys keep display order.
struct WireScreen<'a>(&'a Screen);

#[derive(Serialize)]
struct WireSection<'a> {
    content: &'a str,
    max_lines: usize,
}

impl Serialize for WireScreen<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, section) in self.0.sections() {
            map.serialize_entry(
                name,
                &WireSection {
                    content: &section.content,
                    max_lines: section.max_lines,
                },
            )?;
        }
        map.end()
    }
}

impl Serialize for Reply<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Reply::Response {
                id,
                output,
                success,
                running,
                files,
                screen,
            } => {
                map.serialize_entry("type", "response")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry(
                    "response",
                    &ResponseBody {
                        output,
                        success: *success,
                        running: *running,
                        files: files
                            .iter()
                            .map(|file| WireFile {
                                path: &file.path,
                                size: file.size,
                                media_type: &file.media_type,
                            })
                            .collect(),
                    },
                )?;
                map.serialize_entry("screen", &WireScreen(screen))?;
            }
            Reply::Screen { id, screen } => {
                map.serialize_entry("type", "screen")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry("screen", &WireScreen(screen))?;
            }
            Reply::Error { id, message } => {
                map.serialize_entry("type", "error")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry("message", message)?;
            }
            Reply::Refused {
                id,
                message,
                reason,
            } => {
                map.serialize_entry("type", "error")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry("message", message)?;
                map.serialize_entry("reason", reason)?;
            }
            Reply::File {
                id,
                path,
                size,
                offset,
                content,
                eof,
            } => {
                map.serialize_entry("type", "file")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry("path", path)?;
                map.serialize_entry("size", size)?;
                map.serialize_entry("offset", offset)?;
                map.serialize_entry("content_base64", &files::encode(content))?;
                map.serialize_entry("eof", eof)?;
            }
            Reply::FileWritten {
                id,
                path,
                size,
                complete,
            } => {
                map.serialize_entry("type", "file_written")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry("path", path)?;
                map.serialize_entry("size", size)?;
                map.serialize_entry("complete", complete)?;
            }
        }
        map.end()
    }
}

/// Writes one reply as one line and flushes it.
///
/// The line is built in memory and written with one call: stdout's own
/// buffer is 1 KiB, so a typical answer (screen included) would otherwise
/// reach the agent in several pieces, each a wake-up for its reader.
pub fn write_reply(out: &mut (impl Write + ?Sized), reply: &Reply<'_>) -> io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use envhost_core::ScreenSection;

    #[test]
    fn replies_are_single_lines_with_ordered_screen() {
        let mut screen = Screen::new();
        screen.push(
            "bash",
            ScreenSection::new("Working directory: /p\nLast exit code: 0"),
        );
        screen.push("alpha", ScreenSection::with_max_lines("a", 3));
        let id = RequestId::from("req-1");
        let mut out = Vec::new();
        write_reply(
            &mut out,
            &Reply::Response {
                id: Some(&id),
                output: "hi\n",
                success: true,
                running: false,
                files: &[],
                screen: &screen,
            },
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "{\"type\":\"response\",\"id\":\"req-1\",\"response\":{\"output\":\"hi\\n\",\"success\":true},\
             \"screen\":{\"bash\":{\"content\":\"Working directory: /p\\nLast exit code: 0\",\"max_lines\":50},\
             \"alpha\":{\"content\":\"a\",\"max_lines\":3}}}\n"
        );
        let mut out = Vec::new();
        write_reply(
            &mut out,
            &Reply::Error {
                id: None,
                message: "bad",
            },
        )
        .unwrap();
        assert_eq!(out, b"{\"type\":\"error\",\"message\":\"bad\"}\n");
    }

    #[test]
    fn files_are_sent_in_the_response_only_when_there_are_some() {
        let screen = Screen::new();
        let files = [ProducedFile {
            path: "out/plot.png".into(),
            absolute: "/p/out/plot.png".into(),
            size: 2048,
            media_type: "image/png".into(),
        }];
        let mut out = Vec::new();
        write_reply(
            &mut out,
            &Reply::Response {
                id: None,
                output: "",
                success: true,
                running: false,
                files: &files,
                screen: &screen,
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"type\":\"response\",\"response\":{\"output\":\"\",\"success\":true,\"files\":\
             [{\"path\":\"out/plot.png\",\"size\":2048,\"media_type\":\"image/png\"}]},\"screen\":{}}\n"
        );
    }

    #[test]
    fn running_is_sent_only_when_true_and_ids_keep_their_text() {
        let screen = Screen::new();
        let id: Box<serde_json::value::RawValue> =
            serde_json::from_str("18446744073709551617").unwrap();
        let id = RequestId::from_json(&id).unwrap();
        let mut out = Vec::new();
        write_reply(
            &mut out,
            &Reply::Response {
                id: Some(&id),
                output: "so far\n",
                success: true,
                running: true,
                files: &[],
                screen: &screen,
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"type\":\"response\",\"id\":18446744073709551617,\"response\":{\"output\":\"so far\\n\",\"success\":true,\"running\":true},\"screen\":{}}\n"
        );
    }

    #[test]
    fn file_answers_are_lines() {
        let id = RequestId::from("r");
        let mut out = Vec::new();
        write_reply(
            &mut out,
            &Reply::File {
                id: Some(&id),
                path: "a.bin",
                size: 2,
                offset: 0,
                content: &[0, 255],
                eof: true,
            },
        )
        .unwrap();
        write_reply(
            &mut out,
            &Reply::FileWritten {
                id: None,
                path: "a.bin",
                size: 2,
                complete: false,
            },
        )
        .unwrap();
        write_reply(
            &mut out,
            &Reply::Refused {
                id: None,
                message: "a.bin does not exist",
                reason: "not_found",
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            concat!(
                r#"{"type":"file","id":"r","path":"a.bin","size":2,"offset":0,"content_base64":"AP8=","eof":true}"#,
                "\n",
                r#"{"type":"file_written","path":"a.bin","size":2,"complete":false}"#,
                "\n",
                r#"{"type":"error","message":"a.bin does not exist","reason":"not_found"}"#,
                "\n"
            )
        );
    }
}
