"""Commands that outlive the wait: `yield_after`, then `wait`, `input`,
`interrupt` and `restart`, through the installed client and the real
binary. Waiting for the host to implement the messages."""

from __future__ import annotations

import asyncio
import time

import envhost
from support import ProjectTest


class Yielding(ProjectTest):
    def test_a_yielded_command_is_waited_for(self):
        session = self.session()
        started = time.monotonic()
        first = session.run("bash", "echo begin; sleep 2; echo end", yield_after=0.3)
        self.assertLess(time.monotonic() - started, 1.8)
        self.assertTrue(first.running)
        self.assertIn("begin", first.output)
        self.assertIn("still running", first.output)
        for _ in range(20):
            later = session.wait("bash", timeout=5)
            if not later.running:
                break
        self.assertFalse(later.running)
        self.assertIn("end", later.output)
        self.assertNotIn("begin", later.output)
        self.assertTrue(later.success)

    def test_other_environments_serve_while_one_runs(self):
        session = self.session()
        self.assertTrue(session.run("bash", "sleep 3", yield_after=0.2).running)
        self.assertEqual(session.run("python", "6 * 7").output, "42\n")
        busy = session.run("bash", "echo too soon")
        self.assertFalse(busy.success)
        self.assertIn("wait", busy.output)
        self.assertFalse(session.interrupt("bash").running)

    def test_input_reaches_the_running_program(self):
        session = self.session()
        asked = session.run("bash", "read -p 'name? ' name; echo hello $name", yield_after=0.3)
        self.assertTrue(asked.running)
        self.assertIn("name?", asked.output)
        answered = session.input("bash", "John\n", timeout=5)
        self.assertFalse(answered.running)
        self.assertIn("hello John", answered.output)

    def test_ctrl_c_as_input_and_interrupt(self):
        session = self.session()
        self.assertTrue(session.run("bash", "sleep 100", yield_after=0.2).running)
        stopped = session.input("bash", "\x03", timeout=5)
        self.assertFalse(stopped.running)
        self.assertTrue(session.run("python", "import time\ntime.sleep(100)", yield_after=0.2).running)
        interrupted = session.interrupt("python")
        self.assertFalse(interrupted.running)
        self.assertIn("KeyboardInterrupt", interrupted.output)

    def test_nothing_running_is_a_failed_result(self):
        session = self.session()
        for result in (session.wait("bash", timeout=0.1), session.input("bash", "x\n"), session.interrupt("bash")):
            self.assertFalse(result.success)
            self.assertIn("nothing is running", result.output.lower())
        self.assertFalse(session.wait("ruby").success)

    def test_restart_starts_fresh_and_says_what_was_lost(self):
        session = self.session()
        session.run("python", "kept = 1")
        restarted = session.restart("python")
        self.assertIn("lost", restarted.output.lower())
        self.assertNotIn("kept", restarted.screen["python"].content)
        self.assertIn("NameError", session.run("python", "kept").output)

    def test_async_yield_and_wait(self):
        async def scenario():
            async with await envhost.AsyncSession.start(project=self.project) as session:
                first = await session.run("bash", "sleep 1; echo late", yield_after=0.2)
                rest = await session.wait("bash", timeout=10)
                return first, rest

        first, rest = asyncio.run(scenario())
        self.assertTrue(first.running)
        self.assertFalse(rest.running)
        self.assertIn("late", rest.output)
