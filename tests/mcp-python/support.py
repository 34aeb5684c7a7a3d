"""What the MCP client tests share: the envhost binary and plugins the
build made, throw-away projects, and `envhost mcp --http` servers.

The client is the official Python MCP SDK (`mcp` on PyPI, pinned in
constraints.txt), an implementation independent of the Rust SDK the server
is built on. Nothing here is skipped: a missing binary, plugin or package
fails the test that needs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from mcp import StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 120.0


def target_dir() -> Path:
    configured = os.environ.get("CARGO_TARGET_DIR")
    if not configured:
        return ROOT / "target"
    path = Path(configured)
    return path if path.is_absolute() else ROOT / path


def envhost_binary() -> Path:
    binary = Path(os.environ.get("ENVHOST_BIN") or target_dir() / "debug" / "envhost")
    if not binary.is_file():
        raise AssertionError(f"no envhost binary at {binary}: run `cargo build` first")
    return binary


def guest(name: str) -> Path:
    built = target_dir() / "wasm32-wasip2" / "wasm-release"
    for path in (built / f"{name}.wasm", built / "examples" / f"{name}.wasm"):
        if path.is_file():
            return path
    raise AssertionError(f"no {name}.wasm under {built}: run scripts/build-plugins first")


def process_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # A zombie has ended; its parent just has not reaped it yet.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until_dead(pid: int, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.05)
    return False


def outer_pid(inner: int, name: str, limit: float = DEADLINE) -> int:
    """The pid, as this test sees it, of the process called `name` that a
    command saw as `inner`: commands run in a PID namespace of the host's
    (the last number of NSpid in /proc/<pid>/status is the one they see)."""
    deadline = time.monotonic() + limit
    while True:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            numbers = fields.get("NSpid", "").split()
            if fields.get("Name") == name and numbers and numbers[-1] == str(inner):
                return int(entry)
        if time.monotonic() > deadline:
            raise AssertionError(f"no process {name} numbered {inner} in its namespace")
        time.sleep(0.02)


def wait_for_file(path: Path, limit: float = DEADLINE) -> None:
    deadline = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


class Project:
    """A temporary project with plugins, its own plugin cache and a transcript."""

    def __init__(self, plugins: dict[str, str] | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="envhost-mcp-py-"))
        for env_name, guest_name in (plugins or {}).items():
            (self.dir / "env").mkdir(exist_ok=True)
            shutil.copyfile(guest(guest_name), self.dir / "env" / f"{env_name}.wasm")

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def args(self, *extra: str) -> list[str]:
        return [
            "mcp",
            "--project", str(self.dir),
            "--plugin-cache", str(self.dir / ".plugin-cache"),
            "--transcript", str(self.dir / "transcript.jsonl"),
            *extra,
        ]

    def stdio(self, *extra: str) -> StdioServerParameters:
        return StdioServerParameters(command=str(envhost_binary()), args=self.args(*extra))

    def events(self, kind: str) -> list[dict]:
        lines = (self.dir / "transcript.jsonl").read_text().splitlines()
        return [event for event in map(json.loads, lines) if event["event"] == kind]


class HttpServer:
    """`envhost mcp --http 127.0.0.1:0` on a project; the address and the
    token are read from what it prints on stderr."""

    def __init__(self, project: Project, *extra: str) -> None:
        self.process = subprocess.Popen(
            [str(envhost_binary()), *project.args("--http", "127.0.0.1:0", *extra)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.token: str | None = None
        self.url = ""
        assert self.process.stderr is not None
        deadline = time.monotonic() + DEADLINE
        while not self.url:
            line = self.process.stderr.readline()
            if not line:
                raise AssertionError(f"envhost mcp --http ended early ({self.process.wait()})")
            if found := re.search(r"bearer token for this server .*: ([0-9a-f]{64})$", line):
                self.token = found.group(1)
            if found := re.search(r"MCP over HTTP at (http://\S+)$", line):
                self.url = found.group(1)
            if time.monotonic() > deadline:
                raise AssertionError("envhost mcp --http did not say where it listens")
        # The rest of stderr is drained, so that a full pipe never blocks the host.
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    @property
    def origin(self) -> str:
        return self.url.removesuffix("/mcp")

    def stop(self) -> int:
        """SIGTERM, as an operator stops it; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            if self.process.stderr:
                self.process.stderr.close()
