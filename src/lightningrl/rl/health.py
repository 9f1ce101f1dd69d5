"""Learning health: rules over a run's metrics rows that say in words why a run is flat or falling.

Each rule reads the rows so far (one per step, as `MetricsLog` keeps them) and names what it finds:
rollouts that made no model call or posted no reward, no signal in a slice, entropy collapsing while
success falls, train reward rising while held-out does not (sharpening), held-out falling (or one
slice of it while the whole does not), the first decision collapsing onto one choice. A line's `key`
(rule and slice) stays the same while the problem lasts, so a loop announces each problem once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lightningrl.rl.decisions import parse_summary

Row = Mapping[str, Any]

NO_SIGNAL_STEPS = 3
"""Consecutive steps with no informative group before a slice is said to have no signal."""
MIN_TREND_STEPS = 4
"""Trained steps before a trend (entropy, train success) is compared start to end."""
TREND_WINDOW = 3
"""Steps averaged at each end of a trend (fewer when the run is short)."""
ENTROPY_COLLAPSE = 0.5
"""An entropy ending below this share of its start has collapsed."""
SUCCESS_FELL = 0.05
SLICE_FELL = 0.2
TRAIN_ROSE = 0.15
HELD_OUT_STAYED = 0.05
"""Held-out success gaining less than this while train success rose is sharpening, not learning."""
HELD_OUT_FELL = 0.1
MIN_COLLAPSED_ROLLOUTS = 4
"""Rollouts of a slice that must all make one first decision before it counts as a collapse."""
COLLAPSED_SLICE_SUCCESS = 0.25
"""A slice collapsed onto one first decision is named when its train success is at most this."""
SEPARATOR = " | "
"""Between lines in the `health/lines` column."""


@dataclass(frozen=True)
class HealthLine:
    key: str
    """Rule and slice: the same while the problem lasts."""
    text: str


@dataclass(frozen=True)
class StepHealth:
    columns: dict[str, Any]
    """`health/count` and, when any, `health/lines` (the active lines joined by `SEPARATOR`)."""
    new: list[str]
    """Lines active now that were not after the previous row: what to announce."""


def health_lines(rows: Sequence[Row]) -> list[HealthLine]:
    """Every rule's lines over `rows` (oldest first)."""
    return [line for rule in RULES for line in rule(rows)]


def step_health(previous: Sequence[Row], row: Row) -> StepHealth:
    """The health columns of a step's `row` (logged after `previous`) and the lines it makes new."""
    before = {line.key for line in health_lines(previous)}
    now = health_lines([*previous, row])
    columns: dict[str, Any] = {"health/count": len(now)}
    if now:
        columns["health/lines"] = SEPARATOR.join(line.text for line in now)
    return StepHealth(columns, [line.text for line in now if line.key not in before])


# ---- the rules ---------------------------------------------------------------------------------------


def no_signal(rows: Sequence[Row]) -> list[HealthLine]:
    """A slice (or the whole batch) whose groups all agreed for `NO_SIGNAL_STEPS` steps in a row: GRPO
    has nothing to compare, whatever the reward."""
    trained = _trained(rows)
    lines = []
    for scope in [None, *_slices(trained, "train/success")]:
        shares = [_informative(r, scope) for r in trained]
        run = 0
        for share in reversed(shares):
            if share is None or share > 0:
                break
            run += 1
        if run < NO_SIGNAL_STEPS:
            continue
        outcome = _outcome(_number(trained[-1].get(_column("train/success", scope))))
        lines.append(
            HealthLine(
                f"no_signal/{scope or 'all'}",
                f"{_where(scope)}every group agreed for {run} steps ({outcome}): no signal",
            )
        )
        if scope is None:
            break  # every slice agreed too: one line says it
    return lines


def entropy_collapse(rows: Sequence[Row]) -> list[HealthLine]:
    """The policy's entropy (or its first-token entropy) fell below `ENTROPY_COLLAPSE` of its start
    while train success fell, overall or in a slice."""
    trained = _trained(rows)
    success = _trend(trained, "train/success")
    worst = _worst_slice(trained, "train/success")
    fell = success is not None and success[1] < success[0] - SUCCESS_FELL
    if not fell and (worst is None or worst[1] - worst[2] < SLICE_FELL):
        return []
    lines = []
    for column, name in (("actor/entropy", "entropy"), ("actor/entropy_decision", "first-token entropy")):
        trend = _trend(trained, column)
        if trend is None or not trend[1] < ENTROPY_COLLAPSE * trend[0]:
            continue
        text = f"{name} {trend[0]:.2f} → {trend[1]:.2f} while "
        if success is not None and fell:
            text += f"train success fell {success[0]:.2f} → {success[1]:.2f}"
            if worst is not None and worst[1] - worst[2] >= SLICE_FELL:
                text += f" ({worst[0]} {worst[1]:.2f} → {worst[2]:.2f})"
        else:
            assert worst is not None
            text += f"{worst[0]}'s train success fell {worst[1]:.2f} → {worst[2]:.2f}"
        lines.append(HealthLine(f"entropy_collapse/{column}", text))
    return lines


def sharpening(rows: Sequence[Row]) -> list[HealthLine]:
    """Train success rose by `TRAIN_ROSE` while held-out success gained less than `HELD_OUT_STAYED`:
    the policy is sharpening on what it already did, not learning what generalises."""
    train = _trend(_trained(rows), "train/success")
    held_out = _indexed(rows, "val/success")
    if train is None or len(held_out) < 2 or train[1] - train[0] < TRAIN_ROSE:
        return []
    first, last = held_out[0][1], held_out[-1][1]
    if last - first >= HELD_OUT_STAYED:
        return []
    verb = "stayed" if last - first > -HELD_OUT_STAYED else "fell"
    return [
        HealthLine(
            "sharpening",
            f"train success rose {train[0]:.2f} → {train[1]:.2f} while held-out {verb} "
            f"{first:.2f} → {last:.2f}: sharpening, not learning",
        )
    ]


def held_out_fell(rows: Sequence[Row]) -> list[HealthLine]:
    """The latest held-out success is `HELD_OUT_FELL` or more below the best before it; the slice that
    fell furthest is named."""
    held_out = _indexed(rows, "val/success")
    if len(held_out) < 2:
        return []
    best_index, best = max(held_out[:-1], key=lambda item: (item[1], item[0]))
    last_index, last = held_out[-1]
    if best - last < HELD_OUT_FELL:
        return []
    text = f"held-out fell {best:.2f} → {last:.2f} since step {_step(rows[best_index])}"
    drops = []
    for scope in _slices([rows[best_index], rows[last_index]], "val/success"):
        then = _number(rows[best_index].get(_column("val/success", scope)))
        now = _number(rows[last_index].get(_column("val/success", scope)))
        if then is not None and now is not None:
            drops.append((then - now, scope, then, now))
    if drops:
        drop, scope, then, now = max(drops)
        if drop >= HELD_OUT_FELL:
            text += f" ({scope} {then:.2f} → {now:.2f})"
    return [HealthLine("held_out_fell", text)]


def slice_fell(rows: Sequence[Row]) -> list[HealthLine]:
    """A held-out slice `SLICE_FELL` or more below its best earlier value while the whole held-out did not
    fall as far (`held_out_fell` names that): the updates that taught the other slices moved a choice
    the slices share. The slice's first decisions at the last step say which way."""
    held_out = _indexed(rows, "val/success")
    if len(held_out) < 2:
        return []
    last_index, last = held_out[-1]
    best_overall = max(value for _, value in held_out[:-1])
    if best_overall - last >= HELD_OUT_FELL:
        return []
    lines = []
    for scope in _slices([rows[i] for i, _ in held_out], "val/success"):
        column = _column("val/success", scope)
        earlier = [
            (v, i) for i, r in enumerate(rows[:last_index]) if (v := _number(r.get(column))) is not None
        ]
        now = _number(rows[last_index].get(column))
        if not earlier or now is None:
            continue
        best, best_index = max(earlier, key=lambda item: (item[0], -item[1]))
        if best - now < SLICE_FELL:
            continue
        text = (
            f"{scope}: held-out fell {best:.2f} → {now:.2f} since step {_step(rows[best_index])} while "
            f"the whole held-out is {last:.2f}: the updates of the other slices moved a choice they share"
        )
        trained = [r for r in _trained(rows) if _decisions(r, scope)]
        if trained:
            chosen = ", ".join(f"{name} {count}" for name, count in _decisions(trained[-1], scope))
            text += f" (first decisions at step {_step(trained[-1])}: {chosen})"
        lines.append(HealthLine(f"slice_fell/{scope}", text))
    return lines


def decision_collapse(rows: Sequence[Row]) -> list[HealthLine]:
    """The first decision, varied at an earlier step, is now one choice for every rollout: of every slice
    (one line), else of a slice whose train success is at most `COLLAPSED_SLICE_SUCCESS`."""
    trained = [r for r in _trained(rows) if "decision/first" in r]
    if len(trained) < 2 or not any(len(_decisions(r, None)) > 1 for r in trained[:-1]):
        return []
    last = trained[-1]
    scopes = _slices([last], "decision/first")
    collapsed = {scope: one for scope in scopes if (one := _unanimous(last, scope)) is not None}
    chosen = {name for name, _ in collapsed.values()}
    if len(scopes) > 1 and len(collapsed) == len(scopes) and len(chosen) == 1:
        detail = ", ".join(f"{scope} {count} of {count}" for scope, (_, count) in collapsed.items())
        return [
            HealthLine(
                "decision_collapse/all",
                f"first decision collapsed onto {chosen.pop()} for every slice ({detail})",
            )
        ]
    lines = []
    for scope, (name, count) in collapsed.items():
        success = _number(last.get(_column("train/success", scope)))
        if success is None or success > COLLAPSED_SLICE_SUCCESS:
            continue
        lines.append(
            HealthLine(
                f"decision_collapse/{scope}",
                f"{scope}: first decision collapsed onto {name} ({count} of {count}) "
                f"while its train success is {success:.2f}",
            )
        )
    return lines


def agent_contract(rows: Sequence[Row]) -> list[HealthLine]:
    """The last step's rollouts that made no model call through the proxy, or posted no reward: an agent
    that does not use its base URL or never reports trains on nothing (or on zeros), so say so."""
    if not rows:
        return []
    row = rows[-1]
    total = _number(row.get("credit/rollouts"))
    if not total:
        return []
    lines = []
    silent = _number(row.get("credit/rollouts_without_model_call")) or 0
    if silent:
        lines.append(
            HealthLine(
                "agent/no_model_call",
                f"{silent:.0f} of {total:.0f} rollouts made no model call through the proxy: nothing to "
                "train on (does the agent call the model at $OPENAI_BASE_URL / $AGL_OPENAI_BASE_URL?)",
            )
        )
    unrewarded = _number(row.get("credit/rollouts_without_reward")) or 0
    if unrewarded:
        lines.append(
            HealthLine(
                "agent/no_reward",
                f"{unrewarded:.0f} of {total:.0f} rollouts posted no reward: their calls train as a return "
                "of 0 (emit_reward, a returned float, or POST $AGL_EVENT_URL)",
            )
        )
    return lines


RULES: tuple[Callable[[Sequence[Row]], list[HealthLine]], ...] = (
    agent_contract,
    no_signal,
    entropy_collapse,
    sharpening,
    held_out_fell,
    slice_fell,
    decision_collapse,
)


# ---- reading rows ------------------------------------------------------------------------------------


def _trained(rows: Sequence[Row]) -> list[Row]:
    """The rows of training steps (those with a train outcome; step 0 is a validation only)."""
    return [r for r in rows if "train/success" in r]


def _column(prefix: str, scope: str | None) -> str:
    return prefix if scope is None else f"{prefix}[{scope}]"


def _where(scope: str | None) -> str:
    return "" if scope is None else f"{scope}: "


def _outcome(success: float | None) -> str:
    if success is None:
        return "train success unknown"
    if success in (0.0, 1.0):
        return "all failed" if success == 0.0 else "all succeeded"
    return f"train success {success:.2f}"


def _slices(rows: Sequence[Row], prefix: str) -> list[str]:
    """The slices (`tag=value`) that `prefix[...]` columns of `rows` name, in first-seen order."""
    opening = prefix + "["
    found = (k[len(opening) : -1] for r in rows for k in r if k.startswith(opening) and k.endswith("]"))
    return list(dict.fromkeys(found))


def _informative(row: Row, scope: str | None) -> float | None:
    """The share of informative groups: dynamic sampling's own count (`sample/`) when the row has it."""
    for prefix in ("sample/informative_share", "health/informative_share"):
        value = _number(row.get(_column(prefix, scope)))
        if value is not None:
            return value
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _indexed(rows: Sequence[Row], column: str) -> list[tuple[int, float]]:
    """(row index, value) of every row with a number in `column`."""
    return [(i, v) for i, r in enumerate(rows) if (v := _number(r.get(column))) is not None]


def _step(row: Row) -> int | str:
    step = _number(row.get("step"))
    return int(step) if step is not None else "?"


def _trend(rows: Sequence[Row], column: str) -> tuple[float, float] | None:
    """(mean of the first, mean of the last) `TREND_WINDOW` values of `column`; None before
    `MIN_TREND_STEPS` values."""
    values = [v for _, v in _indexed(rows, column)]
    if len(values) < MIN_TREND_STEPS:
        return None
    width = min(TREND_WINDOW, len(values) // 2)
    return sum(values[:width]) / width, sum(values[-width:]) / width


def _worst_slice(rows: Sequence[Row], prefix: str) -> tuple[str, float, float] | None:
    """The slice whose `prefix[...]` trend fell furthest: (slice, start, end)."""
    trends = []
    for scope in _slices(rows, prefix):
        trend = _trend(rows, _column(prefix, scope))
        if trend is not None:
            trends.append((trend[0] - trend[1], scope, trend))
    if not trends:
        return None
    _, scope, (start, end) = max(trends)
    return scope, start, end


def _decisions(row: Row, scope: str | None) -> list[tuple[str, int]]:
    """The (decision, count) pairs of a row's first-decision summary (others as one `+N` entry)."""
    text = row.get(_column("decision/first", scope))
    if not text:
        return []
    named, rest = parse_summary(str(text))
    return named + ([("+", rest)] if rest else [])


def _unanimous(row: Row, scope: str) -> tuple[str, int] | None:
    """(decision, count) when every one of at least `MIN_COLLAPSED_ROLLOUTS` rollouts made it."""
    decisions = _decisions(row, scope)
    if len(decisions) == 1 and decisions[0][1] >= MIN_COLLAPSED_ROLLOUTS:
        return decisions[0]
    return None
