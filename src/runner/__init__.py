"""runner: run an existing agent against a LightningStore (claim, trace, reward, finish), unchanged.

Every name is imported on first use: the agent's own API (`emit_reward`, `@rollout`, `agent_name`)
loads neither the OpenTelemetry SDK nor the store's models; the `Runner` that executes agents does.
"""

from typing import TYPE_CHECKING

from lightningstore.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from runner.agent import FunctionAgent, LitAgent, rollout
    from runner.agl import AglAgent
    from runner.progress import RunnerSummary
    from runner.resources import AgentResources, ResolvedLLM
    from runner.reward import emit_reward
    from runner.runner import Runner, runner_name_prefix
    from runner.step_spans import trace
    from runner.tracing.context import AttemptContext, agent_name, current_attempt

__getattr__ = lazy_exports(
    __name__,
    {
        "AgentResources": "runner.resources",
        "AglAgent": "runner.agl",
        "AttemptContext": "runner.tracing.context",
        "FunctionAgent": "runner.agent",
        "LitAgent": "runner.agent",
        "ResolvedLLM": "runner.resources",
        "Runner": "runner.runner",
        "RunnerSummary": "runner.progress",
        "agent_name": "runner.tracing.context",
        "current_attempt": "runner.tracing.context",
        "emit_reward": "runner.reward",
        "rollout": "runner.agent",
        "runner_name_prefix": "runner.runner",
        "trace": "runner.step_spans",
    },
)

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
