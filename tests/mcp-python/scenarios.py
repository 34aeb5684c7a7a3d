"""The scenarios every transport and protocol era must pass, written once:
a test class mixes `Scenarios` in and says how to connect (`connect`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from mcp import Client
from mcp.shared.exceptions import MCPError

from support import DEADLINE, Project, outer_pid, wait_for_file, wait_until_dead

TOOLS = ["bash", "python", "editor", "rogue", "timer", "screen", "wait", "input", "interrupt", "restart", "close"]


def text(result) -> str:
    assert len(result.content) == 1, result
    return result.content[0].text


class Scenarios:
    """Mixed into an `unittest.IsolatedAsyncioTestCase`."""

    mode = "auto"
    # Whether a result shows only the sections that changed: every request
    # over stateless HTTP is a session of its own, and sees all of them.
    tracks_screen = True

    def setUp(self) -> None:
        self.project = Project({"timer": "timer", "rogue": "rogue"})
        self.addCleanup(self.project.remove)

    def connect(self) -> contextlib.AbstractAsyncContextManager[Client]:
        raise NotImplementedError

    async def ok(self, client: Client, tool: str, arguments: dict) -> str:
        result = await client.call_tool(tool, arguments, read_timeout_seconds=DEADLINE)
        self.assertFalse(result.is_error, f"{tool} {arguments}: {text(result)}")
        return text(result)

    async def failed(self, client: Client, tool: str, arguments: dict) -> str:
        result = await client.call_tool(tool, arguments, read_timeout_seconds=DEADLINE)
        self.assertTrue(result.is_error, f"{tool} {arguments} should fail: {text(result)}")
        return text(result)

    async def test_tools_come_in_a_fixed_order_with_truthful_hints(self) -> None:
        async with self.connect() as client:
            tools = (await client.list_tools()).tools
            self.assertEqual([tool.name for tool in tools], TOOLS)
            by_name = {tool.name: tool for tool in tools}
            for name, destructive, open_world in [
                ("bash", True, True),
                ("editor", True, False),
                ("timer", False, False),
            ]:
                hints = by_name[name].annotations
                self.assertEqual(
                    (hints.destructive_hint, hints.open_world_hint), (destructive, open_world), name
                )
                self.assertEqual(by_name[name].input_schema["required"], ["command"])
            self.assertTrue(by_name["screen"].annotations.read_only_hint)
            self.assertIn("Commands:\n  view ", by_name["editor"].description)

    async def test_state_persists_in_every_environment(self) -> None:
        (self.project.dir / "notes.txt").write_text("alpha\nbeta\ngamma\n")
        async with self.connect() as client:
            first = await self.ok(client, "bash", {"command": "mkdir -p sub && cd sub && X=41"})
            for section in ("BASH", "PYTHON", "EDITOR", "TIMER", "ROGUE"):
                self.assertIn(f"==================== {section} ====================", first)
            again = await self.ok(client, "bash", {"command": "echo $((X + 1)) $(basename $PWD)"})
            self.assertTrue(again.startswith("42 sub\n"), again)
            if self.tracks_screen:
                self.assertTrue(again.endswith("(unchanged: bash, python, editor, rogue, timer)"), again)
            else:
                self.assertIn("==================== BASH ====================", again)
            await self.ok(client, "python", {"command": "x = 20"})
            self.assertTrue((await self.ok(client, "python", {"command": "print(x * 2 + 2)"})).startswith("42\n"))
            await self.ok(client, "editor", {"command": "view notes.txt /^alpha/ /^gamma/"})
            await self.ok(client, "editor", {"command": "edit notes.txt 2-2\nBETA"})
            self.assertEqual((self.project.dir / "notes.txt").read_text(), "alpha\nBETA\ngamma\n")
            self.assertTrue((await self.ok(client, "timer", {"command": "start"})).startswith("Timer started"))
            self.assertIn("already running", await self.failed(client, "timer", {"command": "start"}))
            screen = await self.ok(client, "screen", {})
            self.assertIn("Timer: Running", screen)

    async def test_failures_are_error_results_and_bad_calls_say_what_is_wrong(self) -> None:
        async with self.connect() as client:
            failed = await self.failed(client, "bash", {"command": "echo oops >&2; false"})
            self.assertTrue(failed.startswith("oops\n"), failed)
            self.assertEqual(await self.failed(client, "bash", {}), "The bash tool needs `command` (a string).")
            with self.assertRaises(MCPError) as raised:
                await client.call_tool("ruby", {"command": "puts 1"})
            self.assertEqual(raised.exception.code, -32602)
            self.assertTrue(raised.exception.message.startswith("Unknown tool: ruby. The tools are: bash,"))
            self.assertTrue((await self.ok(client, "bash", {"command": "echo still"})).startswith("still"))

    async def test_a_plugin_trap_is_an_error_result_and_the_next_call_works(self) -> None:
        async with self.connect() as client:
            await self.ok(client, "rogue", {"command": "count"})
            trapped = await self.failed(client, "rogue", {"command": "panic out of marbles"})
            self.assertTrue(
                trapped.startswith("The rogue plugin stopped during this command: it panicked: out of marbles"),
                trapped,
            )
            counted = await self.ok(client, "rogue", {"command": "count"})
            self.assertTrue(counted.startswith("count = 1"), counted)

    async def test_progress_reaches_a_client_that_asks(self) -> None:
        seen: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.append((done, total, message))

        async with self.connect() as client:
            result = await client.call_tool(
                "bash", {"command": "sleep 4; echo done"}, read_timeout_seconds=DEADLINE, progress_callback=progress
            )
            self.assertTrue(text(result).startswith("done\n"))
        self.assertTrue(seen, "no progress during a 4 s command")
        self.assertTrue(seen[0][2].startswith("bash: `sleep 4; echo done` running for"), seen)

    async def test_a_client_that_gives_up_interrupts_the_command(self) -> None:
        pid_file = self.project.dir / "sleeper.pid"

        def sleeper() -> int:
            # Found while the call runs (3 s): the command prints its pid
            # as its PID namespace numbers it, this test needs its own.
            wait_for_file(pid_file)
            return outer_pid(int(pid_file.read_text()), "sleep", 10)

        async with self.connect() as client:
            # In threads: the SDK sends its cancellation from this event loop,
            # which a blocking wait here would hold up.
            found = asyncio.create_task(asyncio.to_thread(sleeper))
            with self.assertRaises(MCPError):
                # The SDK sends notifications/cancelled when its read times out.
                await client.call_tool(
                    "bash",
                    {"command": "sh -c 'echo $$ > sleeper.pid; exec sleep 60'; echo finished"},
                    read_timeout_seconds=3,
                )
            dead = await asyncio.to_thread(wait_until_dead, await found, 30)
            self.assertTrue(dead, "the command outlived its cancelled call")
            after = await self.ok(client, "bash", {"command": "echo after"})
            self.assertIn("after\n", after)
            self.assertNotIn("finished", after)


@contextlib.asynccontextmanager
async def opened(client: Client) -> AsyncIterator[Client]:
    async with client:
        yield client
