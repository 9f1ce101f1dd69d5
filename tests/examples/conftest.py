"""Shared helpers of the example tests (tests/examples/test_<name>.py): the repository root on the import
path (so `examples.<name>.agent` resolves here and in the runner processes `fit` starts), a warmed-up
tiny model, and a read of a finished run's store."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


@dataclass
class StoreRead:
    """A finished run's rollouts, spans (latest attempt) and rewards, by rollout id."""

    rollouts: list
    spans: dict[str, list]
    rewards: dict[str, list]

    def llm_spans(self, mode: str | None = None) -> list:
        """The LLM-call spans (credit assignment's own test) of rollouts of `mode` (None: all)."""
        from lightningrl.credit.calls import is_llm_span

        ids = [
            r.rollout_id
            for r in self.rollouts
            if mode is None or str(getattr(r.mode, "value", r.mode)) == mode
        ]
        return [s for i in ids for s in self.spans[i] if is_llm_span(s)]


def _read_store(db: str | Path) -> StoreRead:
    from lightningstore import SqlStore

    async def read() -> StoreRead:
        store = SqlStore(db)
        try:
            rollouts = await store.query_rollouts()
            ids = [r.rollout_id for r in rollouts]
            spans = {i: await store.query_spans(i, "latest") for i in ids}
            rewards = {i: await store.query_rewards(i) for i in ids}
            return StoreRead(rollouts, spans, rewards)
        finally:
            await store.close()

    return asyncio.run(read())


@pytest.fixture
def read_store() -> Callable[[str | Path], StoreRead]:
    """`read_store(path_to_store_db)`: a finished run's rollouts, spans and rewards."""
    return _read_store


def _warm_model(
    out: Path,
    vocabulary: Sequence[str],
    demonstrations: Sequence[tuple[list[dict[str, str]], str]],
    *,
    steps: int = 100,
    batch_size: int = 8,
    hidden_size: int = 64,
    num_layers: int = 1,
    lr: float = 3e-3,
) -> Path:
    from lightningrl.demos.tinylm import build_tiny_model
    from lightningrl.demos.warmup import WarmupConfig, supervised_warmup

    base = build_tiny_model(
        out / "base",
        seed=0,
        tokenizer_kind="word",
        extra_text=list(vocabulary),
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=4,
    )
    warm, _ = supervised_warmup(
        base,
        list(demonstrations),
        out / "warm",
        WarmupConfig(steps=steps, batch_size=batch_size, lr=lr, seed=0),
        show_progress=False,
    )
    return warm


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """`warm_model(vocabulary, demonstrations, **sizes)`: a tiny word-tokenizer model warmed up on them."""

    def make(vocabulary: Sequence[str], demonstrations: Sequence, **kwargs: object) -> Path:
        return _warm_model(tmp_path_factory.mktemp("warm"), vocabulary, demonstrations, **kwargs)  # type: ignore[arg-type]

    return make


# An in-process trainer of an earlier test (fit) leaves its torch.distributed rendezvous in this
# process's environment; a child inheriting it would join that process group instead of its own.
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")

# One seeded calc demo run (examples/calc/demo.py through examples/experiments.py), shared by the
# experiments test and the replay test: one RL step with a validation before and after, a warm-up long
# enough for the call format (~150 steps at this size) so that step 1 trains.
CALC_SMALL = ["--deterministic", "--steps", "1", "--val-every", "1", "--tasks-per-step", "6", "--n", "4"]
CALC_SMALL += ["--workers", "8", "--warmup-steps", "220", "--warmup-until-loss", "100"]


def example_env() -> dict[str, str]:
    """The environment an example runs in as a child: one thread, offline, no inherited rendezvous."""
    env = {k: v for k, v in os.environ.items() if k not in RENDEZVOUS}
    return env | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run_experiments(out: Path, *extra: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    """examples/experiments.py on the calc demo alone, seed 0, `CALC_SMALL` then `extra`, into `out`."""
    command = ["examples/experiments.py", "--only", "calc", "--runs", "1", "--output", str(out), *CALC_SMALL]
    return subprocess.run(
        [sys.executable, *command, *extra],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=example_env(),
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def calc_experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of one finished `run_experiments` (its run in calc/seed0)."""
    out = tmp_path_factory.mktemp("calc-experiment") / "experiments"
    done = run_experiments(out, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out
