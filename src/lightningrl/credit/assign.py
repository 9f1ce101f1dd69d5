"""assign_credit: a rollout's spans and rewards -> training sequences (merged calls, per-call credit).

Hierarchical credit: the episode reward (a reward with neither `span_id` nor `step`) and the step
rewards (judging one LLM call) combine per call first:

    value(call k) = sum of step rewards of call k + gamma ** (calls after k) * episode return

then every generated token of call k gets value(call k). With `return_to_judged_calls=False` a call
that has step rewards is valued by them alone (its judgement), and only unjudged calls receive the
episode return: an agent that checks a step itself (e.g. "the answer restates the tool's result")
keeps that step from being blamed for an earlier call's mistake. Calls whose token histories are exactly
continuous merge into one sequence, and each call inside it keeps its own value: merging changes
how tokens are batched, never the credit a token receives. A sequence's `token_rewards` hold each
call's value on that call's last generated token, and `sequence_reward` is the first call's value
(the return from the sequence's start), which is what outcome-style estimators read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from lightningrl.credit.calls import LlmCall, llm_calls
from lightningrl.credit.report import CreditReport
from lightningrl.credit.sequence import TrainingSequence
from lightningstore.data.reward import Reward
from lightningstore.data.span import Span


@dataclass
class CreditResult:
    """The sequences of one rollout and the report of how they were made."""

    sequences: list[TrainingSequence]
    report: CreditReport


def assign_credit(
    spans: Iterable[Span],
    rewards: Iterable[Reward],
    *,
    agent_names: Collection[str] | None = None,
    gamma: float = 1.0,
    reward_name: str | None = None,
    group_id: str | None = None,
    return_to_judged_calls: bool = True,
) -> CreditResult:
    """Turn one attempt's spans and its rollout's rewards into training sequences.

    `agent_names` keeps only calls whose `lightningrl.agent_name` is in it (None keeps all);
    `reward_name` selects rewards by name (None selects the primary ones); `group_id` is copied
    onto every sequence for group-baselined advantages; `return_to_judged_calls=False` values a
    call with step rewards by those alone (see the module docstring).
    """
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {gamma!r}")
    spans = list(spans)
    if not spans:
        # The agent called no model through the proxy (and traced nothing): counted, never silent.
        chosen = [r for r in rewards if (r.primary if reward_name is None else r.name == reward_name)]
        report = CreditReport(
            rollouts=1,
            rollouts_without_model_call=1,
            rollouts_without_reward=int(not chosen),
            rollouts_without_episode_reward=int(
                not any(r.span_id is None and r.step is None for r in chosen)
            ),
        )
        return CreditResult(sequences=[], report=report)
    rollout_id = _only(spans, "rollout_id")
    attempt_id = _only(spans, "attempt_id")
    calls = llm_calls(spans)
    report = CreditReport(rollouts=1, llm_calls=len(calls), rollouts_without_model_call=int(not calls))

    step_rewards, episode_return, judged = _collect_rewards(
        rewards, calls, rollout_id, attempt_id, reward_name, report
    )
    last = len(calls) - 1
    values = {
        c.index: step_rewards[c.index]
        if c.index in step_rewards and not return_to_judged_calls
        else step_rewards.get(c.index, 0.0) + gamma ** (last - c.index) * episode_return
        for c in calls
    }

    usable = [c for c in calls if _usable(c, agent_names, report)]
    report.calls_used = len(usable)
    used = {c.index for c in usable}
    report.rewards_on_dropped_calls = sum(1 for index in judged if index not in used)

    sequences = _build_sequences(usable, values, rollout_id, group_id, report)
    report.sequences = len(sequences)
    if len(usable) > 1:
        report.multi_call_rollouts = 1
        report.multi_call_rollouts_merged = int(len(sequences) == 1)
    return CreditResult(sequences=sequences, report=report)


def _only(spans: list[Span], attribute: str) -> str:
    values = {getattr(s, attribute) for s in spans}
    if len(values) != 1:
        raise ValueError(f"spans of one attempt expected, got several {attribute}s: {sorted(values)}")
    return values.pop()


def _collect_rewards(
    rewards: Iterable[Reward],
    calls: list[LlmCall],
    rollout_id: str,
    attempt_id: str,
    reward_name: str | None,
    report: CreditReport,
) -> tuple[dict[int, float], float, list[int]]:
    """Sum the selected rewards per judged call and for the episode; list the judged call indexes."""
    by_span = {c.span_id: c.index for c in calls}
    step_rewards: dict[int, float] = {}
    judged: list[int] = []
    episode_return = 0.0
    has_episode_reward = False
    for reward in rewards:
        if reward.rollout_id != rollout_id:
            raise ValueError(
                f"reward {reward.reward_id!r} belongs to rollout {reward.rollout_id!r}, not {rollout_id!r}"
            )
        selected = reward.primary if reward_name is None else reward.name == reward_name
        if not selected:
            report.rewards_not_selected += 1
            continue
        if reward.attempt_id is not None and reward.attempt_id != attempt_id:
            report.rewards_other_attempt += 1
            continue
        if reward.span_id is None and reward.step is None:
            episode_return += reward.value
            has_episode_reward = True
            report.rewards_used += 1
            continue
        index = by_span.get(reward.span_id) if reward.span_id is not None else reward.step
        if index is None or not 0 <= index < len(calls):
            report.rewards_unmatched += 1
            continue
        step_rewards[index] = step_rewards.get(index, 0.0) + reward.value
        judged.append(index)
        report.rewards_used += 1
    if not has_episode_reward:
        report.rollouts_without_episode_reward += 1
        if not judged:
            report.rollouts_without_reward += 1
    return step_rewards, episode_return, judged


def _usable(call: LlmCall, agent_names: Collection[str] | None, report: CreditReport) -> bool:
    if agent_names is not None and call.agent_name not in agent_names:
        report.calls_filtered_agent += 1
        return False
    # `trainable` decides; the token checks name why a call is not, and guard against a span that
    # claims to be trainable without the tokens to build a sequence from.
    if not call.has_tokens:
        report.calls_without_tokens += 1
        return False
    if not call.logprobs_aligned:
        report.calls_logprob_mismatch += 1
        return False
    if not call.trainable:
        report.calls_not_trainable += 1
        return False
    return True


@dataclass
class _Open:
    """The sequence being built: calls are appended while their histories stay continuous."""

    first: LlmCall
    prompt: list[int]
    response: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    call_ids: list[int] = field(default_factory=list)
    call_values: dict[int, float] = field(default_factory=dict)
    call_roles: dict[int, str] = field(default_factory=dict)
    span_ids: list[str] = field(default_factory=list)
    sampled_by: list[str] = field(default_factory=list)

    def continues(self, call: LlmCall) -> bool:
        """The call's prompt starts with this sequence's whole token history, from the same agent and
        at the same temperature (a sequence is scored at one)."""
        history = self.prompt + self.response
        prompt = call.prompt_ids or ()
        same_source = (call.agent_name, call.temperature) == (self.first.agent_name, self.first.temperature)
        return same_source and list(prompt[: len(history)]) == history

    def append(self, call: LlmCall, value: float, context: list[int]) -> None:
        """Add the tokens the model did not generate (masked), then the call's response."""
        response = list(call.response_ids or ())
        self.response += context + response
        self.mask += [0] * len(context) + [1] * len(response)
        self.logprobs += [0.0] * len(context) + list(call.logprobs or ())
        self.rewards += [0.0] * (len(context) + len(response) - 1) + [value]
        self.call_ids += [-1] * len(context) + [call.index] * len(response)
        self.call_values[call.index] = value
        self.call_roles[call.index] = call.role
        self.span_ids.append(call.span_id)
        if call.resource_version and call.resource_version not in self.sampled_by:
            self.sampled_by.append(call.resource_version)

    def close(self, rollout_id: str, group_id: str | None) -> TrainingSequence:
        return TrainingSequence(
            rollout_id=rollout_id,
            prompt_ids=self.prompt,
            response_ids=self.response,
            response_mask=self.mask,
            rollout_logprobs=self.logprobs,
            token_rewards=self.rewards,
            call_ids=self.call_ids,
            call_values=self.call_values,
            call_roles=self.call_roles,
            sequence_reward=self.call_values[self.first.index],
            group_id=group_id,
            agent_name=self.first.agent_name,
            span_ids=self.span_ids,
            temperature=self.first.temperature,
            sampled_by=self.sampled_by,
        )


def _build_sequences(
    calls: list[LlmCall],
    values: dict[int, float],
    rollout_id: str,
    group_id: str | None,
    report: CreditReport,
) -> list[TrainingSequence]:
    sequences: list[TrainingSequence] = []
    current: _Open | None = None
    for call in calls:
        if current is not None and current.continues(call):
            history = len(current.prompt) + len(current.response)
            current.append(call, values[call.index], list((call.prompt_ids or ())[history:]))
            report.calls_merged += 1
            continue
        if current is not None:
            sequences.append(current.close(rollout_id, group_id))
            report.sequence_breaks += 1
        current = _Open(first=call, prompt=list(call.prompt_ids or ()))
        current.append(call, values[call.index], [])
    if current is not None:
        sequences.append(current.close(rollout_id, group_id))
    return sequences
