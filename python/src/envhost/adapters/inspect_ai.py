"""inspect_ai on envhost: tools that give an inspect agent envhost's
persistent environments, one host per sample, kept for the whole sample
and shut down at its end.

    from inspect_ai import Task
    from envhost.adapters.inspect_ai import envhost_solver

    Task(dataset=dataset, solver=envhost_solver(), scorer=scorer)

or, around a solver or agent of your own:

    from inspect_ai.agent import react
    from envhost.adapters.inspect_ai import envhost_tools, with_envhost

    Task(dataset=dataset, solver=with_envhost(react(tools=envhost_tools())), scorer=scorer)

`with_envhost` starts one `envhost serve` for the sample before the
solver it wraps runs and closes it after, whatever happens (a limit, an
error, a cancellation); the tools find that sample's host, so `cd`,
variables and imports last from one call to the next and never cross
from one sample to another. Called outside `with_envhost` they raise
rather than start a host per call (the state would silently vanish
between calls, as it does with an MCP server used without
`mcp_connection`).

This module owns the host's lifetime per sample and how a command's
answer reads as a tool result. It must not know how the session reaches
the host (`command=` decides that) nor anything of the protocol beyond
`AsyncSession`.
"""

from __future__ import annotations

import contextvars
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import anyio
from inspect_ai.solver import Generate, Solver, TaskState, chain, generate, solver, use_tools
from inspect_ai.tool import Tool, ToolDef, ToolError

from .._aio import AsyncSession
from .._protocol import EnvhostError, Result, Screen

ProjectChoice = Union[None, "os.PathLike[str]", str, Callable[[TaskState], "os.PathLike[str] | str"]]
CommandChoice = Union[None, Sequence[str], Callable[[TaskState], Sequence[str]]]

# The environments every host has; plugins are named by the caller.
BUILT_IN = ("bash", "python", "editor")

_DESCRIPTIONS = {
    "bash": (
        "Runs a command in a persistent bash shell. The working directory, exported variables, "
        "functions and background jobs last from one call to the next for the whole task. The "
        "result is the command's output, then the screen: the sections of the environments that "
        "changed (the shell's working directory and last exit code, the interpreter's variables, "
        "the editor's views)."
    ),
    "python": (
        "Runs Python code in a persistent interpreter: variables, imports and functions last from "
        "one call to the next for the whole task. Multi-line code works, and the value of a "
        "trailing expression is shown as in a REPL; a traceback comes back in the result. The "
        "result is the output, then the sections of the screen that changed."
    ),
    "editor": (
        "A file editor: views of a file bounded by regular expressions, and edits by line number "
        "checked against what the view showed. The first line is the command (view, edit, search, "
        "create, close, next_match, prev_match), the lines after it the content of an edit or a "
        "new file. Its section of the screen, in the first result, lists the commands with "
        "examples."
    ),
}

_PLUGIN_DESCRIPTION = (
    "Runs one command in the {name} environment (an envhost plugin); its state lasts for the "
    "whole task. Its section of the screen, in the first result, says which commands it takes."
)


class _SampleHost:
    """The envhost session of one sample: started by `with_envhost`, used
    by the tools, closed at the sample's end. A host that dies is replaced
    on the next call, and that call's result says what was lost."""

    def __init__(self, project: Optional[str], command: Optional[Sequence[str]], options: Dict[str, Any]):
        self._project = project
        self._command = list(command) if command is not None else None
        self._options = options
        self._session: Optional[AsyncSession] = None
        self._lock = anyio.Lock()
        # What the model last saw of each section, to show only changes.
        self._seen: Dict[str, str] = {}
        self._lost: Optional[str] = None

    async def start(self) -> AsyncSession:
        session = await AsyncSession.start(project=self._project, command=self._command, **self._options)
        try:
            # Fails here, with the host's own words, when it cannot serve
            # (no binary, no project, a docker exec that cannot reach it).
            await session.screen()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await session.close()
            raise
        self._session = session
        return session

    @property
    def session(self) -> Optional[AsyncSession]:
        return self._session

    async def run(self, environment: str, command: str, timeout: Optional[int]) -> str:
        async with self._lock:
            session = self._session
            if session is None or session.closed:
                session = await self.start()
            try:
                result = await session.run(environment, command, timeout=timeout)
            except EnvhostError as error:
                # The session is closed (the host died or stopped
                # answering): the next call starts another.
                with anyio.CancelScope(shield=True):
                    await session.close()
                self._seen.clear()
                self._lost = str(error)
                raise ToolError(
                    f"The envhost session ended: {error}. The next call starts a fresh one: the "
                    "shells' and interpreters' state is lost; files in the project remain."
                ) from None
            return self._render(result)

    def _render(self, result: Result) -> str:
        parts: List[str] = []
        if self._lost is not None:
            parts.append(f"[envhost] This is a fresh session (the last one ended: {self._lost}); state from before it is gone.\n")
            self._lost = None
        if result.output:
            parts.append(result.output if result.output.endswith("\n") else result.output + "\n")
        parts.append(self._changes(result.screen))
        return "\n".join(parts).rstrip()

    def _changes(self, screen: Screen) -> str:
        blocks, unchanged = [], []
        for name, section in screen.items():
            if self._seen.get(name) == section.content:
                unchanged.append(name)
            else:
                blocks.append(f"=== {name} ===\n{section.content}")
        if unchanged:
            blocks.append(f"(unchanged: {', '.join(unchanged)})")
        self._seen = {name: section.content for name, section in screen.items()}
        return "\n\n".join(blocks)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            # The sample may be ending because it was cancelled: the host
            # is still stopped and waited for.
            with anyio.CancelScope(shield=True):
                await session.close()


_current: "contextvars.ContextVar[Optional[_SampleHost]]" = contextvars.ContextVar("envhost_sample_host", default=None)


def _sample_host() -> _SampleHost:
    host = _current.get()
    if host is None:
        raise RuntimeError(
            "envhost's inspect tools need the sample's host: run the solver or agent that uses them "
            "inside with_envhost(...) (or use envhost_solver()). Without it every call would start a "
            "fresh host and the agent's cd, variables and imports would vanish between calls."
        )
    return host


def current_session() -> AsyncSession:
    """The running sample's envhost session (inside `with_envhost`), for
    solvers and tools of your own. Raises `RuntimeError` outside one, or
    before the host started."""
    session = _sample_host().session
    if session is None:
        raise RuntimeError("the sample's envhost session is not running")
    return session


def _environment_tool(environment: str) -> Tool:
    async def execute(command: str, timeout: Optional[int] = None) -> str:
        return await _sample_host().run(environment, command, timeout)

    kind, _, instance = environment.partition(":")
    description = _DESCRIPTIONS.get(kind, _PLUGIN_DESCRIPTION.format(name=kind))
    if instance:
        description = f"{description} This is the instance {environment}: its own state, apart from {kind}'s."
    return ToolDef(
        execute,
        # A tool name cannot hold ':': the instance bash:server is the tool bash_server.
        name=environment.replace(":", "_"),
        description=description,
        parameters={
            "command": "The command (for python, the code) to run.",
            "timeout": "Seconds after which the command is interrupted; the environment keeps its "
            "state. Default: the host's.",
        },
        parallel=False,
    ).as_tool()


def envhost_tools(environments: Sequence[str] = BUILT_IN) -> List[Tool]:
    """One tool per environment, named after it (`bash`, `python`,
    `editor`, and any plugin of the project you name; a named instance
    such as `bash:server` is the tool `bash_server`), each taking a
    `command` and an optional `timeout` in seconds. They run in the
    sample's host, so they work only inside `with_envhost`."""
    if isinstance(environments, str):
        raise TypeError("environments is a list of names, e.g. ['bash', 'python']")
    return [_environment_tool(name) for name in environments]


def _chosen(value: Any, state: TaskState) -> Any:
    return value(state) if callable(value) else value


@solver
def with_envhost(
    inner: Union[Solver, Sequence[Solver], Any],
    project: ProjectChoice = None,
    command: CommandChoice = None,
    **options: Any,
) -> Solver:
    """Runs `inner` (a solver, an agent, or a list of them) with one envhost
    host for the sample, shut down when `inner` returns or fails.

    `project`: the project directory, or a function of the sample's
    `TaskState` returning it; by default a fresh temporary directory per
    sample, removed at its end. `command`: a command prefix that reaches
    `envhost serve` elsewhere (`["docker", "exec", "-i", "box", "envhost",
    "serve"]`), or a function of the `TaskState` returning one; `project`
    is then a path on that side, passed only when given. Other keyword
    options are `envhost.Session`'s (`timeout=`, `python=`, `pass_env=`,
    `reply_timeout=`, ...)."""
    wrapped = chain(inner)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        chosen_command = _chosen(command, state)
        chosen_project = _chosen(project, state)
        scratch = None
        if chosen_project is None and chosen_command is None:
            scratch = tempfile.mkdtemp(prefix="envhost-inspect-")
            chosen_project = scratch
        host = _SampleHost(
            os.fspath(chosen_project) if chosen_project is not None else None,
            chosen_command,
            dict(options),
        )
        try:
            await host.start()
            token = _current.set(host)
            try:
                return await wrapped(state, generate)
            finally:
                _current.reset(token)
        finally:
            await host.close()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    return solve


@solver
def envhost_solver(
    project: ProjectChoice = None,
    command: CommandChoice = None,
    environments: Sequence[str] = BUILT_IN,
    **options: Any,
) -> Solver:
    """The ready one: the envhost tools, then inspect's `generate()` loop
    (the model calls tools until it answers without one), in one host per
    sample. Arguments as `with_envhost` and `envhost_tools`."""
    return with_envhost(
        [use_tools(envhost_tools(environments)), generate()],
        project=project,
        command=command,
        **options,
    )
