"""The official Python MCP SDK drives `envhost mcp` over stdio, with the
initialize handshake and with the stateless 2026-07-28 revision."""

from __future__ import annotations

import unittest

from mcp import Client

from scenarios import Scenarios, opened


class StdioHandshake(Scenarios, unittest.IsolatedAsyncioTestCase):
    mode = "legacy"

    def connect(self):
        return opened(Client(self.project.stdio(), mode=self.mode))

    async def test_the_session_is_recorded_and_ends_with_its_input(self) -> None:
        async with self.connect() as client:
            self.assertEqual(client.server_info.name, "envhost")
            self.assertIn("persistent environments", client.instructions)
            await client.call_tool("bash", {"command": "true"})
        started = self.project.events("host_started")
        self.assertEqual(started[0]["mode"], "mcp")
        self.assertEqual(len(self.project.events("command_finished")), 1)
        self.assertEqual(self.project.events("host_stopping")[0]["reason"], "end of input")


class StdioStateless(Scenarios, unittest.IsolatedAsyncioTestCase):
    mode = "auto"

    def connect(self):
        return opened(Client(self.project.stdio(), mode=self.mode))

    async def test_the_newest_revision_is_negotiated(self) -> None:
        async with self.connect() as client:
            self.assertEqual(client.protocol_version, "2026-07-28")


if __name__ == "__main__":
    unittest.main()
