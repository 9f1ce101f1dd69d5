"""Experiment trackers: every metrics row lands in TensorBoard, MLflow and W&B (offline) files under the
same numbers, with the config and the version ids; bad names fail clearly."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tracker_files import mlflow_runs, tensorboard_scalars, tensorboard_texts, wandb_run

from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.metrics import MetricsLog
from lightningrl.rl.trackers import RunTrackers, mlflow_name

ROWS = [
    {"step": 0, "val/success": 0.25, "val/success[op=minus]": 0.0},
    {
        "step": 1,
        "train/reward_mean": 0.375,
        "train/success[op=plus]": 0.75,
        "actor/lr": 1e-5,
        "decision/first": "add:5 sub:3",
        "update/version_id": "v-abc",
        "actor/grad_norm": math.nan,  # not a number a tracker can chart: left out
    },
    {"step": 2, "train/reward_mean": 0.5, "train/success[op=plus]": 1.0, "update/version_id": "v-def"},
]


def numbers(row: dict) -> dict[str, float]:
    return {
        k: float(v) for k, v in row.items() if k != "step" and isinstance(v, int | float) and math.isfinite(v)
    }


def test_every_row_lands_in_each_tracker_under_its_numbers(tmp_path: Path) -> None:
    config = LightningRLConfig(output_dir=tmp_path, trackers=("tensorboard", "mlflow", "wandb"), seed=3)
    log = MetricsLog(tmp_path / "metrics.csv")
    log.trackers = RunTrackers.for_config(config)
    for row in ROWS:
        log.log(row)
    log.trackers.close()

    scalars = tensorboard_scalars(tmp_path / "tensorboard")
    texts = tensorboard_texts(tmp_path / "tensorboard")
    [mlflow] = mlflow_runs(tmp_path / "mlflow.db")
    wandb = wandb_run(tmp_path / "wandb")
    for row in ROWS:
        step = row["step"]
        for key, value in numbers(row).items():
            assert scalars[key][step] == pytest.approx(value), key
            assert mlflow["metrics"][mlflow_name(key)][step] == pytest.approx(value), key
            assert wandb["history"][step][key] == pytest.approx(value), key
    assert "actor/grad_norm" not in scalars and "actor/grad_norm" not in mlflow["metrics"]
    # Text columns: TensorBoard text per step, MLflow tags (last value), W&B as logged.
    assert texts["decision/first"][1] == "add:5 sub:3" and texts["update/version_id"][2] == "v-def"
    assert mlflow["tags"]["update/version_id"] == "v-def"
    assert wandb["history"][1]["decision/first"] == "add:5 sub:3"
    # The whole config, in each tracker's own form.
    assert mlflow["params"]["seed"] == "3" and mlflow["params"]["advantage.baseline"] == "role"
    assert mlflow["params"]["trainer.lr"] == str(config.trainer.lr) and mlflow["status"] == "FINISHED"
    assert '"baseline": "role"' in texts["config"][0]
    assert wandb["config"]["seed"] == 3 and wandb["config"]["advantage"]["baseline"] == "role"


def test_mlflow_names_keep_the_slice_readable() -> None:
    assert mlflow_name("train/success[op=minus]") == "train/success/op:minus"
    assert mlflow_name("decision/first[kind=founder_born]") == "decision/first/kind:founder_born"
    assert mlflow_name("sample/rollouts") == "sample/rollouts"
    assert mlflow_name("weird*key[a=b]") == "weird_key/a:b"


def test_an_unknown_tracker_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown tracker 'comet'.*tensorboard"):
        LightningRLConfig(output_dir=tmp_path, trackers=("tensorboard", "comet"))
    assert LightningRLConfig(trackers=["wandb", "wandb"]).trackers == ("wandb",)  # type: ignore[arg-type]


def test_trackers_are_chosen_by_a_flag_or_toml(tmp_path: Path) -> None:
    import argparse

    from lightningrl.commands import train
    from lightningrl.config_fields import config_from

    parser = argparse.ArgumentParser()
    train.register(parser.add_subparsers())
    _, config = train.settings_from(parser.parse_args(["train", "--trackers", "tensorboard,mlflow"]))
    assert config_from(config).trackers == ("tensorboard", "mlflow")
    toml = tmp_path / "train.toml"
    toml.write_text('[config]\ntrackers = ["wandb"]\n')
    _, config = train.settings_from(parser.parse_args(["train", "--config", str(toml)]))
    assert config_from(config).trackers == ("wandb",)
