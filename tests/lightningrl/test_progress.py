"""Progress: a bar on a terminal, one plain line per reported step otherwise; the warm-up reports too."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup
from lightningrl.rl.progress import StepProgress, step_info

WARMUP_LINE = re.compile(r"^warm-up step (\d+)/(\d+)  loss \d+\.\d{3}  \d+\.\d steps/s$")


def plain_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=60), out


def terminal_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100), out


def test_step_info_names_held_out_only_when_measured() -> None:
    assert step_info(0.834, 4.21) == "reward 0.83  4.2 s"
    assert step_info(0.834, 4.21, heldout=0.91) == "reward 0.83  held-out 0.91  4.2 s"


def test_a_non_terminal_gets_one_unwrapped_line_per_step() -> None:
    console, out = plain_console()
    with StepProgress(console, 3, bar_label="RL steps") as progress:
        progress.advance(step_info(0.5, 1.0))
        progress.advance(step_info(0.6, 2.0, heldout=0.7))
        progress.advance("a long info text that is wider than the sixty columns of this console, not wrapped")
    assert out.getvalue().splitlines() == [
        "step 1/3  reward 0.50  1.0 s",
        "step 2/3  reward 0.60  held-out 0.70  2.0 s",
        "step 3/3  a long info text that is wider than the sixty columns of this console, not wrapped",
    ]


def test_every_n_steps_and_the_last_one() -> None:
    console, out = plain_console()
    with StepProgress(console, 7, bar_label="x", line_label="warm-up step", every=3) as progress:
        for i in range(7):
            progress.advance(f"i {i}")
    assert out.getvalue().splitlines() == [
        "warm-up step 3/7  i 2",
        "warm-up step 6/7  i 5",
        "warm-up step 7/7  i 6",
    ]


def test_a_terminal_gets_the_bar_and_disabled_prints_nothing() -> None:
    console, out = terminal_console()
    with StepProgress(console, 2, bar_label="RL steps") as progress:
        progress.advance("reward 0.50  1.0 s")
        progress.advance("reward 0.75  1.0 s")
    text = out.getvalue()
    assert "RL steps" in text and "2/2" in text and "reward 0.75" in text
    assert "step 1/2" not in text

    for console, out in (plain_console(), terminal_console()):
        with StepProgress(console, 2, bar_label="RL steps", enabled=False) as progress:
            progress.advance("reward 0.50  1.0 s")
        assert out.getvalue() == ""


def test_bad_progress_arguments_name_the_value() -> None:
    console, _ = plain_console()
    with pytest.raises(ValueError, match="every must be >= 1, got 0"):
        StepProgress(console, 3, bar_label="x", every=0)
    with pytest.raises(ValueError, match="total must be >= 0, got -1"):
        StepProgress(console, -1, bar_label="x")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("warmup-progress")
    return build_tiny_model(root / "base", seed=0, tokenizer_kind="word", hidden_size=32, num_heads=2)


DEMOS = [([{"role": "user", "content": "Pick a or b."}], c) for c in ("a", "b")]


def test_warmup_prints_a_line_every_n_steps_off_a_terminal(tiny_model: Path, tmp_path: Path) -> None:
    console, out = plain_console()
    _, losses = supervised_warmup(
        tiny_model,
        DEMOS,
        tmp_path / "warm",
        WarmupConfig(steps=6, batch_size=2),
        console=console,
        report_every=2,
    )
    lines = out.getvalue().splitlines()
    assert [WARMUP_LINE.match(line).groups() for line in lines] == [("2", "6"), ("4", "6"), ("6", "6")], lines
    assert lines[-1].split("  ")[1] == f"loss {losses[-1]:.3f}"


def test_warmup_shows_a_bar_on_a_terminal(tiny_model: Path, tmp_path: Path) -> None:
    console, out = terminal_console()
    supervised_warmup(
        tiny_model, DEMOS, tmp_path / "warm", WarmupConfig(steps=3, batch_size=2), console=console
    )
    text = out.getvalue()
    assert "supervised warm-up" in text and "steps/s" in text
    assert "warm-up step" not in text


def test_warmup_goes_on_until_its_loss_target_up_to_max_steps(tiny_model: Path, tmp_path: Path) -> None:
    def run(until_loss: float, name: str) -> list[float]:
        config = WarmupConfig(steps=4, batch_size=2, until_loss=until_loss, max_steps=12, loss_window=3)
        return supervised_warmup(tiny_model, DEMOS, tmp_path / name, config, show_progress=False)[1]

    assert len(run(100.0, "reached")) == 4  # the target holds at `steps`: stop there
    assert len(run(0.0, "never")) == 12  # an unreachable target: up to max_steps
    with pytest.raises(ValueError, match="until_loss needs max_steps >= steps"):
        WarmupConfig(steps=10, until_loss=0.1, max_steps=5)
