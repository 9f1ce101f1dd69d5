"""A training step's path prints nothing of transformers', verl's or torch's; the user's own calls still do."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from lightningrl.quiet import quiet_third_party

# A fresh interpreter: verl's engine warnings come once per process, on its first import.
SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch

    from lightningrl.credit import TrainingSequence, collate
    from lightningrl.serving.service import InferenceService
    from lightningrl.demos.tinylm import build_tiny_model
    from lightningrl.trainer import TrainerConfig, VerlActorTrainer
    from lightningrl.demos.warmup import WarmupConfig, supervised_warmup

    root = Path(sys.argv[1])
    base = build_tiny_model(root / "base", seed=0, tokenizer_kind="word", hidden_size=32, num_heads=2)
    demos = [([{"role": "user", "content": "Pick a or b."}], c) for c in ("a", "b")]
    warm, _ = supervised_warmup(base, demos, root / "warm", WarmupConfig(steps=2), show_progress=False)
    service = InferenceService(warm, device="cpu")
    trainer = VerlActorTrainer(warm, TrainerConfig(lr=1e-2, micro_batch_size=4))
    gen = torch.Generator().manual_seed(0)
    sequences = [
        TrainingSequence(
            rollout_id=f"r{i}",
            prompt_ids=torch.randint(4, 60, (3,), generator=gen).tolist(),
            response_ids=torch.randint(4, 60, (4,), generator=gen).tolist(),
            response_mask=[1] * 4,
            rollout_logprobs=[-1.0] * 4,
            token_rewards=[0.0] * 4,
            call_ids=[0] * 4,
        )
        for i in range(4)
    ]
    batch = collate(sequences)
    trainer.train_step(batch, torch.randn(batch.responses.shape, generator=gen))
    checkpoint = trainer.save_checkpoint(root / "step-1")
    assert service.reload(checkpoint).version == 1
    print("OUR STEP DONE", flush=True)

    # The user's own call, outside our code: its progress bar is theirs to keep.
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(checkpoint)
    """
)

RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")
NOISE = (
    "Loading weights",
    "Writing model shards",
    "megatron",
    "mindspeed",
    "engine is not available",
    "NUMA affinity",
    "parameters",
    "Before FSDP",
    "Total steps",
    "is_fx_tracing",
    "Skipping monkey patch",
)


def test_a_training_step_path_prints_no_third_party_noise(tmp_path: Path) -> None:
    script = tmp_path / "step.py"
    script.write_text(SCRIPT)
    # A trainer made earlier in this pytest process set the rendezvous variables to its own port.
    env = {k: v for k, v in os.environ.items() if k not in RENDEZVOUS_VARIABLES}
    # One pipe for both streams, unbuffered: what came before the marker is our calls' output.
    done = subprocess.run(
        [sys.executable, "-u", str(script), str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    ours, _, users = done.stdout.partition("OUR STEP DONE")
    assert users, done.stdout[-4000:]
    found = [noise for noise in NOISE if noise in ours]
    assert not found, f"third-party output during our calls: {found}\n{ours[-4000:]}"
    assert "Loading weights" in users  # scoped: the user's own from_pretrained keeps its bar


def test_quiet_is_per_thread_and_nests(capfd) -> None:
    """Another thread's prints pass through while one thread is quiet; leaving the outer block restores."""
    inside = threading.Event()
    release = threading.Event()

    def quiet_worker() -> None:
        with quiet_third_party():
            with quiet_third_party():
                print("hidden inner")
            print("hidden outer")
            inside.set()
            assert release.wait(timeout=60)
        print("shown after")

    worker = threading.Thread(target=quiet_worker)
    worker.start()
    assert inside.wait(timeout=60)
    print("shown from another thread")
    release.set()
    worker.join(timeout=60)
    assert not worker.is_alive()
    out = capfd.readouterr().out
    assert "hidden" not in out
    assert "shown from another thread" in out and "shown after" in out
