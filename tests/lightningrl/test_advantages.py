"""Advantages and the PPO-clip loss (verl's maths) against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from lightningrl.credit import TrainingSequence, collate
from lightningrl.rl.advantages import AdvantageConfig, compute_advantages
from lightningrl.trainer.loss import PolicyLossConfig, policy_loss, truncated_is_weights


def sequence(
    group: str,
    values: list[float],
    tokens_per_call: int = 2,
    context: int = 0,
    roles: list[str] | None = None,
) -> TrainingSequence:
    """A sequence of merged calls with the given values (and roles); `context` masked tokens between calls."""
    response: list[int] = []
    mask: list[int] = []
    rewards: list[float] = []
    call_ids: list[int] = []
    for k, value in enumerate(values):
        if k:
            response += [3] * context
            mask += [0] * context
            rewards += [0.0] * context
            call_ids += [-1] * context
        response += [5] * tokens_per_call
        mask += [1] * tokens_per_call
        rewards += [0.0] * (tokens_per_call - 1) + [value]
        call_ids += [k] * tokens_per_call
    return TrainingSequence(
        rollout_id=f"{group}-{values}",
        prompt_ids=[1, 2],
        response_ids=response,
        response_mask=mask,
        rollout_logprobs=[0.0] * len(response),
        token_rewards=rewards,
        call_ids=call_ids,
        call_values=dict(enumerate(values)),
        call_roles=dict(enumerate(roles)) if roles else {},
        sequence_reward=values[0],
        group_id=group,
    )


def test_grpo_matches_hand_computed_group_normalisation() -> None:
    batch = collate([sequence("t", [1.0]), sequence("t", [0.0]), sequence("t", [0.0])])

    result = compute_advantages(batch)

    # mean 1/3, unbiased std sqrt(1/3): (1 - 1/3) / sqrt(1/3) and (0 - 1/3) / sqrt(1/3)
    std = math.sqrt(1 / 3)
    expected = torch.tensor([[(2 / 3) / std] * 2, [(-1 / 3) / std] * 2, [(-1 / 3) / std] * 2])
    torch.testing.assert_close(result.advantages, expected, atol=1e-5, rtol=0)
    assert result.keep.tolist() == [True, True, True]
    assert (result.groups, result.dropped_groups, result.dropped_sequences) == (1, 0, 0)


def test_dr_grpo_does_not_divide_by_the_std() -> None:
    batch = collate([sequence("t", [3.0], 1), sequence("t", [1.0], 1)])

    result = compute_advantages(batch, AdvantageConfig(norm_by_std=False))

    assert result.advantages.flatten().tolist() == [1.0, -1.0]


def test_groups_whose_rewards_are_all_equal_are_dropped_and_counted() -> None:
    batch = collate(
        [
            sequence("flat", [1.0]),
            sequence("flat", [1.0]),
            sequence("alone", [0.5]),
            sequence("live", [1.0]),
            sequence("live", [0.0]),
        ]
    )

    result = compute_advantages(batch, AdvantageConfig(scale_to_batch=False))

    assert result.keep.tolist() == [False, False, False, True, True]
    assert (result.groups, result.dropped_groups, result.dropped_sequences) == (3, 2, 3)
    assert result.advantages[:3].abs().sum().item() == 0.0
    # The live group is normalised on its own: +-1/sqrt(2) / (1/sqrt(2)) ... i.e. +-0.7071 around 0.5.
    torch.testing.assert_close(result.advantages[3:, 0], torch.tensor([0.7071, -0.7071]), atol=1e-4, rtol=0)

    # By default the kept rows carry their share of the batch's loss tokens (2 of 5 one-token rows):
    # the token-mean update is the one the whole batch would give.
    scaled = compute_advantages(batch)
    assert scaled.keep.tolist() == result.keep.tolist()
    torch.testing.assert_close(scaled.advantages, result.advantages * 2 / 5)


def test_all_groups_flat_gives_no_rows_to_train() -> None:
    result = compute_advantages(collate([sequence("a", [1.0]), sequence("a", [1.0])]))

    assert not result.keep.any() and result.dropped_groups == 1


def test_merged_calls_get_the_same_advantages_as_separate_sequences() -> None:
    merged = collate([sequence("t", [2.0, 1.0], context=1), sequence("t", [0.0])])
    separate = collate([sequence("t", [2.0]), sequence("t", [1.0]), sequence("t", [0.0])])

    got = compute_advantages(merged).advantages
    want = compute_advantages(separate).advantages

    # Row 0 of `merged` is [call 0 (2 tokens), context, call 1 (2 tokens)].
    torch.testing.assert_close(got[0, :2], want[0, :2])
    assert got[0, 2].item() == 0.0
    torch.testing.assert_close(got[0, 3:5], want[1, :2])
    torch.testing.assert_close(got[1, :2], want[2, :2])


def test_group_and_call_baseline_compares_each_call_with_the_same_call_of_its_siblings() -> None:
    # Three rollouts of one task, two calls each: (tool right?, answer faithful?).
    batch = collate(
        [
            sequence("t", [1.0, 1.0], context=1),
            sequence("t", [0.0, 1.0], context=1),
            sequence("t", [0.0, 1.0], context=1),
        ]
    )

    result = compute_advantages(batch, AdvantageConfig(baseline="group_and_call"))

    # Call 0 is normalised among the three call-0 values [1, 0, 0]; call 1 is uniform: dropped, zeros.
    std = math.sqrt(1 / 3)
    torch.testing.assert_close(
        result.advantages[:, 0],
        torch.tensor([(2 / 3) / std, (-1 / 3) / std, (-1 / 3) / std]),
        atol=1e-5,
        rtol=0,
    )
    assert result.advantages[:, 3:].abs().sum().item() == 0.0
    assert result.keep.tolist() == [True, True, True]
    assert (result.groups, result.dropped_groups) == (2, 1)
    # With one baseline for the task the faithful answers would be pushed by the tool's outcome.
    mixed = compute_advantages(batch)
    assert mixed.advantages[1, 3].item() != 0.0


def test_a_sequence_is_dropped_only_when_every_call_group_is_uniform() -> None:
    batch = collate([sequence("t", [1.0, 0.0]), sequence("t", [1.0, 0.0])])

    result = compute_advantages(batch, AdvantageConfig(baseline="group_and_call"))

    assert not result.keep.any() and (result.groups, result.dropped_groups) == (2, 2)


SEARCH, ANSWER = "agent/tool", "agent/answer"


def test_a_group_without_a_success_trains_no_shortcut_over_the_longer_path() -> None:
    # A two-hop group in which no rollout succeeded: the search calls carry the episode return (0),
    # each answer call its own step reward ("copied a search result": 1 for both).
    shortcut = sequence("two-hop", [0.0, 1.0], context=1, roles=[SEARCH, ANSWER])
    longer = sequence("two-hop", [0.0, 0.0, 1.0], context=1, roles=[SEARCH, SEARCH, ANSWER])
    batch = collate([shortcut, longer, shortcut, longer])

    by_role = compute_advantages(batch)

    # Searches are compared with searches, answers with answers: every comparison agrees, nothing trains.
    assert not by_role.keep.any()
    assert by_role.advantages.abs().sum().item() == 0.0
    assert (by_role.groups, by_role.dropped_groups) == (2, 2)
    # By position, the shortcut's answer (call 1) is compared with the longer path's second search and
    # wins: the shortcut is reinforced in a group where nothing succeeded.
    by_position = compute_advantages(batch, AdvantageConfig(baseline="group_and_call"))
    assert by_position.advantages[0, 3].item() > 0 > by_position.advantages[1, 3].item()


def test_the_role_baseline_compares_each_decision_with_the_same_decision_of_its_siblings() -> None:
    # The shortcut fails (answer unfaithful: 0); the longer path succeeds at every call.
    shortcut = sequence("t", [0.0, 0.0], context=1, roles=[SEARCH, ANSWER])
    longer = sequence("t", [1.0, 1.0, 1.0], context=1, roles=[SEARCH, SEARCH, ANSWER])
    batch = collate([shortcut, longer])

    result = compute_advantages(batch, AdvantageConfig(norm_by_std=False, scale_to_batch=False))

    # Searches [0, 1, 1]: mean 2/3. Answers [0, 1]: mean 1/2. Row 0 = [s(2), ctx, a(2)]; row 1 = [s, ctx, s, ctx, a].
    adv = result.advantages
    torch.testing.assert_close(adv[0, :2], torch.tensor([-2 / 3] * 2))
    torch.testing.assert_close(adv[0, 3:5], torch.tensor([-0.5] * 2))
    torch.testing.assert_close(adv[1, :2], torch.tensor([1 / 3] * 2))
    torch.testing.assert_close(adv[1, 3:5], torch.tensor([1 / 3] * 2))
    torch.testing.assert_close(adv[1, 6:8], torch.tensor([0.5] * 2))
    assert (result.groups, result.dropped_groups) == (2, 0)


def test_calls_of_other_agents_are_never_one_baseline() -> None:
    # A planner and a writer in one rollout group: each is compared with its own kind only.
    batch = collate(
        [
            sequence("t", [1.0, 5.0], roles=["planner/answer", "writer/answer"]),
            sequence("t", [0.0, 5.0], roles=["planner/answer", "writer/answer"]),
        ]
    )

    result = compute_advantages(batch, AdvantageConfig(norm_by_std=False, scale_to_batch=False))

    assert result.advantages[:, 2:].abs().sum().item() == 0.0  # the writers agree
    assert result.advantages[:, 0].tolist() == [0.5, -0.5]


def test_unknown_baseline_is_rejected() -> None:
    with pytest.raises(ValueError, match="baseline"):
        AdvantageConfig(baseline="per-token")


def test_reinforce_plus_plus_whitens_call_values_over_all_trained_tokens() -> None:
    batch = collate([sequence("a", [1.0], 2), sequence("b", [0.0], 3)])

    result = compute_advantages(batch, AdvantageConfig(estimator="reinforce_plus_plus"))

    # Token values [1, 1] and [0, 0, 0]: mean 0.4, unbiased variance 0.3.
    scale = 1 / math.sqrt(0.3 + 1e-8)
    expected = torch.tensor([[0.6 * scale, 0.6 * scale, 0.0], [-0.4 * scale] * 3])
    torch.testing.assert_close(result.advantages, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(result.returns, torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))


def test_reinforce_plus_plus_drops_only_a_batch_without_signal() -> None:
    config = AdvantageConfig(estimator="reinforce_plus_plus")

    flat = compute_advantages(collate([sequence("a", [1.0]), sequence("b", [1.0])]), config)

    assert not flat.keep.any() and (flat.groups, flat.dropped_groups) == (1, 1)


def test_unknown_estimator_is_rejected() -> None:
    with pytest.raises(ValueError, match="estimator"):
        AdvantageConfig(estimator="gae")


def test_ppo_clip_loss_matches_hand_computed_values() -> None:
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[1.5, 0.5, 1.5, 7.0]]))
    advantages = torch.tensor([[1.0, 1.0, -1.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token is masked out

    loss, metrics = policy_loss(new, old, advantages, mask, PolicyLossConfig(), batch_num_tokens=3)

    # Per token max(-A r, -A clip(r, 0.8, 1.2)): -1.2 (clipped), -0.5, +1.5; dual clip min(3|A|, .) keeps 1.5.
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 1.5) / 3, abs=1e-6)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(1 / 3, abs=1e-6)


def test_ppo_clip_loss_applies_importance_weights() -> None:
    old = torch.zeros(1, 2)
    new = torch.zeros(1, 2)
    advantages = torch.tensor([[1.0, -2.0]])
    mask = torch.ones(1, 2)

    loss, _ = policy_loss(
        new, old, advantages, mask, PolicyLossConfig(), rollout_is_weights=torch.tensor([[2.0, 0.5]])
    )

    # ratio 1: token losses -1 and +2, weighted 2 and 0.5, token-mean over 2.
    assert loss.item() == pytest.approx((-2.0 + 1.0) / 2, abs=1e-6)


def test_truncated_importance_weights_are_capped_and_masked() -> None:
    old = torch.log(torch.tensor([[3.0, 0.5, 1.0]]))
    rollout = torch.zeros(1, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0]])

    weights, metrics = truncated_is_weights(old, rollout, mask, threshold=2.0)

    torch.testing.assert_close(weights, torch.tensor([[2.0, 0.5, 0.0]]))
    assert "rollout_is_mean" in metrics
