"""The Python SDK in CPython: the splitting rule every implementation
shares, routing, typed responses, state snapshots, when the screen changes,
refused-file sentences, outgoing HTTP's sentences, and the build-time check. The exports are also tested against the real
bindings componentize-py generates (ENVHOST_PY_BINDINGS names the folder;
scripts/build-polyglot-plugins writes it)."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

import envhost_plugin as sdk  # noqa: E402
from envhost_plugin import Call, Fail, Plugin, PluginError, Request, Response, Runner, Screen, command, fail  # noqa: E402


class Kv(Plugin):
    summary = "A key-value store"
    name = "kv"
    requests = [Request.write_directory("notes", "notes live there"), Request.network("https://api.github.com", "x")]

    def __init__(self):
        self.state = {"entries": {}}

    @command("put <key> <value>", "Store a value.", example="put a 1")
    def put(self, call):
        key, _, value = call.args.partition(" ")
        if not value:
            fail("put needs a key and a value")
        self.state["entries"][key] = value
        return f"stored {key}"

    @command("get <key>", "Show a value.", simple=True)
    def get(self, call):
        if call.args not in self.state["entries"]:
            raise Fail(f"no key named {call.args}")
        return self.state["entries"][call.args]

    @command("wrong", "Returns a number.")
    def wrong(self, call):
        return 42

    @command("read <file>", "Reads a note.")
    def read(self, call):
        with open(f"/notes/{call.args}") as f:
            return f.read()

    @command("spoil", "Puts a set in the state.")
    def spoil(self, call):
        self.state["bad"] = {1, 2}
        return "spoiled"

    def screen(self):
        return f"Keys: {len(self.state['entries'])}"


class SplitRule(unittest.TestCase):
    def test_every_shared_case(self):
        cases = json.loads((ROOT / "wit/command-split-cases.json").read_text())["cases"]
        self.assertGreater(len(cases), 20)
        for case in cases:
            call = Call.parse(case["text"])
            self.assertEqual((call.name, call.args, call.body), (case["name"], case["arguments"], case["body"]), case["why"])

    def test_words(self):
        self.assertEqual(Call.parse("x a\u3000b  c").words(), ["a", "b", "c"])
        self.assertEqual(Call.parse("x a b").arg(1), "b")
        self.assertIsNone(Call.parse("x").arg(0))


class Routing(unittest.TestCase):
    def test_routes_and_answers(self):
        runner = Runner(Kv)
        summary, specs = runner.describe()
        self.assertEqual(summary, "A key-value store")
        self.assertEqual([s.signature for s in specs], ["put <key> <value>", "get <key>", "wrong", "read <file>", "spoil"])
        self.assertTrue(specs[1].simple)
        self.assertEqual(runner.handle("put colour blue"), Response.ok("stored colour"))
        self.assertEqual(runner.handle("  get colour "), Response.ok("blue"))
        self.assertEqual(runner.handle("get x"), Response.fail("no key named x"))
        self.assertEqual(runner.handle("put a"), Response.fail("put needs a key and a value"))
        self.assertEqual(runner.handle("nope").output, "Unknown command: nope\nAvailable: put, get, wrong, read, spoil")
        self.assertEqual(runner.screen(), Screen("Keys: 1", 50))

    def test_wrong_return_type_is_a_sentence_and_keeps_state(self):
        runner = Runner(Kv)
        runner.handle("put a 1")
        response = runner.handle("wrong")
        self.assertFalse(response.success)
        self.assertIn("the plugin's command `wrong` returned int 42, not the output", response.output)
        self.assertIn("Kv.wrong must return a str", response.output)
        self.assertEqual(runner.handle("get a"), Response.ok("1"))

    def test_bad_tables_fail_at_export(self):
        class Twice(Plugin):
            summary = "x"

            @command("go", "a")
            def one(self, call):
                return ""

            @command("go <now>", "b")
            def two(self, call):
                return ""

        with self.assertRaisesRegex(PluginError, "two commands are named `go` \\(Twice.one and Twice.two\\)"):
            Runner(Twice)

        class NoSignature(Plugin):
            summary = "x"

            @command("   ", "a")
            def one(self, call):
                return ""

        with self.assertRaisesRegex(PluginError, "empty signature"):
            Runner(NoSignature)
        with self.assertRaisesRegex(PluginError, "needs the command's signature"):
            command(lambda self, call: "")

    def test_bad_screen_and_requests(self):
        class Bad(Plugin):
            summary = "x"
            requests = [("read-directory", "data")]

            def screen(self):
                return {"content": "x", "max_line": 3}

        runner = Runner(Bad)
        self.assertIn("Bad.screen() returned dict", runner.screen().content)
        with self.assertRaisesRegex(PluginError, "`requests` holds tuple"):
            runner.requests()


class State(unittest.TestCase):
    def test_snapshot_and_restore(self):
        runner = Runner(Kv)
        runner.handle("put colour blue")
        data = runner.snapshot()
        self.assertEqual(json.loads(data), {"entries": {"colour": "blue"}})
        fresh = Runner(Kv)
        self.assertIsNone(fresh.restore(data))
        self.assertEqual(fresh.handle("get colour"), Response.ok("blue"))
        self.assertIsNone(Runner(Kv).restore(b""))
        self.assertIn("not the JSON this plugin writes", Runner(Kv).restore(b"\xff{"))

    def test_state_that_cannot_be_saved_is_said_at_the_command(self):
        runner = Runner(Kv)
        runner.handle("put a 1")
        before = runner.snapshot()
        response = runner.handle("spoil")
        self.assertTrue(response.success)
        self.assertIn("spoiled\n(The plugin's state cannot be saved", response.output)
        self.assertIn("set is not JSON serializable", response.output)
        self.assertEqual(runner.snapshot(), before)


class WhenTheScreenChanges(unittest.TestCase):
    def test_any_time_by_default(self):
        self.assertEqual(Plugin.screen_changes, "any-time")
        self.assertEqual(Runner(Kv).screen_changes, "any-time")

    def test_when_called(self):
        class Quiet(Kv):
            screen_changes = "when-called"

        self.assertEqual(Runner(Quiet).screen_changes, "when-called")
        self.assertEqual(Runner(Kv).screen_changes, "any-time")

    def test_anything_else_is_refused_at_export(self):
        for value, near in [("sometimes", None), ("when_called", "when-called"), ("AnyTime", "any-time"),
                            (True, None), (None, None), ("", None)]:
            class Wrong(Kv):
                screen_changes = value

            for make in (Runner, sdk.export):
                with self.assertRaises(PluginError, msg=repr(value)) as raised:
                    make(Wrong)
                message = str(raised.exception)
                self.assertTrue(message.startswith(f"Wrong.screen_changes is {type(value).__name__} {value!r}; "
                                                   f"it must be \"any-time\" (the default"), message)
                self.assertIn("or \"when-called\" (the screen shows only what the plugin's own calls leave)", message)
                if near:
                    self.assertTrue(message.endswith(f'; did you mean "{near}"?'), message)
                else:
                    self.assertNotIn("did you mean", message)


class Files(unittest.TestCase):
    def test_refused_access_names_the_grant(self):
        runner = Runner(Kv)
        response = runner.handle("read todo.txt")
        self.assertFalse(response.success)
        self.assertEqual(
            response.output,
            'cannot use /notes/todo.txt: ask the operator to grant notes in env/envhost.toml '
            '([plugins.kv] read-write = ["notes"])',
        )

    def test_hint_for_a_plugin_without_requests(self):
        self.assertEqual(
            sdk.grant_hint("/data/sub/x.txt", False, "tool"),
            'ask the operator to grant data in env/envhost.toml ([plugins.tool] read-only = ["data"])',
        )
        # A directory that exists: reading it is the file's own business,
        # a refused write most likely a read-only grant.
        self.assertIsNone(sdk.grant_hint("/tmp/x", False, "kv"))
        self.assertEqual(
            sdk.grant_hint("/tmp/x", True, "kv"),
            'not permitted; if tmp is granted read-only, ask the operator to grant it read-write in '
            'env/envhost.toml ([plugins.kv] read-write = ["tmp"])',
        )


class Http(unittest.TestCase):
    """What http_get says without sending anything: URLs, origins, the
    sentences. The request itself goes through the host in the end-to-end
    tests (tests/e2e/new_project.rs, a_new_python_project_fetches_from_an_allowed_host)."""

    def test_the_origin_is_written_as_allowed_hosts_writes_it(self):
        for url, origin in [
            ("http://127.0.0.1:9/x", "http://127.0.0.1:9"),
            ("https://Example.COM:443/", "https://example.com"),
            ("http://example.com:80", "http://example.com"),
            ("http://example.com:443", "http://example.com:443"),
            ("HTTPS://[::1]:8443/a", "https://[::1]:8443"),
            ("https://[::1]:443/a", "https://[::1]"),
            ("https://[::1]/a", "https://[::1]"),
        ]:
            self.assertEqual(sdk.origin(url), origin, url)

    def test_urls_become_a_request_s_parts(self):
        self.assertEqual(sdk._target("https://example.com"), (True, "example.com", "/"))
        self.assertEqual(sdk._target("http://127.0.0.1:9/x?y=1#top"), (False, "127.0.0.1:9", "/x?y=1"))
        self.assertEqual(sdk._target("https://a.org?q"), (True, "a.org", "/?q"))
        for url, why in [
            ("ftp://a.org/", "only http:// and https:// URLs can be fetched"),
            ("a.org/x", "a URL starts with http:// or https://"),
            ("https:///x", "the URL names no host"),
            ("https://a.org/a b", "a URL holds no spaces or control characters"),
        ]:
            with self.assertRaises(sdk.HttpError) as raised:
                sdk.http_get(url)
            self.assertEqual(str(raised.exception), f"cannot fetch {url}: {why}")

    def test_a_denial_names_the_grant_and_is_a_failed_response(self):
        self.assertEqual(
            sdk._denied("http://127.0.0.1:9/"),
            'cannot fetch http://127.0.0.1:9/: ask the operator to add "http://127.0.0.1:9" to allowed-hosts '
            'in env/envhost.toml',
        )
        self.assertTrue(issubclass(sdk.HttpError, Fail))

        class Fetching(Plugin):
            summary = "fetches"

            @command("fetch <url>", "Fetch.")
            def fetch(self, call):
                return sdk.http_get(call.args).text()

        response = Runner(Fetching).handle("fetch gopher://x")
        self.assertEqual(response, Response.fail("cannot fetch gopher://x: only http:// and https:// URLs can be fetched"))

    def test_sizes_read_as_the_host_words_them(self):
        self.assertEqual([sdk._size(n) for n in (512, 64 * 1024, 1536 * 1024, 4 << 30)],
                         ["512 B", "64 KiB", "1.5 MiB", "4.0 GiB"])

    def test_a_response_reads_as_text(self):
        response = sdk.HttpResponse(200, [("content-type", b"text/plain")], b"caf\xc3\xa9 \xff")
        self.assertEqual(response.text(), "caf\u00e9 \ufffd")

    def test_error_codes_of_the_real_bindings_read_as_words(self):
        sys.path.insert(0, BuildCheck.bindings(self))
        try:
            from wit_world.imports import wasi_http_types as http
            self.assertEqual(sdk._readable(http.ErrorCode_ConnectionRefused()), "connection refused")
            self.assertEqual(sdk._readable(http.ErrorCode_DnsTimeout()), "DNS timeout")
            self.assertEqual(sdk._readable(http.ErrorCode_TlsCertificateError()), "TLS certificate error")
            self.assertEqual(sdk._readable(http.ErrorCode_HttpResponseBodySize(3)), "HTTP response body size")
            self.assertEqual(sdk._readable(http.ErrorCode_InternalError("boom")), "internal error: boom")
            self.assertEqual(
                sdk._readable(http.ErrorCode_DnsError(http.DnsErrorPayload("NXDOMAIN", None))), "DNS error (NXDOMAIN)"
            )
            # The names http_get takes from the bindings all exist.
            Ok, Err, outgoing_handler, types, streams = sdk._http_bindings()
            for name in ("OutgoingRequest", "Fields", "Method_Get", "Scheme_Http", "Scheme_Https", "IncomingResponse",
                         "IncomingBody", "ErrorCode_HttpRequestDenied", "http_error_code"):
                self.assertTrue(hasattr(types, name), name)
            self.assertTrue(hasattr(outgoing_handler, "handle"))
            self.assertTrue(hasattr(streams, "StreamError_Closed"))
        finally:
            sys.path.remove(BuildCheck.bindings(self))


class BuildCheck(unittest.TestCase):
    def bindings(self):
        folder = os.environ.get("ENVHOST_PY_BINDINGS")
        if not folder:
            self.fail("ENVHOST_PY_BINDINGS must name the bindings componentize-py generated for wit/v0.2.1 "
                      "full-plugin (scripts/build-polyglot-plugins writes target/polyglot/python-bindings)")
        return folder

    def run_check(self, source):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "app.py").write_text(textwrap.dedent(source))
            path = os.pathsep.join([folder, str(HERE.parent), self.bindings()])
            return subprocess.run(
                [sys.executable, str(HERE.parent / "envhost_plugin.py"), "check", "app"],
                env={**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"},
                capture_output=True, text=True, timeout=60,
            )

    def test_a_good_plugin_passes(self):
        result = self.run_check("""
            from envhost_plugin import Plugin, Request, command, export
            class P(Plugin):
                summary = "ok"
                requests = [Request.network("https://api.github.com", "issues")]
                def __init__(self):
                    self.state = {"n": 0}
                @command("add <n>", "Adds.")
                def add(self, call) -> str:
                    return "x"
            Environment, Capabilities, State, ScreenChanges = export(P)
        """)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("app checked", result.stdout)

    def test_mistakes_are_sentences(self):
        result = self.run_check("""
            from envhost_plugin import Plugin, command, export
            class P(Plugin):
                summary = ""
                def __init__(self):
                    self.state = {"seen": set()}
                @command("add <n>", "Adds.")
                def add(self, call) -> int:
                    return 1
            Environment, Capabilities, State, ScreenChanges = export(P)
        """)
        self.assertEqual(result.returncode, 1)
        self.assertIn("P.summary is str ''; set it to one line", result.stderr)
        self.assertIn("the plugin's first state cannot be saved (Object of type set is not JSON serializable)", result.stderr)
        self.assertIn("P.add (command `add`) is annotated to return int", result.stderr)

    def test_a_module_written_for_0_2_0_is_told_the_fourth_name(self):
        result = self.run_check("""
            from envhost_plugin import Plugin, export
            class P(Plugin):
                summary = "ok"
            Environment, Capabilities, State = export(P)
        """)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(
            "error: app unpacks export(...) into three names; it returns four classes since 0.2.1 (ScreenChanges "
            "is new): end the module with `Environment, Capabilities, State, ScreenChanges = export(YourPlugin)`",
            result.stderr,
        )

    def test_screen_changes_belongs_on_the_class(self):
        result = self.run_check("""
            from envhost_plugin import Plugin, export
            class P(Plugin):
                summary = "ok"
                def __init__(self):
                    self.screen_changes = "when-called"
            Environment, Capabilities, State, ScreenChanges = export(P)
        """)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("P() sets self.screen_changes, which the SDK does not read; set it on the class", result.stderr)

    def test_a_bad_screen_changes_fails_the_check(self):
        result = self.run_check("""
            from envhost_plugin import Plugin, export
            class P(Plugin):
                summary = "ok"
                screen_changes = "never"
            Environment, Capabilities, State, ScreenChanges = export(P)
        """)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn('error: P.screen_changes is str \'never\'; it must be "any-time"', result.stderr)

    def test_the_exports_speak_the_bindings(self):
        sys.path.insert(0, self.bindings())
        try:
            Environment, Capabilities, State, ScreenChanges = sdk.export(Kv)
            from wit_world.exports import capabilities, environment, screen_changes
            description = Environment().describe()
            self.assertIsInstance(description, environment.Description)
            self.assertEqual(description.commands[0].signature, "put <key> <value>")
            self.assertEqual(Environment().handle_command("put a 1"), environment.CommandResponse("stored a", True))
            self.assertEqual(Environment().get_screen(), environment.ScreenSection("Keys: 1", 50))
            requested = Capabilities().requested()
            self.assertEqual(requested[1].power, capabilities.Power_Network("https://api.github.com"))
            data = State().snapshot()
            State().restore(data)
            from componentize_py_types import Err
            with self.assertRaises(Err):
                State().restore(b"not json")
            self.assertIs(ScreenChanges().screen_changes(), screen_changes.When.ANY_TIME)

            class Quiet(Kv):
                screen_changes = "when-called"

            self.assertIs(sdk.export(Quiet)[3]().screen_changes(), screen_changes.When.WHEN_CALLED)
        finally:
            sys.path.remove(self.bindings())


if __name__ == "__main__":
    unittest.main()
