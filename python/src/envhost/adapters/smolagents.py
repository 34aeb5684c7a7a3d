"""smolagents on envhost: a remote Python executor whose code runs in
envhost's persistent python environment.

    from smolagents import CodeAgent
    from envhost.adapters.smolagents import EnvhostExecutor

    agent = CodeAgent(tools=[], model=model, executor=EnvhostExecutor(project="work"))

Variables, imports and functions persist between steps (and show on
envhost's screen); `final_answer(...)` ends the run with its value;
printed output comes back as the step's logs; an exception comes back as
an `AgentError` carrying the traceback of the agent's own code.

This module owns the translation between smolagents' executor interface
and envhost's python environment. It must not know how the session
reaches the host.
"""

from __future__ import annotations

import ast
import base64
import json
import secrets
from typing import Any, List, Optional, Sequence

from smolagents.local_python_executor import CodeOutput
from smolagents.monitoring import AgentLogger, LogLevel
from smolagents.remote_executors import RemotePythonExecutor
from smolagents.utils import AgentError

from .._client import Session

# pip names whose import name differs (smolagents turns "PIL" into "pillow").
_IMPORT_NAMES = {"pillow": "PIL"}

# Defined once in the python environment. A leading underscore keeps it
# off envhost's screen. It runs the step's code in the interpreter's own
# namespace (so variables persist), evaluates a trailing expression for
# the step's output, and reports how the step ended on a line that starts
# with a per-step random marker, after everything the code printed.
_RUNNER = r'''
def _envhost_smolagents_run(source_b64, marker):
    import ast, base64, json, sys, traceback
    namespace = globals()
    source = base64.b64decode(source_b64).decode("utf-8")
    outcome = {"kind": "value", "value": None}
    try:
        tree = ast.parse(source, "<code>")
        trailing = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            trailing = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<code>", "exec"), namespace)
        if trailing is not None:
            value = eval(compile(trailing, "<code>", "eval"), namespace)
            outcome["value"] = None if value is None else repr(value)
    except BaseException as error:
        if type(error).__name__ == "FinalAnswerException":
            outcome = {"kind": "final", "value": error.value}
        elif isinstance(error, Exception):
            frames = traceback.extract_tb(error.__traceback__)
            # Only the agent's own frames (and what they called), not this runner's.
            while frames and frames[0].filename != "<code>":
                frames.pop(0)
            text = "".join(traceback.format_exception_only(type(error), error))
            if frames:
                text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) + text
            outcome = {"kind": "error", "type": type(error).__name__, "value": text}
        else:
            raise
    sys.stdout.flush()
    sys.stderr.flush()
    print("\n" + marker + " " + json.dumps(outcome), flush=True)
'''


class EnvhostExecutor(RemotePythonExecutor):
    """A smolagents executor backed by envhost's python environment.

    Give it a running `session`, or `project` / `command` / options to
    start one (the executor then owns it and ends it in `cleanup`). The
    interpreter is envhost's `--python` (``python="/path/to/python"``) or
    `python3` on the host's PATH.

    Like smolagents' other remote executors, it installs what the agent
    needs into that interpreter: `additional_imports` and the tools'
    requirements (smolagents' own `final_answer` code imports numpy and
    PIL), with pip, and only those the interpreter cannot import yet.
    ``pip_install=False`` never installs anything.

    `timeout` (seconds) bounds each step of the agent's code; the
    executor's own setup (the interpreter's start, the package probe,
    installs) runs under the session's timeout instead.
    """

    def __init__(
        self,
        additional_imports: Sequence[str] = (),
        logger: Optional[AgentLogger] = None,
        *,
        session: Optional[Session] = None,
        project: Any = None,
        command: Optional[Sequence[str]] = None,
        allow_pickle: bool = False,
        timeout: Optional[float] = None,
        pip_install: bool = True,
        environment: str = "python",
        **options: Any,
    ):
        super().__init__(list(additional_imports), logger or AgentLogger(level=LogLevel.INFO), allow_pickle=allow_pickle)
        self._owns_session = session is None
        self.session = session if session is not None else Session(project=project, command=command, **options)
        self.timeout = timeout
        self.pip_install = pip_install
        # "python", or a named instance ("python:agent") apart from the default.
        self.environment = environment
        self._ready = False
        self.installed_packages = self.install_packages(list(additional_imports))

    def _prepare(self) -> None:
        if self._ready:
            return
        # Setup, not a step of the agent's: the first command starts the
        # interpreter, which can take longer than a short step timeout on a
        # loaded machine, so it runs under the session's own timeout.
        result = self.session.run(self.environment, _RUNNER)
        if not result.success:
            raise AgentError(f"could not prepare envhost's python environment:\n{result.output}", self.logger)
        self._ready = True

    def run_code_raise_errors(self, code: str) -> CodeOutput:
        self._prepare()
        marker = "envhost-smolagents-" + secrets.token_hex(16)
        encoded = base64.b64encode(code.encode("utf-8")).decode("ascii")
        result = self.session.run(self.environment, f"_envhost_smolagents_run({encoded!r}, {marker!r})", timeout=self.timeout)
        logs, found, report = result.output.rpartition("\n" + marker + " ")
        if not found:
            # No report: the step was interrupted (timeout) or the
            # interpreter died; envhost's output says which.
            raise AgentError(f"Executing code yielded an error:\n{result.output}", self.logger)
        outcome = json.loads(report.strip().splitlines()[0])
        if outcome["kind"] == "final":
            return CodeOutput(
                output=self._deserialize_final_answer(outcome["value"], self.allow_pickle),
                logs=logs,
                is_final_answer=True,
            )
        if outcome["kind"] == "error":
            raise AgentError(f"{logs}\nExecuting code yielded an error:\n{outcome['value']}", self.logger)
        return CodeOutput(output=outcome["value"], logs=logs, is_final_answer=False)

    def install_packages(self, additional_imports: List[str]) -> List[str]:
        # Import paths ("pandas.*") name their package by the first part;
        # smolagents passes the tools' requirements as pip names ("pillow").
        packages = sorted({name.split(".")[0] for name in additional_imports} - {"*", ""})
        if not packages:
            return list(additional_imports)
        imports = {package: _IMPORT_NAMES.get(package, package) for package in packages}
        probe = self.session.run(
            self.environment,
            f"[n for n in {sorted(set(imports.values()))!r} if __import__('importlib.util').util.find_spec(n) is None]",
        )
        try:
            missing_imports = set(ast.literal_eval(probe.output.strip() or "[]"))
        except (ValueError, SyntaxError):
            raise AgentError(f"could not check the interpreter's packages:\n{probe.output}", self.logger) from None
        missing = [package for package, name in imports.items() if name in missing_imports]
        if missing and not self.pip_install:
            self.logger.log(f"envhost: the interpreter lacks {', '.join(missing)} (pip_install=False: not installing them)")
        elif missing:
            code = (
                "import subprocess as _s, sys as _y\n"
                f"_s.run([_y.executable, '-m', 'pip', 'install', '--quiet', *{missing!r}], check=True)"
            )
            result = self.session.run(self.environment, code)
            self.logger.log(result.output)
            if not result.success:
                raise AgentError(f"could not install {', '.join(missing)}:\n{result.output}", self.logger)
        return list(additional_imports)

    def cleanup(self) -> None:
        if self._owns_session:
            self.session.close()

    def delete(self) -> None:
        self.cleanup()
