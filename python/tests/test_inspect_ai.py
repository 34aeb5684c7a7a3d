"""inspect_ai on envhost: real `inspect_ai.eval` runs, with inspect's
`mockllm` model replaying scripted tool calls, through the adapter's tools
in one host per sample; and, for those who wire envhost's MCP server by
hand, what `mcp_connection` changes.

Each scripted output carries its token usage: without it mockllm counts
tokens with tiktoken, which downloads its encoding at run time."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import unittest
from pathlib import Path

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.solver import generate, solver, use_tools
from inspect_ai.tool import mcp_connection, mcp_server_stdio

import envhost
from envhost.adapters.inspect_ai import current_session, envhost_solver, envhost_tools, with_envhost
from support import alive, check_installed, descendants

MODEL = "mockllm/model"


def scripted(output: ModelOutput) -> ModelOutput:
    output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    return output


def call(tool: str, **arguments) -> ModelOutput:
    return scripted(ModelOutput.for_tool_call(MODEL, tool, arguments))


def answer(text: str) -> ModelOutput:
    return scripted(ModelOutput.from_content(MODEL, text))


def scripted_model(steps):
    """A mockllm model that plays `steps(sample_name)` for each sample: the
    sample is told by its input, the step by the tool results so far (so
    samples may run in any order)."""

    def next_output(messages, tools, tool_choice, config):
        name = next(m.text for m in messages if m.role == "user").split()[-1]
        done = sum(1 for m in messages if m.role == "tool")
        plan = steps(name)
        return plan[done] if done < len(plan) else answer(f"done {name}")

    return get_model(MODEL, custom_outputs=next_output)


def state_steps(name: str):
    """Each sample first looks for any state left by another, then sets
    its own (cd, an exported variable, an import and a variable) and reads
    it back in later calls."""
    return [
        call("bash", command=f'echo "mark=${{MARK:-unset}} pwd=$PWD"; cd /usr && export MARK={name}'),
        call("python", command=f"print('value' in globals(), 'json' in globals())\nimport json\nvalue = {{'sample': '{name}'}}"),
        call("bash", command='echo "$MARK $PWD"'),
        call("python", command="print(json.dumps(value))"),
    ]


def tool_outputs(sample) -> list:
    return [message.text for message in sample.messages if message.role == "tool"]


def assert_nothing_left(test: unittest.TestCase) -> None:
    """No process this test started is left (a host killed from outside
    may take a moment to take its shell and interpreter with it)."""
    deadline = time.monotonic() + 10
    while True:
        left = [pid for pid in descendants(os.getpid()) if alive(pid)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    test.assertEqual(left, [], "processes left after the eval")


class InspectAI(unittest.TestCase):
    def setUp(self) -> None:
        check_installed()
        self.logs = Path(tempfile.mkdtemp(prefix="envhost-inspect-logs-"))
        self.addCleanup(shutil.rmtree, self.logs, ignore_errors=True)

    def run_eval(self, task: Task, model, **options):
        logs = inspect_eval(task, model=model, log_dir=str(self.logs), display="none", **options)
        self.assertEqual(len(logs), 1)
        return logs[0]

    def assert_nothing_left(self):
        assert_nothing_left(self)

    def dataset(self):
        return [Sample(input="Work in sample alpha", id="alpha"), Sample(input="Work in sample beta", id="beta")]

    def test_state_lasts_the_sample_and_never_crosses_samples(self):
        task = Task(dataset=self.dataset(), solver=envhost_solver())
        log = self.run_eval(task, scripted_model(state_steps), max_samples=1)

        self.assertEqual(log.status, "success", log.error)
        self.assertEqual(len(log.samples), 2)
        for sample in log.samples:
            name = sample.id
            outputs = tool_outputs(sample)
            self.assertEqual(len(outputs), 4, outputs)
            # Nothing from the other sample: a fresh shell in a fresh
            # project, a fresh interpreter.
            self.assertTrue(outputs[0].startswith("mark=unset pwd="), outputs[0])
            self.assertNotIn("pwd=/usr\n", outputs[0])
            self.assertTrue(outputs[1].startswith("False False"), outputs[1])
            # Its own state, across calls.
            self.assertTrue(outputs[2].startswith(f"{name} /usr\n"), outputs[2])
            self.assertTrue(outputs[3].startswith(f'{{"sample": "{name}"}}'), outputs[3])
            # A result is the output, then the screen's sections that
            # changed: all of them first, then only those that changed.
            self.assertIn("=== bash ===", outputs[0])
            self.assertIn("=== editor ===", outputs[0])
            self.assertIn("=== python ===", outputs[1])
            self.assertIn("value: dict", outputs[1])
            self.assertIn("(unchanged: bash, editor)", outputs[1])
            self.assertIn("(unchanged: bash, python, editor)", outputs[2])
            self.assertEqual(sample.output.completion, f"done {name}")
        self.assert_nothing_left()

    def test_one_host_per_sample_shut_down_at_its_end(self):
        hosts = []

        @solver
        def note_host():
            async def solve(state, generate):
                hosts.append((state.sample_id, current_session().pid))
                return state

            return solve

        project = Path(tempfile.mkdtemp(prefix="envhost-inspect-project-"))
        self.addCleanup(shutil.rmtree, project, ignore_errors=True)
        task = Task(
            dataset=self.dataset(),
            solver=with_envhost([note_host(), use_tools(envhost_tools()), generate()], project=project, timeout=30),
        )
        # Both samples at once: each still has its own host.
        log = self.run_eval(task, scripted_model(lambda name: state_steps(name)[2:] + state_steps(name)[:2]), max_samples=2)

        self.assertEqual(log.status, "success", log.error)
        self.assertEqual(sorted(sample_id for sample_id, _ in hosts), ["alpha", "beta"])
        self.assertNotEqual(hosts[0][1], hosts[1][1])
        for _, pid in hosts:
            self.assertFalse(alive(pid), f"the host {pid} outlived its sample")
        # The given project is used (and kept).
        for sample in log.samples:
            self.assertIn(f"Working directory: {project}", tool_outputs(sample)[0])
        self.assertTrue(project.is_dir())
        self.assert_nothing_left()

    def test_a_command_past_its_timeout_is_interrupted_and_state_survives(self):
        steps = [
            call("python", command="kept = 'yes'"),
            call("python", command="import time\ntime.sleep(30)", timeout=1),
            call("python", command="print(kept)"),
        ]
        task = Task(dataset=[Sample(input="Work in sample alpha")], solver=envhost_solver())
        log = self.run_eval(task, scripted_model(lambda name: steps))
        self.assertEqual(log.status, "success", log.error)
        outputs = tool_outputs(log.samples[0])
        self.assertIn("KeyboardInterrupt", outputs[1])
        self.assertTrue(outputs[2].startswith("yes\n"), outputs[2])
        self.assert_nothing_left()

    def test_a_host_that_dies_is_replaced_on_the_next_call_which_says_so(self):
        hosts = []

        @solver
        def note_host():
            async def solve(state, generate):
                hosts.append(current_session().pid)
                return state

            return solve

        def steps(name):
            return [call("bash", command="export MARK=kept"), call("bash", command="true"), call("bash", command='echo "mark=${MARK:-unset}"')]

        def next_output(messages, tools, tool_choice, config):
            done = sum(1 for m in messages if m.role == "tool")
            if done == 1:
                # Between two calls, the host is killed.
                os.kill(hosts[0], signal.SIGKILL)
            plan = steps("")
            return plan[done] if done < len(plan) else answer("done")

        task = Task(
            dataset=[Sample(input="Work in sample alpha")],
            solver=with_envhost([note_host(), use_tools(envhost_tools()), generate()]),
        )
        log = self.run_eval(task, get_model(MODEL, custom_outputs=next_output))
        self.assertEqual(log.status, "success", log.error)
        tools = [message for message in log.samples[0].messages if message.role == "tool"]
        self.assertIsNotNone(tools[1].error)
        self.assertIn("The envhost session ended", tools[1].error.message)
        self.assertIn("The next call starts a fresh one", tools[1].error.message)
        self.assertTrue(tools[2].text.startswith("[envhost] This is a fresh session"), tools[2].text)
        self.assertIn("mark=unset", tools[2].text)
        self.assert_nothing_left()

    def test_the_tools_refuse_to_run_outside_with_envhost(self):
        # Rather than a host per call, whose state would vanish between calls.
        task = Task(dataset=[Sample(input="Work in sample alpha")], solver=[use_tools(envhost_tools()), generate()])
        log = self.run_eval(task, scripted_model(lambda name: [call("bash", command="echo hi")]))
        self.assertEqual(log.status, "error")
        self.assertIn("with_envhost", str(log.error) + str(log.samples[0].error if log.samples else ""))
        self.assert_nothing_left()

    def test_a_missing_project_fails_the_sample_with_the_hosts_words(self):
        task = Task(dataset=[Sample(input="Work in sample alpha")], solver=envhost_solver(project="/nonexistent/envhost-project"))
        log = self.run_eval(task, scripted_model(lambda name: [call("bash", command="true")]))
        self.assertEqual(log.status, "error")
        self.assertIn("/nonexistent/envhost-project", str(log.error))
        self.assert_nothing_left()


class HandWiredMCP(unittest.TestCase):
    """inspect's own MCP client on `envhost mcp`: the state lasts across
    calls only inside `mcp_connection` (docs/python-package.md)."""

    def setUp(self) -> None:
        check_installed()
        self.logs = Path(tempfile.mkdtemp(prefix="envhost-inspect-logs-"))
        self.project = Path(tempfile.mkdtemp(prefix="envhost-inspect-project-"))
        self.addCleanup(shutil.rmtree, self.logs, ignore_errors=True)
        self.addCleanup(shutil.rmtree, self.project, ignore_errors=True)

    def second_echo(self, solver_chain) -> str:
        steps = [call("bash", command="export MARK=kept"), call("bash", command='echo "mark=${MARK:-unset}"')]
        task = Task(dataset=[Sample(input="Work in sample alpha")], solver=solver_chain)
        logs = inspect_eval(task, model=scripted_model(lambda name: steps), log_dir=str(self.logs), display="none")
        self.assertEqual(logs[0].status, "success", logs[0].error)
        assert_nothing_left(self)
        return tool_outputs(logs[0].samples[0])[1]

    def server(self):
        return mcp_server_stdio(name="envhost", command=envhost.find_binary(), args=["mcp", "--project", str(self.project)])

    def test_without_mcp_connection_every_call_starts_a_fresh_host(self):
        server = self.server()
        self.assertTrue(self.second_echo([use_tools(server), generate()]).startswith("mark=unset"))

    def test_inside_mcp_connection_the_state_lasts(self):
        server = self.server()

        @solver
        def connected():
            async def solve(state, generate_):
                async with mcp_connection([server]):
                    return await generate()(state, generate_)

            return solve

        self.assertTrue(self.second_echo([use_tools(server), connected()]).startswith("mark=kept"))
