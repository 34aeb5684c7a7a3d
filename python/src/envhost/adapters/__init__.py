"""Adapters that put envhost under agent frameworks, one module each,
each needing its framework installed (the package's optional extras):

- `envhost.adapters.minisweagent` — `EnvhostEnvironment`, an
  `environment_class` for mini-swe-agent (`envhost[mini]`);
- `envhost.adapters.smolagents` — `EnvhostExecutor`, a remote Python
  executor for smolagents' `CodeAgent` (`envhost[smolagents]`);
- `envhost.adapters.deepagents` — `EnvhostSandbox`, a `BaseSandbox`
  backend for LangChain deepagents (`envhost[deepagents]`).
- `envhost.adapters.inspect_ai` — `envhost_tools`, `with_envhost` and
  `envhost_solver`: envhost's environments as inspect_ai tools, one host
  per sample (`envhost[inspect]`).

`envhost.adapters._shell` is what they share: a bash command's exit code
and whether its output was cut.
"""
