"""Learning health: each rule over hand-built metrics rows, firing and not; a problem is announced once;
the informative-group share per slice; the rollback guard's decision."""

from __future__ import annotations

from typing import Any

from algorithm import RolloutOutcome, Task
from lightningrl.rl.health import (
    agent_contract,
    decision_collapse,
    entropy_collapse,
    held_out_fell,
    no_signal,
    sharpening,
    slice_fell,
    step_health,
)
from lightningrl.rl.metrics import informative_shares, outcome_metrics
from lightningrl.rl.regression_guard import RegressionGuard, Validated
from lightningstore import Rollout, RolloutConfig, RolloutMode, RolloutStatus

Row = dict[str, Any]


def steps(*rows: Row, start: int = 1) -> list[Row]:
    """Training rows numbered from `start`, each with a train outcome."""
    return [{"step": start + i, "train/success": 0.5, **row} for i, row in enumerate(rows)]


def texts(lines: list[Any]) -> list[str]:
    return [line.text for line in lines]


# ---- the agent's contract ---------------------------------------------------------------------------------


def test_rollouts_without_a_model_call_or_a_reward_are_named() -> None:
    row = {
        "credit/rollouts": 16,
        "credit/rollouts_without_model_call": 16,
        "credit/rollouts_without_reward": 16,
    }
    assert texts(agent_contract(steps(row))) == [
        "16 of 16 rollouts made no model call through the proxy: nothing to train on (does the agent call "
        "the model at $OPENAI_BASE_URL / $AGL_OPENAI_BASE_URL?)",
        "16 of 16 rollouts posted no reward: their calls train as a return of 0 (emit_reward, a returned "
        "float, or POST $AGL_EVENT_URL)",
    ]
    fine = {
        "credit/rollouts": 16,
        "credit/rollouts_without_model_call": 0,
        "credit/rollouts_without_reward": 0,
    }
    assert agent_contract(steps(fine)) == [] and agent_contract([]) == []
    # Announced once, when it first shows.
    first = step_health([], steps(row)[0])
    again = step_health(steps(row), steps(row, start=2)[0])
    assert len(first.new) == 2 and again.new == [] and again.columns["health/count"] == 2


# ---- no signal -----------------------------------------------------------------------------------------


def test_a_slice_whose_groups_all_agree_for_three_steps_has_no_signal() -> None:
    share = "health/informative_share"
    agreed = {share: 0.5, f"{share}[op=plus]": 1.0, f"{share}[op=times]": 0.0, "train/success[op=times]": 0.0}
    rows = steps(agreed, agreed, agreed)
    assert texts(no_signal(rows)) == ["op=times: every group agreed for 3 steps (all failed): no signal"]
    assert no_signal(rows[:2]) == []  # two steps are not yet a pattern
    recovered = {**agreed, f"{share}[op=times]": 0.25}
    assert no_signal(steps(agreed, agreed, agreed, recovered)) == []


def test_the_whole_batch_agreeing_is_one_line_and_dynamic_samplings_count_wins() -> None:
    agreed = {
        "health/informative_share": 0.0,
        "health/informative_share[op=plus]": 0.0,
        "train/success": 1.0,
    }
    assert texts(no_signal(steps(agreed, agreed, agreed, agreed))) == [
        "every group agreed for 4 steps (all succeeded): no signal"
    ]
    # Dynamic sampling measured its own groups (refills included): its share is the one that counts.
    refilled = {**agreed, "sample/informative_share": 0.5, "sample/informative_share[op=plus]": 0.5}
    assert no_signal(steps(agreed, agreed, refilled)) == []


# ---- entropy collapse ----------------------------------------------------------------------------------


def test_entropy_collapsing_while_success_falls_is_named_with_the_worst_slice() -> None:
    rows = steps(
        *[
            {
                "actor/entropy": e,
                "actor/entropy_decision": 1.0,
                "train/success": s,
                "train/success[kind=founder_born]": k,
                "train/success[kind=ceo]": 0.5,
            }
            for e, s, k in [(0.9, 0.6, 0.5), (0.8, 0.6, 0.5), (0.3, 0.4, 0.2), (0.05, 0.3, 0.1)]
        ]
    )
    assert texts(entropy_collapse(rows)) == [
        "entropy 0.85 → 0.17 while train success fell 0.60 → 0.35 (kind=founder_born 0.50 → 0.15)"
    ]


def test_entropy_falling_while_success_rises_is_learning() -> None:
    rows = steps(
        *[
            {"actor/entropy": e, "train/success": s}
            for e, s in [(0.9, 0.2), (0.8, 0.3), (0.2, 0.7), (0.1, 0.9)]
        ]
    )
    assert entropy_collapse(rows) == []
    held = steps(*[{"actor/entropy": e, "train/success": 0.5} for e in (0.9, 0.9, 0.8, 0.7)])
    assert entropy_collapse(held) == []


def test_first_token_entropy_collapsing_in_a_falling_slice() -> None:
    rows = steps(
        *[
            {"actor/entropy": 1.0, "actor/entropy_decision": d, "train/success[op=minus]": m}
            for d, m in [(0.7, 0.6), (0.7, 0.6), (0.1, 0.2), (0.0, 0.1)]
        ]
    )
    assert texts(entropy_collapse(rows)) == [
        "first-token entropy 0.70 → 0.05 while op=minus's train success fell 0.60 → 0.15"
    ]


# ---- sharpening and held-out falling -------------------------------------------------------------------


def test_train_rising_while_held_out_stays_is_sharpening() -> None:
    rows = [
        {"step": 0, "val/success": 0.45},
        *steps(*[{"train/success": s} for s in (0.2, 0.24, 0.5, 0.56)]),
    ]
    rows[-1]["val/success"] = 0.46
    assert texts(sharpening(rows)) == [
        "train success rose 0.22 → 0.53 while held-out stayed 0.45 → 0.46: sharpening, not learning"
    ]
    rows[-1]["val/success"] = 0.6  # held-out rose too: learning
    assert sharpening(rows) == []
    rows[-1].pop("val/success")  # one validation: nothing to compare
    assert sharpening(rows) == []


def test_held_out_falling_below_its_best_names_the_slice_that_fell_furthest() -> None:
    rows = [
        {"step": 0, "val/success": 0.4, "val/success[kind=born]": 0.4, "val/success[kind=ceo]": 0.4},
        *steps({}, {}, {}, {}),
    ]
    rows[2].update({"val/success": 0.48, "val/success[kind=born]": 0.5, "val/success[kind=ceo]": 0.46})
    rows[4].update({"val/success": 0.33, "val/success[kind=born]": 0.1, "val/success[kind=ceo]": 0.56})
    assert texts(held_out_fell(rows)) == ["held-out fell 0.48 → 0.33 since step 2 (kind=born 0.50 → 0.10)"]
    rows[4]["val/success"] = 0.41  # within 0.1 of the best
    assert held_out_fell(rows) == []


def test_one_slice_falling_while_the_others_rise_is_named_with_its_first_decisions() -> None:
    """Calculator seed 0 of issue 52's invocation: plus 1.00 -> 0.68 while the whole rose 0.33 -> 0.89."""
    rows = [
        {"step": 0, "val/success": 0.33, "val/success[op=plus]": 1.0, "val/success[op=minus]": 0.0},
        *steps(
            {"decision/first[op=plus]": "add:3 sub:3 +1"}, {"decision/first[op=plus]": "mul:5 sub:2 add:1"}
        ),
    ]
    rows[-1].update({"val/success": 0.89, "val/success[op=plus]": 0.68, "val/success[op=minus]": 1.0})
    assert texts(slice_fell(rows)) == [
        "op=plus: held-out fell 1.00 → 0.68 since step 0 while the whole held-out is 0.89: the updates of "
        "the other slices moved a choice they share (first decisions at step 2: mul 5, sub 2, add 1)"
    ]
    assert held_out_fell(rows) == []  # the whole rose
    rows[-1]["val/success[op=plus]"] = 0.85  # within 0.2 of its best
    assert slice_fell(rows) == []
    rows[-1].update({"val/success": 0.2, "val/success[op=plus]": 0.3})  # the whole fell: held_out_fell's line
    assert slice_fell(rows) == [] and held_out_fell(rows)


# ---- first decision collapse ---------------------------------------------------------------------------


def test_every_slice_collapsing_onto_one_first_decision() -> None:
    varied = {
        "decision/first": "add:5 sub:3",
        "decision/first[op=plus]": "add:4",
        "decision/first[op=minus]": "sub:3 add:1",
    }
    collapsed = {
        "decision/first": "add:8",
        "decision/first[op=plus]": "add:4",
        "decision/first[op=minus]": "add:4",
    }
    assert texts(decision_collapse(steps(varied, collapsed))) == [
        "first decision collapsed onto add for every slice (op=plus 4 of 4, op=minus 4 of 4)"
    ]
    # Never varied: an agent whose first step is always the same tool has not collapsed.
    assert decision_collapse(steps(collapsed, collapsed)) == []


def test_a_failing_slice_collapsed_onto_one_choice() -> None:
    varied = {"decision/first": "add:5 sub:3", "decision/first[op=minus]": "sub:3 add:1"}
    minus = {
        "decision/first": "add:8",
        "decision/first[op=plus]": "add:4 sub:1",
        "decision/first[op=minus]": "add:4",
        "train/success[op=minus]": 0.0,
    }
    assert texts(decision_collapse(steps(varied, minus))) == [
        "op=minus: first decision collapsed onto add (4 of 4) while its train success is 0.00"
    ]
    succeeding = {**minus, "train/success[op=minus]": 1.0, "decision/first[op=minus]": "sub:4"}
    assert decision_collapse(steps(varied, succeeding)) == []  # converged on what works
    few = {**minus, "decision/first[op=minus]": "add:2"}
    assert decision_collapse(steps(varied, few)) == []  # two rollouts are not a collapse


# ---- announcing ----------------------------------------------------------------------------------------


def test_a_problem_is_announced_once_while_it_lasts_and_again_when_it_returns() -> None:
    agreed = {"health/informative_share": 0.0, "train/success": 0.0}
    mixed = {"health/informative_share": 0.5, "train/success": 0.5}
    rows: list[Row] = []
    announced = []
    for step, row in enumerate([agreed, agreed, agreed, agreed, mixed, agreed, agreed, agreed], start=1):
        health = step_health(rows, {"step": step, **row})
        rows.append({"step": step, **row, **health.columns})
        announced.append(health.new)
    assert announced == [
        [],
        [],
        ["every group agreed for 3 steps (all failed): no signal"],
        [],  # still true (4 steps now): not said again
        [],
        [],
        [],
        ["every group agreed for 3 steps (all failed): no signal"],
    ]
    assert rows[3]["health/count"] == 1
    assert rows[3]["health/lines"] == "every group agreed for 4 steps (all failed): no signal"
    assert rows[4]["health/count"] == 0 and "health/lines" not in rows[4]


# ---- the informative-group share -----------------------------------------------------------------------


def outcome(group: str, k: int, reward: float | None, op: str, failed: bool = False) -> RolloutOutcome:
    rollout = Rollout(
        rollout_id=f"{group}.{k}",
        input={},
        mode=RolloutMode.TRAIN,
        config=RolloutConfig(),
        status=RolloutStatus.FAILED if failed else RolloutStatus.SUCCEEDED,
        group_id=group,
        enqueue_time=0.0,
    )
    return RolloutOutcome(rollout=rollout, task=Task(task_id=group, input={}, tags={"op": op}), reward=reward)


def test_informative_share_per_slice_counts_groups_whose_rewards_differ() -> None:
    outcomes = [
        *(outcome("g1", k, r, "plus") for k, r in enumerate([1.0, 0.0, 1.0])),  # informative
        *(outcome("g2", k, 1.0, "plus") for k in range(3)),  # all agree
        *(outcome("g3", k, 0.0, "times") for k in range(3)),  # all agree
        # agrees among the finished ones: the failed rollout is not trained on
        outcome("g4", 0, 1.0, "times"),
        outcome("g4", 1, 1.0, "times"),
        outcome("g4", 2, None, "times", failed=True),
        outcome("g5", 0, 1.0, "times"),  # a group of one compares nothing
    ]
    assert informative_shares(outcomes) == {
        "health/informative_share": 0.25,
        "health/informative_share[op=plus]": 0.5,
        "health/informative_share[op=times]": 0.0,
    }
    assert outcome_metrics(outcomes, 1.0, prefix="train")["health/informative_share[op=plus]"] == 0.5


# ---- rollback guard ------------------------------------------------------------------------------------


def test_the_guard_names_the_best_version_when_held_out_falls_too_far() -> None:
    guard = RegressionGuard(tolerance=0.1)
    assert guard.observe(Validated("v0", 0.40, 0)) is None
    assert guard.observe(Validated("v2", 0.50, 2)) is None
    assert guard.observe(Validated("v4", 0.45, 4)) is None  # within the tolerance: kept
    assert guard.best == Validated("v2", 0.50, 2)
    assert guard.observe(Validated("v6", 0.50, 6)) is None  # a tie: the newer is the best
    assert guard.observe(Validated("v8", 0.35, 8)) == Validated("v6", 0.50, 6)
    assert guard.best == Validated("v6", 0.50, 6)
