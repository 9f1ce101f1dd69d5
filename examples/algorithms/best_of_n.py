"""Best-of-N over prompt variants: a complete user-written Algorithm (docs/algorithms.md).

Each variant becomes a version of the `prompt` resource, is scored by real rollouts, and `latest` ends
on the best one. Run it against a store server with a runner of `answer_agent` attached:
`python examples/algorithms/best_of_n.py --store http://127.0.0.1:4747 "Say a." "Say b."`.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from openai import AsyncOpenAI

from algorithm import Algorithm, Task
from lightningstore import LightningStore, PromptTemplate, ResourceVersion, open_store
from runner import rollout


@rollout
async def answer_agent(task: dict, resources) -> float:
    """One call with the rollout's prompt template; 1.0 when the reply is the task's answer."""
    prompt, llm = resources.prompts["prompt"].format(**task), resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        reply = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": prompt}], max_tokens=3
        )
    return float((reply.choices[0].message.content or "").strip() == task["answer"])


class BestOfN(Algorithm):
    """Score every prompt variant by `n` rollouts per task in val mode; `latest` ends on the best."""

    name = "best_of_n"

    def __init__(
        self, store: LightningStore, tasks: Sequence[Task], variants: Sequence[str], *, n: int = 4
    ) -> None:
        super().__init__(store)
        self.tasks, self.variants, self.n = list(tasks), list(variants), n

    async def run(self) -> tuple[ResourceVersion, float]:
        llm = await self.store.get_latest_version("llm")
        parent = await self.store.get_latest_version("prompt")
        if llm is None:
            raise LookupError("publish an `llm` resource before running BestOfN")
        runs = []  # every variant's rollouts are enqueued before any is awaited: they run together
        for i, text in enumerate(self.variants):
            version, bound = await self.publish(
                "prompt", PromptTemplate(template=text), parent_id=parent.version_id if parent else None,
                metadata={"variant": i}, others={"llm": llm.version_id},
            )  # fmt: skip
            enqueued = await self.enqueue_tasks(
                self.tasks, n=self.n, mode="val", resources_id=bound.resources_id, group_prefix=f"v{i}/"
            )
            runs.append((version, enqueued))
        scored = []
        for version, enqueued in runs:
            outcomes = await self.wait_for(enqueued, timeout=300)
            scored.append((sum(o.reward or 0.0 for o in outcomes) / len(outcomes), version))
        score, best = max(scored, key=lambda s: s[0])  # the first variant wins a tie
        reason = f"best of {len(scored)} variants: mean reward {score:.3f}"
        await self.store.move_pointer("prompt", "latest", best.version_id, actor=self.name, reason=reason)
        return best, score


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", required=True, help="store server URL (an `llm` resource published)")
    parser.add_argument("variants", nargs="+", help="prompt templates ({answer} is the task's field)")
    args = parser.parse_args()
    store = open_store(args.store)
    tasks = [Task(task_id=f"t{i}", input={"answer": "b"}) for i in range(3)]
    best, score = await BestOfN(store, tasks, args.variants).run()
    print(f"best: {best.resource.template!r} (version {best.version_id}, mean reward {score:.3f})")
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
