"""APO: automatic prompt optimization by beam search with textual gradients.

Each round, for every prompt in the beam: run it on the train tasks, show the failed rollouts' LLM calls
to an optimizer LLM (any OpenAI-compatible endpoint, through litellm) for a critique, ask it for an
edited prompt, score every edit by real rollouts on the validation tasks, and keep the best `beam`.
Critique and edit texts are stored as spans on a failed rollout; a prompt version is published only for
a usable edit; `latest` ends on the best prompt (the start, with the reason, when no edit beat it).
"""

from __future__ import annotations

import json
import re
import string
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from algorithm import Algorithm, RolloutOutcome, Task
from lightningrl.rl.hooks import PlanFiler
from lightningstore import LightningStore, PromptTemplate, ResourceVersion, SpanIn, semconv, spans_of_rollouts

CRITIQUE_SPAN = "lightningrl.apo.critique"
EDIT_SPAN = "lightningrl.apo.edit"
CRITIQUE = (
    "An assistant was given this prompt template:\n<prompt>\n{prompt}\n</prompt>\n"
    "These conversations failed:\n{failures}\n"
    "In a few sentences, say what in the prompt made the assistant fail."
)
EDIT = (
    "Prompt template:\n<prompt>\n{prompt}\n</prompt>\nCritique:\n{critique}\n"
    "Write an improved prompt template. It must contain {placeholders} exactly as written, where the "
    "task's text goes. Answer with the new template only, between <prompt> and </prompt>."
)


@dataclass(frozen=True)
class APOConfig:
    optimizer_model: str
    """The optimizer LLM as litellm names it: "openai/<served name>" for an OpenAI-compatible server."""
    optimizer_base_url: str | None = None
    optimizer_api_key: str = "unused"
    prompt_name: str = "prompt"
    llm_name: str = "llm"
    rounds: int = 2
    beam: int = 2
    rollouts_per_task: int = 2
    """Rollouts of each train task (to find failures) and each val task (to score a prompt)."""
    failures_shown: int = 3
    success_threshold: float = 1.0
    optimizer_max_tokens: int = 200
    optimizer_temperature: float = 0.7
    optimizer_timeout: float = 120.0
    step_timeout: float = 600.0

    def __post_init__(self) -> None:
        for name in ("rounds", "beam", "rollouts_per_task", "failures_shown"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")


@dataclass
class Candidate:
    version: ResourceVersion
    score: float
    round: int


@dataclass
class APOResult:
    best: Candidate
    start: Candidate
    candidates: list[Candidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Why a parent got no candidate in a round (optimizer error, no usable edit, no failures)."""


class APO(Algorithm):
    """Beam search over versions of a PromptTemplate resource, scored by validation rollouts."""

    name = "apo"

    def __init__(
        self,
        store: LightningStore,
        train_tasks: Sequence[Task],
        val_tasks: Sequence[Task],
        config: APOConfig,
        *,
        file_plan: PlanFiler | None = None,
    ) -> None:
        super().__init__(store)
        if not train_tasks or not val_tasks:
            raise ValueError("APO needs train tasks (to find failures) and val tasks (to score prompts)")
        self.train_tasks, self.val_tasks, self.config = list(train_tasks), list(val_tasks), config
        self.file_plan = file_plan
        """Files the run's training plan before the first round (`lightningrl.rl.hooks`; fit installs
        the release gate's); without one no plan is filed."""
        self.plan_id: str | None = None
        self._llm_id = ""

    async def run(self) -> APOResult:
        cfg = self.config
        llm = await self.store.get_latest_version(cfg.llm_name)
        start = await self.store.get_latest_version(cfg.prompt_name)
        if llm is None or start is None or not isinstance(start.resource, PromptTemplate):
            raise LookupError(
                f"APO needs an {cfg.llm_name!r} resource and a PromptTemplate {cfg.prompt_name!r} published"
            )
        await self._file_plan(start)
        self._llm_id = llm.version_id
        first = Candidate(start, await self._score(start, "r0/start"), 0)
        result = APOResult(best=first, start=first)
        beam = [first]
        for round_ in range(1, cfg.rounds + 1):
            fresh: list[Candidate] = []
            for k, parent in enumerate(beam):
                edit = await self._propose(parent, round_, k, result.notes)
                if edit is None:
                    continue
                version = await self.store.add_resource_version(
                    cfg.prompt_name,
                    PromptTemplate(template=edit, engine=parent.version.resource.engine),
                    parent_id=parent.version.version_id,
                    created_by=self.name,
                    metadata={"plan_id": self.plan_id, "step": round_, "apo": {"round": round_, "beam": k}},
                )
                fresh.append(Candidate(version, await self._score(version, f"r{round_}/{k}"), round_))
            result.candidates += fresh
            # Ties keep the older prompt: an edit must beat its parent to replace it.
            beam = sorted(beam + fresh, key=lambda c: -c.score)[: cfg.beam]
        result.best = max([first, *result.candidates], key=lambda c: c.score)
        reason = (
            f"apo: best of {len(result.candidates)} candidates, val score {result.best.score:.3f}"
            if result.best is not first
            else f"apo: no candidate beat the start prompt ({first.score:.3f}); " + "; ".join(result.notes)
        )
        await self.store.move_pointer(
            cfg.prompt_name, "latest", result.best.version.version_id, actor=self.name, reason=reason[:1000]
        )
        return result

    async def _file_plan(self, start: ResourceVersion) -> None:
        if self.file_plan is not None:
            self.plan_id = await self.file_plan(
                self,
                self.config.prompt_name,
                start.version_id,
                {"algorithm": "apo", "rounds": self.config.rounds, "beam": self.config.beam},
            )

    async def _rollouts(
        self, version: ResourceVersion, tasks: list[Task], mode: str, prefix: str
    ) -> list[RolloutOutcome]:
        bound = await self.store.add_resource_set(
            {self.config.llm_name: self._llm_id, self.config.prompt_name: version.version_id}
        )
        enqueued = await self.enqueue_tasks(
            tasks,
            n=self.config.rollouts_per_task,
            mode=mode,
            resources_id=bound.resources_id,
            group_prefix=prefix,
        )
        return await self.wait_for(enqueued, timeout=self.config.step_timeout)

    async def _score(self, version: ResourceVersion, prefix: str) -> float:
        """Mean primary reward of the prompt's validation rollouts."""
        outcomes = await self._rollouts(version, self.val_tasks, "val", f"apo/{prefix}/val/")
        return sum(o.reward or 0.0 for o in outcomes) / len(outcomes)

    async def _propose(self, parent: Candidate, round_: int, k: int, notes: list[str]) -> str | None:
        """One edited template of `parent` from its failed train rollouts; None (a note saying why) when
        there are no failures, the optimizer fails, or its answer is no usable template."""
        cfg = self.config
        template = parent.version.resource
        assert isinstance(template, PromptTemplate)
        outcomes = await self._rollouts(
            parent.version, self.train_tasks, "train", f"apo/r{round_}/{k}/train/"
        )
        failed = [o for o in outcomes if (o.reward or 0.0) < cfg.success_threshold]
        where = f"round {round_}, beam {k} ({parent.version.version_id})"
        if not failed:
            notes.append(f"{where}: no failed rollouts to learn from")
            return None
        spans = await spans_of_rollouts(
            self.store, [o.rollout.rollout_id for o in failed[: cfg.failures_shown]]
        )
        failures = "\n".join(
            _conversation(spans[o.rollout.rollout_id], o.reward) for o in failed[: cfg.failures_shown]
        )
        anchor = failed[0].rollout
        try:
            critique = await self._ask(CRITIQUE.format(prompt=template.template, failures=failures))
            await self._record(anchor.rollout_id, CRITIQUE_SPAN, critique, parent, round_)
            fields = ", ".join(f"{{{name}}}" for name in _fields(template.template)) or "no placeholder"
            answer = await self._ask(
                EDIT.format(prompt=template.template, critique=critique, placeholders=fields)
            )
        except Exception as error:  # any optimizer failure leaves the prompt as it is
            notes.append(f"{where}: optimizer failed: {type(error).__name__}: {str(error)[:200]}")
            return None
        edit, problem = usable_edit(answer, template, self.train_tasks[0].input)
        await self._record(anchor.rollout_id, EDIT_SPAN, answer, parent, round_, problem=problem)
        if problem:
            notes.append(f"{where}: no usable edit: {problem}")
            return None
        return edit

    async def _ask(self, content: str) -> str:
        import litellm

        litellm.suppress_debug_info = True  # its failures are recorded in the notes, not printed
        cfg = self.config
        reply = await litellm.acompletion(
            model=cfg.optimizer_model,
            api_base=cfg.optimizer_base_url,
            api_key=cfg.optimizer_api_key,
            messages=[{"role": "user", "content": content}],
            max_tokens=cfg.optimizer_max_tokens,
            temperature=cfg.optimizer_temperature,
            timeout=cfg.optimizer_timeout,
            num_retries=0,
        )
        text = reply.choices[0].message.content
        if not text or not text.strip():
            raise ValueError("the optimizer answered nothing")
        return text.strip()

    async def _record(
        self,
        rollout_id: str,
        name: str,
        text: str,
        parent: Candidate,
        round_: int,
        *,
        problem: str | None = None,
    ) -> None:
        """The optimizer's text as a span on the failed rollout it read (its latest attempt)."""
        attempt = await self.store.get_latest_attempt(rollout_id)
        assert attempt is not None
        now = time.time()
        attributes: dict[str, Any] = {
            "lightningrl.apo.text": text,
            "lightningrl.apo.parent_version": parent.version.version_id,
            "lightningrl.apo.round": round_,
            "lightningrl.apo.optimizer": self.config.optimizer_model,
        }
        if problem:
            attributes["lightningrl.apo.rejected"] = problem
        await self.store.add_many_spans(
            [
                SpanIn(
                    rollout_id=rollout_id, attempt_id=attempt.attempt_id, trace_id=uuid.uuid4().hex,
                    span_id=uuid.uuid4().hex[:16], name=name, start_time=now, end_time=now, attributes=attributes,
                )
            ]
        )  # fmt: skip


def usable_edit(answer: str, parent: PromptTemplate, example: Any) -> tuple[str, str | None]:
    """The template in the optimizer's answer and None, or ("", why it is not usable).

    The template is the last <prompt>...</prompt> block, else the text after an unclosed <prompt>, else
    the whole answer (small models rarely close the tag); it must keep the parent's placeholders."""
    found = re.findall(r"<prompt>(.*?)(?:</prompt>|$)", answer, flags=re.DOTALL)
    edit = (found[-1] if found else answer).strip().strip('"').strip()
    if not edit:
        return "", "the answer holds no template"
    if edit == parent.template.strip():
        return "", "the edit repeats the prompt unchanged"
    missing = [f"{{{name}}}" for name in _fields(parent.template) if f"{{{name}}}" not in edit]
    if parent.engine == "f-string" and missing:
        return "", f"the edit drops the placeholder(s) {', '.join(missing)}"
    try:
        PromptTemplate(template=edit, engine=parent.engine).format(
            **(example if isinstance(example, dict) else {})
        )
    except Exception as error:  # a template the agent could not render would fail every rollout
        return "", f"the edit does not render with a task's fields: {type(error).__name__}: {error}"
    return edit, None


def _fields(template: str) -> list[str]:
    """The named fields of an f-string template ("{prompt}" -> ["prompt"])."""
    try:
        return sorted({name for _, name, _, _ in string.Formatter().parse(template) if name})
    except ValueError:
        return []


def _conversation(spans: Sequence[Any], reward: float | None) -> str:
    """A failed rollout's LLM calls as text: what was asked, what the model answered, the reward."""
    lines = []
    for span in spans:
        asked = span.attributes.get(semconv.LLM_REQUEST_MESSAGES)
        if asked is None:
            continue
        messages = json.loads(asked) if isinstance(asked, str) else asked
        said = " | ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        lines.append(
            f"- asked: {said[:300]}\n  answered: {str(span.attributes.get(semconv.LLM_RESPONSE_TEXT, ''))[:200]}"
        )
    return "\n".join(lines) + f"\n  reward: {reward}"
