"""TrainingSequence: one prompt and the response tokens trained on, with credit per token."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TrainingSequence:
    """One or more merged LLM calls; all response-aligned lists have len(response_ids) entries.

    A merged sequence's response is resp_0 + extra prompt tokens of call 1 + resp_1 + ...; the
    extra (non-model) tokens are context only: mask 0, logprob 0, reward 0, call id -1.
    """

    rollout_id: str
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    """1 on model-generated tokens, 0 on tokens the model did not generate."""
    rollout_logprobs: list[float]
    """Logprobs the inference backend reported for each generated token; 0 where masked."""
    token_rewards: list[float]
    """Call k's value on the last generated token of call k, 0 elsewhere."""
    call_ids: list[int]
    """Index (within the rollout) of the LLM call that generated each token; -1 where masked."""
    call_values: dict[int, float] = field(default_factory=dict)
    """Each merged call's value: its step rewards plus the discounted episode return."""
    call_roles: dict[int, str] = field(default_factory=dict)
    """Each merged call's role (`LlmCall.role`: agent and kind of decision); a call missing here has
    the role "" (every such call of a group is compared with the others)."""
    sequence_reward: float = 0.0
    """The first call's value: the return from this sequence's start, the outcome-style scalar."""
    group_id: str | None = None
    """The group advantages are baselined over (e.g. the task of a GRPO group); set by the caller."""
    agent_name: str | None = None
    span_ids: list[str] = field(default_factory=list)
    temperature: float = 1.0
    """The temperature its calls were sampled at (calls of different temperatures never merge)."""
    sampled_by: list[str] = field(default_factory=list)
    """The resource versions that served its calls (the proxy's record, in call order, each once):
    how far behind the trained version its behaviour policy was (async rollouts, continuous mode)."""

    @property
    def num_calls(self) -> int:
        """How many LLM calls were merged into this sequence."""
        return len(self.span_ids)

    @property
    def trained_tokens(self) -> int:
        """Tokens that carry loss."""
        return sum(self.response_mask)
