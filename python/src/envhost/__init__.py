"""envhost for Python: the `envhost` binary (installed with this package)
and a client for it.

    import envhost

    with envhost.Session(project="repo") as session:
        result = session.run("bash", "ls && python3 -m pytest -q", timeout=300)
        print(result.output, result.success)
        print(result.screen["bash"].content)

`Session` starts `envhost serve` (or any command prefix that reaches one:
`docker exec -i`, `kubectl exec -i`, ...) and speaks its NDJSON protocol;
`AsyncSession` does the same on an asyncio event loop. Adapters for agent
frameworks live in `envhost.adapters` (optional extras: `envhost[mini]`,
`envhost[smolagents]`, `envhost[deepagents]`, `envhost[inspect]`).
"""

from ._aio import AsyncSession
from ._binary import find_binary
from ._client import Session
from ._protocol import (
    BinaryNotFound,
    EnvhostError,
    FileChunk,
    FileWritten,
    HostDied,
    ProducedFile,
    ProtocolViolation,
    ReplyTimeout,
    RequestRefused,
    Result,
    Screen,
    Section,
)

__all__ = [
    "AsyncSession",
    "BinaryNotFound",
    "EnvhostError",
    "FileChunk",
    "FileWritten",
    "HostDied",
    "ProducedFile",
    "ProtocolViolation",
    "ReplyTimeout",
    "RequestRefused",
    "Result",
    "Screen",
    "Section",
    "Session",
    "find_binary",
]
