"""The `{{name}}` environment: keys and values an agent keeps while it
works, and notes it saves as files, as an envhost plugin written in Python.

- `put`, `get`, `del`: values live in `self.state`, which the SDK
  snapshots after every command, so they survive a crash of the plugin and
  a restart of the host (`envhost serve --resume`);
- `save`, `show`: notes are files in the project's `notes/` directory,
  which the operator grants in env/envhost.toml (`read-write = ["notes"]`);
  the plugin reaches it with plain `open()` at `/notes`;
- `fetch`: GETs a URL through the host (`http_get` from the SDK) and keeps
  the body as a value; the operator allows hosts with `allowed-hosts` in
  env/envhost.toml, and every other host is refused with a sentence naming
  the grant to ask for.

Build with `./build.sh`; test with `envhost test
env/{{name}}.wasm tests/{{name}}.session --grants env/envhost.toml`.
"""

import os

from envhost_plugin import WHITESPACE, Plugin, Request, command, export, fail, http_get, origin

NOTES = "notes"
# The most of a fetched body kept as a value.
FETCHED_AT_MOST = 64 * 1024


class KeyValue(Plugin):
    summary = "Keys and values kept for the agent, and notes saved as files in notes/"
    name = "{{name}}"
    requests = [
        Request.write_directory(NOTES, "saves the agent's notes there as files"),
        Request.network("https://example.com", "fetches the URLs the agent asks for"),
    ]
    # The screen lists the files in notes/, which change without this plugin
    # (the agent's editor, bash): "any-time", the default. A screen drawn only
    # from self.state would say "when-called", and the host would stop asking
    # for it after other environments' commands.
    screen_changes = "any-time"

    def __init__(self):
        # JSON values only: the SDK snapshots this after every command.
        self.state = {"entries": {}}

    @command(
        "put <key> <value>",
        "Store a value under a key (the value may contain spaces).\n"
        "Values survive a crash of the plugin and a restart of the host.",
        summary="Store a value under a key",
        example="put colour blue",
    )
    def put(self, call):
        key = call.arg(0)
        value = call.args[len(key or ""):].strip(WHITESPACE)
        if not key or not value:
            fail("put needs a key and a value, e.g. `put colour blue`")
        self.state["entries"][key] = value
        return f"stored {key}"

    @command("get <key>", "Show the value stored under a key.", example="get colour")
    def get(self, call):
        entries = self.state["entries"]
        if call.args not in entries:
            fail(f"no key named {call.args}; the screen lists the keys")
        return entries[call.args]

    @command("del <key>", "Forget a key.", simple=True)
    def delete(self, call):
        if self.state["entries"].pop(call.args, None) is None:
            fail(f"no key named {call.args}")
        return f"deleted {call.args}"

    @command(
        "save <file>",
        "Save the lines after the command as a note, notes/<file> in the project\n"
        "(replacing a note of that name).",
        summary="Save the following lines as notes/<file>",
        example="save todo.txt\nbuy milk\ncall Ada",
    )
    def save(self, call):
        path = note_path(call.args)
        lines = (call.body or "").splitlines()
        with open(path, "w", encoding="utf-8") as note:
            note.write("".join(line + "\n" for line in lines))
        return f"saved {NOTES}/{call.args} ({len(lines)} lines)"

    @command("show <file>", "Show a note.", example="show todo.txt")
    def show(self, call):
        with open(note_path(call.args), encoding="utf-8") as note:
            return note.read()

    @command(
        "fetch <key> <url>",
        "GET a URL and store its body (text, at most 64 KiB) under a key.\n"
        "Only hosts the operator allows are reached: `allowed-hosts` in\n"
        "env/envhost.toml (see docs/plugin-network.md).",
        summary="Fetch a URL from an allowed host and store its body under a key",
        example="fetch readme https://example.com/",
    )
    def fetch(self, call):
        words = call.words()
        if len(words) != 2:
            fail("fetch needs a key and a URL, e.g. `fetch readme https://example.com/`")
        key, url = words
        # A host not in allowed-hosts raises here, with the sentence naming
        # the grant: `cannot fetch URL: ask the operator to add ...`.
        response = http_get(url, max_bytes=FETCHED_AT_MOST)
        if not 200 <= response.status < 300:
            fail(f"GET {url} answered {response.status}")
        self.state["entries"][key] = response.text().rstrip(WHITESPACE)
        return f"stored {key} ({len(response.body)} bytes from {origin(url)})"

    def screen(self):
        keys = sorted(self.state["entries"])
        lines = [f"Keys ({len(keys)}): {', '.join(keys)}" if keys else "Keys: (none)"]
        try:
            notes = sorted(n for n in os.listdir("/" + NOTES) if not n.startswith("."))
            lines.append(f"Notes in {NOTES}/: {', '.join(notes) if notes else '(none)'}")
        except OSError:
            lines.append(f"Notes: {NOTES}/ is not granted; the operator grants it in env/envhost.toml")
        return "\n".join(lines)


def note_path(name):
    if not name or "/" in name or name in (".", ".."):
        fail("a note's name is a file name, e.g. `todo.txt`")
    return f"/{NOTES}/{name}"


Environment, Capabilities, State, ScreenChanges = export(KeyValue)
