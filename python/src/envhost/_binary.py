"""Finding the `envhost` binary and the command line that starts a session.

Owns where the binary is looked for ($ENVHOST_BIN, then the copy the wheel
installed) and how keyword options become `envhost serve` flags. It knows
nothing about the protocol.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path
from typing import Any, Iterable, List, Mapping, Optional, Sequence

from ._protocol import BinaryNotFound

EXE = "envhost" + (sysconfig.get_config_var("EXE") or "")

# Options given in seconds in Python and as durations on the command line.
_DURATION_OPTIONS = {"timeout", "yield_after"}


def _candidates() -> Iterable[Path]:
    # The wheel puts the binary in the scripts folder of the scheme pip
    # installed into: the environment's own, the user's (`pip install
    # --user`), or `bin/` beside the package (`pip install --target`).
    yield Path(sysconfig.get_path("scripts")) / EXE
    if sys.version_info >= (3, 10):
        user_scheme = sysconfig.get_preferred_scheme("user")
    elif os.name == "nt":
        user_scheme = "nt_user"
    else:
        user_scheme = "posix_user"
    yield Path(sysconfig.get_path("scripts", scheme=user_scheme)) / EXE
    yield Path(__file__).resolve().parent.parent / "bin" / EXE


def find_binary() -> str:
    """The `envhost` binary to run: $ENVHOST_BIN if set, else the one the
    `envhost` wheel installed."""
    override = os.environ.get("ENVHOST_BIN")
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BinaryNotFound(f"ENVHOST_BIN is set to {override!r}, which is not an executable file")
        return override
    for path in _candidates():
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    searched = ", ".join(str(path) for path in _candidates())
    raise BinaryNotFound(
        f"the envhost binary was not found (looked in {searched}). "
        "Install the wheel (`pip install envhost`), set ENVHOST_BIN to a binary built with "
        "`cargo build`, or pass command=[...] to Session"
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _duration(name: str, seconds: Any) -> str:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {seconds!r}")
    return f"{max(1, round(seconds * 1000))}ms"


def option_args(options: Mapping[str, Any]) -> List[str]:
    """Keyword options as flags: `timeout=90` → `--timeout 90000ms`,
    `allow_outside_project=True` → `--allow-outside-project`,
    `pass_env=["A", "B"]` → `--pass-env A --pass-env B`; None and False
    are left out. Any flag of `envhost serve` can be given this way."""
    args: List[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = _flag(name)
        if value is True:
            args.append(flag)
        elif name in _DURATION_OPTIONS:
            args += [flag, _duration(name, value)]
        elif isinstance(value, (list, tuple)):
            for item in value:
                args += [flag, os.fspath(item)]
        else:
            args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return args


def session_argv(
    project: Optional["os.PathLike[str] | str"],
    command: Optional[Sequence[str]],
    options: Mapping[str, Any],
) -> List[str]:
    """The command line of a session. Without `command`, the local binary
    serves `project` (default: the current directory). With `command` (e.g.
    `["docker", "exec", "-i", "box", "envhost", "serve"]`) the prefix is
    used as given and the flags are appended; `project` is then a path as
    the far side sees it, and only passed when given."""
    if command is not None:
        if isinstance(command, (str, bytes)) or not command:
            raise ValueError("command must be a non-empty list of arguments, e.g. ['docker', 'exec', '-i', 'box', 'envhost', 'serve']")
        argv = [os.fspath(part) for part in command]
    else:
        argv = [find_binary(), "serve"]
        if project is None:
            project = "."
    if project is not None:
        argv += ["--project", os.fspath(project)]
    return argv + option_args(options)
