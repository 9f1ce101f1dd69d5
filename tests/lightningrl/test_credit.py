"""Credit assignment: spans and rewards -> merged, masked, credited training sequences."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from lightningrl.credit import (
    CreditReport,
    RolloutEvidence,
    assign_credit,
    assign_credit_to_rollouts,
    collate,
)
from lightningrl.rl.config import LightningRLConfig
from lightningstore import semconv
from lightningstore.data.reward import Reward
from lightningstore.data.span import Span
from lightningstore.llm_call import llm_call_attributes, span_name
from lightningstore.llm_record import CallRecord

_seq = iter(range(1, 1_000_000))


def llm_span(
    span_id: str,
    prompt: list[int] | None,
    response: list[int] | None,
    logprobs: list[float] | None = None,
    *,
    agent: str | None = None,
    attempt: str = "a1",
    sequence_id: int | None = None,
    trainable: bool | None = None,
    finish: str | None = None,
    decision: str | None = None,
) -> Span:
    attributes: dict[str, Any] = {semconv.GEN_AI_OPERATION: "chat"}
    if finish is not None:
        attributes[semconv.GEN_AI_FINISH_REASONS] = [finish]
    if decision is not None:
        attributes[semconv.DECISION] = decision
    if trainable is not None:
        attributes[semconv.LLM_TRAINABLE] = trainable
    if prompt is not None:
        attributes[semconv.LLM_PROMPT_TOKEN_IDS] = prompt
    if response is not None:
        attributes[semconv.LLM_RESPONSE_TOKEN_IDS] = response
        attributes[semconv.LLM_RESPONSE_LOGPROBS] = (
            logprobs if logprobs is not None else [-0.1 * (i + 1) for i in range(len(response))]
        )
    if agent is not None:
        attributes[semconv.AGENT_NAME] = agent
    return Span(
        rollout_id="r1",
        attempt_id=attempt,
        trace_id="t1",
        span_id=span_id,
        name="chat",
        attributes=attributes,
        sequence_id=sequence_id if sequence_id is not None else next(_seq),
    )


def tool_span(span_id: str) -> Span:
    return Span(
        rollout_id="r1",
        attempt_id="a1",
        trace_id="t1",
        span_id=span_id,
        name="tool.search",
        sequence_id=next(_seq),
    )


def reward(
    value: float,
    *,
    span_id: str | None = None,
    step: int | None = None,
    name: str = "reward",
    primary: bool = True,
    attempt: str | None = None,
    rollout: str = "r1",
) -> Reward:
    return Reward(
        rollout_id=rollout,
        attempt_id=attempt,
        name=name,
        value=value,
        span_id=span_id,
        step=step,
        primary=primary,
        reward_id=f"rw{next(_seq)}",
        create_time=0.0,
    )


def test_single_call_gets_the_episode_reward_on_its_last_token() -> None:
    result = assign_credit(
        [llm_span("c0", [1, 2, 3], [7, 8], [-0.5, -0.25])], [reward(1.0)], group_id="task-9"
    )

    [seq] = result.sequences
    assert (seq.prompt_ids, seq.response_ids, seq.response_mask) == ([1, 2, 3], [7, 8], [1, 1])
    assert seq.rollout_logprobs == [-0.5, -0.25]
    assert seq.token_rewards == [0.0, 1.0]
    assert seq.sequence_reward == 1.0
    assert seq.call_ids == [0, 0]
    assert seq.group_id == "task-9" and seq.rollout_id == "r1"
    assert result.report.calls_used == 1 and result.report.rewards_used == 1 and result.report.sequences == 1


def test_continuous_calls_merge_with_the_non_model_tokens_masked() -> None:
    spans = [
        llm_span("c0", [1, 2], [10, 11], [-1.0, -2.0]),
        # Call 1 saw call 0's whole history, then a tool result (20, 21) it did not generate.
        llm_span("c1", [1, 2, 10, 11, 20, 21], [12], [-3.0]),
        llm_span("c2", [1, 2, 10, 11, 20, 21, 12], [13, 14], [-4.0, -5.0]),
    ]

    result = assign_credit(spans, [reward(2.0)])

    [seq] = result.sequences
    assert seq.prompt_ids == [1, 2]
    assert seq.response_ids == [10, 11, 20, 21, 12, 13, 14]
    assert seq.response_mask == [1, 1, 0, 0, 1, 1, 1]
    assert seq.rollout_logprobs == [-1.0, -2.0, 0.0, 0.0, -3.0, -4.0, -5.0]
    assert seq.call_ids == [0, 0, -1, -1, 1, 2, 2]
    assert seq.token_rewards == [0.0, 2.0, 0.0, 0.0, 2.0, 0.0, 2.0]
    assert seq.span_ids == ["c0", "c1", "c2"] and seq.num_calls == 3 and seq.trained_tokens == 5
    assert result.report.calls_merged == 2 and result.report.sequence_breaks == 0


def test_a_broken_prefix_starts_a_new_sequence_and_is_counted() -> None:
    spans = [
        llm_span("c0", [1, 2], [10]),
        llm_span("c1", [1, 3, 10], [11]),  # history rewritten (e.g. summarised): not continuous
        llm_span("c2", [1, 3, 10, 11], [12]),
    ]

    result = assign_credit(spans, [reward(1.0)])

    assert [s.span_ids for s in result.sequences] == [["c0"], ["c1", "c2"]]
    assert result.report.sequence_breaks == 1 and result.report.calls_merged == 1


def test_calls_are_ordered_by_sequence_id_not_by_list_order() -> None:
    late = llm_span("c1", [1, 2, 10], [11], sequence_id=20)
    early = llm_span("c0", [1, 2], [10], sequence_id=10)

    result = assign_credit([late, tool_span("t"), early], [reward(1.0, step=1)])

    [seq] = result.sequences
    assert seq.span_ids == ["c0", "c1"]
    assert seq.call_values == {0: 0.0, 1: 1.0}


def test_step_and_episode_rewards_combine_per_call_with_discount() -> None:
    spans = [llm_span("c0", [1], [10]), llm_span("c1", [1, 10], [11]), llm_span("c2", [1, 10, 11], [12])]
    rewards = [
        reward(1.0),  # episode
        reward(0.5, span_id="c0"),
        reward(0.25, step=2),
        reward(0.25, step=2),  # several step rewards of one call add up
    ]

    [seq] = assign_credit(spans, rewards, gamma=0.5).sequences

    # value(k) = step rewards of k + 0.5 ** (calls after k) * 1.0
    assert seq.call_values == {0: 0.5 + 0.25, 1: 0.5, 2: 0.5 + 1.0}
    assert seq.token_rewards == [0.75, 0.5, 1.5]
    assert seq.sequence_reward == 0.75


def test_a_judged_call_can_be_valued_by_its_judgement_alone() -> None:
    spans = [llm_span("c0", [1], [10]), llm_span("c1", [1, 10], [11]), llm_span("c2", [1, 10, 11], [12])]
    rewards = [reward(0.0), reward(1.0, step=2), reward(0.5, span_id="c1"), reward(0.25, step=2)]

    [seq] = assign_credit(spans, rewards, gamma=0.5, return_to_judged_calls=False).sequences

    # c1 and c2 are judged: their step rewards only; c0 is not: the discounted episode return (0).
    assert seq.call_values == {0: 0.0, 1: 0.5, 2: 1.25}
    assert seq.token_rewards == [0.0, 0.5, 1.25]


def test_agent_filter_keeps_only_named_agents_and_counts_the_rest() -> None:
    spans = [
        llm_span("c0", [1], [10], agent="planner"),
        llm_span("c1", [5], [50], agent="coder"),
        llm_span("c2", [1, 10, 7], [11], agent="planner"),
        llm_span("c3", [6], [60]),
    ]

    result = assign_credit(spans, [reward(1.0), reward(3.0, span_id="c1")], agent_names={"planner"})

    [seq] = result.sequences
    assert seq.span_ids == ["c0", "c2"] and seq.agent_name == "planner"
    assert seq.response_mask == [1, 0, 1]
    assert result.report.calls_filtered_agent == 2
    assert result.report.rewards_on_dropped_calls == 1


def test_calls_from_different_agents_do_not_merge() -> None:
    spans = [llm_span("c0", [1], [10], agent="a"), llm_span("c1", [1, 10], [11], agent="b")]

    result = assign_credit(spans, [reward(1.0)])

    assert len(result.sequences) == 2 and result.report.sequence_breaks == 1


def test_each_call_keeps_its_role_agent_and_kind_of_decision() -> None:
    spans = [
        llm_span("c0", [1], [10], agent="writer", finish="tool_calls"),
        llm_span("c1", [1, 10, 7], [11], agent="writer", finish="tool_calls"),
        llm_span("c2", [1, 10, 7, 11, 8], [12], agent="writer", finish="stop"),
        llm_span("c3", [2], [13], agent="checker", decision="verdict"),
    ]

    result = assign_credit(spans, [reward(1.0)])

    writer, checker = result.sequences
    # Calls keep their own roles when merged; the named key wins over the finish reason.
    assert writer.call_roles == {0: "writer/tool", 1: "writer/tool", 2: "writer/answer"}
    assert checker.call_roles == {3: "checker/verdict"}
    assert collate(result.sequences).call_roles == [writer.call_roles, checker.call_roles]


def test_unusable_calls_are_counted_and_a_later_call_can_still_merge_over_them() -> None:
    spans = [
        llm_span("c0", [1], [10]),
        llm_span("c1", [1, 10], [11], [-0.1, -0.2]),  # two logprobs for one token
        llm_span("c2", None, None),  # observe-only provider: no token ids
        llm_span("c3", [1, 10, 11], [12]),
    ]

    result = assign_credit(spans, [reward(1.0), reward(0.5, step=1)])

    [seq] = result.sequences
    # c1's tokens stay as context of the merged sequence, but are not trained on.
    assert seq.response_ids == [10, 11, 12] and seq.response_mask == [1, 0, 1]
    report = result.report
    assert (report.llm_calls, report.calls_used) == (4, 2)
    assert report.calls_logprob_mismatch == 1 and report.calls_without_tokens == 1
    assert report.rewards_on_dropped_calls == 1


def test_the_spans_trainable_flag_decides_which_calls_become_training_tokens() -> None:
    spans = [
        llm_span("c0", [1], [10], trainable=True),
        llm_span(
            "c1", [1, 10], [11], trainable=False
        ),  # tokens and logprobs fine, but e.g. a cut-short stream
        llm_span("c2", [1, 10, 11], [12], trainable=True),
    ]

    result = assign_credit(spans, [reward(1.0), reward(0.5, step=1)])

    [seq] = result.sequences
    assert seq.response_ids == [10, 11, 12] and seq.response_mask == [1, 0, 1]
    assert seq.span_ids == ["c0", "c2"]
    report = result.report
    assert (report.llm_calls, report.calls_used, report.calls_not_trainable) == (3, 2, 1)
    assert report.calls_without_tokens == report.calls_logprob_mismatch == 0
    assert report.rewards_on_dropped_calls == 1


def test_spans_without_the_flag_fall_back_to_their_tokens_and_a_flag_needs_tokens() -> None:
    no_logprobs = llm_span("c1", [1, 10], [11])
    del no_logprobs.attributes[semconv.LLM_RESPONSE_LOGPROBS]
    spans = [
        llm_span("c0", [1], [10]),  # no flag (an older or foreign span), tokens complete: trained on
        no_logprobs,  # no flag, no logprobs: not trained on
        llm_span("c2", [2], None, trainable=True),  # says trainable without response ids: cannot be
        llm_span("c3", [3], [30], trainable=True),
    ]

    result = assign_credit(spans, [reward(1.0)])

    assert [seq.span_ids for seq in result.sequences] == [["c0"], ["c3"]]
    report = result.report
    assert (report.calls_used, report.calls_logprob_mismatch, report.calls_without_tokens) == (2, 1, 1)
    assert report.calls_not_trainable == 0


def test_the_recorded_rule_is_what_credit_follows() -> None:
    body = {
        "prompt_token_ids": [1, 2],
        "choices": [
            {
                "index": 0,
                "message": {"content": "ok"},
                "token_ids": [7, 8],
                "logprobs": {"content": [{"logprob": -0.1}, {"logprob": -0.2}]},
                "finish_reason": "stop",
            }
        ],
    }
    spans = []
    for span_id, error, system in (
        ("ok", None, "openai"),
        ("cut", "stream cut", "openai"),
        ("other", None, "anthropic"),
    ):
        record = CallRecord("chat", error=error)
        record.absorb(body)
        attributes = llm_call_attributes("chat", {"messages": []}, record, system)
        spans.append(
            Span(
                rollout_id="r1",
                attempt_id="a1",
                trace_id="t1",
                span_id=span_id,
                name=span_name("chat"),
                attributes=attributes,
                sequence_id=next(_seq),
            )
        )

    result = assign_credit(spans, [reward(1.0)])

    assert [seq.span_ids for seq in result.sequences] == [["ok"]]
    assert result.report.calls_not_trainable == 2


def test_reward_selection_is_counted() -> None:
    spans = [llm_span("c0", [1], [10]), tool_span("tool-1")]
    rewards = [
        reward(1.0),
        reward(9.0, name="latency", primary=False),
        reward(5.0, attempt="a0"),  # an earlier, failed attempt
        reward(1.0, span_id="tool-1"),  # not an LLM call
        reward(1.0, step=7),
    ]

    result = assign_credit(spans, rewards)

    report = result.report
    assert result.sequences[0].sequence_reward == 1.0
    assert report.rewards_used == 1 and report.rewards_not_selected == 1
    assert report.rewards_other_attempt == 1 and report.rewards_unmatched == 2


def test_reward_name_selects_a_non_primary_reward() -> None:
    rewards = [reward(1.0), reward(0.25, name="judge", primary=False)]

    result = assign_credit([llm_span("c0", [1], [10])], rewards, reward_name="judge")

    assert result.sequences[0].sequence_reward == 0.25 and result.report.rewards_not_selected == 1


def test_missing_episode_reward_is_counted_and_values_are_zero() -> None:
    result = assign_credit([llm_span("c0", [1], [10])], [])

    assert result.sequences[0].token_rewards == [0.0]
    assert result.report.rollouts_without_episode_reward == 1


def test_a_rollout_without_a_model_call_or_a_reward_is_counted() -> None:
    # No span at all (an agent that never called its base URL): nothing to train, counted.
    silent = assign_credit([], []).report
    assert (silent.rollouts, silent.rollouts_without_model_call, silent.rollouts_without_reward) == (1, 1, 1)
    rewarded = assign_credit([], [reward(1.0)]).report
    assert (rewarded.rollouts_without_model_call, rewarded.rollouts_without_reward) == (1, 0)
    assert rewarded.rollouts_without_episode_reward == 0
    # Only a tool span: no model call either.
    assert assign_credit([tool_span("tool-1")], [reward(0.0)]).report.rollouts_without_model_call == 1
    # A call judged by a step reward has a reward, though no episode reward.
    judged = assign_credit([llm_span("c0", [1], [10])], [reward(1.0, step=0)]).report
    assert (judged.rollouts_without_episode_reward, judged.rollouts_without_reward) == (1, 0)
    assert assign_credit([llm_span("c0", [1], [10])], []).report.rollouts_without_reward == 1


def test_inputs_from_several_attempts_or_rollouts_are_rejected() -> None:
    with pytest.raises(ValueError, match="attempt_id"):
        assign_credit([llm_span("c0", [1], [10]), llm_span("c1", [1], [10], attempt="a2")], [])
    with pytest.raises(ValueError, match="rollout"):
        assign_credit([llm_span("c0", [1], [10])], [reward(1.0, rollout="r2")])
    with pytest.raises(ValueError, match="gamma"):
        assign_credit([llm_span("c0", [1], [10])], [], gamma=0.0)


def test_reports_add_up() -> None:
    one = assign_credit([llm_span("c0", [1], [10])], [reward(1.0)]).report
    two = assign_credit([llm_span("c0", [1], [10]), llm_span("c1", [2], [20])], []).report

    total = one + two
    assert isinstance(total, CreditReport)
    assert (total.rollouts, total.sequences, total.rollouts_without_episode_reward) == (2, 3, 1)
    assert total.as_dict()["llm_calls"] == 3


def test_many_rollouts_take_the_run_configs_credit_settings_and_their_reports_add_up() -> None:
    judged = [llm_span("c0", [1], [10], agent="a"), llm_span("c1", [1, 10], [11], agent="b")]
    rewards = [reward(1.0), reward(0.25, step=1)]
    config = LightningRLConfig(agent_names=frozenset({"b"}), return_to_judged_calls=False)

    sequences, report = assign_credit_to_rollouts(
        [RolloutEvidence("g1", judged, rewards), RolloutEvidence(None, [llm_span("d0", [5], [50])], [])],
        config,
    )

    alone = assign_credit(judged, rewards, agent_names={"b"}, return_to_judged_calls=False, group_id="g1")
    assert [s.span_ids for s in sequences] == [["c1"]]  # c0 is agent a's, d0 has no agent name
    assert sequences[0] == alone.sequences[0] and sequences[0].call_values == {1: 0.25}
    assert sequences[0].group_id == "g1"
    assert (report.rollouts, report.calls_filtered_agent, report.rollouts_without_episode_reward) == (2, 2, 1)


def test_collate_pads_prompts_left_and_responses_right() -> None:
    spans_a = [llm_span("c0", [1, 2, 3], [10], [-1.0]), llm_span("c1", [1, 2, 3, 10, 4], [11], [-2.0])]
    [seq_a] = assign_credit(spans_a, [reward(1.0)], group_id="g").sequences
    [seq_b] = assign_credit([llm_span("d0", [5], [50, 51], [-3.0, -4.0])], [reward(0.0)]).sequences

    batch = collate([seq_a, seq_b], pad_token_id=0)

    assert batch.prompts.tolist() == [[1, 2, 3], [0, 0, 5]]
    assert batch.responses.tolist() == [[10, 4, 11], [50, 51, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0]]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 2]]
    assert batch.response_mask.tolist() == [[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
    assert batch.rollout_log_probs.tolist() == [[-1.0, 0.0, -2.0], [-3.0, -4.0, 0.0]]
    assert batch.token_rewards.tolist() == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert batch.call_ids.tolist() == [[0, -1, 1], [0, 0, -1]]
    assert batch.group_ids == ["g", "r1"]  # no group id: the rollout is its own group
    assert batch.num_tokens == 9

    picked = batch.select(torch.tensor([False, True]))
    assert len(picked) == 1 and picked.responses.tolist() == [[50, 51, 0]] and picked.group_ids == ["r1"]


def test_collate_rejects_an_empty_list() -> None:
    with pytest.raises(ValueError, match="at least one"):
        collate([])
