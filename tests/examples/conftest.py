"""Shared helpers of the example tests (tests/examples/test_<name>.py): the repository root on the import
path (so `examples.<name>.agent` resolves here and in the runner processes `fit` starts), a warmed-up
tiny model, and a read of a finished run's store."""

from __future__ import annotations

import asyncio
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
