"""agent_spec: what runner processes are told to load, and clear errors for what they cannot."""

from __future__ import annotations

import pytest
from fit_agents import reply_length_agent

from lightningrl.processes.agent_spec import AgentSpec, agent_spec
from runner import LitAgent


class Echo(LitAgent):
    def rollout(self, task, resources):
        return 1.0


ECHO = Echo()


def test_names_and_command_lines() -> None:
    assert agent_spec(reply_length_agent) == AgentSpec(name="fit_agents:reply_length_agent")
    assert agent_spec(Echo).name == f"{__name__}:Echo"
    assert agent_spec(ECHO).name == f"{__name__}:ECHO"
    assert agent_spec("pkg.mod:solve") == AgentSpec(name="pkg.mod:solve")
    assert agent_spec("agents/x.py:solve") == AgentSpec(name="agents/x.py:solve")
    assert agent_spec("python agent.py --fast") == AgentSpec(command=("python", "agent.py", "--fast"))
    assert agent_spec(["node", "agent.js"]).runner_args() == ["--command", "node agent.js"]


def test_what_a_runner_process_cannot_load() -> None:
    with pytest.raises(ValueError, match="lambda"):
        agent_spec(lambda task: 1.0)
    with pytest.raises(ValueError, match="top-level variable"):
        agent_spec(Echo())
    with pytest.raises(TypeError, match="agent must be"):
        agent_spec(3)
    with pytest.raises(ValueError, match="empty command"):
        agent_spec("  ")
