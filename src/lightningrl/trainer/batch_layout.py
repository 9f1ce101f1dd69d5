"""How an update's rows are laid out for verl: order, micro-batch size and loss-free padding rows.

verl splits a step into equal mini-batches, each evenly over the ranks, and each rank's share into
equal micro-batches. Micro-batches that keep a prompt's rows together (shared-prefix training computes
the prompt once per micro-batch) rarely come out equal, so they are completed with loss-free rows (a
copy of a real row cut to its prompt and one response token, `response_mask` 0): they add nothing to
the loss or its token count, and almost nothing to a forward that shares their prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lightningrl.credit.batch import SequenceBatch
from lightningrl.trainer.shared_prefix import prompt_order


def divisor_at_most(rows: int, cap: int) -> int:
    """The largest micro-batch size <= cap that splits `rows` evenly (verl requires even splits)."""
    return max(d for d in range(1, min(rows, cap) + 1) if rows % d == 0)


def whole_micro_batches(rows: int, ranks: int, cap: int) -> tuple[int, int]:
    """(micro-batch size, padded row count) for ONE mini-batch of `rows` over `ranks`: micro-batches of
    `cap` rows (fewer if a rank has fewer), the last one completed with padding rows.

    Cutting 25 rows into micro-batches of 5 (the largest divisor <= 8) instead of 8 + padding splits
    prompt groups and runs 5 forwards instead of 4: measured on the calculator agent, 58.7 s for 25
    rows against 25.9 s for 24."""
    share = -(-rows // ranks)
    micro = max(1, min(cap, share))
    share += -share % micro
    return micro, share * ranks


def by_length(attention_mask: torch.Tensor) -> list[int]:
    """Row indexes, longest sequence first (stable), so that consecutive micro-batches hold like lengths."""
    lengths = attention_mask.sum(dim=1).tolist()
    return sorted(range(len(lengths)), key=lambda i: -lengths[i])


def padded_share(attention_mask: torch.Tensor, micro_batch: int) -> float:
    """Share of the positions a forward computes that are padding, micro-batches of `micro_batch`
    consecutive rows each padded to its longest."""
    lengths = attention_mask.sum(dim=1)
    chunks = lengths.split(micro_batch)
    computed = sum(len(chunk) * int(chunk.max()) for chunk in chunks if len(chunk))
    return 1.0 - float(lengths.sum()) / computed if computed else 0.0


def rank_major_order(rows: int, mini_batch: int, ranks: int) -> list[int]:
    """Rows reordered so that rank r's contiguous slice holds its share of every global mini-batch, in order.

    E.g. 8 rows, mini-batches of 4, 2 ranks: [0, 1, 4, 5 | 2, 3, 6, 7].
    """
    share = mini_batch // ranks
    return [
        step * mini_batch + rank * share + i
        for rank in range(ranks)
        for step in range(rows // mini_batch)
        for i in range(share)
    ]


def packed_micro_batches(groups: list[list[int]], cap: int) -> list[list[int]]:
    """Rows (grouped by prompt) in micro-batches of at most `cap`: a group is split only where it holds
    more than `cap` rows (whole micro-batches first), the rest packed first-fit, so a prompt is computed
    in as few forwards as possible."""
    bins: list[list[int]] = []
    for group in groups:
        rows = list(group)
        while len(rows) >= cap:
            bins.append(rows[:cap])
            rows = rows[cap:]
        if not rows:
            continue
        for micro in bins:
            if len(micro) + len(rows) <= cap:
                micro.extend(rows)
                break
        else:
            bins.append(rows)
    return bins


@dataclass(frozen=True)
class RowLayout:
    """Which row of a batch sits at each position of verl's input (`index`), and which positions are
    loss-free padding (`pad`: a copy of the row before it, cut to its prompt and one response token)."""

    index: list[int]
    pad: list[bool]
    micro_batch: int

    @classmethod
    def for_one_mini_batch(
        cls, prompts: torch.Tensor, attention_mask: torch.Tensor, ranks: int, cap: int, *, by_prompt: bool
    ) -> RowLayout:
        """One mini-batch over `ranks`, in micro-batches of `cap` rows (fewer if a rank has fewer).
        `by_prompt`: each micro-batch holds whole prompt groups where they fit (`packed_micro_batches`),
        padded to `cap`; else rows longest first, the last micro-batch padded."""
        rows = prompts.shape[0]
        micro, _ = whole_micro_batches(rows, ranks, cap)
        if by_prompt:
            order = prompt_order(prompts, attention_mask)
            width = prompts.shape[1]
            keys = [tuple(prompts[i][attention_mask[i, :width].bool()].tolist()) for i in order]
            groups: dict[tuple[int, ...], list[int]] = {}
            for key, row in zip(keys, order, strict=True):
                groups.setdefault(key, []).append(row)
            bins = packed_micro_batches(list(groups.values()), micro)
        else:
            ordered = by_length(attention_mask)
            bins = [ordered[i : i + micro] for i in range(0, rows, micro)]
        bins += [[] for _ in range(-len(bins) % ranks)]  # every rank the same number of micro-batches
        index: list[int] = []
        pad: list[bool] = []
        for micro_rows in bins:
            fill = micro - len(micro_rows)
            last = micro_rows[-1] if micro_rows else (index[-1] if index else 0)
            index += micro_rows + [last] * fill
            pad += [False] * len(micro_rows) + [True] * fill
        return cls(index, pad, micro)

    @classmethod
    def in_order(cls, rows: int, padded_rows: int, micro_batch: int) -> RowLayout:
        """The rows as they are, then `padded_rows - rows` padding rows."""
        fill = padded_rows - rows
        return cls(list(range(rows)) + [rows - 1] * fill, [False] * rows + [True] * fill, micro_batch)

    @property
    def padding(self) -> int:
        return sum(self.pad)

    def apply(self, batch: SequenceBatch) -> SequenceBatch:
        """The batch in this layout, padding rows loss-free."""
        laid = batch.select(self.index)
        if self.padding:
            pads = torch.tensor(self.pad)
            width = batch.prompts.shape[1]
            laid.attention_mask[pads, width + 1 :] = 0
            laid.response_mask[pads] = 0
            laid.call_ids[pads] = -1
            laid.token_rewards[pads] = 0
        return laid

    def rows_of(self, values: torch.Tensor) -> torch.Tensor:
        """Per-row `values` (the batch's order) in this layout, zero on padding rows."""
        laid = values[self.index].clone()
        laid[torch.tensor(self.pad, dtype=torch.bool)] = 0
        return laid

    def restore(self, laid: torch.Tensor) -> torch.Tensor:
        """Values in this layout back in the batch's row order (padding rows dropped)."""
        real = [i for i, pad in enumerate(self.pad) if not pad]
        out = laid.new_empty((len(real), *laid.shape[1:]))
        out[torch.tensor([self.index[i] for i in real])] = laid[torch.tensor(real)]
        return out
