"""envhost's NDJSON protocol as Python values.

This module owns the shape of every request the client sends and the
typed values made from every answer. It knows nothing about processes,
pipes or event loops: the synchronous and asyncio sessions both build
their lines here and hand the answers back here.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
from dataclasses import dataclass, field
from typing import IO, Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

# The host's line cap is 16 MiB and it sends at most 8 MiB of file content
# per line (11 MiB of base64): chunks stay well under the cap.
FILE_CHUNK_BYTES = 8 * 1024 * 1024


class EnvhostError(Exception):
    """Base class of every error this package raises."""


class BinaryNotFound(EnvhostError):
    """No `envhost` binary could be found to start."""


class HostDied(EnvhostError):
    """The host process ended, or its stream closed, before answering.

    `stderr` holds the last lines the host (or the command prefix, e.g.
    `kubectl`) wrote on stderr; `returncode` is its exit status when known.
    """

    def __init__(self, message: str, *, returncode: Optional[int], stderr: List[str]):
        self.returncode = returncode
        self.stderr = list(stderr)
        text = message
        if returncode is not None:
            text += f" (exit status {returncode})"
        if self.stderr:
            text += "\nlast lines on its stderr:\n  " + "\n  ".join(self.stderr)
        else:
            text += "; it wrote nothing on stderr"
        super().__init__(text)


class RequestRefused(EnvhostError):
    """The host answered a request with an `error` line: the request was
    malformed, or (for file messages) the file cannot be read or written.
    The session is still usable."""

    def __init__(self, message: str, *, request_type: str, reason: Optional[str] = None):
        self.message = message
        self.request_type = request_type
        # File messages say why in one word as well: "not_found",
        # "is_directory", "permission_denied", "outside_project",
        # "invalid_path", "too_large", "io".
        self.reason = reason
        super().__init__(f"envhost refused the {request_type} request: {message}")


class ReplyTimeout(EnvhostError):
    """No answer came within the session's `reply_timeout`. The host was
    stopped: with one answer missing, later answers could not be paired
    with their requests."""


class ProtocolViolation(EnvhostError):
    """The host sent something that is not an answer to the request (not
    JSON, another id, an unexpected type). The session was closed."""


@dataclass(frozen=True)
class Section:
    """One environment's part of the screen."""

    content: str
    max_lines: int


@dataclass(frozen=True)
class Screen(Mapping[str, Section]):
    """Every environment's section, in the host's order (bash, python,
    editor, then plugins by name)."""

    sections: Dict[str, Section] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Section:
        return self.sections[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.sections)

    def __len__(self) -> int:
        return len(self.sections)

    def text(self) -> str:
        """The whole screen as plain text, one titled block per section."""
        return "\n\n".join(f"=== {name} ===\n{section.content}" for name, section in self.sections.items())


@dataclass(frozen=True)
class ProducedFile:
    """A file the command created or changed inside the project: `path`
    relative to the project (absolute for an editor write outside it under
    `allow_outside_project`), its `size` in bytes when the host looked, and
    a `media_type` guessed from the name."""

    path: str
    size: int
    media_type: str


@dataclass(frozen=True)
class Result:
    """The answer to `run`, `wait`, `input`, `interrupt` and `restart`.

    `running` is true when the command was still running when the host
    answered (it yielded): call `wait`, `input` or `interrupt` next.
    `files` lists the files the command created or changed (saved output,
    figures, editor writes, files in the folders the host looked at); it is
    empty when there are none.
    """

    output: str
    success: bool
    running: bool
    screen: Screen
    files: Tuple[ProducedFile, ...]
    raw: Dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class FileChunk:
    """One `file` answer: `content` is the bytes from `offset`; `size` is
    the whole file's size when the chunk was read."""

    path: str
    size: int
    offset: int
    content: bytes
    eof: bool


@dataclass(frozen=True)
class FileWritten:
    """One `file_written` answer: `size` is the bytes written so far;
    `complete` is true once the file is in place."""

    path: str
    size: int
    complete: bool


def milliseconds(seconds: Optional[float], what: str) -> Optional[int]:
    """Seconds (as the Python API takes them) to the protocol's positive
    integer milliseconds."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {seconds!r}")
    return max(1, round(seconds * 1000))


def request(kind: str, request_id: int, **fields: Any) -> Dict[str, Any]:
    """A request object; fields that are None are left out (they are all
    optional on the wire)."""
    message: Dict[str, Any] = {"type": kind, "id": request_id}
    message.update({name: value for name, value in fields.items() if value is not None})
    return message


# One builder per request type, so that field names live in one place.
# Durations are seconds here and milliseconds on the wire.


def command(request_id: int, environment: str, text: str, timeout: Optional[float], yield_after: Optional[float]) -> Dict[str, Any]:
    return request(
        "command",
        request_id,
        environment=environment,
        command=text,
        timeout_ms=milliseconds(timeout, "timeout"),
        yield_ms=milliseconds(yield_after, "yield_after"),
    )


def wait(request_id: int, environment: str, timeout: Optional[float]) -> Dict[str, Any]:
    return request("wait", request_id, environment=environment, timeout_ms=milliseconds(timeout, "timeout"))


def input_text(request_id: int, environment: str, text: str, timeout: Optional[float]) -> Dict[str, Any]:
    return request("input", request_id, environment=environment, text=text, timeout_ms=milliseconds(timeout, "timeout"))


def interrupt(request_id: int, environment: str) -> Dict[str, Any]:
    return request("interrupt", request_id, environment=environment)


def restart(request_id: int, environment: str) -> Dict[str, Any]:
    return request("restart", request_id, environment=environment)


def close(request_id: int, environment: str) -> Dict[str, Any]:
    return request("close", request_id, environment=environment)


def screen(request_id: int) -> Dict[str, Any]:
    return request("screen", request_id)


def read_file(request_id: int, path: "os.PathLike[str] | str", offset: int, length: Optional[int]) -> Dict[str, Any]:
    return request("read_file", request_id, path=os.fspath(path), offset=offset, length=length)


def write_file(request_id: int, path: "os.PathLike[str] | str", content: bytes, *, append: bool, more: bool) -> Dict[str, Any]:
    return request(
        "write_file",
        request_id,
        path=os.fspath(path),
        content_base64=base64.b64encode(content).decode("ascii"),
        # Only sent when true: a plain one-chunk write is the short form.
        append=True if append else None,
        more=True if more else None,
    )


def encode(message: Mapping[str, Any]) -> bytes:
    # ensure_ascii keeps every line pure ASCII: no encoding surprises
    # through `docker exec` / `kubectl exec` streams.
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


class LastWords(Exception):
    """Internal: the host answered with an `error` line that names no
    request: its last words before it stops (it cannot serve, or a signal
    or an internal error ends it). The session turns it into HostDied."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def decode(line: bytes, sent: Mapping[str, Any]) -> Dict[str, Any]:
    """Parses one answer line and checks it answers `sent`; raises
    RequestRefused for an `error` answer, LastWords for an `error` line
    that names no request (every request this client sends has an id, and
    the host echoes it whenever it could read one)."""
    try:
        reply = json.loads(line)
    except ValueError as err:
        raise ProtocolViolation(f"envhost answered with a line that is not JSON ({err}): {line[:200]!r}") from None
    if not isinstance(reply, dict):
        raise ProtocolViolation(f"envhost answered with {type(reply).__name__}, not an object: {line[:200]!r}")
    # The host echoes the id whenever it could read one; a missing id on
    # an error line is still this request's answer (one line per line).
    if "id" in reply and reply["id"] != sent["id"]:
        raise ProtocolViolation(
            f"envhost answered request {reply['id']!r} while request {sent['id']!r} was waiting; "
            "the session is out of step and was closed"
        )
    if reply.get("type") == "error" and "id" not in reply:
        raise LastWords(str(reply.get("message", "(no message)")))
    if reply.get("type") == "error":
        reason = reply.get("reason")
        raise RequestRefused(
            str(reply.get("message", "(no message)")),
            request_type=str(sent["type"]),
            reason=reason if isinstance(reason, str) else None,
        )
    return reply


def screen_from(value: Any) -> Screen:
    sections: Dict[str, Section] = {}
    if isinstance(value, dict):
        for name, section in value.items():
            if isinstance(section, dict):
                sections[name] = Section(
                    content=str(section.get("content", "")),
                    max_lines=int(section.get("max_lines", 0)),
                )
    return Screen(sections)


def expect(reply: Dict[str, Any], kind: str) -> None:
    if reply.get("type") != kind:
        raise ProtocolViolation(f"expected a {kind!r} answer, got {reply.get('type')!r}: {str(reply)[:200]}")


def result_from(reply: Dict[str, Any]) -> Result:
    expect(reply, "response")
    response = reply.get("response")
    if not isinstance(response, dict):
        raise ProtocolViolation(f"a response without its 'response' object: {str(reply)[:200]}")
    return Result(
        output=str(response.get("output", "")),
        success=bool(response.get("success", False)),
        # Present (and true) only while the command runs.
        running=bool(response.get("running", False)),
        screen=screen_from(reply.get("screen")),
        files=files_from(response.get("files")),
        raw=reply,
    )


def files_from(value: Any) -> Tuple[ProducedFile, ...]:
    """The response's `files` (absent when there are none)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ProtocolViolation(f"'files' is not a list: {str(value)[:200]}")
    files = []
    for entry in value:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("path"), str)
            or isinstance(entry.get("size"), bool)
            or not isinstance(entry.get("size"), int)
            or not isinstance(entry.get("media_type"), str)
        ):
            raise ProtocolViolation(f"a 'files' entry without path, size and media_type: {str(entry)[:200]}")
        files.append(ProducedFile(path=entry["path"], size=entry["size"], media_type=entry["media_type"]))
    return tuple(files)


def file_chunk_from(reply: Dict[str, Any]) -> FileChunk:
    expect(reply, "file")
    try:
        content = base64.b64decode(reply.get("content_base64", ""), validate=True)
    except (binascii.Error, ValueError) as err:
        raise ProtocolViolation(f"a file answer whose content is not base64: {err}") from None
    return FileChunk(
        path=str(reply.get("path", "")),
        size=int(reply.get("size", 0)),
        offset=int(reply.get("offset", 0)),
        content=content,
        eof=bool(reply.get("eof", False)),
    )


def file_written_from(reply: Dict[str, Any]) -> FileWritten:
    expect(reply, "file_written")
    return FileWritten(
        path=str(reply.get("path", "")),
        size=int(reply.get("size", 0)),
        complete=bool(reply.get("complete", True)),
    )


def screen_answer(reply: Dict[str, Any]) -> Screen:
    expect(reply, "screen")
    return screen_from(reply.get("screen"))


class Collect:
    """A binary sink that keeps what it is given."""

    def __init__(self) -> None:
        self._data = bytearray()

    def write(self, data: bytes) -> None:
        self._data += data

    def value(self) -> bytes:
        return bytes(self._data)


def chunks_of(data: Union[bytes, bytearray, memoryview, IO[bytes]]) -> Iterator[bytes]:
    """At least one chunk (an empty file is one empty chunk)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        yield bytes(view[: FILE_CHUNK_BYTES])
        for start in range(FILE_CHUNK_BYTES, len(view), FILE_CHUNK_BYTES):
            yield bytes(view[start : start + FILE_CHUNK_BYTES])
        return
    first = data.read(FILE_CHUNK_BYTES)
    yield first
    while True:
        chunk = data.read(FILE_CHUNK_BYTES)
        if not chunk:
            return
        yield chunk


def write_plan(data: Union[bytes, bytearray, memoryview, IO[bytes]]) -> Iterator["tuple[bytes, bool, bool]"]:
    """(content, append, more) for each `write_file` request of one file."""
    chunks = chunks_of(data)
    current = next(chunks)
    append = False
    while True:
        following = next(chunks, None)
        yield current, append, following is not None
        if following is None:
            return
        current, append = following, True


class FileReader:
    """Puts a file's chunks together in order, into `into` (a binary file
    object) or into memory, and notices a file that changes under it."""

    def __init__(self, path: "os.PathLike[str] | str", into: Optional[IO[bytes]]):
        self.path = os.fspath(path)
        self.offset = 0
        self._size: Optional[int] = None
        self._into = into
        self._memory = Collect() if into is None else None

    def accept(self, chunk: FileChunk) -> bool:
        """Takes the next chunk; true when the file is complete."""
        if self._size is not None and chunk.size != self._size:
            raise EnvhostError(
                f"{self.path} changed while it was being read ({self._size} then {chunk.size} bytes); read it again"
            )
        self._size = chunk.size
        (self._into or self._memory).write(chunk.content)  # type: ignore[union-attr]
        self.offset += len(chunk.content)
        return chunk.eof or not chunk.content

    def result(self) -> "bytes | int":
        return self._memory.value() if self._memory is not None else self.offset
