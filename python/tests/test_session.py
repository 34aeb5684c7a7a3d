"""The client against the real binary the wheel installed: sessions, typed
results, the screen, errors, the host dying, shutdown, command prefixes,
the asyncio variant."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
import threading
import time
import unittest
from pathlib import Path

import envhost
from envhost import _protocol
from support import ProjectTest, alive, check_installed, descendants, run


def has_interpreter(path: Path) -> bool:
    """Whether an ELF-64 executable names a program interpreter (PT_INTERP)."""
    import struct

    with open(path, "rb") as file:
        header = file.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2:
            raise AssertionError(f"{path} is not a 64-bit ELF file")
        phoff, = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        file.seek(phoff)
        table = file.read(phentsize * phnum)
    return any(struct.unpack_from("<I", table, i * phentsize)[0] == 3 for i in range(phnum))


class InstalledPackage(unittest.TestCase):
    def test_the_binary_is_the_one_the_wheel_installed(self):
        check_installed()
        self.assertNotIn("ENVHOST_BIN", os.environ, "the tests must find the wheel's binary, not an override")
        binary = Path(envhost.find_binary())
        self.assertEqual(binary.resolve(), (Path(sys.executable).parent / "envhost").resolve())
        self.assertTrue(os.access(binary, os.X_OK))
        version = run([str(binary), "--version"])
        self.assertEqual(version.returncode, 0, version.stderr)
        self.assertRegex(version.stdout, r"^envhost \d+\.\d+\.\d+")
        # `python -m envhost` runs the same binary.
        module = run([sys.executable, "-m", "envhost", "--version"])
        self.assertEqual(module.stdout, version.stdout)
        # The wheel carries the static build: no program interpreter (no
        # dynamic loader), so it runs on glibc and musl systems alike.
        self.assertFalse(has_interpreter(binary), f"{binary} is dynamically linked")

    def test_envhost_bin_overrides_and_is_checked(self):
        check_installed()
        missing = "/nonexistent/envhost"
        os.environ["ENVHOST_BIN"] = missing
        try:
            with self.assertRaises(envhost.BinaryNotFound) as caught:
                envhost.find_binary()
            self.assertIn(missing, str(caught.exception))
        finally:
            del os.environ["ENVHOST_BIN"]


class Sessions(ProjectTest):
    def test_state_persists_and_results_are_typed(self):
        (self.project / "sub").mkdir()
        session = self.session()
        first = session.run("bash", "cd sub && export GREETING=hello && echo started")
        self.assertIsInstance(first, envhost.Result)
        self.assertEqual(first.output, "started\n")
        self.assertTrue(first.success)
        self.assertFalse(first.running)
        second = session.run("bash", 'pwd; echo "$GREETING"')
        self.assertEqual(second.output, f"{self.project.resolve()}/sub\nhello\n")
        self.assertIn(f"Working directory: {self.project.resolve()}/sub", second.screen["bash"].content)

        session.run("python", "numbers = [1, 2, 3]")
        total = session.run("python", "sum(numbers) * 7")
        self.assertEqual(total.output, "42\n")
        self.assertIn("numbers: list", total.screen["python"].content)
        self.assertEqual(list(total.screen)[:3], ["bash", "python", "editor"])

        failed = session.run("bash", "ls /no/such/dir")
        self.assertFalse(failed.success)
        self.assertIn("No such file or directory", failed.output)
        self.assertIn("Last exit code: 2", failed.screen["bash"].content)

    def test_files_a_command_wrote_are_typed(self):
        session = self.session()
        quiet = session.run("bash", "true")
        self.assertEqual(quiet.files, ())
        wrote = session.run("bash", "mkdir -p out && printf '{}\\n' > out/r.json")
        self.assertEqual(wrote.files, (envhost.ProducedFile(path="out/r.json", size=3, media_type="application/json"),))
        self.assertEqual(wrote.raw["response"]["files"][0]["path"], "out/r.json")

    def test_screen_without_running_anything(self):
        screen = self.session().screen()
        self.assertIsInstance(screen, envhost.Screen)
        self.assertIn("bash", screen)
        self.assertIn("=== python ===", screen.text())
        self.assertGreater(screen["editor"].max_lines, 0)

    def test_timeout_interrupts_and_keeps_state(self):
        session = self.session()
        session.run("bash", "KEPT=yes")
        started = time.monotonic()
        result = session.run("bash", "sleep 30", timeout=0.3)
        self.assertLess(time.monotonic() - started, 20)
        self.assertFalse(result.success)
        self.assertRegex(result.output, r"300 ?ms")
        self.assertEqual(session.run("bash", "echo $KEPT").output, "yes\n")
        with self.assertRaises(ValueError):
            session.run("bash", "true", timeout=0)

    def test_session_options_become_flags(self):
        session = self.session(timeout=0.4, pass_env=["ENVHOST_TEST_API_KEY"], env={**os.environ, "ENVHOST_TEST_API_KEY": "s3cret"})
        self.assertIn("--timeout", session.argv)
        self.assertIn("400ms", session.argv)
        self.assertFalse(session.run("bash", "sleep 30").success)
        self.assertEqual(session.run("bash", "echo $ENVHOST_TEST_API_KEY").output, "s3cret\n")

    def test_unknown_environment_is_a_failed_result(self):
        result = self.session().run("ruby", "puts 1")
        self.assertFalse(result.success)
        self.assertIn("Unknown environment: ruby", result.output)
        self.assertIn("bash", result.output)

    def test_named_instances_keep_their_own_state_and_close(self):
        session = self.session()
        session.run("bash:server", "cd /tmp && export WHERE=server")
        self.assertEqual(session.run("bash", "echo \"[$WHERE]\"").output, "[]\n")
        here = session.run("bash:server", "echo $WHERE; pwd")
        self.assertEqual(here.output, "server\n/tmp\n")
        self.assertIn("bash:server", here.screen)
        closed = session.close_instance("bash:server")
        self.assertTrue(closed.success, closed.output)
        self.assertTrue(closed.output.startswith("Closed bash:server: ended the shell"), closed.output)
        self.assertNotIn("bash:server", closed.screen)
        refused = session.close_instance("bash")
        self.assertFalse(refused.success)
        self.assertIn("restart", refused.output)

    def test_a_refused_request_raises_and_the_session_goes_on(self):
        session = self.session()
        def bad(request_id):
            return {"type": "command", "id": request_id, "environment": "bash", "command": "ls", "timeout": 5}

        with self.assertRaises(envhost.RequestRefused) as caught:
            session._call(bad)
        self.assertIn("timeout", caught.exception.message)
        self.assertEqual(session.run("bash", "echo still here").output, "still here\n")

    def test_output_over_the_cap_is_cut_with_a_marker(self):
        result = self.session().run("python", "print('x' * 1_000_000)")
        self.assertTrue(result.success)
        self.assertLess(len(result.output), 200_000)
        self.assertIn("[... output too long:", result.output)

    def test_answers_of_many_megabytes(self):
        session = self.session(output_cap=16 * 1024 * 1024)
        result = session.run("python", "print('x' * (12 * 1024 * 1024))")
        self.assertEqual(len(result.output), 12 * 1024 * 1024 + 1)
        self.assertEqual(session.run("bash", "echo after").output, "after\n")

        async def scenario():
            async with await envhost.AsyncSession.start(project=self.project, output_cap=16 * 1024 * 1024) as other:
                return await other.run("python", "print('y' * (12 * 1024 * 1024))")

        self.assertEqual(len(asyncio.run(scenario()).output), 12 * 1024 * 1024 + 1)

    def test_threads_can_share_a_session(self):
        session = self.session()
        errors = []

        def worker(n):
            try:
                for i in range(15):
                    output = session.run("bash", f"echo {n}-{i}").output
                    if output != f"{n}-{i}\n":
                        errors.append(output)
            except Exception as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        self.assertEqual(errors, [])


class Lifetime(ProjectTest):
    def test_close_ends_the_host_and_everything_it_started(self):
        session = self.session()
        session.run("bash", "sleep 1000 & nohup sleep 1001 >/dev/null 2>&1 &")
        session.run("python", "import subprocess; p = subprocess.Popen(['sleep', '1002'])")
        children = descendants(session.pid)
        self.assertGreaterEqual(len(children), 5, children)
        self.assertEqual(session.close(), 0)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([pid for pid in children if alive(pid)], [])
        with self.assertRaises(envhost.EnvhostError):
            session.run("bash", "true")

    def test_context_manager_closes(self):
        with envhost.Session(project=self.project) as session:
            pid = session.pid
            session.run("bash", "true")
        self.assertFalse(alive(pid))

    def test_host_killed_mid_session_raises_host_died(self):
        session = self.session()
        session.run("bash", "true")
        # From outside: the host's guard refuses a kill from the programs
        # it runs (bash's `kill -9 $PPID` fails with EPERM).
        killer = threading.Timer(0.5, os.kill, (session.pid, signal.SIGKILL))
        killer.start()
        self.addCleanup(killer.cancel)
        with self.assertRaises(envhost.HostDied) as caught:
            session.run("bash", "sleep 5")
        self.assertEqual(caught.exception.returncode, -9)
        self.assertIn("ended before answering", str(caught.exception))
        # Every later request says the same, at once.
        with self.assertRaises(envhost.HostDied):
            session.run("bash", "true")

    def test_host_that_cannot_start_shows_its_stderr(self):
        with self.assertRaises(envhost.HostDied) as caught:
            self.session(no_such_option=True).run("bash", "true")
        error = caught.exception
        self.assertEqual(error.returncode, 2)
        self.assertTrue(any("--no-such-option" in line for line in error.stderr), error.stderr)
        self.assertIn("--no-such-option", str(error))

    def test_missing_project_is_reported(self):
        with self.assertRaises(envhost.HostDied) as caught:
            envhost.Session(project=self.project / "missing").screen()
        self.assertIn("cannot be used", str(caught.exception))

    def test_reply_timeout_closes_a_silent_host(self):
        session = envhost.Session(command=["sleep", "1000"], reply_timeout=0.5)
        self.addCleanup(session.close)
        with self.assertRaises(envhost.ReplyTimeout):
            session.screen()
        self.assertTrue(session.closed)
        self.assertFalse(alive(session.pid))

    def test_reply_timeout_on_an_event_loop(self):
        async def scenario():
            session = await envhost.AsyncSession.start(command=["sleep", "1000"], reply_timeout=0.5)
            try:
                await session.screen()
            finally:
                await session.close()
            return session

        with self.assertRaises(envhost.ReplyTimeout):
            asyncio.run(scenario())

    def test_an_answer_that_is_not_json_closes_the_session(self):
        session = envhost.Session(command=["sh", "-c", "read line; echo 'not json'; exec sleep 1000"])
        self.addCleanup(session.close)
        with self.assertRaises(envhost.ProtocolViolation):
            session.screen()
        self.assertTrue(session.closed)


class CommandPrefixes(ProjectTest):
    def test_any_command_that_reaches_envhost_serve(self):
        # What `docker exec -i BOX envhost serve` or `kubectl exec -i POD --
        # envhost serve` amount to: a prefix that ends in the host's stdio.
        binary = envhost.find_binary()
        session = envhost.Session(
            project=self.project,
            command=["env", "REACHED_THROUGH=prefix", binary, "serve"],
        )
        self.addCleanup(session.close)
        self.assertEqual(session.run("bash", "echo $REACHED_THROUGH; pwd").output, f"prefix\n{self.project.resolve()}\n")

    def test_envhost_bin_is_used_for_local_sessions(self):
        log = self.project / "wrapper.log"
        wrapper = self.project / "envhost-wrapper"
        wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {envhost.find_binary()} "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
        os.environ["ENVHOST_BIN"] = str(wrapper)
        try:
            session = self.session()
        finally:
            del os.environ["ENVHOST_BIN"]
        self.assertEqual(session.run("bash", "echo ok").output, "ok\n")
        self.assertIn("serve --project", log.read_text())

    def test_a_command_must_be_a_list(self):
        with self.assertRaises(ValueError):
            envhost.Session(command="envhost serve")


class AsyncSessions(ProjectTest):
    def test_the_same_session_on_an_event_loop(self):
        async def scenario():
            async with await envhost.AsyncSession.start(project=self.project) as session:
                await session.run("bash", "cd /tmp")
                where = await session.run("bash", "pwd")
                value = await session.run("python", "x = 6\nx * 7")
                screen = await session.screen()
                # Two sessions side by side on one loop.
                async with await envhost.AsyncSession.start(project=self.project) as other:
                    both = await asyncio.gather(session.run("bash", "echo a"), other.run("bash", "echo b"))
                return where, value, screen, both

        where, value, screen, both = asyncio.run(scenario())
        self.assertEqual(where.output, "/tmp\n")
        self.assertEqual(value.output, "42\n")
        self.assertIn("x: int", screen["python"].content)
        self.assertEqual([result.output for result in both], ["a\n", "b\n"])

    def test_host_death_and_refusals_on_an_event_loop(self):
        async def scenario():
            session = await envhost.AsyncSession.start(project=self.project, no_such_option=True)
            try:
                await session.screen()
            finally:
                await session.close()

        with self.assertRaises(envhost.HostDied) as caught:
            asyncio.run(scenario())
        self.assertTrue(any("--no-such-option" in line for line in caught.exception.stderr))

        async def refused():
            async with await envhost.AsyncSession.start(project=self.project) as session:
                def bad(request_id):
                    return {"type": "nonsense", "id": request_id}

                try:
                    await session._call(bad)
                except envhost.RequestRefused as error:
                    return error, (await session.run("bash", "echo on")).output

        error, after = asyncio.run(refused())
        self.assertIn("nonsense", error.message)
        self.assertEqual(after, "on\n")


class Protocol(unittest.TestCase):
    def test_requests_leave_out_what_is_not_given(self):
        self.assertEqual(
            _protocol.command(3, "bash", "ls", None, None),
            {"type": "command", "id": 3, "environment": "bash", "command": "ls"},
        )
        self.assertEqual(
            _protocol.command(4, "bash", "ls", 1.5, 0.25),
            {"type": "command", "id": 4, "environment": "bash", "command": "ls", "timeout_ms": 1500, "yield_ms": 250},
        )
        self.assertEqual(
            _protocol.write_file(5, "a.bin", b"\x00\xff", append=False, more=False),
            {"type": "write_file", "id": 5, "path": "a.bin", "content_base64": "AP8="},
        )

    def test_an_answer_to_another_request_is_a_violation(self):
        with self.assertRaises(envhost.ProtocolViolation):
            _protocol.decode(b'{"type":"screen","id":9,"screen":{}}', {"type": "screen", "id": 8})

    def test_write_plan_chunks_and_marks_the_last(self):
        size = _protocol.FILE_CHUNK_BYTES
        plan = list(_protocol.write_plan(b"a" * (2 * size + 1)))
        self.assertEqual([(len(content), append, more) for content, append, more in plan], [(size, False, True), (size, True, True), (1, True, False)])
        self.assertEqual(list(_protocol.write_plan(b"")), [(b"", False, False)])


if __name__ == "__main__":
    unittest.main()
