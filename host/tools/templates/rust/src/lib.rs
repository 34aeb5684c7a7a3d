//! The `{{name}}` environment: keys and values an agent keeps while it
//! works, and notes it saves as files, as an envhost plugin written in Rust.
//!
//! - `put`, `get`, `del`: values live in memory, and in the snapshots the
//!   host takes after every command (`snapshot` / `restore` below), so they
//!   survive a crash of the plugin and a restart of the host
//!   (`envhost serve --resume`);
//! - `save`, `show`: notes are files in the project's `notes/` directory,
//!   which the operator grants in env/envhost.toml (`read-write =
//!   ["notes"]`); the plugin sees it at `/notes`;
//! - `fetch`: GETs a URL through the host (`envhost_sdk::http`) and keeps
//!   the body as a value; the operator allows hosts with `allowed-hosts`
//!   in env/envhost.toml, and every other host is refused with a sentence
//!   naming the grant to ask for.
//!
//! Build with `./build.sh`; test with `envhost test
//! env/{{name}}.wasm tests/{{name}}.session --grants env/envhost.toml`.

use std::collections::BTreeMap;
use std::{fs, io};

use envhost_sdk::{Call, Command, Declarative, Error, Request, Result, fail, http};

const NOTES: &str = "notes";
/// The most of a fetched body kept as a value.
const FETCHED_AT_MOST: usize = 64 * 1024;

#[derive(Default)]
struct KeyValue {
    entries: BTreeMap<String, String>,
}

impl Declarative for KeyValue {
    const SUMMARY: &'static str =
        "Keys and values kept for the agent, and notes saved as files in notes/";
    const COMMANDS: &'static [Command<Self>] = &[
        Command::new("put <key> <value>", Self::put)
            .description(
                "Store a value under a key (the value may contain spaces).\n\
                 Values survive a crash of the plugin and a restart of the host.",
            )
            .summary("Store a value under a key")
            .example("put colour blue"),
        Command::new("get <key>", Self::get)
            .description("Show the value stored under a key.")
            .example("get colour"),
        Command::new("del <key>", Self::delete)
            .description("Forget a key.")
            .simple(),
        Command::new("save <file>", Self::save)
            .description(
                "Save the lines after the command as a note, notes/<file> in the project\n\
                 (replacing a note of that name).",
            )
            .summary("Save the following lines as notes/<file>")
            .example("save todo.txt\nbuy milk\ncall Ada"),
        Command::new("show <file>", Self::show)
            .description("Show a note.")
            .example("show todo.txt"),
        Command::new("fetch <key> <url>", Self::fetch)
            .description(
                "GET a URL and store its body (text, at most 64 KiB) under a key.\n\
                 Only hosts the operator allows are reached: `allowed-hosts` in\n\
                 env/envhost.toml (see docs/plugin-network.md).",
            )
            .summary("Fetch a URL from an allowed host and store its body under a key")
            .example("fetch readme https://example.com/"),
    ];

    fn state(&self) -> String {
        let keys: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        let mut lines = vec![if keys.is_empty() {
            "Keys: (none)".to_owned()
        } else {
            format!("Keys ({}): {}", keys.len(), keys.join(", "))
        }];
        match fs::read_dir(format!("/{NOTES}")) {
            Ok(entries) => {
                let mut notes: Vec<String> = entries
                    .flatten()
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .filter(|name| !name.starts_with('.'))
                    .collect();
                notes.sort();
                let shown = if notes.is_empty() {
                    "(none)".to_owned()
                } else {
                    notes.join(", ")
                };
                lines.push(format!("Notes in {NOTES}/: {shown}"));
            }
            Err(_) => lines.push(format!(
                "Notes: {NOTES}/ is not granted; the operator grants it in env/envhost.toml"
            )),
        }
        lines.join("\n")
    }

    /// One `key value` line per entry: a key is one word; a value's line
    /// feeds (a fetched page has some) and backslashes are escaped.
    fn snapshot(&self) -> Vec<u8> {
        let mut out = String::new();
        for (key, value) in &self.entries {
            let value = value.replace('\\', "\\\\").replace('\n', "\\n");
            out.push_str(&format!("{key} {value}\n"));
        }
        out.into_bytes()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let text = std::str::from_utf8(snapshot)?;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                fail!("the snapshot's line `{line}` is not `key value`");
            };
            self.entries.insert(key.to_owned(), unescape(value)?);
        }
        Ok(())
    }

    fn requests(&self) -> Vec<Request> {
        vec![
            Request::write_directory(NOTES, "saves the agent's notes there as files"),
            Request::network("https://example.com", "fetches the URLs the agent asks for"),
        ]
    }
}

impl KeyValue {
    fn put(&mut self, call: &Call) -> Result<String> {
        let Some(key) = call.arg(0) else {
            fail!("put needs a key and a value, e.g. `put colour blue`");
        };
        let value = call.args[key.len()..].trim();
        if value.is_empty() {
            fail!("put needs a key and a value, e.g. `put colour blue`");
        }
        self.entries.insert(key.to_owned(), value.to_owned());
        Ok(format!("stored {key}"))
    }

    fn get(&mut self, call: &Call) -> Result<String> {
        match self.entries.get(call.args) {
            Some(value) => Ok(value.clone()),
            None => fail!("no key named {}; the screen lists the keys", call.args),
        }
    }

    fn delete(&mut self, call: &Call) -> Result<String> {
        match self.entries.remove(call.args) {
            Some(_) => Ok(format!("deleted {}", call.args)),
            None => fail!("no key named {}", call.args),
        }
    }

    fn save(&mut self, call: &Call) -> Result<String> {
        let path = note_path(call.args)?;
        let lines: Vec<&str> = call.body.unwrap_or("").lines().collect();
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        fs::write(&path, text).map_err(|err| file_error(&path, err, true))?;
        Ok(format!(
            "saved {NOTES}/{} ({} lines)",
            call.args,
            lines.len()
        ))
    }

    fn show(&mut self, call: &Call) -> Result<String> {
        let path = note_path(call.args)?;
        fs::read_to_string(&path).map_err(|err| file_error(&path, err, false))
    }

    fn fetch(&mut self, call: &Call) -> Result<String> {
        let (Some(key), Some(url), None) = (call.arg(0), call.arg(1), call.arg(2)) else {
            fail!("fetch needs a key and a URL, e.g. `fetch readme https://example.com/`");
        };
        // A host not in allowed-hosts fails here, with the sentence naming
        // the grant: `cannot fetch URL: ask the operator to add ...`.
        let response = http::get_at_most(url, FETCHED_AT_MOST)?;
        if !(200..300).contains(&response.status) {
            fail!("GET {url} answered {}", response.status);
        }
        let text = String::from_utf8_lossy(&response.body);
        let text = text.trim_end();
        self.entries.insert(key.to_owned(), text.to_owned());
        Ok(format!(
            "stored {key} ({} bytes from {})",
            response.body.len(),
            http::origin(url)?
        ))
    }
}

/// The inverse of the escaping in `snapshot`.
fn unescape(value: &str) -> Result<String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            _ => fail!("the snapshot's value `{value}` has a lone backslash"),
        }
    }
    Ok(out)
}

fn note_path(name: &str) -> Result<String> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        fail!("a note's name is a file name, e.g. `todo.txt`");
    }
    Ok(format!("/{NOTES}/{name}"))
}

/// A file error as the agent should read it: a missing grant names the
/// grant to ask the operator for.
fn file_error(path: &str, err: io::Error, writing: bool) -> Error {
    let grant = format!("([plugins.{{name}}] read-write = [\"{NOTES}\"])");
    if fs::metadata(format!("/{NOTES}")).is_err() {
        return Error::new(format!(
            "cannot use {path}: ask the operator to grant {NOTES} in env/envhost.toml {grant}"
        ));
    }
    if writing && err.kind() == io::ErrorKind::PermissionDenied {
        return Error::new(format!(
            "cannot use {path}: not permitted; if {NOTES} is granted read-only, ask the operator to grant it read-write in env/envhost.toml {grant}"
        ));
    }
    Error::new(format!("cannot use {path}: {err}"))
}

envhost_sdk::export!(KeyValue);
