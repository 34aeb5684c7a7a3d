"""LangChain deepagents on envhost: deepagents' own agent graph and tools,
driven by a chat model that replays scripted tool calls, with the
adapter's sandbox as its backend."""

from __future__ import annotations

from deepagents import create_deep_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage

from envhost.adapters.deepagents import EnvhostSandbox
from support import ProjectTest

EVERY_BYTE = bytes(range(256)) * 3 + b"\r\n\x00"


class ScriptedChatModel(GenericFakeChatModel):
    """langchain-core's fake chat model, accepting the agent's tools (it
    replays its messages whatever tools it is offered)."""

    def bind_tools(self, tools, **kwargs):
        return self


def call(name: str, **args) -> AIMessage:
    call.count = getattr(call, "count", 0) + 1
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{call.count}"}])


def run_agent(sandbox: EnvhostSandbox, script: list) -> list:
    model = ScriptedChatModel(messages=iter(script + [AIMessage(content="done")]))
    agent = create_deep_agent(model=model, backend=sandbox)
    messages = agent.invoke({"messages": [{"role": "user", "content": "work on the project"}]})["messages"]
    return [message for message in messages if isinstance(message, ToolMessage)]


class DeepAgents(ProjectTest):
    def sandbox(self, **options) -> EnvhostSandbox:
        sandbox = EnvhostSandbox(project=self.project, **options)
        self.addCleanup(sandbox.close)
        return sandbox

    def test_agent_commands_run_in_envhosts_persistent_shell(self):
        project = self.project.resolve()
        (project / "notes.txt").write_text("alpha\nbeta\ngamma\n")
        sandbox = self.sandbox()
        results = run_agent(
            sandbox,
            [
                call("execute", command="mkdir -p work && cd work && export STAGE=one"),
                call("execute", command="pwd; echo $STAGE; ls /no/such/dir"),
                call("read_file", file_path=f"{project}/notes.txt"),
                call("edit_file", file_path=f"{project}/notes.txt", old_string="beta", new_string="BETA"),
                call("grep", pattern="BETA", path=str(project)),
                call("ls", path=str(project)),
            ],
        )
        self.assertEqual(len(results), 6, [result.content for result in results])
        first, second, read, edit, grep, listing = results
        self.assertEqual(first.artifact["exit_code"], 0)
        # The working directory and variables carried over; the exit code is
        # the failing command's.
        self.assertIn(f"{project}/work\none\n", second.content)
        self.assertEqual(second.artifact["exit_code"], 2)
        self.assertIn("beta", read.content)
        self.assertNotIn("error", edit.content.lower())
        self.assertEqual((project / "notes.txt").read_text(), "alpha\nBETA\ngamma\n")
        self.assertIn("notes.txt", grep.content)
        self.assertIn("work", listing.content)

    def test_execute_reports_timeouts_and_cut_output(self):
        sandbox = self.sandbox(output_cap=4096)
        self.assertTrue(sandbox.id.startswith("envhost-"))
        slow = sandbox.execute("sleep 30", timeout=1)
        self.assertNotEqual(slow.exit_code, 0)
        self.assertIn("its timeout", slow.output)
        long = sandbox.execute("seq 1 100000")
        self.assertTrue(long.truncated)
        self.assertEqual(long.exit_code, 0)
        self.assertFalse(sandbox.execute("echo short").truncated)

    def test_upload_download_and_the_write_file_tool(self):
        project = self.project.resolve()
        sandbox = EnvhostSandbox(project=project)
        self.addCleanup(sandbox.close)
        uploaded = sandbox.upload_files([(f"{project}/bin/blob", EVERY_BYTE), ("/etc/envhost-test", b"x")])
        self.assertEqual([response.error for response in uploaded], [None, "invalid_path"])
        downloaded = sandbox.download_files([f"{project}/bin/blob", f"{project}/missing", f"{project}/bin"])
        self.assertEqual(downloaded[0].content, EVERY_BYTE)
        self.assertEqual([response.error for response in downloaded], [None, "file_not_found", "is_directory"])

        results = run_agent(
            sandbox,
            [
                call("write_file", file_path=f"{project}/hello.py", content="print('hello from deepagents')\n"),
                call("execute", command=f"python3 {project}/hello.py"),
            ],
        )
        self.assertIn("hello from deepagents", results[1].content)
        self.assertEqual((project / "hello.py").read_text(), "print('hello from deepagents')\n")
