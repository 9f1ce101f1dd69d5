"""Copy checks: what `WarmupConfig.until_copied` measures, and the warm-up going on until it holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from lightningrl.demos.copy_checks import CopyCheck, copied_share, encode_check
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup

ASK = [{"role": "user", "content": "copy red"}]
DEMOS = [(ASK, "say red")] * 4


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("copy")
    return build_tiny_model(
        root / "base", tokenizer_kind="word", extra_text=["copy say red blue"], hidden_size=32, num_layers=1
    )


def share(model_dir: Path, checks: list[CopyCheck]) -> float:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    return copied_share(model, tokenizer, [encode_check(tokenizer, check) for check in checks])


def test_copied_share_counts_checks_whose_every_token_after_the_prefix_is_the_greedy_choice(
    tiny_model: Path, tmp_path: Path
) -> None:
    warm, _ = supervised_warmup(
        tiny_model, DEMOS, tmp_path / "warm", WarmupConfig(steps=60, batch_size=4), show_progress=False
    )
    right = [CopyCheck((ASK, "say red"), prefix="say"), CopyCheck((ASK, "say red"))]
    wrong = [CopyCheck((ASK, "say blue"), prefix="say"), CopyCheck((ASK, "say blue"))]
    assert share(warm, right) == 1.0
    assert share(warm, wrong) == 0.0
    assert share(warm, [right[0], wrong[0]]) == 0.5
    assert share(tiny_model, right) < 1.0  # the untrained model does not say it


def test_a_prefix_that_is_not_the_completions_start_is_refused(tiny_model: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    with pytest.raises(ValueError, match="CopyCheck.prefix 'blue'"):
        encode_check(tokenizer, CopyCheck((ASK, "say red"), prefix="blue"))


def test_warmup_goes_on_until_the_checks_are_copied_up_to_max_steps(tiny_model: Path, tmp_path: Path) -> None:
    def run(checks: list[CopyCheck], name: str) -> int:
        config = WarmupConfig(steps=4, batch_size=4, until_copied=1.0, max_steps=200, check_every=4)
        return len(
            supervised_warmup(tiny_model, DEMOS, tmp_path / name, config, show_progress=False, checks=checks)[
                1
            ]
        )

    learned = run([CopyCheck((ASK, "say red"), prefix="say")], "learned")
    assert 4 < learned < 200 and (learned - 4) % 4 == 0  # went on past `steps`, stopped at a check
    assert run([CopyCheck((ASK, "say blue"), prefix="say")], "never") == 200  # contradicts the demos
    with pytest.raises(ValueError, match="until_copied needs checks"):
        supervised_warmup(
            tiny_model, DEMOS, tmp_path / "none", WarmupConfig(steps=4, until_copied=0.5, max_steps=8)
        )
    with pytest.raises(ValueError, match="until_copied must be in"):
        WarmupConfig(steps=4, until_copied=1.5, max_steps=8)
