"""The example demos' shared flags: the config they make, and the closing line experiments.py parses."""

from __future__ import annotations

import argparse
import importlib.util
import io
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from lightningrl.demos.flags import (
    DemoDefaults,
    add_demo_flags,
    demo_rl_config,
    heldout_slices,
    report_heldout,
)
from lightningrl.fitting.result import TrainResult


def _experiments_module():  # examples/ is not a package on the path; load the script by its file
    path = Path(__file__).resolve().parents[2] / "examples" / "experiments.py"
    spec = importlib.util.spec_from_file_location("examples_experiments", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


LAST_LINE = _experiments_module().LAST_LINE


def parser(**defaults: object) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_demo_flags(p, DemoDefaults(output="runs/x", **defaults))  # type: ignore[arg-type]
    return p


def test_the_flags_make_the_config_and_a_demo_sets_its_own_fields() -> None:
    args = parser(lr=1e-4, ppo_epochs=2).parse_args(
        ["--seed", "3", "--negative-weight", "1.0", "--kl-coef", "0.05", "--deterministic", "--std-norm"]
    )

    config = demo_rl_config(args, balance_by="op", return_to_judged_calls=False)

    assert (config.seed, config.deterministic, config.balance_by, config.return_to_judged_calls) == (
        3,
        True,
        "op",
        False,
    )
    assert (config.trainer.lr, config.trainer.ppo_epochs, config.trainer.seed) == (1e-4, 2, 3)
    assert config.trainer.total_training_steps == config.steps == 40
    assert config.trainer.loss.kl_loss_coef == 0.05
    assert (config.advantage.negative_weight, config.advantage.norm_by_std) == (1.0, True)


def test_an_unknown_field_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="balance"):
        demo_rl_config(parser().parse_args([]), balance="op")


def result(tmp_path: Path, rows: list[dict]) -> TrainResult:
    return TrainResult(
        metrics=rows,
        final_version_id="v",
        held_out_before=None,
        held_out_after=None,
        metrics_csv=tmp_path / "metrics.csv",
        reward_curve=None,
        last_checkpoint=None,
        output_dir=tmp_path,
        store="",
        proxy_url="",
    )


def test_the_closing_line_reports_first_and_last_validation_and_parses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"step": 0, "val/success": 0.33, "val/success[op=plus]": 0.5},
        {"step": 1, "train/reward_mean": 0.4},
        {"step": 2, "val/success": 0.97, "val/success[op=plus]": 1.0},
    ]
    console = Console(file=io.StringIO())

    last = report_heldout(result(tmp_path, rows), time.perf_counter(), 5, console)

    assert capsys.readouterr().out.strip() == last
    match = LAST_LINE.search(last)
    assert match and (match["before"], match["after"], match["seed"], match["steps"]) == (
        "0.33",
        "0.97",
        "5",
        "2",
    )
    assert "held-out success after RL: 0.97  {'op=plus': 1.0}" in console.file.getvalue()
    assert heldout_slices(rows[0]) == {"op=plus": 0.5}


def test_without_validation_the_closing_line_says_so(tmp_path: Path) -> None:
    last = report_heldout(
        result(tmp_path, [{"step": 1}]), time.perf_counter(), 0, Console(file=io.StringIO())
    )

    assert last.startswith("no held-out validation ran") and not LAST_LINE.search(last)
