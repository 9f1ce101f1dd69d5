"""A bare-torch GRPO loop on SmolLM2-135M-Instruct against `fit` on the same task: the framework's cost.

    .venv/bin/python bench/bare_grpo.py [--steps 10] [--runs 3] [--only bare,fit,fit-bf16,sft,apo]

The task is bench/real_model.py's two-digit sums ("What is a plus b? Answer with the number."; reward 1
when the reply holds the sum). Both sides: 4 prompts x 8 samples a step at temperature 1, 24 new tokens,
one full fine-tune update a batch (AdamW, lr 1e-5), GRPO advantages (reward minus the group mean, over
the group's std), token-mean loss; held-out success is greedy on the same 64 unseen sums, before and
after. **bare**: HF `generate` and one forward/backward in this process, ~60 lines. **fit**: the same
settings through `fit` (store server, proxy, our inference server, 2 runner processes, verl's actor).
**fit-defaults**: `fit` with only the run's size chosen (steps, tasks and rollouts a step): every other
setting is the library's default (the recipe), against the bare loop's hand-picked lr.
**fit-bf16**: `fit` with the actor's parameters in bf16 (`trainer.param_dtype="bf16"`; fp32 master
weights and checkpoints, so the server still samples in fp32): whether the faster bf16 update learns
despite the train-inference mismatch it brings on the CPU.
**sft**: `fit(..., algorithm="sft")` on the same rollouts (4 x 8 a step), trained on the successful
ones only (NLL on their response tokens, same actor and lr): SFT against RL at the same number of
rollouts.
**apo**: `fit(..., algorithm="apo")`: the same agent with its system prompt as a prompt resource,
starting from the one SmolLM2's template adds by itself (so the start is the other sides' model and
prompt), 2 rounds, beam 2; the optimizer is the policy itself as our server serves it; candidates are
scored by 2 rollouts on each of 32 train tasks (held-out stays unseen); the weights never change.
Its wall is the whole `fit` call (evaluations and start-up included).
The table gives each side's held-out before -> after and its training wall (evaluation excluded), median
(min-max) over the runs, and the ratio of the medians. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_model import SMOLLM2_SYSTEM, prompted_sum_agent, sum_agent  # noqa: E402, F401 (fit's agents)

from lightningrl.models import cached_model  # noqa: E402

TASKS, SAMPLES, NEW_TOKENS, LR = 4, 8, 24, 1e-5


def split(seed: int, train: int = 256, heldout: int = 64) -> tuple[list[dict], list[dict]]:
    """Distinct sums of two numbers 10-49: the same `heldout` for every seed, `train` unseen ones by seed."""
    pairs = [(a, b) for a in range(10, 50) for b in range(10, 50)]
    random.Random(1000).shuffle(pairs)
    held, rest = pairs[:heldout], pairs[heldout:]
    random.Random(seed).shuffle(rest)
    return [{"a": a, "b": b} for a, b in rest[:train]], [{"a": a, "b": b} for a, b in held]


def question(task: dict) -> list[dict]:
    return [{"role": "user", "content": f"What is {task['a']} plus {task['b']}? Answer with the number."}]


def reward(task: dict, text: str) -> float:
    return float(str(task["a"] + task["b"]) in text)


def generate(model, tokenizer, tasks: list[dict], samples: int, greedy: bool) -> tuple[torch.Tensor, int]:
    """Left-padded prompts, each repeated `samples` times, with their sampled continuations."""
    prompts = [
        tokenizer.apply_chat_template(question(t), add_generation_prompt=True, tokenize=False) for t in tasks
    ]
    batch = tokenizer([p for p in prompts for _ in range(samples)], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(
            **batch, max_new_tokens=NEW_TOKENS, do_sample=not greedy, temperature=None if greedy else 1.0,
            top_p=None, top_k=None, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        )  # fmt: skip
    return out, batch["input_ids"].shape[1]


def success(model, tokenizer, tasks: list[dict]) -> float:
    out, width = generate(model, tokenizer, tasks, 1, greedy=True)
    texts = tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)
    return sum(reward(t, x) for t, x in zip(tasks, texts, strict=True)) / len(tasks)


def bare_run(seed: int, steps: int, train: list[dict], heldout: list[dict]) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one line per run in the table's log, not a loading bar

    torch.manual_seed(seed)
    path = cached_model("smollm2")
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    before = success(model.eval(), tokenizer, heldout)
    rng, wall = random.Random(seed), 0.0
    for _ in range(steps):
        started = time.perf_counter()
        tasks = rng.sample(train, TASKS)
        out, width = generate(model.eval(), tokenizer, tasks, SAMPLES, greedy=False)
        texts = tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)
        rewards = torch.tensor([reward(tasks[i // SAMPLES], x) for i, x in enumerate(texts)]).view(
            TASKS, SAMPLES
        )
        advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-6)).view(
            -1
        )
        response = out[:, width:]
        # Response tokens up to and including the first eos; pad after it.
        ended = (response == tokenizer.eos_token_id).int().cumsum(1)
        mask = ((ended == 0) | ((ended == 1) & (response == tokenizer.eos_token_id))).float()
        attention = torch.cat([(out[:, :width] != tokenizer.pad_token_id).long(), mask.long()], 1)
        model.train()
        logits = model(input_ids=out, attention_mask=attention).logits[:, width - 1 : -1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, response.unsqueeze(-1)).squeeze(-1)
        loss = -(advantages[:, None] * logp * mask).sum() / mask.sum()  # on-policy: the ratio is 1
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        wall += time.perf_counter() - started
    return {"before": before, "after": success(model.eval(), tokenizer, heldout), "wall": wall}


def fit_run(
    seed: int,
    steps: int,
    train: list[dict],
    heldout: list[dict],
    algorithm: str = "rl",
    dtype: str | None = None,
    defaults: bool = False,
) -> dict:
    from lightningrl import fit

    # SFT's update is NLL only for one optimiser step on a batch scored by its own weights.
    sft = {"trainer": {"mini_batch_size": None, "ppo_epochs": 1}} if algorithm == "sft" else None
    apo = (
        {"rounds": 2, "beam": 2, "rollouts_per_task": 2, "optimizer_max_tokens": 96, "score_on": "train",
         "score_tasks": 32}
        if algorithm == "apo" else None
    )  # fmt: skip
    agent = "prompted_sum_agent" if algorithm == "apo" else "sum_agent"

    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        result = fit(
            f"{Path(__file__).resolve().parent / 'real_model.py'}:{agent}",
            train,
            heldout,
            model=cached_model("smollm2"),
            config={
                "steps": steps,
                "tasks_per_step": TASKS,
                "rollouts_per_task": SAMPLES,
                "val_every": steps,
                "seed": seed,
                **(
                    {}
                    if defaults
                    else {"trainer": {"lr": LR, "micro_batch_size": 8, "ppo_epochs": 1, "param_dtype": dtype}}
                ),
                "show_progress": False,
            },  # fmt: skip
            sampling_by_mode={"val": {"temperature": 0.0}},
            workers=8,
            runner_processes=2,
            engine="ours",
            output_dir=out,
            algorithm=algorithm,
            sft=sft,
            apo=apo,
            prompt=SMOLLM2_SYSTEM if apo is not None else None,
        )
        whole = time.perf_counter() - started
        with open(Path(out) / "metrics.csv", newline="") as file:
            rows = list(csv.DictReader(file))
    held = [(int(r["step"]), float(r["val/success"])) for r in rows if r.get("val/success")]
    mismatch = [float(r["tokens/mismatch_abs_mean"]) for r in rows if r.get("tokens/mismatch_abs_mean")]
    if algorithm == "apo":
        best = result.apo.best.version.resource.template if result.apo is not None else None
        return {"before": held[0][1], "after": held[-1][1], "wall": whole, "prompt": best}
    # Training wall: each step's wall less the validation inside it.
    wall = sum(
        float(r["step_seconds"]) - float(r.get("val/seconds") or 0.0) for r in rows if int(r["step"]) > 0
    )
    return {"before": held[0][1], "after": held[-1][1], "wall": wall, "mismatch": statistics.median(mismatch)}


def cell(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="bare,fit,sft", help="of bare,fit,fit-defaults,fit-bf16,sft,apo")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {}
    for seed in range(args.runs):
        train, heldout = split(seed)
        for side in args.only.split(","):
            if side == "bare":
                run = bare_run(seed, args.steps, train, heldout)
            else:
                algorithm = "rl" if side.startswith("fit") else side
                dtype = "bf16" if side == "fit-bf16" else None
                run = fit_run(
                    seed, args.steps, train, heldout, algorithm=algorithm, dtype=dtype,
                    defaults=side == "fit-defaults",
                )  # fmt: skip
            print(
                f"{side} seed {seed}: {run['before']:.2f} -> {run['after']:.2f} in {run['wall']:.0f} s"
                + (f"; best prompt {run['prompt']!r}" if run.get("prompt") is not None else "")
                + (f"; mismatch |dlogp| {run['mismatch']:.1e}" if run.get("mismatch") is not None else ""),
                flush=True,
            )
            results.setdefault(side, []).append(run)
    print(
        f"\nSmolLM2-135M, sums, {TASKS} x {SAMPLES} a step, {args.steps} steps, {args.runs} runs: median (min-max)\n"
    )
    print("| loop | held-out before | held-out after | gain | training wall s |")
    print("|---|---|---|---|---|")
    for side, runs in results.items():
        gains = [r["after"] - r["before"] for r in runs]
        print(
            f"| {side} | {cell([r['before'] for r in runs], 2)} | {cell([r['after'] for r in runs], 2)} | "
            f"{cell(gains, 2)} | {cell([r['wall'] for r in runs], 0)} |"
        )
    if "bare" in results and "fit" in results:
        ratio = statistics.median(r["wall"] for r in results["fit"]) / statistics.median(
            r["wall"] for r in results["bare"]
        )
        print(f"\nfit / bare training wall (medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
