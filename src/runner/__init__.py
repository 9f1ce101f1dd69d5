"""runner: run an existing agent against a LightningStore (claim, trace, reward, finish), unchanged."""

from runner.agent import FunctionAgent, LitAgent, rollout
from runner.agl import AglAgent
from runner.context import AttemptContext, agent_name, current_attempt
from runner.progress import RunnerSummary
from runner.resources import AgentResources, ResolvedLLM
from runner.reward import emit_reward
from runner.runner import Runner, runner_name_prefix
from runner.trace import trace

__all__ = [
    "AgentResources",
    "AglAgent",
    "AttemptContext",
    "FunctionAgent",
    "LitAgent",
    "ResolvedLLM",
    "Runner",
    "RunnerSummary",
    "agent_name",
    "current_attempt",
    "emit_reward",
    "rollout",
    "runner_name_prefix",
    "trace",
]
