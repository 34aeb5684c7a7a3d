"""mini-swe-agent on envhost: an environment class whose commands run in
envhost's persistent bash.

Use it from a mini-swe-agent config:

    environment:
      environment_class: envhost.adapters.minisweagent.EnvhostEnvironment
      project: /path/to/repo        # default: the current directory
      timeout: 60
      env: {PAGER: cat}

or build it in Python: ``EnvhostEnvironment(project="repo")``. Unlike
mini-swe-agent's local environment, which starts a fresh subshell per
command, the working directory, variables and background jobs carry over
between commands (set ``fresh_subshell: true`` for the old behaviour).
The submission rule is mini-swe-agent's own: a command whose output
starts with ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` and exits 0 ends
the run with the rest of its output as the submission.

This module owns the translation between mini-swe-agent's environment
protocol and a `Session`; it must not know how the session reaches the
host.
"""

from __future__ import annotations

import os
import platform
import shlex
from typing import Any, Dict, List, Optional

from minisweagent.exceptions import Submitted
from minisweagent.utils.serialize import recursive_merge
from pydantic import BaseModel

from .._client import Session
from .._protocol import EnvhostError, HostDied
from ._shell import exit_code, quote_env

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class EnvhostEnvironmentConfig(BaseModel):
    project: str = ""
    """The project directory envhost serves (default: the current directory)."""
    cwd: str = ""
    """Where the shell starts (default: the project)."""
    env: Dict[str, str] = {}
    """Variables exported in the shell before the first command."""
    timeout: int = 30
    """Seconds a command may run before envhost interrupts it (the shell keeps its state)."""
    fresh_subshell: bool = False
    """Run each command as `cd CWD && ( COMMAND )`, as mini-swe-agent's local environment does."""
    command: Optional[List[str]] = None
    """A command that starts `envhost serve` elsewhere, e.g. ["docker", "exec", "-i", "box", "envhost", "serve"]."""
    environment: str = "bash"
    """The shell commands run in: "bash", or a named instance such as "bash:agent"."""
    options: Dict[str, Any] = {}
    """More `envhost serve` options, as `Session` takes them (e.g. {"python": "/usr/bin/python3"})."""


class EnvhostEnvironment:
    def __init__(self, *, config_class: type = EnvhostEnvironmentConfig, **kwargs: Any):
        self.config = config_class(**kwargs)
        self._session: Optional[Session] = None
        self._start()

    def _start(self) -> Session:
        project = self.config.project or (None if self.config.command else os.getcwd())
        session = Session(project=project, command=self.config.command, **self.config.options)
        setup = [quote_env(self.config.env)]
        if self.config.cwd:
            setup.append(f"cd {shlex.quote(self.config.cwd)}")
        setup_text = " && ".join(part for part in setup if part)
        if setup_text:
            result = session.run(self.config.environment, setup_text, timeout=self.config.timeout)
            if not result.success:
                session.close()
                raise EnvhostError(f"could not prepare the shell ({setup_text}): {result.output.strip()}")
        self._session = session
        return session

    def execute(self, action: Dict[str, Any], cwd: str = "", *, timeout: Optional[int] = None) -> Dict[str, Any]:
        """Runs the action's command; returns mini-swe-agent's result dict."""
        command = action.get("command", "")
        if cwd or self.config.fresh_subshell:
            where = cwd or self.config.cwd or self.config.project or os.getcwd()
            command = f"cd {shlex.quote(where)} && ( {command}\n)"
        notice = ""
        try:
            session = self._session
            if session is None:
                notice = "[envhost] The previous session had ended; this command ran in a fresh one.\n"
                session = self._start()
            result = session.run(self.config.environment, command, timeout=timeout or self.config.timeout)
        except HostDied as err:
            self._session = None
            output = {
                "output": "",
                "returncode": -1,
                "exception_info": f"The envhost session ended: {err}",
                "extra": {"exception_type": type(err).__name__, "exception": str(err)},
            }
            return output
        output = {"output": notice + result.output, "returncode": exit_code(result, self.config.environment), "exception_info": ""}
        self._check_finished(output)
        return output

    def _check_finished(self, output: Dict[str, Any]) -> None:
        lines = output.get("output", "").lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {"exit_status": "Submitted", "submission": submission},
                }
            )

    def get_template_vars(self, **kwargs: Any) -> Dict[str, Any]:
        merged: Dict[str, Any] = recursive_merge(self.config.model_dump(), platform.uname()._asdict(), dict(os.environ), kwargs)
        return merged

    def serialize(self) -> Dict[str, Any]:
        return {
            "info": {
                "config": {
                    "environment": self.config.model_dump(mode="json"),
                    "environment_type": f"{self.__class__.__module__}.{self.__class__.__name__}",
                }
            }
        }

    def close(self) -> None:
        """Ends the envhost session (and every process it started)."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
