"""LightningRLConfig from dicts and command-line text: nested tables, type checks, named errors, help."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightningrl.config_fields import config_fields, config_from, parse_field_text
from lightningrl.rl.config import LightningRLConfig


def test_nested_dicts_become_the_config() -> None:
    config = config_from(
        {
            "steps": 3,
            "agent_names": ["solver"],
            "output_dir": "runs/x",
            "advantage": {"estimator": "reinforce_plus_plus"},
            "trainer": {"lr": 1e-4, "betas": [0.9, 0.95], "loss": {"clip_ratio_high": 0.28}},
        }
    )
    assert config.steps == 3 and config.agent_names == frozenset({"solver"})
    assert config.output_dir == Path("runs/x") and config.advantage.estimator == "reinforce_plus_plus"
    assert config.trainer.lr == 1e-4 and config.trainer.betas == (0.9, 0.95)
    assert config.trainer.loss.clip_ratio_high == 0.28
    same = LightningRLConfig(steps=2)
    assert config_from(same) is same and config_from(None) == LightningRLConfig()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"stepz": 3}, r"unknown key config\.stepz .*valid keys: resource_name, steps"),
        ({"trainer": {"learning_rate": 1}}, r"unknown key config\.trainer\.learning_rate .*valid keys: lr"),
        ({"steps": "3"}, r"config\.steps must be int, got '3'"),
        ({"steps": True}, r"config\.steps must be int, got True"),
        ({"trainer": {"betas": [0.9]}}, r"config\.trainer\.betas must be tuple\[float, float\]"),
        ({"trainer": 3}, r"config\.trainer must be TrainerConfig, got 3"),
        ({"steps": 0}, r"steps must be >= 1, got 0"),
        ({"advantage": {"estimator": "ppo"}}, r"config\.advantage: estimator must be one of"),
    ],
)
def test_bad_values_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config_from(data)


def test_command_line_text() -> None:
    hints = {f.name: f.hint for f in config_fields()}
    assert parse_field_text("1e-4", hints["trainer.lr"], "--trainer.lr") == 1e-4
    assert parse_field_text("3", hints["steps"], "--steps") == 3
    assert parse_field_text("false", hints["validate_first"], "--validate_first") is False
    assert parse_field_text("a,b", hints["agent_names"], "--agent_names") == frozenset({"a", "b"})
    assert parse_field_text("none", hints["balance_by"], "--balance_by") is None
    assert parse_field_text("op", hints["balance_by"], "--balance_by") == "op"
    assert parse_field_text("[0.9, 0.99]", hints["trainer.betas"], "--trainer.betas") == (0.9, 0.99)
    assert parse_field_text('{"eps": 1e-5}', hints["trainer.optimizer_kwargs"], "-") == {"eps": 1e-5}
    with pytest.raises(ValueError, match="--steps must be int, got 'many'"):
        parse_field_text("many", hints["steps"], "--steps")


def test_every_field_has_a_flag_and_documented_fields_have_help() -> None:
    fields = {f.name: f for f in config_fields()}
    assert {"steps", "trainer.lr", "trainer.loss.clip_ratio_low", "advantage.estimator"} <= set(fields)
    assert fields["steps"].help.startswith("RL steps") and fields["steps"].default == 20
    assert "GRPO group" in fields["rollouts_per_task"].help
