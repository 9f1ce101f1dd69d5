"""CreditReport: what credit assignment did with every call and reward it was given."""

from __future__ import annotations

from dataclasses import dataclass, fields

from lightningrl.counts import Counts


@dataclass
class CreditReport(Counts):
    """Counts per rollout (add reports to total them); nothing is dropped without a count here."""

    rollouts: int = 0
    llm_calls: int = 0
    calls_used: int = 0
    calls_without_tokens: int = 0
    """No (or empty) prompt/response token ids recorded: nothing to train on."""
    calls_filtered_agent: int = 0
    calls_logprob_mismatch: int = 0
    """Logprobs missing or not one per response token: the importance ratio would be wrong."""
    calls_not_trainable: int = 0
    """Tokens recorded, but the span says `trainable=False` (failed or cut-short call, observed-only backend)."""
    calls_merged: int = 0
    """Calls appended to the previous call's sequence (continuous token history)."""
    sequence_breaks: int = 0
    """Calls that started a new sequence although one was open (history not continuous; normal)."""
    sequences: int = 0
    multi_call_rollouts: int = 0
    """Rollouts with more than one call used."""
    multi_call_rollouts_merged: int = 0
    """Of those, the rollouts whose calls all merged into one sequence (prefix continuity)."""
    rewards_used: int = 0
    rewards_not_selected: int = 0
    """Not the primary reward (or not the requested name)."""
    rewards_other_attempt: int = 0
    rewards_unmatched: int = 0
    """Target span or step is not an LLM call of this rollout."""
    rewards_on_dropped_calls: int = 0
    """Judged a call that is not trained on (filtered, no tokens, bad logprobs, not trainable): no effect."""
    rollouts_without_episode_reward: int = 0
    rollouts_without_model_call: int = 0
    """No LLM call recorded (the agent did not call the model through its base URL): nothing to train on."""
    rollouts_without_reward: int = 0
    """No selected reward at all, for the episode or a call: its calls train as a return of 0."""

    def as_dict(self) -> dict[str, int]:
        """The counts as a flat dict (for metrics)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
