"""Write envhost environments ("plugins") in Python, for componentize-py.

A plugin is a WebAssembly component the envhost host loads from
`<project>/env/NAME.wasm`: the agent sends it commands and sees its screen
section after every command. This module hides the component plumbing (the
world `full-plugin` of `wit/v0.2.1`, the generated `wit_world` bindings,
the one plugin instance, snapshots of its state) behind a class and a
decorator, in the declarative style of the Rust SDK:

    from envhost_plugin import Plugin, Request, command, export, fail

    class Counter(Plugin):
        summary = "A counter that only goes up"

        def __init__(self):
            self.state = {"count": 0}      # kept across traps and restarts

        @command("add <n>", description="Add n to the counter.", example="add 3")
        def add(self, call):
            if not call.args.isdigit():
                fail("add needs a number, e.g. `add 3`")
            self.state["count"] += int(call.args)
            return f"Count is now {self.state['count']}"

        def screen(self):
            return f"Count: {self.state['count']}"

    Environment, Capabilities, State, ScreenChanges = export(Counter)

The host routes by the command's first word (split by the one rule in
`wit/command-split-cases.json`) and renders each command's help: LONG
(signature, description, example) until the agent has used it, SHORT
(signature - summary) after.

What the SDK checks, so that a mistake reads as a sentence and not as the
toolchain's internals: the commands when the module is imported (which
componentize-py does at build time, so a bad table fails the build);
the plugin as a whole with `python3 envhost_plugin.py check MODULE` in
CPython before componentize runs (the description, requests, first screen,
a snapshot round trip, return annotations); and every value a handler or
`screen` returns, at the call (a wrong type is a failed response naming the
command and what to return; the instance and its state stay).

State: whatever `self.state` holds (JSON: dicts, lists, strings, numbers,
booleans, None) is snapshotted after every command and given back to a
fresh instance after a trap or a host restart with `--resume`. Override
`snapshot()` / `restore(data)` for another format.

Screen changes: the host asks every plugin for its screen after every
command to any environment, because a screen may show what changes on its
own. A plugin whose screen shows only its own state (what its commands
leave) says so with the class attribute `screen_changes = "when-called"`;
the host then asks for its screen only after calling it, and the plugin no
longer slows every other environment's answers. A screen that shows the
time, files, a program's progress or anything fetched keeps the default,
`screen_changes = "any-time"`. Any other value fails the build.

Files: the directories the operator grants appear at `/` + their path in
the project (`notes` is `/notes`); plain `open()` works. An `OSError` that
escapes a handler is a failed response; when nothing is granted there (or
only reading is), the response says what to ask the operator for.

Outgoing HTTP: `http_get(url)` sends a GET through the host's
`wasi:http/outgoing-handler` and returns an `HttpResponse` (`.status`,
`.headers`, `.body`, `.text()`). The operator allows hosts with
`allowed-hosts` in env/envhost.toml; a refused host raises `HttpError` (a
`Fail`: uncaught, it is the failed response) whose message names the grant
to ask for.

This file is self-contained (standard library only) so that it can be
copied next to a plugin's sources; `envhost new --lang python` does that.
"""

from __future__ import annotations

import errno
import inspect
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

__all__ = [
    "Call",
    "Fail",
    "HttpError",
    "HttpResponse",
    "Plugin",
    "PluginError",
    "Request",
    "Response",
    "Runner",
    "Screen",
    "command",
    "export",
    "fail",
    "grant_hint",
    "http_get",
    "origin",
    "log",
]

# Unicode's White_Space set, spelled out: Python's own (`str.split`,
# `str.strip`) also counts U+001C to U+001F, and the rule must read alike
# in the host and every SDK.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

DEFAULT_MAX_LINES = 50

# The values of `Plugin.screen_changes`, as the WIT enum `when` (interface
# `screen-changes`) spells its cases; the first is the default.
SCREEN_CHANGES = ("any-time", "when-called")


class PluginError(Exception):
    """A mistake in the plugin's own code (its command table, a value it
    returned), found by the SDK; the message says what to change."""


class Fail(Exception):
    """Raised by a handler (or `fail(...)`) for a command that failed: the
    message is the failed response's output. The state stays as it is."""


def fail(message: str):
    """Ends the command as failed with `message` (say what went wrong and
    how to recover)."""
    raise Fail(message)


# --- Values --------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    """The result of one command. Handlers usually return the output (a
    str) or raise `Fail`; return a Response to choose `success` yourself."""

    output: str
    success: bool = True

    @staticmethod
    def ok(output: str) -> "Response":
        return Response(output, True)

    @staticmethod
    def fail(output: str) -> "Response":
        return Response(output, False)


@dataclass(frozen=True)
class Screen:
    """The plugin's own part of the screen; the host adds the commands'
    help below it and cuts `content` to `max_lines` lines."""

    content: str
    max_lines: int = DEFAULT_MAX_LINES


@dataclass(frozen=True)
class Request:
    """A power the plugin asks the operator for, and why (shown to the
    operator; asking grants nothing)."""

    kind: str
    value: Any
    reason: str

    KINDS = ("read-directory", "write-directory", "variable", "program", "memory", "network")

    @staticmethod
    def read_directory(path: str, reason: str) -> "Request":
        """Read a directory of the project (seen at `/` + path)."""
        return Request("read-directory", path, reason)

    @staticmethod
    def write_directory(path: str, reason: str) -> "Request":
        """Read and write a directory of the project (seen at `/` + path)."""
        return Request("write-directory", path, reason)

    @staticmethod
    def variable(name: str, reason: str) -> "Request":
        """See one of the host's environment variables."""
        return Request("variable", name, reason)

    @staticmethod
    def program(program: str, reason: str) -> "Request":
        """Run a program interactively."""
        return Request("program", program, reason)

    @staticmethod
    def memory(size: int, reason: str) -> "Request":
        """Use up to `size` bytes of memory."""
        return Request("memory", size, reason)

    @staticmethod
    def network(pattern: str, reason: str) -> "Request":
        """Send HTTP requests to destinations matching `pattern`, as the
        operator writes it in `allowed-hosts` (`https://api.github.com`,
        `https://*.example.com:8443`); see docs/plugin-network.md."""
        return Request("network", pattern, reason)


@dataclass(frozen=True)
class Call:
    """A command as a handler receives it: `edit a.py 3-4` followed by
    lines gives name `edit`, args `a.py 3-4` and the lines in `body`."""

    name: str
    args: str
    body: Optional[str]
    text: str

    @staticmethod
    def parse(text: str) -> "Call":
        """Splits a command's text by the rule the host routes by: leading
        whitespace, blank lines included, is skipped; the name is the first
        line up to its first whitespace character; the arguments are the
        rest of that line without leading or trailing whitespace; the body
        is everything after the first line feed, verbatim (None without
        one)."""
        first, newline, body = text.lstrip(WHITESPACE).partition("\n")
        for at, char in enumerate(first):
            if char in WHITESPACE:
                name, arguments = first[:at], first[at + 1:]
                break
        else:
            name, arguments = first, ""
        return Call(name, arguments.strip(WHITESPACE), body if newline else None, text)

    def words(self) -> list:
        """The arguments split on whitespace."""
        return [word for word in _split_words(self.args) if word]

    def arg(self, index: int) -> Optional[str]:
        """The `index`-th argument word, or None."""
        words = self.words()
        return words[index] if index < len(words) else None


def _split_words(text: str):
    word = []
    for char in text:
        if char in WHITESPACE:
            yield "".join(word)
            word = []
        else:
            word.append(char)
    yield "".join(word)


# --- Declaring a plugin ----------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    signature: str
    description: str
    summary: Optional[str]
    example: str
    simple: bool

    @property
    def name(self) -> str:
        return self.signature.lstrip(WHITESPACE).split(None, 1)[0] if self.signature.strip() else ""


def command(signature: str, description: str = "", *, summary: Optional[str] = None,
            example: str = "", simple: bool = False):
    """Declares a method of a `Plugin` as a command. `signature` is how to
    call it (`get <key>`); its first word is the command's name.
    `description` is the LONG help (may span lines), `summary` the one-line
    SHORT help (default: the description's first line), `example` a raw
    command as the agent would send it, and `simple` commands always get
    SHORT help. The method takes a `Call` and returns the output (a str),
    or raises `Fail`."""

    def mark(function):
        function.__envhost_command__ = _Spec(signature, description, summary, example, simple)
        return function

    if callable(signature):
        raise PluginError(
            f"@command needs the command's signature: write @command(\"{signature.__name__} <args>\", "
            f"description=...) above `def {signature.__name__}`"
        )
    return mark


class Plugin:
    """Base class of a plugin. Set `summary` (one line: what the environment
    is for), decorate methods with `@command`, and override what you need:

    - `screen()`: the state shown above the commands' help (a str, or a
      `Screen` to choose `max_lines`); default: the summary;
    - `requests`: a list of `Request`s (directories, `network`, ...);
    - `screen_changes`: "when-called" when `screen()` shows only what the
      plugin's own calls leave (the host then stops asking for it after
      other environments' commands); "any-time" (the default) when it
      shows the time, files, a program's progress, anything external;
    - `self.state`: JSON-serialisable state, snapshotted for you; or
      `snapshot()` / `restore(data)` for your own bytes;
    - `name`: the environment's name (the .wasm file's stem), used in the
      sentences that say which grant to ask for;
    - `shutdown()`: called once when the host stops.
    """

    summary: str = ""
    name: str = ""
    requests: list = []
    max_lines: int = DEFAULT_MAX_LINES
    screen_changes: str = "any-time"

    def screen(self):
        return self.summary

    def shutdown(self) -> None:
        pass

    def snapshot(self) -> bytes:
        """The state as bytes (default: `self.state` as JSON; no bytes
        without a `state` attribute)."""
        if not hasattr(self, "state"):
            return b""
        return json.dumps(self.state, ensure_ascii=False, separators=(",", ":")).encode()

    def restore(self, data: bytes) -> None:
        """Puts back what `snapshot` returned (default: JSON into
        `self.state`). Raise `Fail` with a sentence to refuse it."""
        if not data:
            return
        try:
            self.state = json.loads(data.decode())
        except ValueError as err:
            raise Fail(f"the snapshot is not the JSON this plugin writes ({err})") from None


def _commands(cls) -> list:
    """The commands of a Plugin class, in the order they are defined
    (base classes first), checked: a bad table is a `PluginError`."""
    found = {}
    for klass in reversed(cls.__mro__):
        for attribute, value in vars(klass).items():
            spec = getattr(value, "__envhost_command__", None)
            if spec is not None:
                found[attribute] = (spec, attribute)
    commands = []
    names = {}
    for spec, attribute in found.values():
        where = f"{cls.__name__}.{attribute}"
        _check_spec(spec, where)
        if spec.name in names:
            raise PluginError(
                f"two commands are named `{spec.name}` ({names[spec.name]} and {where}); "
                f"the first word of each signature must be unique"
            )
        names[spec.name] = where
        commands.append((spec, attribute))
    return commands


def _check_spec(spec: _Spec, where: str) -> None:
    def text(field, value, optional=False):
        if optional and value is None:
            return
        if not isinstance(value, str):
            raise PluginError(
                f"the `{field}` of command {where} is {_kind(value)}; it must be a str"
                + (" or None" if optional else "")
            )

    text("signature", spec.signature)
    text("description", spec.description)
    text("summary", spec.summary, optional=True)
    text("example", spec.example)
    if not isinstance(spec.simple, bool):
        raise PluginError(f"the `simple` of command {where} is {_kind(spec.simple)}; it must be True or False")
    if not spec.name:
        raise PluginError(f"command {where} has an empty signature; write how to call it, e.g. `get <key>`")


def _check_requests(requests) -> list:
    if not isinstance(requests, (list, tuple)):
        raise PluginError(f"`requests` is {_kind(requests)}; it must be a list of Request.read_directory(...) etc.")
    for request in requests:
        if not isinstance(request, Request) or request.kind not in Request.KINDS:
            raise PluginError(
                f"`requests` holds {_kind(request)}; use Request.read_directory, write_directory, "
                f"variable, program, memory or network"
            )
        wanted = int if request.kind == "memory" else str
        if not isinstance(request.value, wanted) or isinstance(request.value, bool):
            raise PluginError(
                f"the {request.kind} request's value is {_kind(request.value)}; it must be "
                f"{'a number of bytes' if wanted is int else 'a str'}"
            )
        if not isinstance(request.reason, str):
            raise PluginError(f"the reason of the {request.kind} request is {_kind(request.reason)}; it must be a str")
    return list(requests)


def _check_screen_changes(cls) -> str:
    """The class's `screen_changes`, checked: anything but the two values is
    a `PluginError` (at export, so at build time)."""
    value = cls.screen_changes
    if isinstance(value, str) and value in SCREEN_CHANGES:
        return value
    plain = "".join(c for c in value.lower() if c.isalpha()) if isinstance(value, str) else ""
    near = next((w for w in SCREEN_CHANGES if w.replace("-", "") == plain), None)
    raise PluginError(
        f"{cls.__name__}.screen_changes is {_kind(value)}; it must be \"any-time\" (the default: the screen "
        f"may change between the plugin's calls, e.g. it shows the time, files or a program's progress) or "
        f"\"when-called\" (the screen shows only what the plugin's own calls leave)"
        + (f"; did you mean \"{near}\"?" if near else "")
    )


def _kind(value) -> str:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{type(value).__name__} {shown}"


# --- Files -----------------------------------------------------------------

# WASI's "not capable", which wasi-libc's errno has and Linux's has not.
_ENOTCAPABLE = getattr(errno, "ENOTCAPABLE", 76)
_REFUSED = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EBADF, _ENOTCAPABLE}


def grant_hint(path: str, writing: bool, plugin: str = "", requests=()) -> Optional[str]:
    """The sentence for a file access the sandbox refused: which directory
    to ask the operator to grant, and how, or None when the directory is
    granted as needed (then the error is the file's own)."""
    directory = _directory_of(path, requests)
    if not directory:
        return None
    name = plugin or "NAME"
    wants_write = writing or any(r.kind == "write-directory" and r.value == directory for r in requests)
    key = "read-write" if wants_write else "read-only"
    grant = f'([plugins.{name}] {key} = ["{directory}"])'
    if not os.path.isdir("/" + directory):
        return f"ask the operator to grant {directory} in env/envhost.toml {grant}"
    if writing:
        # Under WASI a read-only grant cannot be told from its mode bits;
        # a refused write to a granted directory is the usual cause.
        return (
            f"not permitted; if {directory} is granted read-only, ask the operator to grant it "
            f"read-write in env/envhost.toml {grant}"
        )
    return None


def _directory_of(path: str, requests) -> str:
    """The project directory `path` lies in: the longest requested
    directory that holds it, else its first component."""
    if not isinstance(path, str):
        return ""
    relative = os.path.normpath(path).lstrip("/")
    if relative in ("", "."):
        return ""
    best = ""
    for request in requests:
        if request.kind in ("read-directory", "write-directory"):
            wanted = os.path.normpath(request.value).lstrip("/")
            if (relative == wanted or relative.startswith(wanted + "/")) and len(wanted) > len(best):
                best = wanted
    return best or relative.split("/", 1)[0]


def _file_failure(err: OSError, plugin: Plugin, requests) -> str:
    path = err.filename if isinstance(err.filename, str) else ""
    reason = err.strerror or str(err)
    if not path:
        return f"a file operation failed: {reason}"
    hint = None
    if err.errno in _REFUSED:
        # Whether it was a write is not in the error: a refused write to a
        # granted read-only directory shows as not permitted; a missing
        # grant as no such file.
        writing = err.errno != errno.ENOENT
        hint = grant_hint(path, writing, plugin.name, requests)
    if hint:
        return f"cannot use {path}: {hint}"
    return f"cannot use {path}: {reason}"


# --- Logging ----------------------------------------------------------------


class _Log:
    """The host's log (its stderr, prefixed with the plugin's name), for
    the plugin's author and the operator; the agent never sees it. Outside
    the component (native tests) it writes to stderr."""

    def _write(self, level: str, message: str) -> None:
        try:
            from wit_world.imports import logging as host_log
        except ImportError:
            print(f"[{level}] {message}", file=sys.stderr)
            return
        try:
            host_log.log(getattr(host_log.Level, level.upper()), str(message))
        except Exception:  # CPython with generated bindings: no host to call
            print(f"[{level}] {message}", file=sys.stderr)

    def debug(self, message: str) -> None:
        self._write("debug", message)

    def info(self, message: str) -> None:
        self._write("info", message)

    def warn(self, message: str) -> None:
        self._write("warn", message)

    def error(self, message: str) -> None:
        self._write("error", message)


log = _Log()


# --- Outgoing HTTP ------------------------------------------------------------


class HttpError(Fail):
    """A request that got no usable response: refused by the host (the
    message names the grant to ask the operator for), failed on the way
    (connection refused, a timeout, DNS), or a body over the limit. Uncaught
    in a handler, the message is the failed response."""


@dataclass(frozen=True)
class HttpResponse:
    """What a server answered: any status is a response (check `.status`)."""

    status: int
    headers: list  # [(name, value bytes)], names in lower case
    body: bytes

    def text(self) -> str:
        """The body as UTF-8 (invalid bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")


def _target(url: str) -> tuple:
    """(https, authority, path with query) of an http(s) URL, or raises
    HttpError saying what is wrong with it."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise HttpError(f"cannot fetch {url}: a URL starts with http:// or https://")
    if scheme.lower() not in ("http", "https"):
        raise HttpError(f"cannot fetch {url}: only http:// and https:// URLs can be fetched")
    if any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in url):
        raise HttpError(f"cannot fetch {url}: a URL holds no spaces or control characters")
    rest = rest.split("#", 1)[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=-1)
    if cut < 0:
        authority, path = rest, "/"
    elif rest[cut] == "?":
        authority, path = rest[:cut], "/" + rest[cut:]
    else:
        authority, path = rest[:cut], rest[cut:]
    if not authority:
        raise HttpError(f"cannot fetch {url}: the URL names no host")
    return scheme.lower() == "https", authority, path


def origin(url: str) -> str:
    """`scheme://host[:port]` of an http(s) URL as `allowed-hosts` writes it
    (lower case, the port only when it is not the scheme's default):
    `https://example.com`, `http://127.0.0.1:9`."""
    https, authority, _ = _target(url)
    scheme, default = ("https", "443") if https else ("http", "80")
    host = authority.lower().rpartition("@")[2]
    name, colon, port = host.rpartition(":")
    if colon and "]" not in port and port == default:
        host = name
    return f"{scheme}://{host}"


def _denied(url: str) -> str:
    return f'cannot fetch {url}: ask the operator to add "{origin(url)}" to allowed-hosts in env/envhost.toml'


def _readable(code) -> str:
    """A wasi:http error code (a binding's `ErrorCode_*` object) in words:
    `connection refused`, `DNS timeout`."""
    name = type(code).__name__.removeprefix("ErrorCode_")
    value = getattr(code, "value", None)
    if name == "DnsError" and value is not None:
        detail = value.rcode or (f"info code {value.info_code}" if value.info_code is not None else None)
        return f"DNS error ({detail})" if detail else "DNS error"
    if name == "InternalError" and value:
        return f"internal error: {value}"
    words, word = [], ""
    for c in name:
        if c.isupper() and word:
            words.append(word)
            word = ""
        word += c
    words.append(word)
    text = " ".join(w.upper() if w in ("Dns", "Tls", "Http", "Ip", "Uri") else w.lower() for w in words)
    if name in ("HttpResponseTransferCoding", "HttpResponseContentCoding") and value:
        text += f" ({value})"
    return text


def _size(count: int) -> str:
    """A size as the host words it: `512 B`, `64 KiB`, `1.5 MiB`, `4.0 GiB`."""
    if count < 1024:
        return f"{count} B"
    value, unit = float(count), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{value:.0f} {unit}" if value.is_integer() and value >= 10 else f"{value:.1f} {unit}"


def _http_bindings() -> tuple:
    """(Ok, Err, outgoing_handler, wasi_http_types, streams) from the
    bindings componentize-py generates. `export` calls this once at import
    time: a componentize-py build keeps only the modules loaded while it
    pre-initialises the plugin, so one first imported at a command's time
    would be missing."""
    from componentize_py_types import Err, Ok
    from wit_world.imports import outgoing_handler, streams
    from wit_world.imports import wasi_http_types

    return Ok, Err, outgoing_handler, wasi_http_types, streams


def http_get(url: str, max_bytes: Optional[int] = None) -> HttpResponse:
    """GET `url` through the host (wasi:http/outgoing-handler), waiting for
    the whole response; with `max_bytes`, a longer body raises HttpError as
    soon as it passes the limit (nothing more is read). Raises HttpError
    when the host refuses the destination (the message names the grant) or
    the request fails."""
    https, authority, path = _target(url)
    Ok, Err, outgoing_handler, http, _ = _http_bindings()

    def failure(code) -> HttpError:
        if isinstance(code, http.ErrorCode_HttpRequestDenied):
            return HttpError(_denied(url))
        if code is None:
            return HttpError(f"cannot fetch {url}: the host gave no response")
        return HttpError(f"cannot fetch {url}: {_readable(code)}")

    request = http.OutgoingRequest(http.Fields())
    try:
        request.set_method(http.Method_Get())
        request.set_scheme(http.Scheme_Https() if https else http.Scheme_Http())
        request.set_authority(authority)
        request.set_path_with_query(path)
    except Err:
        raise HttpError(
            f"cannot fetch {url}: the host cannot read it as a request (check the host name and path)"
        ) from None
    try:
        future = outgoing_handler.handle(request, None)
    except Err as err:
        raise failure(err.value) from None
    # Resources are released child first (the body's stream, the body, the
    # response, the future), on every path.
    with future:
        # The poll loop: one pollable, waited for until the answer is in.
        while (ready := future.get()) is None:
            with future.subscribe() as pollable:
                pollable.block()
        # Ok(Ok(response)), Ok(Err(code)), or Err(()) for an answer taken
        # twice (not done here).
        if not isinstance(ready, Ok) or not isinstance(ready.value, Ok):
            raise failure(ready.value.value if isinstance(ready, Ok) else None)
        with ready.value.value as response:
            status = response.status()
            with response.headers() as fields:
                headers = list(fields.entries())
            body = response.consume()
            try:
                with body.stream() as stream:
                    chunks = _read_all(url, stream, max_bytes, failure)
            except BaseException:
                body.__exit__(None, None, None)
                raise
            # Trailers are not kept.
            with http.IncomingBody.finish(body):
                pass
    return HttpResponse(status, headers, b"".join(chunks))


def _read_all(url: str, stream, max_bytes: Optional[int], failure) -> list:
    """The chunks of a response body's stream, up to `max_bytes`."""
    _, Err, _, http, streams = _http_bindings()

    chunks, total = [], 0
    while True:
        try:
            chunk = stream.blocking_read(64 * 1024)
        except Err as err:
            if isinstance(err.value, streams.StreamError_Closed):
                return chunks
            code = http.http_error_code(err.value.value)
            if code is None:
                raise HttpError(f"cannot fetch {url}: reading the body failed") from None
            raise failure(code) from None
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise HttpError(f"cannot fetch {url}: its body is larger than {_size(max_bytes)}, the most this plugin keeps")
        chunks.append(chunk)


# --- Running a plugin ---------------------------------------------------------


class Runner:
    """One plugin instance behind the host's calls, with plain Python
    values: what `export` wraps for the component, and what native tests
    drive (`Runner(Kv).handle("set a 1")`)."""

    def __init__(self, cls):
        if not (isinstance(cls, type) and issubclass(cls, Plugin)):
            raise PluginError(f"export() takes a subclass of envhost_plugin.Plugin, not {_kind(cls)}")
        self.cls = cls
        self.commands = _commands(cls)
        self.by_name = {spec.name: attribute for spec, attribute in self.commands}
        # "any-time" or "when-called": read once, from the class, as the
        # host asks once per instance and wants the same answer every time.
        self.screen_changes = _check_screen_changes(cls)
        self._plugin = None
        self._snapshot = None

    @property
    def plugin(self) -> Plugin:
        if self._plugin is None:
            self._plugin = self.cls()
        return self._plugin

    def describe(self) -> tuple:
        """(summary, [spec...])."""
        summary = self.plugin.summary
        if not isinstance(summary, str) or not summary.strip():
            raise PluginError(
                f"{self.cls.__name__}.summary is {_kind(summary)}; set it to one line saying what the environment is for"
            )
        return summary, [spec for spec, _ in self.commands]

    def requests(self) -> list:
        return _check_requests(self.plugin.requests)

    def handle(self, text: str) -> Response:
        call = Call.parse(text)
        attribute = self.by_name.get(call.name)
        if attribute is None:
            # The host answers unknown names itself; this is for one that
            # does not.
            return Response.fail(f"Unknown command: {call.name}\nAvailable: {', '.join(self.by_name)}")
        plugin = self.plugin
        try:
            value = getattr(plugin, attribute)(call)
        except Fail as err:
            response = Response.fail(str(err))
        except OSError as err:
            response = Response.fail(_file_failure(err, plugin, self.requests()))
        else:
            response = self._response(call.name, attribute, value)
        return self._keep_snapshot(response)

    def _response(self, name: str, attribute: str, value) -> Response:
        if isinstance(value, str):
            return Response.ok(value)
        if isinstance(value, Response) and isinstance(value.output, str) and isinstance(value.success, bool):
            return value
        message = (
            f"the plugin's command `{name}` returned {_kind(value)}, not the output: "
            f"{self.cls.__name__}.{attribute} must return a str (the output), return "
            f"Response(output, success), or raise Fail(message). This is a bug in the plugin; "
            f"its state is unchanged by this answer."
        )
        log.error(message)
        return Response.fail(message)

    def _keep_snapshot(self, response: Response) -> Response:
        # The host asks for the snapshot right after the command: take it
        # now, so that state that cannot be saved is reported to the agent
        # with the command that made it so.
        try:
            snapshot = self.plugin.snapshot()
            if not isinstance(snapshot, (bytes, bytearray)):
                raise PluginError(f"snapshot() returned {_kind(snapshot)}; it must return bytes")
        except (TypeError, ValueError, PluginError) as err:
            message = (
                f"The plugin's state cannot be saved ({err}); keep only JSON values (dict, list, str, int, float, "
                f"bool, None) in self.state, or override snapshot() and restore(). Until then the state "
                f"will not survive a crash or a restart."
            )
            log.error(message)
            return Response(f"{response.output}\n({message})".lstrip("\n"), response.success)
        self._snapshot = bytes(snapshot)
        return response

    def screen(self) -> Screen:
        value = self.plugin.screen()
        if isinstance(value, str):
            return Screen(value, _max_lines(self.plugin.max_lines, self.cls))
        if isinstance(value, Screen) and isinstance(value.content, str):
            return Screen(value.content, _max_lines(value.max_lines, self.cls))
        message = (
            f"{self.cls.__name__}.screen() returned {_kind(value)}; it must return a str "
            f"(or Screen(content, max_lines)). This is a bug in the plugin."
        )
        log.error(message)
        return Screen(message, DEFAULT_MAX_LINES)

    def snapshot(self) -> bytes:
        if self._snapshot is None:
            try:
                self._snapshot = bytes(self.plugin.snapshot())
            except (TypeError, ValueError) as err:
                log.error(f"the plugin's state cannot be saved: {err}")
                return b""
        return self._snapshot

    def restore(self, data: bytes) -> Optional[str]:
        """None when restored, else why not (a sentence)."""
        try:
            self.plugin.restore(bytes(data))
        except Fail as err:
            return str(err)
        except (TypeError, ValueError, KeyError) as err:
            return f"the plugin could not take back its snapshot: {type(err).__name__}: {err}"
        self._snapshot = None
        return None

    def shutdown(self) -> None:
        self.plugin.shutdown()


def _max_lines(value, cls) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**32:
        return value
    log.error(f"{cls.__name__}: max_lines is {_kind(value)}; it must be a positive int (using {DEFAULT_MAX_LINES})")
    return DEFAULT_MAX_LINES


# --- The component's exports ---------------------------------------------------


def export(cls) -> tuple:
    """The classes componentize-py exports for `cls` (a `Plugin` subclass),
    for the world `full-plugin`; write, at the end of the plugin's module:

        Environment, Capabilities, State, ScreenChanges = export(MyPlugin)

    The command table and `screen_changes` are checked here, when the
    module is imported (at build time too): a mistake in them fails the
    build with a sentence."""
    runner = Runner(cls)
    from wit_world.exports import capabilities as wit_capabilities
    from wit_world.exports import environment as wit

    try:
        from wit_world.exports import screen_changes as wit_screen_changes
    except ImportError:
        # Bindings of wit/v0.2.0, whose `full-plugin` has no screen-changes:
        # componentize-py then leaves `ScreenChanges` out, and nothing calls it.
        wit_screen_changes = None

    _http_bindings()  # loaded now, for http_get (see there)

    def power(request: Request):
        kinds = {
            "read-directory": wit_capabilities.Power_ReadDirectory,
            "write-directory": wit_capabilities.Power_WriteDirectory,
            "variable": wit_capabilities.Power_Variable,
            "program": wit_capabilities.Power_Program,
            "memory": wit_capabilities.Power_Memory,
            "network": wit_capabilities.Power_Network,
        }
        return kinds[request.kind](request.value)

    # componentize-py makes a new object of these classes for every call:
    # everything lives in `runner`, as long as the component instance.
    class Environment:
        def describe(self):
            summary, specs = runner.describe()
            return wit.Description(
                summary=summary,
                commands=[
                    wit.CommandSpec(
                        signature=spec.signature,
                        description=spec.description,
                        summary=spec.summary,
                        example=spec.example,
                        simple=spec.simple,
                    )
                    for spec in specs
                ],
            )

        def handle_command(self, command: str):
            response = runner.handle(command)
            return wit.CommandResponse(output=response.output, success=response.success)

        def get_screen(self):
            screen = runner.screen()
            return wit.ScreenSection(content=screen.content, max_lines=screen.max_lines)

        def shutdown(self) -> None:
            runner.shutdown()

    class Capabilities:
        def requested(self):
            return [wit_capabilities.Request(power=power(r), reason=r.reason) for r in runner.requests()]

    class State:
        def snapshot(self) -> bytes:
            return runner.snapshot()

        def restore(self, snapshot: bytes) -> None:
            why = runner.restore(snapshot)
            if why is not None:
                from componentize_py_types import Err

                raise Err(why)

    class ScreenChanges:
        def screen_changes(self):
            when = wit_screen_changes.When
            return when.WHEN_CALLED if runner.screen_changes == "when-called" else when.ANY_TIME

    Environment.runner = runner
    return Environment, Capabilities, State, ScreenChanges


# --- The build-time check --------------------------------------------------------


def check(module_name: str) -> list:
    """Problems with the plugin module `module_name` as the host would see
    them, found in CPython before componentize runs (needs the bindings
    componentize-py generates on the path). An empty list: none found."""
    import importlib

    problems = []
    names = ("Environment", "Capabilities", "State", "ScreenChanges")
    ending = f"`{', '.join(names)} = export(YourPlugin)`"
    try:
        module = importlib.import_module(module_name)
    except PluginError as err:
        return [str(err)]
    except ValueError as err:
        # `Environment, Capabilities, State = export(...)`, as written before
        # 0.2.1 added ScreenChanges: the module's own line fails to unpack.
        innermost = err.__traceback__
        while innermost.tb_next is not None:
            innermost = innermost.tb_next
        if "too many values to unpack (expected 3" not in str(err) or innermost.tb_frame.f_code.co_name != "<module>":
            raise
        return [f"{module_name} unpacks export(...) into three names; it returns four classes since 0.2.1 "
                f"(ScreenChanges is new): end the module with {ending}"]
    exported = [getattr(module, name, None) for name in names]
    if not all(exported):
        missing = [n for n, c in zip(names, exported) if not c]
        return [f"{module_name} does not define {', '.join(missing)}; end it with {ending}"]
    runner = getattr(exported[0], "runner", None)
    if not isinstance(runner, Runner):
        return [f"{module_name}.Environment was not made by envhost_plugin.export(...)"]
    steps = [
        ("describe", lambda: exported[0]().describe()),
        ("requests", lambda: exported[1]().requested()),
        ("screen", lambda: runner.screen()),
    ]
    for step, run in steps:
        try:
            value = run()
        except PluginError as err:
            problems.append(str(err))
            continue
        if step == "screen" and value.content.startswith(f"{runner.cls.__name__}.screen() returned"):
            problems.append(value.content)
    if vars(runner.plugin).get("screen_changes", runner.screen_changes) != runner.screen_changes:
        problems.append(
            f"{runner.cls.__name__}() sets self.screen_changes, which the SDK does not read; set it on the "
            f"class (`screen_changes = \"when-called\"` beside `summary`)"
        )
    try:
        data = runner.plugin.snapshot()
        if not isinstance(data, (bytes, bytearray)):
            problems.append(f"snapshot() returned {_kind(data)}; it must return bytes")
        else:
            why = Runner(runner.cls).restore(data)
            if why:
                problems.append(f"a fresh instance cannot restore the first snapshot: {why}")
    except (TypeError, ValueError) as err:
        problems.append(
            f"the plugin's first state cannot be saved ({err}); keep only JSON values in self.state, "
            f"or override snapshot() and restore()"
        )
    for spec, attribute in runner.commands:
        hint = inspect.signature(getattr(runner.cls, attribute)).return_annotation
        if hint is inspect.Signature.empty:
            continue
        shown = hint if isinstance(hint, str) else getattr(hint, "__name__", str(hint))
        if shown not in ("str", "Response", "envhost_plugin.Response"):
            problems.append(
                f"{runner.cls.__name__}.{attribute} (command `{spec.name}`) is annotated to return {shown}; "
                f"a command returns a str (the output) or a Response"
            )
    return problems


def _main(argv: list) -> int:
    if len(argv) != 3 or argv[1] != "check":
        print("usage: python3 envhost_plugin.py check MODULE   (with the plugin's folders and the "
              "bindings `componentize-py bindings` wrote on PYTHONPATH)", file=sys.stderr)
        return 2
    problems = check(argv[2])
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(f"envhost_plugin: {argv[2]} has {len(problems)} problem(s); fix them before building", file=sys.stderr)
        return 1
    print(f"envhost_plugin: {argv[2]} checked: commands, requests, screen_changes, first screen and snapshot are well-formed")
    return 0


if __name__ == "__main__":
    # Run as a script, this file is `__main__`: make `import envhost_plugin`
    # in the plugin's module give this same module, not a second copy.
    sys.modules.setdefault("envhost_plugin", sys.modules["__main__"])
    sys.exit(_main(sys.argv))
