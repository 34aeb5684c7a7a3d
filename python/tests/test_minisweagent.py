"""mini-swe-agent on envhost: its own `mini` command and agent loop, its
own deterministic test model replaying a scripted trajectory (create
files, run tests, submit), and the adapter's environment class chosen by
`environment_class:` in its config."""

from __future__ import annotations

import json
import os
import tempfile
import textwrap

from support import ProjectTest, run, venv_script

ENVIRONMENT_CLASS = "envhost.adapters.minisweagent.EnvhostEnvironment"


def step(thought: str, command: str) -> dict:
    """One assistant turn as mini-swe-agent's DeterministicModel replays it."""
    return {"role": "assistant", "content": thought, "extra": {"actions": [{"command": command}]}}


CALC = textwrap.dedent(
    """\
    cat > calc.py <<'EOF'
    def add(a, b):
        return a + b
    EOF"""
)
TEST_CALC = textwrap.dedent(
    """\
    cat > test_calc.py <<'EOF'
    import unittest
    from calc import add

    class AddTest(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 40), 42)
    EOF"""
)


class MiniSweAgent(ProjectTest):
    def run_mini(self, outputs, environment, task="Add an add() function with a test") -> dict:
        config_dir = tempfile.mkdtemp(prefix="mini-config-")
        config = {
            "agent": {"agent_class": "interactive", "mode": "yolo", "confirm_exit": False, "cost_limit": 0, "step_limit": 20},
            "model": {"model_class": "deterministic", "model_name": "deterministic", "outputs": outputs},
            "environment": {"environment_class": ENVIRONMENT_CLASS, **environment},
        }
        # JSON is YAML: mini reads this file with yaml.safe_load.
        config_file = os.path.join(config_dir, "envhost.yaml")
        with open(config_file, "w") as file:
            json.dump(config, file)
        trajectory = os.path.join(config_dir, "run.traj.json")
        env = {**os.environ, "MSWEA_GLOBAL_CONFIG_DIR": config_dir, "MSWEA_CONFIGURED": "1", "MSWEA_SILENT_STARTUP": "1"}
        done = run(
            [venv_script("mini"), "-c", "mini.yaml", "-c", config_file, "-t", task, "-y", "--exit-immediately", "-o", trajectory],
            env=env,
            cwd=config_dir,
        )
        self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])
        with open(trajectory) as file:
            return json.load(file)

    def test_mini_runs_a_scripted_trajectory_in_envhosts_persistent_shell(self):
        outputs = [
            step("Make a package folder and work inside it.", "mkdir -p calc && cd calc"),
            step("Write the function.", CALC),
            step("Write its test.", TEST_CALC),
            step("A command that fails keeps its exit code.", "ls no-such-file"),
            step("Run the tests.", "python3 -m unittest -v test_calc 2>&1"),
            step("Submit.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; pwd; cat calc.py"),
        ]
        trajectory = self.run_mini(outputs, {"project": str(self.project), "timeout": 60})

        info = trajectory["info"]
        self.assertEqual(info["exit_status"], "Submitted")
        # The shell kept its working directory between commands: every file
        # landed in calc/, and the submission says so.
        project = self.project.resolve()
        self.assertEqual(info["submission"], f"{project}/calc\ndef add(a, b):\n    return a + b\n")
        self.assertTrue((project / "calc" / "calc.py").is_file())
        self.assertTrue((project / "calc" / "test_calc.py").is_file())
        self.assertEqual(info["config"]["environment_type"], ENVIRONMENT_CLASS)

        # mini's observation messages carry envhost's output and exit codes.
        observations = [message["content"] for message in trajectory["messages"] if message["role"] == "user"][1:]
        self.assertEqual(len(observations), 5)
        failed = json.loads(observations[3])
        self.assertEqual(failed["returncode"], 2)
        self.assertIn("No such file or directory", failed["output"])
        tests = json.loads(observations[4])
        self.assertEqual(tests["returncode"], 0)
        self.assertIn("test_add (test_calc.AddTest", tests["output"])
        self.assertIn("OK", tests["output"])

    def test_the_environment_in_python_with_fresh_subshells_variables_and_timeouts(self):
        from minisweagent.agents.default import DefaultAgent
        from minisweagent.models.test_models import DeterministicModel

        from envhost.adapters.minisweagent import EnvhostEnvironment

        (self.project / "sub").mkdir()
        environment = EnvhostEnvironment(
            project=str(self.project), fresh_subshell=True, env={"MODE": "fresh subshells"}, timeout=1
        )
        self.addCleanup(environment.close)
        model = DeterministicModel(
            outputs=[
                step("cd does not carry over in fresh subshells", "cd sub && pwd"),
                step("so this runs in the project", "pwd; echo $MODE"),
                step("a command past its timeout is interrupted", "sleep 30"),
                step("and the shell still answers", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo alive"),
            ]
        )
        agent = DefaultAgent(
            model,
            environment,
            system_template="You run commands.",
            instance_template="{{task}}",
            cost_limit=0,
            step_limit=10,
        )
        result = agent.run("check the environment")
        self.assertEqual(result["exit_status"], "Submitted")
        self.assertEqual(result["submission"], "alive\n")
        observations = [message["content"] for message in agent.messages if message["role"] == "user"][1:]
        project = str(self.project.resolve())
        self.assertIn(f"{project}/sub\n", observations[0])
        self.assertIn(f"<output>\n{project}\nfresh subshells\n</output>", observations[1])
        self.assertNotIn("<returncode>0</returncode>", observations[2])
        self.assertIn("its timeout", observations[2])
