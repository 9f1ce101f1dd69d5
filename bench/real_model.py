"""Bench the real SmolLM2-135M-Instruct: one policy update through verl's actor by each of its paths
against a bare torch loop on the same batch, and where an RL step's wall time goes through `fit`.

    .venv/bin/python bench/real_model.py [--sequences 24] [--groups 3] [--prompt 430] [--response 48] [--repeats 3]
    .venv/bin/python bench/real_model.py --step [--steps 2] [--repeats 3] [--lora-rank 0]

`--step` runs `fit` (store server, proxy, our inference server, 2 runner processes, verl's actor here)
on two-digit sums, 4 tasks x 8 rollouts a step, and splits each step's wall time from metrics.csv:
rollouts (enqueue to the last rollout finished), old log-prob recompute, the actor update, saving the
checkpoint, the weight sync, and the rest.

The batch is what one RL step of the calculator agents trains on: `--groups` GRPO groups of
`--sequences` rows in all, the rows of a group sharing a `--prompt`-token prompt (system prompt, tool
header, question), each with a `--response`-token response, every response token trained, random
advantages. Each row of the table times one update after a warm-up update:
- **verl actor** (`VerlActorTrainer.train_step`, FSDP2 on the CPU, one epoch, one mini-batch,
  micro-batches of `--micro`), by path: `verl` = verl's own (a no-grad pass for the old log-probs,
  then the update over every row's whole sequence); `full` = no old log-prob pass (on-policy: the
  update's forward gives them); `shared` = fit's default, also packing each micro-batch by prompt
  (each prompt once, the vocabulary head at response positions only); `lora` = `shared` with LoRA;
- **bare torch**: the same model, `forward` without grad for the old log-probs, then forward +
  backward + AdamW over the same micro-batches (the PPO-clip loss on the same tensors).
Tokens/s counts the response tokens trained. Run it alone on the machine (OMP threads = cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from lightningrl import rollout  # noqa: E402
from lightningrl.credit import SequenceBatch, TrainingSequence, collate  # noqa: E402
from lightningrl.models import cached_model  # noqa: E402


def make_batch(
    sequences: int, prompt: int, response: int, groups: int = 1, seed: int = 0
) -> tuple[SequenceBatch, torch.Tensor]:
    """`sequences` rows in `groups` GRPO groups: the rows of a group share their prompt (as a group's
    rollouts share the task's), responses of random tokens."""
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(100, 40_000, (prompt,), generator=gen).tolist() for _ in range(groups)]
    rows = [
        TrainingSequence(
            rollout_id=f"r{i}",
            prompt_ids=prompts[i % groups],
            response_ids=torch.randint(100, 40_000, (response,), generator=gen).tolist(),
            response_mask=[1] * response,
            rollout_logprobs=[-1.0] * response,
            token_rewards=[0.0] * response,
            call_ids=[0] * response,
        )
        for i in range(sequences)
    ]
    batch = collate(rows)
    return batch, torch.randn(batch.responses.shape, generator=gen) * batch.response_mask


UPDATE_PATHS = {
    "verl": (
        "verl's path: old log-probs pass, full forward",
        {"recompute_old_log_probs": True, "shared_prefix": False},
    ),
    "full": ("on-policy (no old log-prob pass), full forward", {"shared_prefix": False}),
    "shared": ("on-policy, shared prefix (fit's default)", {}),
}
"""The actor update's paths: name -> (row label, TrainerConfig fields)."""


def verl_update(
    model_dir: Path, batch: SequenceBatch, advantages: torch.Tensor, args, lora: int, **fields: object
) -> list[dict]:
    from lightningrl.trainer import TrainerConfig, VerlActorTrainer
    from lightningrl.trainer.loss import PolicyLossConfig

    config = TrainerConfig(
        lr=1e-5,
        micro_batch_size=args.micro,
        lora_rank=lora,
        gradient_checkpointing=args.checkpointing,
        param_dtype=args.dtype,
        loss=PolicyLossConfig(rollout_is_threshold=None),  # the bare loop has no TIS either
        **fields,  # type: ignore[arg-type]
    )
    trainer = VerlActorTrainer(model_dir, config)
    runs = []
    for repeat in range(args.repeats + 1):
        metrics = trainer.train_step(batch, advantages)
        total, logprob_s = metrics["step_time_s"], metrics["old_log_prob_s"]
        if repeat:  # the first is the warm-up
            runs.append({"total": total, "logprob": logprob_s, "update": total - logprob_s})
    close = getattr(trainer, "close", None)
    if close:
        close()
    return runs


def bare_update(model_dir: Path, batch: SequenceBatch, advantages: torch.Tensor, args) -> list[dict]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.cat([batch.prompts, batch.responses], dim=1)
    attention = batch.attention_mask
    width = batch.responses.shape[1]
    mask = batch.response_mask.float()

    def response_log_probs(rows: slice) -> torch.Tensor:
        logits = model(input_ids=ids[rows], attention_mask=attention[rows]).logits[:, -width - 1 : -1]
        return torch.log_softmax(logits.float(), -1).gather(-1, batch.responses[rows, :, None])[..., 0]

    runs = []
    for repeat in range(args.repeats + 1):
        started = time.perf_counter()
        with torch.no_grad():
            old = torch.cat(
                [response_log_probs(slice(i, i + args.micro)) for i in range(0, len(batch), args.micro)]
            )
        logprob_s = time.perf_counter() - started
        optimizer.zero_grad()
        for i in range(0, len(batch), args.micro):
            rows = slice(i, i + args.micro)
            ratio = torch.exp(response_log_probs(rows) - old[rows])
            adv = advantages[rows]
            loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.28) * adv)
            loss = (loss * mask[rows]).sum() / mask.sum()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        total = time.perf_counter() - started
        if repeat:
            runs.append({"total": total, "logprob": logprob_s, "update": total - logprob_s})
    return runs


def sums(count: int, seed: int) -> list[dict]:
    """`count` distinct sums of two numbers 10-49 (fit refuses two rows with the same input)."""
    import random

    pairs = random.Random(seed).sample([(a, b) for a in range(10, 50) for b in range(10, 50)], count)
    return [{"a": a, "b": b} for a, b in pairs]


SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
"""The system prompt SmolLM2's chat template adds when a request has none (APO's start prompt)."""


async def ask_sum(task: dict, llm, system: str | None = None) -> float:
    """One call: "What is a plus b?" (under `system` when given); reward 1 when the reply holds the sum."""
    from openai import AsyncOpenAI

    question = {"role": "user", "content": f"What is {task['a']} plus {task['b']}? Answer with the number."}
    messages = [{"role": "system", "content": system}, question] if system is not None else [question]
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        reply = await client.chat.completions.create(model=llm.model, messages=messages, max_tokens=24)
    return float(str(task["a"] + task["b"]) in (reply.choices[0].message.content or ""))


@rollout
async def sum_agent(task: dict, resources) -> float:
    """The sums agent (no system prompt: the template's own)."""
    return await ask_sum(task, resources.llm)


@rollout
async def prompted_sum_agent(task: dict, resources) -> float:
    """The sums agent under the `prompt` resource as its system prompt (what APO optimizes); with the
    start prompt its requests render to the same tokens as `sum_agent`'s."""
    prompt = resources.prompts.get("prompt")
    return await ask_sum(task, resources.llm, prompt.template if prompt is not None else SMOLLM2_SYSTEM)


STEP_PARTS = (
    ("rollouts", "rollout_seconds"),
    ("old log-probs", "actor/old_log_prob_s"),
    ("update", None),
    ("save checkpoint", None),
    ("weight sync", "sync/seconds"),
    ("rest", None),
)


def step_split(args) -> None:
    import csv
    import tempfile

    from lightningrl import fit

    model_dir = cached_model("smollm2")
    steps = []
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory() as out:
            fit(
                f"{Path(__file__).resolve()}:sum_agent",
                sums(64, repeat),
                model=model_dir,
                config={
                    "steps": args.steps,
                    "tasks_per_step": 4,
                    "rollouts_per_task": 8,
                    "val_every": 0,
                    "trainer": {"lr": 1e-5, "micro_batch_size": 8, "lora_rank": args.lora_rank},
                    "show_progress": False,
                },
                workers=8,
                runner_processes=2,
                engine="ours",
                output_dir=out,
            )
            with open(Path(out) / "metrics.csv", newline="") as file:
                for row in csv.DictReader(file):
                    if row.get("actor/step_time_s"):
                        steps.append({k: float(v) for k, v in row.items() if _is_number(v)})
    parts = []
    for row in steps:
        actor = row["actor/step_time_s"]
        recompute = row.get("actor/old_log_prob_s", 0.0)
        save = row["update/train_seconds"] - actor
        known = row["rollout_seconds"] + row["update/train_seconds"] + row.get("sync/seconds", 0.0)
        parts.append(
            {
                "rollouts": row["rollout_seconds"],
                "old log-probs": recompute,
                "update": actor - recompute,
                "save checkpoint": save,
                "weight sync": row.get("sync/seconds", 0.0),
                "rest": row["step_seconds"] - known,
                "step": row["step_seconds"],
                "tokens": row.get("actor/tokens", 0.0),
            }
        )
    print(
        f"\nRL step on SmolLM2-135M through fit, 4 tasks x 8 rollouts, lora_rank {args.lora_rank}; "
        f"{len(parts)} steps of {args.repeats} runs: median (min-max) seconds\n"
    )
    print("| part | seconds | share |")
    print("|---|---|---|")
    total = statistics.median(p["step"] for p in parts)
    for name, _ in STEP_PARTS:
        values = [p[name] for p in parts]
        print(
            f"| {name} | {statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f}) | "
            f"{statistics.median(values) / total:.0%} |"
        )
    values = [p["step"] for p in parts]
    print(f"| **step** | {total:.1f} ({min(values):.1f}-{max(values):.1f}) | |")
    tokens = [p["tokens"] for p in parts]
    print(
        f"\ntrained response tokens a step: {statistics.median(tokens):.0f} ({min(tokens):.0f}-{max(tokens):.0f})"
    )


def _is_number(value: str) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def summary(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs]
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=24)
    parser.add_argument("--groups", type=int, default=3, help="GRPO groups: rows of a group share a prompt")
    parser.add_argument("--prompt", type=int, default=430)
    parser.add_argument("--response", type=int, default=48)
    parser.add_argument("--micro", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lora-rank", type=int, default=None, help="LoRA rank (default 16; --step: 0)")
    parser.add_argument("--dtype", default=None, help="verl's param dtype (default fp32 on the CPU)")
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing in both")
    parser.add_argument("--only", default="bare,verl,full,shared", help="bare, verl, full, shared, lora")
    parser.add_argument("--step", action="store_true", help="split RL steps through fit instead")
    parser.add_argument("--steps", type=int, default=2, help="--step: steps a run")
    args = parser.parse_args()
    if args.step:
        args.lora_rank = args.lora_rank or 0
        step_split(args)
        return
    args.lora_rank = args.lora_rank or 16
    model_dir = cached_model("smollm2")
    batch, advantages = make_batch(args.sequences, args.prompt, args.response, args.groups)
    tokens = int(batch.response_mask.sum())
    rows = []
    only = args.only.split(",")
    if "bare" in only:
        rows.append(("bare torch (full, AdamW)", bare_update(model_dir, batch, advantages, args)))
    for path, (label, fields) in UPDATE_PATHS.items():
        if path in only:
            rows.append(
                (
                    f"verl actor, full fine-tune: {label}",
                    verl_update(model_dir, batch, advantages, args, 0, **fields),
                )
            )
    if "lora" in only:
        rows.append(
            (
                f"verl actor, LoRA r={args.lora_rank} (shared prefix)",
                verl_update(model_dir, batch, advantages, args, args.lora_rank),
            )
        )
    print(
        f"\nSmolLM2-135M, {args.sequences} x ({args.prompt} prompt + {args.response} response) tokens in "
        f"{args.groups} group(s) sharing a prompt, "
        f"micro-batch {args.micro}, {tokens} tokens trained; median of {args.repeats} (min-max)\n"
    )
    print("| update | s / update | old log-probs s | update s | trained tokens/s |")
    print("|---|---|---|---|---|")
    for name, runs in rows:
        rate = [tokens / r["total"] for r in runs]
        print(
            f"| {name} | {summary(runs, 'total')} | {summary(runs, 'logprob')} | {summary(runs, 'update')} | "
            f"{statistics.median(rate):.0f} ({min(rate):.0f}-{max(rate):.0f}) |"
        )


if __name__ == "__main__":
    main()
