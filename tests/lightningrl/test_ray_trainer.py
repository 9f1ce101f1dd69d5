"""RayTrainer: verl's RayWorkerGroup over 2 ranks (FSDP2 over gloo, logical GPUs) equals 1 rank; LoRA.

One local Ray for the module (started the way a run starts it: `connect_ray`), the ~27k-parameter
Qwen2 of test_verl_trainer, one or two steps per trainer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_verl_trainer import build_tiny_model, random_batch

from lightningrl.models.adapter import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    base_of,
    is_adapter_dir,
    load_causal_lm,
)
from lightningrl.trainer import (
    RayTrainer,
    Trainer,
    TrainerConfig,
    VerlActorTrainer,
    build_trainer,
    response_log_probs,
)
from lightningrl.trainer.batch_layout import rank_major_order
from lightningrl.trainer.loss import PolicyLossConfig


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """connect_ray's own local Ray, started while another Ray instance runs on this machine (as on a
    shared box, or after a crashed run): without RAY_ADDRESS it must not attach to that one."""
    import ray
    from ray.cluster_utils import Cluster

    from lightningrl.trainer.ray_cluster import ADDRESS_ENV, connect_ray

    other = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv(ADDRESS_ENV, raising=False)
            assert connect_ray(2)  # started here: 2 logical GPUs on this GPU-less machine
        assert ray.get_runtime_context().gcs_address != other.address
        assert ray.cluster_resources()["GPU"] == 2
        yield
    finally:
        ray.shutdown()
        other.shutdown()


def run_steps(trainer: Trainer, steps: int, out: Path) -> tuple[torch.Tensor, list[dict[str, float]]]:
    """Step-0 log-probs, the metrics of `steps` steps on one fixed batch, then a checkpoint at `out`."""
    batch, advantages = random_batch(size=8, seed=4)
    log_probs = trainer.compute_log_probs(batch)
    metrics = [trainer.train_step(batch, advantages) for _ in range(steps)]
    trainer.save_checkpoint(out)
    return log_probs, metrics


@pytest.mark.parametrize("mini_batch", [4, None], ids=["two-mini-batches", "on-policy"])
def test_two_ranks_match_one_rank_with_a_kl_term(
    model_dir: Path,
    local_ray: None,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    mini_batch: int | None,
) -> None:
    # Two optimiser steps per train_step (mini-batches of 4 rows), each of two micro-batches on 1 rank
    # and one on each of 2 ranks; or one on-policy step over all 8 rows, whose old log-probs, entropy
    # and mismatch come from the update's forward on each rank. The KL term pulls toward the start.
    config = TrainerConfig(
        lr=1e-2,
        mini_batch_size=mini_batch,
        micro_batch_size=2,
        backend="ray",
        loss=PolicyLossConfig(kl_loss_coef=0.5),
    )
    runs = {}
    for ranks in (1, 2):
        trainer = build_trainer(model_dir, TrainerConfig(**{**vars(config), "num_workers": ranks}))
        assert isinstance(trainer, RayTrainer) and isinstance(trainer, Trainer)
        try:
            runs[ranks] = run_steps(trainer, 2, tmp_path / f"ranks-{ranks}")
            if ranks == 2:
                batch, _ = random_batch(size=8, seed=4)
                trained = trainer.compute_log_probs(batch)
        finally:
            trainer.close()
    assert capfd.readouterr() == ("", "")  # verl's and Ray's chatter stays in Ray's session logs
    (lp1, m1), (lp2, m2) = runs[1], runs[2]

    # Measured (this machine, 3 runs of 6 steps): log-probs, losses, KL and weights bit-identical,
    # grad-norms within 3e-8 (the notes saw weights within 4e-7 on a 612k-parameter model): 1e-5 leaves
    # room for reduction order on other machines.
    torch.testing.assert_close(lp2, lp1, atol=1e-6, rtol=0)
    for one, two in zip(m1, m2, strict=True):
        assert two["loss"] == pytest.approx(one["loss"], abs=1e-5)
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], abs=1e-5)
        assert two["kl_loss"] == pytest.approx(one["kl_loss"], abs=1e-6)
        # The entropy comes back from the ranks' scoring forward as it does in-process.
        assert two["entropy"] == pytest.approx(one["entropy"], abs=1e-5) and one["entropy"] > 0
        assert two["entropy_decision"] == pytest.approx(one["entropy_decision"], abs=1e-5)
        assert two["mismatch_abs_mean"] == pytest.approx(one["mismatch_abs_mean"], abs=1e-5)
        assert two["rollout_is_mean"] == pytest.approx(one["rollout_is_mean"], abs=1e-5)
    assert m1[1]["kl_loss"] > 1e-5  # the policy moved away from the reference
    w1 = load_file(tmp_path / "ranks-1" / "model.safetensors")
    w2 = load_file(tmp_path / "ranks-2" / "model.safetensors")
    assert w1.keys() == w2.keys()
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 1e-5
    start = load_file(model_dir / "model.safetensors")
    assert max((w2[k] - start[k]).abs().max().item() for k in w2) > 1e-3  # it did train

    # The 2-rank checkpoint is an ordinary HF directory scoring what the ranks score.
    model = load_causal_lm(tmp_path / "ranks-2", dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(response_log_probs(model, batch), trained, atol=1e-5, rtol=0)
    assert (tmp_path / "ranks-2" / "tokenizer.json").read_bytes() == (
        model_dir / "tokenizer.json"
    ).read_bytes()


def assert_adapter_dir(out: Path, base: Path, rank: int, alpha: int) -> dict[str, torch.Tensor]:
    """`out` is a LoRA artifact: PEFT's files + the tokenizer, pointing at `base`; returns its tensors."""
    assert is_adapter_dir(out) and base_of(out) == base.resolve()
    names = {p.name for p in out.iterdir()}
    assert {ADAPTER_CONFIG, ADAPTER_WEIGHTS, "tokenizer.json"} <= names
    assert not names & {"model.safetensors", "config.json"}  # the adapter only, never the base
    config_json = json.loads((out / ADAPTER_CONFIG).read_text())
    assert (config_json["r"], config_json["lora_alpha"]) == (rank, alpha)
    adapter = load_file(out / ADAPTER_WEIGHTS)
    assert adapter and all("lora_" in name for name in adapter)
    assert any(v.abs().max() > 0 for k, v in adapter.items() if "lora_B" in k)  # B starts at 0: trained
    return adapter


def test_lora_in_process_trains_and_saves_only_the_adapter(model_dir: Path, tmp_path: Path) -> None:
    kl = PolicyLossConfig(kl_loss_coef=0.5)
    config = TrainerConfig(lr=1e-2, micro_batch_size=4, lora_rank=4, lora_alpha=8, loss=kl)
    trainer = VerlActorTrainer(model_dir, config)
    assert trainer._reference is None  # the KL reference is the base: the adapter switched off
    base_before = trainer.full_state()  # under LoRA without merging: the base weights
    _, metrics = run_steps(trainer, 2, tmp_path / "adapter")
    base_after = trainer.full_state()
    assert base_before.keys() == base_after.keys()
    assert all(torch.equal(base_before[k], base_after[k]) for k in base_before)  # the base is frozen
    assert metrics[0]["grad_norm"] > 0
    # lora_B starts at 0, so the first step's policy IS the base; the second has moved away from it.
    assert metrics[0]["kl_loss"] == pytest.approx(0.0, abs=1e-7) and metrics[1]["kl_loss"] > 1e-6

    assert_adapter_dir(tmp_path / "adapter", model_dir, rank=4, alpha=8)
    # The artifact (adapter + base pointer) loads with PEFT and scores what the trainer scores.
    batch, _ = random_batch(size=8, seed=4)
    model = load_causal_lm(tmp_path / "adapter", dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(
            response_log_probs(model, batch), trainer.compute_log_probs(batch), atol=1e-5, rtol=0
        )
    with pytest.raises(ValueError, match="is a LoRA adapter: set trainer.lora_rank > 0"):
        VerlActorTrainer(tmp_path / "adapter", TrainerConfig())
    with pytest.raises(ValueError, match="VerlActorTrainer runs 1 rank.s., but trainer.num_workers=2"):
        VerlActorTrainer(model_dir, TrainerConfig(backend="ray", num_workers=2))


def test_rank_major_order_gives_each_rank_its_share_of_every_mini_batch() -> None:
    assert rank_major_order(8, 4, 2) == [0, 1, 4, 5, 2, 3, 6, 7]
    assert rank_major_order(6, 6, 3) == [0, 1, 2, 3, 4, 5]  # one mini-batch: unchanged
    assert rank_major_order(4, 4, 1) == [0, 1, 2, 3]


def test_the_backend_is_a_config_key_and_a_train_flag() -> None:
    from lightningrl.cli import build_parser
    from lightningrl.commands.train import settings_from
    from lightningrl.config_fields import config_from

    flags = ["train", "--trainer.backend", "ray", "--trainer.num_workers", "4", "--trainer.lora_rank", "8"]
    _, config = settings_from(build_parser().parse_args(flags))
    trainer = config_from(config).trainer
    assert (trainer.backend, trainer.num_workers, trainer.lora_rank) == ("ray", 4, 8)
    assert TrainerConfig(lora_target_modules="q_proj, v_proj").lora_targets == ["q_proj", "v_proj"]
    with pytest.raises(
        ValueError, match=r"config.trainer: backend must be one of \('local', 'ray'\), got 'slurm'"
    ):
        config_from({"trainer": {"backend": "slurm"}})
    with pytest.raises(ValueError, match="num_workers=2 needs backend='ray'"):
        config_from({"trainer": {"num_workers": 2}})


PROMPTS = ["Pick a or b.", "Choose a or b.", "Say a or b."]


async def odd_length_agent(task: dict, resources) -> float:
    """One call; reward 1 when the reply's text has an odd length (a random tiny model varies it)."""
    from openai import AsyncOpenAI

    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        reply = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=4
        )
    return float(len(reply.choices[0].message.content or "") % 2)


async def test_the_loop_trains_lora_on_two_ranks_and_serves_each_adapter(
    local_ray: None, tmp_path: Path
) -> None:
    import asyncio

    import httpx
    from openai import AsyncOpenAI

    from algorithm import Task
    from lightningrl.demos.tinylm import build_tiny_model as build_chat_model
    from lightningrl.fitting.local_stack import local_stack
    from lightningrl.rl.config import LightningRLConfig
    from lightningrl.rl.loop import LightningRL
    from lightningstore import LLM, SqlStore
    from runner import Runner

    base = build_chat_model(
        tmp_path / "base", seed=0, tokenizer_kind="word", extra_text=PROMPTS, hidden_size=32, num_heads=2
    )
    store = SqlStore(tmp_path / "store.db")
    tasks = [Task(task_id=f"t{i}", input={"prompt": p}) for i, p in enumerate(PROMPTS)]
    config = LightningRLConfig(
        steps=2,
        tasks_per_step=2,
        rollouts_per_task=4,
        val_every=0,
        output_dir=tmp_path / "run",
        show_progress=False,
        trainer=TrainerConfig(lr=1e-2, backend="ray", num_workers=2, lora_rank=4),
    )
    async with local_stack(store, base, model_name="toy") as urls:
        root = await store.add_resource_version(
            "llm",
            LLM(endpoints=[urls.model_v1], model="toy", checkpoint=str(base), sampling={"temperature": 1.0}),
        )
        runner = Runner(store, odd_length_agent, workers=4, proxy_url=urls.proxy, show_progress=False)
        running = asyncio.create_task(runner.run())
        rl = LightningRL(store, tasks, [], config)
        try:
            metrics = await rl.run()
        finally:
            if rl.trainer is not None:
                await asyncio.to_thread(rl.trainer.close)
            runner.stop()
            await asyncio.wait_for(running, timeout=60)
        latest = await store.get_latest_version("llm")
        async with httpx.AsyncClient(timeout=30) as http:
            health = (await http.get(f"{urls.model}/healthz")).json()
        prompt = [5, 6, 7, 8]
        async with AsyncOpenAI(base_url=urls.model_v1, api_key="x", max_retries=0) as client:
            served = await client.completions.create(
                model="toy", prompt=prompt, max_tokens=4, temperature=0, logprobs=1,
                extra_body={"return_token_ids": True},
            )  # fmt: skip
    await store.close()

    assert isinstance(rl.trainer, RayTrainer)
    assert [int(r["step"]) for r in metrics.rows] == [1, 2]
    assert any("actor/grad_norm" in r for r in metrics.rows), metrics.rows
    assert latest.version_id != root.version_id
    adapter = Path(latest.resource.checkpoint)
    assert is_adapter_dir(adapter) and base_of(adapter) == base.resolve() and latest.artifact == str(adapter)
    assert health["checkpoint"] == str(adapter)  # the server reloaded the adapter version
    # ... and serves base + adapter: its logprobs are the merged model's.
    choice = served.model_dump()["choices"][0]
    model = load_causal_lm(adapter, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + choice["token_ids"]])).logits[0]
    steps = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    expected = steps.gather(1, torch.tensor(choice["token_ids"])[:, None]).squeeze(1)
    torch.testing.assert_close(
        torch.tensor(choice["logprobs"]["token_logprobs"]), expected, atol=1e-3, rtol=0
    )
