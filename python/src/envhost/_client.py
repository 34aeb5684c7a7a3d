"""The synchronous session: one `envhost serve` process (or a command
prefix that reaches one, e.g. `kubectl exec -i`) driven over its pipes.

Owns the process's lifetime, the strict one-answer-per-request exchange,
bounded reading of long answer lines and the tail of the host's stderr
for error messages. Request shapes and answer types live in `_protocol`.
"""

from __future__ import annotations

import collections
import os
import selectors
import subprocess
import threading
import time
import weakref
from typing import IO, Any, Deque, Dict, List, Mapping, Optional, Sequence, Union

from . import _protocol as p
from ._binary import session_argv

# How many of the host's last stderr lines an error message quotes.
STDERR_TAIL_LINES = 20
# Time the host gets to shut down after end of input before it is
# signalled; it ends every process it started first.
SHUTDOWN_GRACE_SECONDS = 10.0
_READ_CHUNK = 1 << 20


class StderrTail:
    """Drains a stream in a thread, keeping its last lines: a host whose
    stderr is never read could block on a full pipe."""

    def __init__(self, stream: IO[bytes]):
        self._lines: Deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, args=(stream,), name="envhost-stderr", daemon=True)
        self._thread.start()

    def _drain(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                with self._lock:
                    self._lines.append(line)

    def lines(self, settle: float = 0.0) -> List[str]:
        """The last lines; `settle` waits up to that long for the stream
        to end, so the host's final words are included."""
        if settle:
            self._thread.join(settle)
        with self._lock:
            return list(self._lines)


def _stop(process: "subprocess.Popen[bytes]", grace: float) -> Optional[int]:
    """End of input, then SIGTERM, then SIGKILL: the host shuts every
    environment down on any of them."""
    try:
        if process.stdin and not process.stdin.closed:
            process.stdin.close()
    except OSError:
        pass
    returncode = None
    for signal_it in (None, process.terminate, process.kill):
        if signal_it is not None:
            try:
                signal_it()
            except OSError:
                pass
        try:
            returncode = process.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            grace = 5.0
    if process.stdout is not None:
        process.stdout.close()
    return returncode


class Session:
    """A session with envhost: persistent bash, python, editor and plugin
    environments, and the screen after every command.

    ``Session(project="repo")`` starts the envhost binary that came with
    this package (or $ENVHOST_BIN) as ``envhost serve --project repo``.
    ``command=[...]`` starts that command instead, e.g. ``["kubectl",
    "exec", "-i", "pod", "--", "envhost", "serve"]``; keyword options
    become flags (``timeout=90`` → ``--timeout 90000ms``, ``python=PATH``,
    ``pass_env=[...]``, ``allow_outside_project=True``, ...).

    `reply_timeout` (seconds) bounds the wait for any one answer; by
    default the client trusts the host's own timeouts. Use the session as
    a context manager, or call `close()`: the host then ends every process
    it started.
    """

    def __init__(
        self,
        project: Optional["os.PathLike[str] | str"] = None,
        command: Optional[Sequence[str]] = None,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional["os.PathLike[str] | str"] = None,
        reply_timeout: Optional[float] = None,
        **options: Any,
    ):
        self.argv = session_argv(project, command, options)
        self.reply_timeout = reply_timeout
        self._lock = threading.Lock()
        self._next_id = 1
        self._buffer = bytearray()
        # Where the search for the next newline resumes: an 11 MB answer
        # arrives in 64 KiB pieces and is scanned once, not once per piece.
        self._scan_from = 0
        self._closed_because: Optional[p.EnvhostError] = None
        try:
            self._process = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                # A Ctrl-C meant for the Python program must not reach the
                # host directly: the session is ended by close().
                start_new_session=True,
            )
        except OSError as err:
            raise p.HostDied(f"could not start {self.argv[0]!r}: {err}", returncode=None, stderr=[]) from None
        assert self._process.stdin and self._process.stdout and self._process.stderr
        self._stdin = self._process.stdin
        self._stdout_fd = self._process.stdout.fileno()
        self._stderr = StderrTail(self._process.stderr)
        self._finalizer = weakref.finalize(self, _stop, self._process, 2.0)

    # -- the exchange -------------------------------------------------

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def closed(self) -> bool:
        return self._closed_because is not None

    def stderr_tail(self) -> List[str]:
        """The last lines the host wrote on stderr (run with verbose=True
        to have it narrate the session there)."""
        return self._stderr.lines()

    def _died(self, what: str) -> p.HostDied:
        try:
            returncode: Optional[int] = self._process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            returncode = None
        error = p.HostDied(f"envhost {what}", returncode=returncode, stderr=self._stderr.lines(settle=1.0))
        self._close_with(error)
        return error

    def _close_with(self, error: p.EnvhostError) -> None:
        if self._closed_because is None:
            self._closed_because = error
        self._finalizer()

    def _read_line(self, deadline: Optional[float]) -> bytes:
        with selectors.DefaultSelector() as selector:
            selector.register(self._stdout_fd, selectors.EVENT_READ)
            while True:
                newline = self._buffer.find(b"\n", self._scan_from)
                if newline >= 0:
                    line = bytes(self._buffer[:newline])
                    del self._buffer[: newline + 1]
                    self._scan_from = 0
                    return line
                self._scan_from = len(self._buffer)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    error = p.ReplyTimeout(
                        f"envhost did not answer within {self.reply_timeout}s; the session was closed"
                    )
                    self._close_with(error)
                    raise error
                if not selector.select(remaining):
                    continue
                chunk = os.read(self._stdout_fd, _READ_CHUNK)
                if not chunk:
                    raise self._died("ended before answering" if not self._buffer else "ended in the middle of an answer")
                self._buffer += chunk

    def _call(self, build: Any, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        with self._lock:
            if self._closed_because is not None:
                raise self._closed_because
            message = build(self._next_id, *args, **kwargs)
            self._next_id += 1
            try:
                self._stdin.write(p.encode(message))
                self._stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                raise self._died("is no longer reading requests") from None
            deadline = None if self.reply_timeout is None else time.monotonic() + self.reply_timeout
            line = self._read_line(deadline)
            try:
                return p.decode(line, message)
            except p.LastWords as words:
                raise self._died(f"stopped: {words.message}") from None
            except p.ProtocolViolation as error:
                self._close_with(error)
                raise

    # -- requests -------------------------------------------------------

    def run(
        self,
        environment: str,
        command: str,
        *,
        timeout: Optional[float] = None,
        yield_after: Optional[float] = None,
    ) -> p.Result:
        """Runs `command` in `environment` ("bash", "python", "editor" or a
        plugin). `timeout` (seconds) interrupts it; `yield_after` (seconds)
        answers while it still runs (`result.running`), to be continued
        with `wait`, `input` or `interrupt`."""
        return p.result_from(self._call(p.command, environment, command, timeout, yield_after))

    def wait(self, environment: str, *, timeout: Optional[float] = None) -> p.Result:
        """The output of the running command since the last answer, once it
        ends or after `timeout` seconds (the host's default: 10 s)."""
        return p.result_from(self._call(p.wait, environment, timeout))

    def input(self, environment: str, text: str, *, timeout: Optional[float] = None) -> p.Result:
        """Types `text` into the running command ("\\x03" is Ctrl-C, "\\x04"
        Ctrl-D), then answers as `wait` does (default timeout 1 s)."""
        return p.result_from(self._call(p.input_text, environment, text, timeout))

    def interrupt(self, environment: str) -> p.Result:
        """Stops the running command as a timeout would; the environment
        keeps its state."""
        return p.result_from(self._call(p.interrupt, environment))

    def restart(self, environment: str) -> p.Result:
        """Ends the environment and starts a fresh one; the output says what
        was lost."""
        return p.result_from(self._call(p.restart, environment))

    def close_instance(self, environment: str) -> p.Result:
        """Ends the named instance `environment` ("bash:server", opened by
        its first `run`) and everything it runs, and removes its screen
        section; the output says what was ended. The default instances
        ("bash", "python") cannot be closed: `restart` them."""
        return p.result_from(self._call(p.close, environment))

    def screen(self) -> p.Screen:
        """The current screen, without running anything."""
        return p.screen_answer(self._call(p.screen))

    def read_file_chunk(
        self, path: "os.PathLike[str] | str", offset: int = 0, length: Optional[int] = None
    ) -> p.FileChunk:
        """Up to `length` bytes of a project file from `offset`."""
        return p.file_chunk_from(self._call(p.read_file, path, offset, length))

    def read_file(self, path: "os.PathLike[str] | str", into: Optional[IO[bytes]] = None) -> Union[bytes, int]:
        """A project file's bytes (any content: it travels as base64). With
        `into`, the bytes are written to that binary file object chunk by
        chunk (bounded memory) and the size is returned."""
        reader = p.FileReader(path, into)
        while not reader.accept(self.read_file_chunk(path, reader.offset)):
            pass
        return reader.result()

    def write_file(self, path: "os.PathLike[str] | str", data: Union[bytes, bytearray, memoryview, IO[bytes]]) -> p.FileWritten:
        """Writes a project file (parent folders are created). The new
        content appears all at once: until the last chunk arrives the
        host keeps it aside. `data` may be bytes or a binary file object
        (read chunk by chunk, in bounded memory)."""
        written = None
        for content, append, more in p.write_plan(data):
            written = p.file_written_from(self._call(p.write_file, path, content, append=append, more=more))
        assert written is not None
        return written

    # -- lifetime -------------------------------------------------------

    def close(self) -> Optional[int]:
        """Ends the session: the host shuts every environment down and ends
        every process it started. Returns the host's exit status (0 after
        a clean shutdown)."""
        with self._lock:
            returncode = _stop(self._process, SHUTDOWN_GRACE_SECONDS)
            self._finalizer.detach()
            if self._closed_because is None:
                self._closed_because = p.EnvhostError("the session is closed")
            return returncode

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
