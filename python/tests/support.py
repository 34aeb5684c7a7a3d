"""Shared by the tests: they drive the INSTALLED package (the wheel in a
virtual environment), never the source tree, and the real envhost binary
that the wheel carries."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import envhost

SOURCE_TREE = Path(__file__).resolve().parent.parent / "src"


def check_installed() -> None:
    """Fails loudly when the tests would exercise the source tree instead of
    the installed wheel."""
    package = Path(envhost.__file__).resolve()
    if SOURCE_TREE in package.parents:
        raise AssertionError(f"envhost was imported from the source tree ({package}); install the wheel and run the tests from the virtual environment")
    if sys.prefix == sys.base_prefix:
        raise AssertionError("the tests must run in the virtual environment the wheel was installed into")


class ProjectTest(unittest.TestCase):
    """A fresh project directory per test."""

    def setUp(self) -> None:
        check_installed()
        self.project = Path(tempfile.mkdtemp(prefix="envhost-py-"))
        self.addCleanup(shutil.rmtree, self.project, ignore_errors=True)

    def session(self, **options) -> envhost.Session:
        session = envhost.Session(project=self.project, **options)
        self.addCleanup(session.close)
        return session


def descendants(pid: int) -> list:
    """Every live process below `pid` (by walking /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def venv_script(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise AssertionError(f"{name} is not installed in the test environment ({path})")
    return str(path)


def run(argv, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
