"""The asyncio session: the same requests and answers as `Session`, over
an asyncio subprocess, for agent frameworks that run on an event loop.

Owns the process's lifetime and the one-answer-per-request exchange on
the event loop; request shapes and answer types live in `_protocol`.
"""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
from typing import IO, Any, Deque, Dict, List, Mapping, Optional, Sequence, Union

from . import _protocol as p
from ._binary import session_argv
from ._client import SHUTDOWN_GRACE_SECONDS, STDERR_TAIL_LINES

# One answer line holds at most 8 MiB of file content as base64 plus its
# JSON; the host never writes a line over 16 MiB.
_LINE_LIMIT = 32 * 1024 * 1024


class AsyncSession:
    """`Session` for asyncio: ``async with await AsyncSession.start(...)``
    or ``session = await AsyncSession.start(...)`` … ``await
    session.close()``. The arguments are `Session`'s."""

    def __init__(self, process: "asyncio.subprocess.Process", argv: List[str], reply_timeout: Optional[float]):
        self._process = process
        self.argv = argv
        self.reply_timeout = reply_timeout
        self._lock = asyncio.Lock()
        self._next_id = 1
        self._closed_because: Optional[p.EnvhostError] = None
        self._stderr: Deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

    @classmethod
    async def start(
        cls,
        project: Optional["os.PathLike[str] | str"] = None,
        command: Optional[Sequence[str]] = None,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional["os.PathLike[str] | str"] = None,
        reply_timeout: Optional[float] = None,
        **options: Any,
    ) -> "AsyncSession":
        argv = session_argv(project, command, options)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                limit=_LINE_LIMIT,
                start_new_session=True,
            )
        except OSError as err:
            raise p.HostDied(f"could not start {argv[0]!r}: {err}", returncode=None, stderr=[]) from None
        return cls(process, argv, reply_timeout)

    async def _drain_stderr(self) -> None:
        assert self._process.stderr is not None
        while True:
            raw = await self._process.stderr.readline()
            if not raw:
                return
            self._stderr.append(raw.decode("utf-8", errors="replace").rstrip("\r\n"))

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def closed(self) -> bool:
        return self._closed_because is not None

    def stderr_tail(self) -> List[str]:
        return list(self._stderr)

    async def _died(self, what: str) -> p.HostDied:
        try:
            returncode: Optional[int] = await asyncio.wait_for(self._process.wait(), 2.0)
        except asyncio.TimeoutError:
            returncode = None
        try:
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        except asyncio.TimeoutError:
            pass
        error = p.HostDied(f"envhost {what}", returncode=returncode, stderr=list(self._stderr))
        await self._close_with(error)
        return error

    async def _close_with(self, error: p.EnvhostError) -> None:
        if self._closed_because is None:
            self._closed_because = error
        await self._stop(2.0)

    async def _stop(self, grace: float) -> Optional[int]:
        stdin = self._process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        for signal_it in (None, self._process.terminate, self._process.kill):
            if signal_it is not None:
                try:
                    signal_it()
                except ProcessLookupError:
                    pass
            try:
                return await asyncio.wait_for(self._process.wait(), grace)
            except asyncio.TimeoutError:
                grace = 5.0
        return None

    async def _call(self, build: Any, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        async with self._lock:
            if self._closed_because is not None:
                raise self._closed_because
            message = build(self._next_id, *args, **kwargs)
            self._next_id += 1
            stdin = self._process.stdin
            stdout = self._process.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(p.encode(message))
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError, OSError):
                raise await self._died("is no longer reading requests") from None
            try:
                line = await asyncio.wait_for(stdout.readuntil(b"\n"), self.reply_timeout)
            except asyncio.IncompleteReadError as err:
                raise await self._died(
                    "ended before answering" if not err.partial else "ended in the middle of an answer"
                ) from None
            except asyncio.TimeoutError:
                timed_out = p.ReplyTimeout(f"envhost did not answer within {self.reply_timeout}s; the session was closed")
                await self._close_with(timed_out)
                raise timed_out from None
            except asyncio.LimitOverrunError:
                overlong = p.ProtocolViolation(f"envhost sent an answer longer than {_LINE_LIMIT} bytes; the session was closed")
                await self._close_with(overlong)
                raise overlong from None
            try:
                return p.decode(line[:-1], message)
            except p.LastWords as words:
                raise await self._died(f"stopped: {words.message}") from None
            except p.ProtocolViolation as error:
                await self._close_with(error)
                raise

    async def run(
        self,
        environment: str,
        command: str,
        *,
        timeout: Optional[float] = None,
        yield_after: Optional[float] = None,
    ) -> p.Result:
        return p.result_from(await self._call(p.command, environment, command, timeout, yield_after))

    async def wait(self, environment: str, *, timeout: Optional[float] = None) -> p.Result:
        return p.result_from(await self._call(p.wait, environment, timeout))

    async def input(self, environment: str, text: str, *, timeout: Optional[float] = None) -> p.Result:
        return p.result_from(await self._call(p.input_text, environment, text, timeout))

    async def interrupt(self, environment: str) -> p.Result:
        return p.result_from(await self._call(p.interrupt, environment))

    async def restart(self, environment: str) -> p.Result:
        return p.result_from(await self._call(p.restart, environment))

    async def close_instance(self, environment: str) -> p.Result:
        return p.result_from(await self._call(p.close, environment))

    async def screen(self) -> p.Screen:
        return p.screen_answer(await self._call(p.screen))

    async def read_file_chunk(
        self, path: "os.PathLike[str] | str", offset: int = 0, length: Optional[int] = None
    ) -> p.FileChunk:
        return p.file_chunk_from(await self._call(p.read_file, path, offset, length))

    async def read_file(self, path: "os.PathLike[str] | str", into: Optional[IO[bytes]] = None) -> Union[bytes, int]:
        reader = p.FileReader(path, into)
        while not reader.accept(await self.read_file_chunk(path, reader.offset)):
            pass
        return reader.result()

    async def write_file(
        self, path: "os.PathLike[str] | str", data: Union[bytes, bytearray, memoryview, IO[bytes]]
    ) -> p.FileWritten:
        written = None
        for content, append, more in p.write_plan(data):
            written = p.file_written_from(await self._call(p.write_file, path, content, append=append, more=more))
        assert written is not None
        return written

    async def close(self) -> Optional[int]:
        async with self._lock:
            returncode = await self._stop(SHUTDOWN_GRACE_SECONDS)
            if self._closed_because is None:
                self._closed_because = p.EnvhostError("the session is closed")
        try:
            await asyncio.wait_for(self._stderr_task, 1.0)
        except asyncio.TimeoutError:
            self._stderr_task.cancel()
        return returncode

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()
