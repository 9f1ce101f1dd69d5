"""The demos' two-phase warm-up: short prompts first, then the agent's prompts with the tools listed."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
import torch
from rich.console import Console
from safetensors.torch import load_file

from lightningrl.demos.copy_checks import CopyCheck
from lightningrl.demos.flags import DemoDefaults, add_demo_flags
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.demos.two_phase import add_two_phase_flags, two_phase_warmup

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
MESSAGES = [{"role": "user", "content": "add 1 2"}]


def weights(model_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(next(model_dir.glob("*.safetensors"))))


def test_two_phase_warmup_trains_both_phases_and_can_reuse_phase_one(tmp_path: Path) -> None:
    base = build_tiny_model(
        tmp_path / "base", tokenizer_kind="word", extra_text=["add 1 2 3"], hidden_size=16, num_layers=1
    )
    p = argparse.ArgumentParser()
    add_demo_flags(p, DemoDefaults(output="runs/x"))
    add_two_phase_flags(p)
    args = p.parse_args(["--warmup-steps", "3", "--warmup-tools-steps", "2"])
    text = io.StringIO()
    console = Console(file=text, width=200)
    warm = two_phase_warmup(
        base, [(MESSAGES, "3")], [(MESSAGES, "3", TOOLS)], tmp_path / "run", args, console, phase1_batch=2
    )
    short = tmp_path / "run" / "model-warmup-short"
    assert warm == tmp_path / "run" / "model-warmup"
    assert "phase 1 (no tool listing): 3 steps" in text.getvalue()
    assert "phase 2 (the agent's prompts, tools listed): 2 steps" in text.getvalue()
    before, middle, after = weights(base), weights(short), weights(warm)
    assert any(not torch.equal(before[k], middle[k]) for k in before)  # phase 1 moved the weights
    assert any(not torch.equal(middle[k], after[k]) for k in middle)  # and so did phase 2

    reuse = p.parse_args(["--warmup-tools-steps", "1", "--warmup-phase1-from", str(short)])
    again = two_phase_warmup(base, [], [(MESSAGES, "3", TOOLS)], tmp_path / "again", reuse, console)
    assert f"reusing phase 1 of the warm-up from {short}" in text.getvalue()
    copied = weights(tmp_path / "again" / "model-warmup-short")
    assert all(torch.equal(copied[k], middle[k]) for k in middle) and (again / "config.json").exists()


def test_phase_one_goes_on_until_the_copies_hold_and_restarts_from_fresh_weights_if_they_do_not(
    tmp_path: Path,
) -> None:
    base = build_tiny_model(
        tmp_path / "base", tokenizer_kind="word", extra_text=["add 1 2 3 4"], hidden_size=16, num_layers=1
    )
    p = argparse.ArgumentParser()
    add_demo_flags(p, DemoDefaults(output="runs/x", warmup_steps=4, warmup_max_steps=60))
    add_two_phase_flags(p, tools_steps=1, until_copied=1.0, restarts=1)
    args = p.parse_args([])
    demos = [(MESSAGES, "3", TOOLS)] * 4
    text = io.StringIO()
    console = Console(file=text, width=200)

    two_phase_warmup(base, None, demos, tmp_path / "ok", args, console, checks=[CopyCheck(demos[0])])
    lines = text.getvalue().splitlines()
    phase1 = next(line for line in lines if line.startswith("warm-up phase 1"))
    assert phase1.endswith("copied 1.00 of 1 checks") and "restarting" not in text.getvalue()
    assert 4 < int(phase1.split(": ")[1].split(" steps")[0]) < 60  # past `steps`, stopped once copied

    text.truncate(0)
    never = [CopyCheck((MESSAGES, "4", TOOLS))]  # the demonstrations say 3: never copied
    two_phase_warmup(base, None, demos, tmp_path / "no", args, console, checks=never)
    out = text.getvalue()
    assert out.count("warm-up phase 1 (no tool listing): 60 steps") == 2
    assert "restarting from fresh weights (model seed 1000)" in out
    assert "warning: RL starts from a warm-up that does not copy reliably" in out
    restarted = weights(tmp_path / "no" / "model-base-1")
    assert any(not torch.equal(restarted[k], weights(base)[k]) for k in restarted)  # other weights


def test_the_completion_loss_is_the_models_own_loss_and_gradient(tmp_path: Path) -> None:
    """The warm-up's loss scores completions through the vocabulary head at their positions only: the
    same loss and gradient as the model's own `labels` loss over the whole sequence."""
    from transformers import AutoModelForCausalLM

    from lightningrl.demos.warmup import completion_loss

    model = AutoModelForCausalLM.from_pretrained(
        build_tiny_model(tmp_path / "m", seed=0, hidden_size=32, num_heads=2), dtype=torch.float32
    )
    ids = torch.randint(3, 50, (2, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0  # a padded row
    labels = torch.full_like(ids, -100)
    labels[0, 5:9], labels[1, 4:9] = ids[0, 5:9], ids[1, 4:9]
    ours = completion_loss(model, ids, mask, labels)
    ours.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    theirs = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    theirs.backward()
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-6)
    for name, param in model.named_parameters():
        assert torch.allclose(grads[name], param.grad, atol=1e-6), name
