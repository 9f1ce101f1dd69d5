"""The agent's own API is thin: `from runner import emit_reward, rollout` (or lightningrl's) loads
neither the OpenTelemetry SDK nor the store's models, as opentelemetry-api stands apart from its SDK;
the calls work once the runner has opened an attempt around the agent."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from runner import emit_reward, rollout

HEAVY = ("opentelemetry.sdk", "pydantic", "sqlalchemy", "httpx", "fastapi", "torch", "lightningstore.store")


def loaded_after(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after `statement`."""
    code = f"import sys\n{statement}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "statement",
    [
        "from runner import emit_reward, rollout, agent_name",
        "from lightningrl import emit_reward, rollout",
    ],
)
def test_the_agent_api_loads_no_sdk_and_no_store_models(statement: str) -> None:
    modules = loaded_after(statement)
    heavy = [m for m in modules if m.startswith(HEAVY)]
    assert not heavy, heavy
    assert "runner.reward" in modules and "runner.agent" in modules


def test_the_checker_sees_a_heavy_import() -> None:
    assert "opentelemetry.sdk.trace" in loaded_after("from runner import Runner")


def test_outside_an_attempt_emit_reward_says_what_is_missing() -> None:
    @rollout
    def agent(task: dict, resources: object) -> float:
        return 1.0

    assert type(agent).__name__ == "FunctionAgent" and agent.rollout({}, object()) == 1.0
    with pytest.raises(RuntimeError, match="emit_reward must be called inside a rollout run by a Runner"):
        emit_reward(1.0)


@pytest.mark.parametrize("package", ["lightningstore", "runner", "lightningrl"])
def test_no_lazy_name_is_also_a_submodule(package: str) -> None:
    """A submodule named like a lazy export would replace it on the package once anything imports the
    submodule (`runner.trace` the module, not the decorator)."""
    import importlib
    import pkgutil

    module = importlib.import_module(package)
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    assert len(submodules) > 3
    assert not set(module.__all__) & submodules
    for name in module.__all__:
        assert not isinstance(getattr(module, name), type(module)), name
