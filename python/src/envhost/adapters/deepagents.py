"""LangChain deepagents on envhost: a sandbox backend whose commands run
in envhost's persistent bash and whose files move through envhost's
binary-safe file messages.

    from deepagents import create_deep_agent
    from envhost.adapters.deepagents import EnvhostSandbox

    agent = create_deep_agent(model=model, backend=EnvhostSandbox(project="/work/repo"))

deepagents' file tools (`read_file`, `write_file`, `edit_file`, `ls`,
`glob`, `grep`) work through `BaseSandbox`'s defaults on top of
`execute`, `upload_files` and `download_files`. Paths are absolute paths
inside the project (or relative to it); others are refused unless the
session runs with ``allow_outside_project=True``.

This module owns the translation between deepagents' sandbox protocol and
a `Session`; it must not know how the session reaches the host.
"""

from __future__ import annotations

import secrets
from typing import Any, Dict, List, Optional, Sequence, Tuple

from deepagents.backends.protocol import (
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    PERMISSION_DENIED,
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
)
from deepagents.backends.sandbox import BaseSandbox

from .._client import Session
from .._protocol import HostDied, RequestRefused
from ._shell import exit_code, was_cut

# envhost's one-word reasons for a refused file request, as deepagents'
# standard error codes.
_REASONS: Dict[str, str] = {
    "not_found": FILE_NOT_FOUND,
    "is_directory": IS_DIRECTORY,
    "permission_denied": PERMISSION_DENIED,
    "outside_project": INVALID_PATH,
    "invalid_path": INVALID_PATH,
}


def _file_error(error: RequestRefused) -> str:
    return _REASONS.get(error.reason or "", error.message)


class EnvhostSandbox(BaseSandbox):
    """A deepagents sandbox backed by one envhost session.

    Give it a running `session`, or `project` / `command` / options to
    start one (the sandbox then owns it; `close()` ends it).
    """

    def __init__(
        self,
        *,
        session: Optional[Session] = None,
        project: Any = None,
        command: Optional[Sequence[str]] = None,
        sandbox_id: Optional[str] = None,
        environment: str = "bash",
        **options: Any,
    ):
        self._owns_session = session is None
        self.session = session if session is not None else Session(project=project, command=command, **options)
        self._id = sandbox_id or f"envhost-{secrets.token_hex(6)}"
        # "bash", or a named instance ("bash:sandbox") beside the agent's own.
        self.environment = environment

    @property
    def id(self) -> str:
        return self._id

    def execute(self, command: str, *, timeout: Optional[int] = None) -> ExecuteResponse:
        try:
            result = self.session.run(self.environment, command, timeout=timeout)
        except HostDied as error:
            return ExecuteResponse(output=f"The envhost session ended: {error}", exit_code=None)
        return ExecuteResponse(output=result.output, exit_code=exit_code(result, self.environment), truncated=was_cut(result))

    def upload_files(self, files: List[Tuple[str, bytes]]) -> List[FileUploadResponse]:
        responses = []
        for path, content in files:
            try:
                self.session.write_file(path, content)
                responses.append(FileUploadResponse(path=path, error=None))
            except RequestRefused as error:
                responses.append(FileUploadResponse(path=path, error=_file_error(error)))
        return responses

    def download_files(self, paths: List[str]) -> List[FileDownloadResponse]:
        responses = []
        for path in paths:
            try:
                content = self.session.read_file(path)
                assert isinstance(content, bytes)
                responses.append(FileDownloadResponse(path=path, content=content, error=None))
            except RequestRefused as error:
                responses.append(FileDownloadResponse(path=path, content=None, error=_file_error(error)))
        return responses

    def close(self) -> None:
        if self._owns_session:
            self.session.close()
