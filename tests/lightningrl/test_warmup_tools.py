"""A warm-up demonstration may carry OpenAI `tools`: its prompt then renders as the server renders them."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer

from lightningrl.demos.demonstrations import encode_demonstration
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
MESSAGES = [{"role": "user", "content": "add 1 2"}]


def test_demonstration_with_tools_lists_them_in_the_prompt(tmp_path: Path) -> None:
    model = build_tiny_model(
        tmp_path / "m",
        tokenizer_kind="word",
        extra_text=["add 1 2"],
        hidden_size=16,
        num_layers=1,
        num_heads=2,
    )
    tokenizer = AutoTokenizer.from_pretrained(model)
    with_tools, completion = encode_demonstration(tokenizer, MESSAGES, "3", TOOLS)
    plain, _ = encode_demonstration(tokenizer, MESSAGES, "3")
    expected = tokenizer.apply_chat_template(
        MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=False
    )
    assert tokenizer.decode(with_tools) == expected and "<tools>" in expected
    assert "<tools>" not in tokenizer.decode(plain) and completion[-1] == tokenizer.eos_token_id
    # 2-tuples and 3-tuples mix in one warm-up
    out, losses = supervised_warmup(
        model,
        [(MESSAGES, "3", TOOLS), (MESSAGES, "3")],
        tmp_path / "w",
        WarmupConfig(steps=2, batch_size=2),
        show_progress=False,
    )
    assert len(losses) == 2 and (out / "config.json").exists()
