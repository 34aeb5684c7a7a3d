//! The authenticated conversation between the host and the driver: what a
//! request and a reply look like on the wire, and which replies the host
//! believes.
//!
//! The agent's code runs in the same interpreter as the driver, so it can
//! find the driver's descriptors and write to them. Every message therefore
//! carries a tag, keyed BLAKE2b (a MAC by design, RFC 7693, and the fastest
//! one Python's standard library has), under a key drawn fresh for each interpreter
//! and handed to the driver before any of the agent's code runs (the first
//! line on its request pipe; never in an environment variable, an argument
//! or a file). Requests are tagged too (a pipe's reader can reopen it for
//! writing through `/proc/self/fd`), and the two directions are told apart
//! by the hash's personalization string, so that a request read off the pipe cannot be
//! replayed as a reply. Every request has a sequence number that only
//! grows; every reply names the request it answers, and a reply for any
//! other request is set aside, not believed.
//!
//! What this cannot stop is code that goes after the driver itself (walks
//! its frames, reads the interpreter's memory, replaces its functions): it
//! runs with the driver's own powers. See docs/security.md.
//!
//! This module owns the wire format and the checks; it does no I/O and
//! knows nothing of processes or responses.

use blake2::Blake2bMac;
use blake2::digest::Mac;
use blake2::digest::consts::U32;
use serde::{Deserialize, Serialize};

/// Keyed BLAKE2b with a 32-byte tag: Python's
/// `hashlib.blake2b(key=key, digest_size=32, person=label)`.
type Tagger = Blake2bMac<U32>;

/// Bytes of the per-interpreter key.
const KEY_BYTES: usize = 32;

/// The personalization of every request's tag.
const REQUEST_LABEL: &[u8] = b"envhost-request";

/// The personalization of every reply's tag.
const REPLY_LABEL: &[u8] = b"envhost-reply";

/// Bytes of a tag; in hex in every message (a message is one line).
const TAG_BYTES: usize = 32;

/// The secret one interpreter's messages are tagged with, and the tag
/// state of each direction with the key already absorbed (cloned for each
/// message).
pub struct Key {
    secret: [u8; KEY_BYTES],
    request: Tagger,
    reply: Tagger,
}

impl Key {
    /// A fresh key from the operating system's random source.
    pub fn generate() -> Result<Key, getrandom::Error> {
        let mut secret = [0u8; KEY_BYTES];
        getrandom::fill(&mut secret)?;
        Ok(Key::from_secret(secret))
    }

    fn from_secret(secret: [u8; KEY_BYTES]) -> Key {
        let tagger = |label: &[u8]| match Tagger::new_with_salt_and_personal(&secret, &[], label) {
            Ok(tagger) => tagger,
            // A 32-byte key and labels under 16 bytes are within BLAKE2b's
            // limits.
            Err(err) => unreachable!("a valid BLAKE2b key and personalization: {err}"),
        };
        Key {
            request: tagger(REQUEST_LABEL),
            reply: tagger(REPLY_LABEL),
            secret,
        }
    }

    /// The line that hands the key to the driver (its first request line).
    pub fn handover_line(&self) -> Vec<u8> {
        let mut line = hex(&self.secret).into_bytes();
        line.push(b'\n');
        line
    }

    fn mac(base: &Tagger, body: &[u8]) -> Tagger {
        let mut mac = base.clone();
        mac.update(body);
        mac
    }

    /// One request as written to the driver's pipe: a newline first (so
    /// that bytes someone else wrote without one end before it), the tag, a
    /// space, the JSON body, a newline.
    pub fn request(&self, request: &Request<'_>) -> Vec<u8> {
        let body = match serde_json::to_vec(request) {
            Ok(body) => body,
            // A struct of numbers and strings always serializes.
            Err(err) => unreachable!("a request serializes: {err}"),
        };
        let tag = hex(&Key::mac(&self.request, &body).finalize().into_bytes());
        let mut line = Vec::with_capacity(body.len() + 2 * TAG_BYTES + 3);
        line.push(b'\n');
        line.extend_from_slice(tag.as_bytes());
        line.push(b' ');
        line.extend_from_slice(&body);
        line.push(b'\n');
        line
    }

    /// Checks one reply (a line without its newline, or a record: the tag
    /// in hex, a space, the JSON body) and parses its body: `None` for
    /// anything the driver did not write under this key.
    pub fn open(&self, record: &[u8]) -> Option<Reply> {
        let hex_tag = record.get(..2 * TAG_BYTES)?;
        let body = record.get(2 * TAG_BYTES..)?.strip_prefix(b" ")?;
        let mut tag = [0u8; TAG_BYTES];
        for (byte, pair) in tag.iter_mut().zip(hex_tag.chunks_exact(2)) {
            *byte = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
        }
        Key::mac(&self.reply, body).verify_slice(&tag).ok()?;
        serde_json::from_slice::<WireReply>(body)
            .ok()
            .map(Reply::from)
    }

    /// A reply as the driver would seal it, without the newlines around
    /// it on the pipe (for tests).
    #[cfg(test)]
    pub fn seal_reply(&self, body: &str) -> Vec<u8> {
        let tag = Key::mac(&self.reply, body.as_bytes())
            .finalize()
            .into_bytes();
        let mut record = hex(&tag).into_bytes();
        record.push(b' ');
        record.extend_from_slice(body.as_bytes());
        record
    }
}

/// A request to the driver.
#[derive(Debug, Serialize)]
pub struct Request<'a> {
    /// Grows with every request; the driver refuses any it has seen.
    pub seq: u64,
    /// `run` (the code) or `sync` (say that you are idle).
    pub op: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'a str>,
    /// The code reads the pipe the agent types into (else `/dev/null`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub input: bool,
    /// A new such pipe comes with this request (SCM_RIGHTS on the reply
    /// socket, with the request's number).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
}

/// A reply the host believes, before it is matched to its request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The driver is loaded and has the key (sequence number 0).
    Ready { seq: u64 },
    /// Part of a long variable list, ahead of its `done`.
    Vars {
        seq: u64,
        variables: Vec<(String, String)>,
    },
    /// The code of request `seq` has finished.
    Done { seq: u64, done: Done },
    /// The answer to a `sync` request: the driver is idle, every request
    /// before `seq` is behind it.
    Synced { seq: u64, rejected: u64 },
    /// The driver can no longer read its requests (the code closed or
    /// replaced the descriptor); it waits to be ended.
    Lost { seq: u64 },
}

/// A reply as the driver writes it: one flat object, read without the
/// buffering an internally tagged enum would cost on every command.
#[derive(Deserialize)]
struct WireReply {
    #[serde(rename = "type")]
    kind: ReplyKind,
    seq: u64,
    #[serde(default)]
    status: String,
    #[serde(default)]
    cwd: String,
    #[serde(default)]
    variables: Vec<(String, String)>,
    #[serde(default)]
    rejected: u64,
    #[serde(default)]
    figures: Vec<String>,
    #[serde(default)]
    kept: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ReplyKind {
    Ready,
    Vars,
    Done,
    Synced,
    Lost,
}

impl From<WireReply> for Reply {
    fn from(wire: WireReply) -> Reply {
        let seq = wire.seq;
        match wire.kind {
            ReplyKind::Ready => Reply::Ready { seq },
            ReplyKind::Vars => Reply::Vars {
                seq,
                variables: wire.variables,
            },
            ReplyKind::Done => Reply::Done {
                seq,
                done: Done {
                    status: wire.status,
                    cwd: wire.cwd,
                    variables: wire.variables,
                    rejected: wire.rejected,
                    figures: wire.figures,
                    kept: wire.kept,
                },
            },
            ReplyKind::Synced => Reply::Synced {
                seq,
                rejected: wire.rejected,
            },
            ReplyKind::Lost => Reply::Lost { seq },
        }
    }
}

impl Reply {
    /// The request it answers.
    pub fn seq(&self) -> u64 {
        match self {
            Reply::Ready { seq }
            | Reply::Vars { seq, .. }
            | Reply::Done { seq, .. }
            | Reply::Synced { seq, .. }
            | Reply::Lost { seq } => *seq,
        }
    }
}

/// The driver's report when a command's code has finished.
#[derive(Debug, Clone)]
pub struct Done {
    /// `"ok"`, or `"error"` when the code raised (the traceback is in the
    /// output).
    pub status: String,
    /// `os.getcwd()` after the code ran.
    pub cwd: String,
    /// `[name, type name]` of every variable, in namespace order (after
    /// those of the `vars` parts that came first).
    pub variables: Vec<(String, String)>,
    /// Lines on the request pipe the driver refused since its last reply
    /// (untagged, wrongly tagged, or replayed).
    pub rejected: u64,
    /// The PNG files the code's figures (matplotlib figures shown or left
    /// open, a PIL image as the trailing expression) were saved to,
    /// absolute paths, in the order they were saved.
    pub figures: Vec<String>,
    /// The driver wrote its state file (the session is recorded and the
    /// command changed what is kept).
    pub kept: bool,
}

impl Done {
    /// The code ran without raising.
    pub fn succeeded(&self) -> bool {
        self.status == "ok"
    }
}

/// What was set aside since the host last reported it: evidence that
/// something other than the driver used the driver's channels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tampering {
    /// Reply records that failed the tag check or could not be read.
    pub forged_replies: u64,
    /// Genuine replies for a request other than the one awaited.
    pub out_of_step: u64,
    /// Request lines the driver refused.
    pub refused_requests: u64,
}

impl Tampering {
    /// Nothing was set aside.
    pub fn is_empty(&self) -> bool {
        *self == Tampering::default()
    }

    /// The sentence for the response, if anything was set aside.
    pub fn sentence(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if self.forged_replies > 0 {
            parts.push(format!(
                "{} written to python's reply channel",
                messages(self.forged_replies)
            ));
        }
        if self.refused_requests > 0 {
            parts.push(format!(
                "{} written to python's request channel",
                messages(self.refused_requests)
            ));
        }
        let mut sentence = String::new();
        if !parts.is_empty() {
            sentence.push_str(&format!(
                "[{} did not come from envhost's driver and {} ignored: something in the \
                 interpreter writes to the driver's descriptors.",
                capitalize(&parts.join(" and ")),
                if self.forged_replies + self.refused_requests == 1 {
                    "was"
                } else {
                    "were"
                }
            ));
        }
        if self.out_of_step > 0 {
            if sentence.is_empty() {
                sentence.push('[');
            } else {
                sentence.push(' ');
            }
            sentence.push_str(&format!(
                "{} from the driver answered an earlier request and {} set aside; the \
                 answer above is this command's own.",
                capitalize(&messages(self.out_of_step)),
                if self.out_of_step == 1 { "was" } else { "were" }
            ));
        }
        sentence.push(']');
        Some(sentence)
    }
}

fn messages(n: u64) -> String {
    if n == 1 {
        "1 message".to_owned()
    } else {
        format!("{n} messages")
    }
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn hex_digit(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 0x0f)] as char);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_believed_only_with_this_keys_tag() {
        let key = Key::generate().unwrap();
        let body = r#"{"type":"done","seq":3,"status":"ok","cwd":"/p","variables":[["x","int"]]}"#;
        let sealed = key.seal_reply(body);
        match key.open(&sealed) {
            Some(Reply::Done { seq: 3, done }) => {
                assert!(done.succeeded());
                assert_eq!(done.variables, [("x".to_owned(), "int".to_owned())]);
            }
            other => panic!("{other:?}"),
        }
        let other_key = Key::generate().unwrap();
        assert!(other_key.open(&sealed).is_none(), "another key");
        let mut altered = sealed.clone();
        let last = altered.len() - 3;
        altered[last] = b'9';
        assert!(key.open(&altered).is_none(), "altered body");
        assert!(key.open(body.as_bytes()).is_none(), "no tag");
        assert!(key.open(b"").is_none());
        let mut guessed = b"0".repeat(2 * TAG_BYTES);
        guessed.push(b' ');
        guessed.extend_from_slice(body.as_bytes());
        assert!(key.open(&guessed).is_none(), "a guessed tag");
        let mut upper = sealed.clone();
        upper[..2 * TAG_BYTES].make_ascii_uppercase();
        if upper != sealed {
            assert!(key.open(&upper).is_none(), "the tag in another spelling");
        }
        assert!(key.open(&sealed[..2 * TAG_BYTES]).is_none(), "a tag alone");
    }

    #[test]
    fn tags_are_the_ones_python_computes() {
        // hashlib.blake2b(body, key=bytes(range(32)), digest_size=32, person=label)
        let key = Key::from_secret(std::array::from_fn(|i| i as u8));
        let reply = key.seal_reply(r#"{"type":"ready","seq":0}"#);
        assert_eq!(
            &reply[..2 * TAG_BYTES],
            b"1b45162295d24c23d5e48e5f502398395805851f72ec507b90e064768278d6bb"
        );
        assert!(matches!(key.open(&reply), Some(Reply::Ready { seq: 0 })));
        let request = key.request(&Request {
            seq: 1,
            op: "sync",
            code: None,
            input: false,
            stdin: false,
        });
        assert_eq!(
            request,
            b"\n03b88dd5a24fcae7fa127c5ba0e99e5e7a78b2bdad4c2f444aed20ae5c2911da {\"seq\":1,\"op\":\"sync\"}\n"
        );
    }

    #[test]
    fn a_request_cannot_be_replayed_as_a_reply() {
        let key = Key::generate().unwrap();
        let request = key.request(&Request {
            seq: 1,
            op: "sync",
            code: None,
            input: false,
            stdin: false,
        });
        // Requests and replies are spelled alike: only the personalization
        // of their tags tells them apart.
        let line = &request[1..request.len() - 1];
        assert!(key.open(line).is_none());
    }

    #[test]
    fn the_tampering_sentence_names_each_channel() {
        assert_eq!(Tampering::default().sentence(), None);
        let sentence = Tampering {
            forged_replies: 2,
            out_of_step: 1,
            refused_requests: 1,
        }
        .sentence()
        .unwrap();
        assert_eq!(
            sentence,
            "[2 messages written to python's reply channel and 1 message written to python's \
             request channel did not come from envhost's driver and were ignored: something in the \
             interpreter writes to the driver's descriptors. 1 message from the driver answered \
             an earlier request and was set aside; the answer above is this command's own.]"
        );
    }

    #[test]
    fn hex_is_lowercase_pairs() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
    }
}
