"""Engine choice and tool calls without a vLLM server: hermes parsing, our server's tools, the refusals."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch
from engine_stack import TOOL_QUESTION, TOOLS, Live, require_vllm_python, serve
from transformers import AutoTokenizer

from lightningrl.cli import main as cli_main
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.rl.config import LightningRLConfig
from lightningrl.serving import create_app
from lightningrl.serving.endpoint import VllmEndpoint, sync_weights
from lightningrl.serving.tool_calls import parse_tool_calls
from lightningrl.serving.tool_prompt import hermes_conversation
from lightningrl.serving.vllm import (
    EXTENSION_PATH,
    PYTHON_ENV,
    RELOAD_METHOD,
    WORKER_EXTENSION,
    VllmUnavailable,
    check_reloadable,
    resolve_engine,
    vllm_command,
    vllm_env,
    vllm_importable,
    vllm_python,
)


@pytest.fixture(scope="module")
def tied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tied") / "m", hidden_size=64)


@pytest.fixture(scope="module")
def ours(tied: Path) -> Iterator[Live]:
    torch.set_num_threads(1)
    live = serve(create_app(tied, device="cpu", served_model_name="policy", cpu_threads=1), "ours")
    yield live
    live.stop()


def test_hermes_blocks_become_tool_calls_and_anything_else_stays_text() -> None:
    content, calls = parse_tool_calls(
        'Let me add.<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'
        '<tool_call>{"name": "neg", "arguments": {"x": 2}}</tool_call>'
    )
    assert content == "Let me add."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("add", {"a": 1}),
        ("neg", {"x": 2}),
    ]
    assert all(c["type"] == "function" and c["id"] for c in calls)
    assert parse_tool_calls("no call here") == ("no call here", [])
    broken = '<tool_call>{"name": "add", "arguments": </tool_call>'
    assert parse_tool_calls(broken) == (broken, [])  # not JSON: all of it is content, as vLLM answers
    assert parse_tool_calls('<tool_call>{"arguments": {}}</tool_call>')[1] == []  # no name
    # An unterminated last block (max_tokens ran out) is parsed like vLLM's hermes parser does.
    assert parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}')[1][0]["function"]["name"] == "a"


async def test_our_server_renders_tools_and_refuses_what_it_cannot_do(ours: Live, tied: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tied)
    body = {"messages": TOOL_QUESTION, "tools": TOOLS, "max_tokens": 4, "return_token_ids": True}
    async with httpx.AsyncClient(base_url=ours.url + "/v1", timeout=60) as client:
        answer = (await client.post("/chat/completions", json=body)).json()
        expected = tokenizer.apply_chat_template(
            TOOL_QUESTION, tools=TOOLS, add_generation_prompt=True, return_dict=False
        )
        assert answer["prompt_token_ids"] == expected
        assert "add" in tokenizer.decode(expected) and "<tools>" in tokenizer.decode(expected)
        none = (await client.post("/chat/completions", json={**body, "tool_choice": "none"})).json()
        assert none["prompt_token_ids"] == expected  # tools still rendered, as vLLM does
        plain = (await client.post("/chat/completions", json={**body, "tools": None})).json()
        assert plain["prompt_token_ids"] == tokenizer.apply_chat_template(
            TOOL_QUESTION, add_generation_prompt=True, return_dict=False
        )
        for choice, reason in (
            ("any", "tool_choice 'any' is not one of"),
            ({"type": "function", "function": {"name": "mul"}}, "function 'mul', which is not in `tools`"),
            ({"type": "function", "name": "add"}, 'is not {"type": "function"'),
        ):
            refused = await client.post("/chat/completions", json={**body, "tool_choice": choice})
            assert refused.status_code == 400 and reason in refused.json()["error"]["message"], refused.text
        toolless = {**body, "tools": None, "tool_choice": "required"}
        refused = await client.post("/chat/completions", json=toolless)
        assert refused.status_code == 400 and "needs `tools`" in refused.json()["error"]["message"]
        # A forced call: the server writes its start (the tool's name too, when named) after the
        # generation prompt; the model's text continues it, and the message holds both.
        named = {"type": "function", "function": {"name": "add"}}
        for choice, forced in (
            ("required", '<tool_call>\n{"name": "'),
            (named, '<tool_call>\n{"name": "add", "arguments": '),
        ):
            answer = (await client.post("/chat/completions", json={**body, "tool_choice": choice})).json()
            text = tokenizer.apply_chat_template(
                TOOL_QUESTION, tools=TOOLS, add_generation_prompt=True, tokenize=False
            )
            forced_ids = tokenizer.encode(text + forced, add_special_tokens=False)
            assert answer["prompt_token_ids"] == forced_ids and len(forced_ids) > len(expected)
            message = answer["choices"][0]["message"]
            generated = tokenizer.decode(answer["choices"][0]["token_ids"], skip_special_tokens=True)
            if message.get("tool_calls"):  # the random model closed the call validly
                if choice is named:  # the name was written for it; with "required" it names any
                    assert message["tool_calls"][0]["function"]["name"] == "add"
            else:
                assert message["content"] == forced + generated
        streamed = await client.post("/chat/completions", json={**body, "stream": True})
        assert streamed.status_code == 400 and "streaming with tools" in streamed.json()["error"]["message"]
        bad_history = [
            *TOOL_QUESTION,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "add", "arguments": "{a"}}
                ],
            },
        ]
        bad = await client.post("/chat/completions", json={**body, "messages": bad_history})
        assert bad.status_code == 400
        assert "messages[1].tool_calls[0].function.arguments is not JSON" in bad.json()["error"]["message"]


def test_tied_output_heads_are_reloadable_on_vllm_and_a_directory_without_weights_is_not(
    tied: Path, tmp_path: Path
) -> None:
    check_reloadable(tied)  # the sync rebuilds a tied head through the worker extension
    check_reloadable(build_tiny_model(tmp_path / "untied", hidden_size=64, tie_word_embeddings=False))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="has no config.json"):
        check_reloadable(tmp_path / "empty")
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="has no weight files"):
        check_reloadable(tmp_path / "empty")


async def test_vllm_weight_sync_refuses_a_directory_without_weights_before_touching_the_server(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="has no weight files"):
        await sync_weights(["http://127.0.0.1:1/v1"], str(tmp_path), engine="vllm")
    async with httpx.AsyncClient() as client:
        with pytest.raises(ValueError, match="has no weight files"):
            await VllmEndpoint("http://127.0.0.1:1/v1").sync_weights(client, str(tmp_path))


def test_the_worker_extension_imports_nothing_of_ours_and_reloads_then_reties() -> None:
    source = (EXTENSION_PATH / "lightningrl_vllm_ext.py").read_text()
    assert "lightningrl." not in source.replace("lightningrl_", "")  # vLLM's environment lacks ours
    module = importlib.import_module("lightningrl.serving.vllm_ext.lightningrl_vllm_ext")
    assert WORKER_EXTENSION == "lightningrl_vllm_ext.WeightSyncExtension"
    assert callable(getattr(module.WeightSyncExtension, RELOAD_METHOD))


async def test_our_weight_sync_is_detected_and_reloads(ours: Live, tied: Path) -> None:
    row = await sync_weights([ours.url + "/v1"], str(tied), engine="auto")
    assert row["sync/seconds"] > 0
    async with httpx.AsyncClient() as client:
        assert (await client.get(ours.url + "/metrics")).json()["reloads"] >= 1


def test_engine_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    python = require_vllm_python()
    assert vllm_importable(python) and not vllm_importable(str(tmp_path / "no-python"))
    assert resolve_engine("ours") == "ours" and resolve_engine("vllm") == "vllm"
    with pytest.raises(ValueError, match="engine must be one of"):
        resolve_engine("sglang")
    with pytest.raises(ValueError, match="engine must be one of"):
        LightningRLConfig(engine="sglang")
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: auto is ours even with vLLM installed
    monkeypatch.setenv(PYTHON_ENV, "/usr/bin/true")
    assert resolve_engine("auto") == "ours"
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "missing-python"))
    with pytest.raises(VllmUnavailable, match="does not exist"):
        vllm_python()


def test_vllm_command_and_environment(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "m", hidden_size=64, tie_word_embeddings=False)
    command = vllm_command(model, port=9, python="py", enforce_eager=True, lora_rank=8)
    assert command[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    text = " ".join(command)
    assert "--dtype float32" in text  # the declared dtype: vLLM's auto would serve bf16 on a CPU
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in text
    assert "--enable-lora --max-lora-rank 8" in text and "--enforce-eager" in text
    assert f"--worker-extension-cls {WORKER_EXTENSION}" in text
    assert "--chat-template" not in text  # tinylm's template renders tools itself
    env = vllm_env(base={"PYTHONPATH": "/ours", "VLLM_CPU_KVCACHE_SPACE": "4"})
    assert env["PYTHONPATH"] == str(EXTENSION_PATH) and env["VLLM_SERVER_DEV_MODE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "4"  # a size the user set wins


CHATML_WITHOUT_TOOLS = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_vllm_gets_a_chat_template_that_renders_tools_as_ours_when_the_models_has_none(
    tmp_path: Path,
) -> None:
    model = build_tiny_model(tmp_path / "m", hidden_size=64, tie_word_embeddings=False)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = CHATML_WITHOUT_TOOLS
    (model / "chat_template.jinja").unlink(missing_ok=True)
    tokenizer.save_pretrained(model)
    command = vllm_command(model, port=9, python="py")
    template = Path(command[command.index("--chat-template") + 1]).read_text()
    assert command[command.index("--chat-template-content-format") + 1] == "string"
    conversation = [
        {"role": "system", "content": "Be brief."},
        TOOL_QUESTION[0],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "add", "arguments": {"a": 1}}}],
        },
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "2"},
    ]
    for messages, tools in [(conversation, TOOLS), (TOOL_QUESTION, TOOLS), (conversation, None)]:
        ours = tokenizer.apply_chat_template(hermes_conversation(messages, tools), tokenize=False)
        theirs = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False)
        assert theirs == ours
    assert (
        "--chat-template"
        not in vllm_command(model, port=9, python="py", extra_args=["--chat-template", "x"])[:-2]
    )


def test_serve_model_names_a_missing_vllm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = build_tiny_model(tmp_path / "m", hidden_size=64, tie_word_embeddings=False)
    with pytest.raises(VllmUnavailable, match="does not exist"):
        cli_main(
            ["serve-model", "--engine", "vllm", "--checkpoint", str(model), "--vllm-python", "/no/python"]
        )
