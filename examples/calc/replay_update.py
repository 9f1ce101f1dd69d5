"""Replay one RL step's update of a finished demo run, with the same or other settings, and show
where the tool slot's probability went.

    .venv/bin/python examples/calc/replay_update.py --seed 2 --run runs/calc/seed2 --negative-weight 1.0

It reads the step's rollouts from the run's store (their spans, token ids and rewards), assigns
credit and advantages as the demo's flags say, takes one verl actor update from the checkpoint the
step started from, and prints, per operation on the held-out questions, the probability the tool
slot (after the restated operation word) gives the right tool and gives no tool at all. For step 1
the replay is exact (same warm-up, same batch, same seed: the demo's own step-1 checkpoint comes
out); later steps start from a fresh optimiser state.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo import demo_config, demo_parser  # noqa: E402
from tasks import OPS, split_tasks, tool_messages  # noqa: E402

from lightningrl.credit import RolloutEvidence, TrainingSequence, assign_credit_to_rollouts, collate  # noqa: E402
from lightningrl.models.adapter import model_config  # noqa: E402
from lightningrl.quiet import quiet_third_party  # noqa: E402
from lightningrl.rl.advantages import compute_advantages  # noqa: E402
from lightningrl.rl.config import LightningRLConfig  # noqa: E402
from lightningrl.rl.step_checkpoints import step_checkpoint  # noqa: E402
from lightningrl.trainer import build_trainer  # noqa: E402
from lightningstore import open_store  # noqa: E402
from lightningstore.batch_read import rewards_of_rollouts, spans_of_rollouts  # noqa: E402


async def step_sequences(run: Path, step: int, config: LightningRLConfig) -> list[TrainingSequence]:
    """The training sequences of step `step`'s succeeded rollouts, as the loop built them."""
    store = open_store(str(run / "store.db"))
    try:
        rollouts = [
            r
            for r in await store.query_rollouts(status=["succeeded"])
            if (r.group_id or "").startswith(f"s{step}/")
        ]
        if not rollouts:
            raise SystemExit(f"no succeeded rollouts of step {step} in {run / 'store.db'}")
        ids = [r.rollout_id for r in rollouts]
        spans = await spans_of_rollouts(store, ids, "latest")
        rewards = await rewards_of_rollouts(store, ids)
    finally:
        await store.close()
    return assign_credit_to_rollouts(
        (RolloutEvidence(r.group_id, spans[r.rollout_id], rewards[r.rollout_id]) for r in rollouts), config
    )[0]


def tool_slot(model_dir: Path, seed: int) -> dict[str, tuple[float, float]]:
    """Per operation: mean P(right tool) and P(no tool) after the operation word, held-out questions."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with quiet_third_party():  # no "Loading weights" bar between the script's lines
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tools = {tool: tokenizer.encode(f" {tool}", add_special_tokens=False)[0] for tool in OPS.values()}
    _, heldout = split_tasks(seed)
    out = {}
    for op, tool in OPS.items():
        right = none = 0.0
        questions = [t for t in heldout if t.op == op]
        for task in questions:
            prompt = tokenizer.apply_chat_template(
                tool_messages(task.question), add_generation_prompt=True, return_dict=True
            )
            ids = list(prompt["input_ids"])
            ids += tokenizer.encode(op, add_special_tokens=False)
            with torch.no_grad():
                probs = model(torch.tensor([ids])).logits[0, -1].softmax(-1)
            right += float(probs[tools[tool]])
            none += 1.0 - float(sum(probs[t] for t in tools.values()))
        out[op] = (right / len(questions), none / len(questions))
    return out


def main() -> None:
    parser = demo_parser(__doc__)
    parser.add_argument("--run", default=None, help="the demo run's directory (default: OUTPUT/seedN)")
    parser.add_argument("--step", type=int, default=1, help="the RL step to replay")
    parser.add_argument("--save", default=None, help="keep the replayed checkpoint in this directory")
    args = parser.parse_args()
    run = Path(args.run or Path(args.output) / f"seed{args.seed}").resolve()
    config = demo_config(args)
    start = run / "model-warmup" if args.step == 1 else step_checkpoint(run, args.step - 1)
    sequences = asyncio.run(step_sequences(run, args.step, config))
    batch = collate(sequences, pad_token_id=int(model_config(str(start)).get("pad_token_id") or 0))
    adv = compute_advantages(batch, config.advantage)
    if not bool(adv.keep.any()):
        raise SystemExit(f"step {args.step} trained nothing: every group had equal rewards")
    trainer = build_trainer(start, config.effective_trainer())
    stats = trainer.train_step(batch.select(adv.keep), adv.advantages[adv.keep])
    with tempfile.TemporaryDirectory() as tmp:
        after = trainer.save_checkpoint(Path(args.save) if args.save else Path(tmp) / "replayed")
        rows = [("before", tool_slot(start, args.seed)), ("after", tool_slot(after, args.seed))]
    print(
        f"step {args.step}: {len(batch)} sequences, {adv.groups - adv.dropped_groups} of {adv.groups} groups "
        f"kept, ppo_kl {stats['ppo_kl']:.4f}, grad_norm {stats['grad_norm']:.3f}"
    )
    print("tool slot after the operation word, held-out questions: P(right tool) / P(no tool)")
    for label, slot in rows:
        cells = "  ".join(f"{op} {right:.2f} / {none:.2f}" for op, (right, none) in slot.items())
        print(f"  {label:<6} {cells}")


if __name__ == "__main__":
    main()
