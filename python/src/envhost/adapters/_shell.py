"""What the shell adapters need from a bash result beyond output and
success: the exit code and whether the output was cut. Knows the wording
of envhost's bash screen and output cap, and nothing about frameworks."""

from __future__ import annotations

import re
import shlex
from typing import Mapping, Optional

from .._protocol import Result

# The bash section's second line, e.g. "Last exit code: 2".
_EXIT_CODE = re.compile(r"^Last exit code: (-?\d+)$", re.MULTILINE)
# The line envhost puts where it cut a long output (head and tail kept,
# the whole output saved to a file).
_CUT_MARKER = "[... output too long:"


def exit_code(result: Result, environment: str = "bash") -> int:
    """The command's exit status as the bash screen shows it; without that
    line (a plugin, an older host), 0 for success and 1 otherwise."""
    section = result.screen.get(environment)
    match = _EXIT_CODE.search(section.content) if section is not None else None
    if match is not None:
        return int(match.group(1))
    return 0 if result.success else 1


def was_cut(result: Result) -> bool:
    return _CUT_MARKER in result.output


def quote_env(env: Optional[Mapping[str, object]]) -> str:
    """`export K='V' ...` for a set of variables (empty when there are none)."""
    if not env:
        return ""
    for name in env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"{name!r} is not a valid environment variable name")
    return "export " + " ".join(f"{name}={shlex.quote(str(value))}" for name, value in env.items())
