"""The official Python MCP SDK drives `envhost mcp --http`: the same
scenarios as over stdio, then what HTTP adds: the bearer token, the Origin
rule, and several clients sharing one set of environments."""

from __future__ import annotations

import contextlib
import unittest

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from scenarios import Scenarios, opened
from support import DEADLINE, HttpServer

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


class HttpBase(Scenarios):
    def setUp(self) -> None:
        super().setUp()
        self.server = HttpServer(self.project)
        self.addCleanup(self.server.stop)

    def client(self, token: str | None) -> Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=DEADLINE))
        return Client(streamable_http_client(self.server.url, http_client=http), mode=self.mode)

    def connect(self):
        return opened(self.client(self.server.token))


class HttpHandshake(HttpBase, unittest.IsolatedAsyncioTestCase):
    mode = "legacy"

    async def test_two_clients_share_the_environments(self) -> None:
        async with self.connect() as first, self.connect() as second:
            await self.ok(first, "bash", {"command": "export SHARED=from-first"})
            seen = await self.ok(second, "bash", {"command": "echo $SHARED"})
            self.assertTrue(seen.startswith("from-first\n"), seen)
            # Each session tracks its own screen: the second saw it once.
            again = await self.ok(second, "bash", {"command": "true"})
            self.assertNotIn("== PYTHON ==", again)

    async def test_sigterm_stops_the_server(self) -> None:
        async with self.connect() as client:
            await self.ok(client, "bash", {"command": "true"})
        self.assertEqual(self.server.stop(), 0)
        self.assertEqual(self.project.events("host_started")[0]["mode"], "mcp-http")
        self.assertEqual(self.project.events("host_stopping")[0]["reason"], "received SIGTERM")


class HttpStateless(HttpBase, unittest.IsolatedAsyncioTestCase):
    mode = "auto"
    tracks_screen = False


class HttpGate(unittest.IsolatedAsyncioTestCase):
    """Who gets in: raw requests, so that each refusal is seen as sent."""

    def setUp(self) -> None:
        from support import Project

        self.project = Project()
        self.addCleanup(self.project.remove)
        self.server = HttpServer(self.project)
        self.addCleanup(self.server.stop)

    async def post(self, headers: dict[str, str]) -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=DEADLINE) as http:
            return await http.post(
                self.server.url,
                json=INITIALIZE,
                headers={"Accept": "application/json, text/event-stream", **headers},
            )

    async def test_no_token_or_a_wrong_one_is_refused(self) -> None:
        for headers in ({}, {"Authorization": "Bearer " + "0" * 64}, {"Authorization": f"Basic {self.server.token}"}):
            response = await self.post(headers)
            self.assertEqual(response.status_code, 401, headers)
            self.assertEqual(response.headers["www-authenticate"], 'Bearer realm="envhost"')
            self.assertIn("Authorization: Bearer TOKEN", response.text)

    async def test_a_client_without_the_token_cannot_connect(self) -> None:
        http = httpx2.AsyncClient(timeout=DEADLINE)
        with self.assertRaises(BaseException):
            async with Client(streamable_http_client(self.server.url, http_client=http), mode="legacy"):
                pass

    async def test_a_cross_site_origin_is_refused_and_the_servers_own_is_not(self) -> None:
        token = {"Authorization": f"Bearer {self.server.token}"}
        refused = await self.post({**token, "Origin": "http://evil.example"})
        self.assertEqual(refused.status_code, 403)
        own = await self.post({**token, "Origin": self.server.origin})
        self.assertEqual(own.status_code, 200, own.text)
        plain = await self.post(token)
        self.assertEqual(plain.status_code, 200, plain.text)

    async def test_a_foreign_host_header_is_refused(self) -> None:
        # DNS rebinding: a page at evil.example whose name now resolves to
        # 127.0.0.1 sends its own name as Host (and no Origin, in some cases).
        port = self.server.origin.rsplit(":", 1)[1]
        token = {"Authorization": f"Bearer {self.server.token}"}
        refused = await self.post({**token, "Host": f"evil.example:{port}"})
        self.assertEqual(refused.status_code, 403, refused.text)
        own = await self.post({**token, "Host": f"localhost:{port}"})
        self.assertEqual(own.status_code, 200, own.text)

    async def test_bad_json_is_a_parse_error_with_400_not_415(self) -> None:
        token = {"Authorization": f"Bearer {self.server.token}"}
        async with httpx2.AsyncClient(timeout=DEADLINE) as http:
            response = await http.post(
                self.server.url,
                content=b'{"jsonrpc": "2.0", "id": 1, "method": ',
                headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **token},
            )
        self.assertEqual(response.status_code, 400, response.text)
        error = response.json()
        self.assertIsNone(error["id"])
        self.assertEqual(error["error"]["code"], -32700)
        self.assertTrue(error["error"]["message"].startswith("Parse error: the body is not JSON"), error)


class HttpLimits(unittest.IsolatedAsyncioTestCase):
    """Past --max-sessions a new client is refused, and the ones in keep working."""

    def setUp(self) -> None:
        from support import Project

        self.project = Project()
        self.addCleanup(self.project.remove)
        self.server = HttpServer(self.project, "--max-sessions", "1")
        self.addCleanup(self.server.stop)

    def client(self) -> Client:
        headers = {"Authorization": f"Bearer {self.server.token}"}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=DEADLINE))
        return Client(streamable_http_client(self.server.url, http_client=http), mode="legacy")

    async def test_a_session_past_the_cap_is_refused_and_the_first_still_works(self) -> None:
        async with opened(self.client()) as first:
            with self.assertRaises(BaseException):
                async with opened(self.client()):
                    pass
            result = await first.call_tool("bash", {"command": "echo still here"})
            self.assertFalse(result.is_error)
            self.assertTrue(result.content[0].text.startswith("still here\n"), result)
        # The first one's DELETE freed its place.
        async with opened(self.client()) as again:
            result = await again.call_tool("bash", {"command": "echo again"})
            self.assertTrue(result.content[0].text.startswith("again\n"), result)


if __name__ == "__main__":
    unittest.main()
