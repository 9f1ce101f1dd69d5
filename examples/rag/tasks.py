"""Questions over a generated corpus for the retrieval agent: one- and two-hop, train and held-out splits.

The corpus has two kinds of fact, one sentence each: `The founder of Zorbex is Alice.` and
`Alice was born in Paris.`. Who founded what and who was born where is drawn from the seed.
Questions need one hop (`Who is the founder of Zorbex?`, `Where was Alice born?`) or two (`Where
was the founder of Zorbex born?`: search Zorbex, read the founder, search the founder, read the city).

The agent's `search` tool ranks the corpus with BM25 (`bm25`, a few lines below) and returns the best
sentence. Searching the entity finds its fact; searching the relation word (`founder`, `born`) ties
every sentence of that kind and returns the first; `founded` and `city` are in no sentence at all.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

COMPANIES = (
    "Zorbex", "Quantix", "Velora", "Brixon", "Omnira", "Caldex", "Nuvant", "Pexora", "Trellix", "Vantoro",
    "Kestrix", "Lumora", "Fynex", "Orbana", "Sylvex", "Drovia", "Maxtor", "Zentra", "Halvex", "Corvana",
)  # fmt: skip
PEOPLE = (
    "Alice", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ingrid", "Jonas",
    "Kofi", "Lena", "Marco", "Nadia", "Oscar", "Priya", "Quinn", "Rosa", "Stefan", "Tara",
)  # fmt: skip
CITIES = ("Paris", "Lima", "Oslo", "Cairo", "Tokyo", "Dublin", "Quito", "Riga", "Seoul", "Accra")

SYSTEM = "Search, then answer with one word."
TOOL_DESCRIPTION = "Search the facts."
NO_RESULT = "No result."
UNKNOWN = "unknown"

# (text, kind, relation word of the first hop, of the second hop); {e} is the entity asked about.
TEMPLATES = (
    ("Where was the founder of {e} born?", "founder_born", "founder", "born"),
    ("In which city was the founder of {e} born?", "founder_born", "founder", "city"),
    ("Who is the founder of {e}?", "founder", "founder", None),
    ("Who founded {e}?", "founder", "founded", None),
    ("Where was {e} born?", "born", "born", None),
    ("In which city was {e} born?", "born", "city", None),
)
KINDS = ("founder_born", "founder", "born")


@dataclass(frozen=True)
class World:
    """The seed's facts and the corpus built from them (sentences in a seeded order)."""

    founder: dict[str, str]
    birthplace: dict[str, str]
    corpus: tuple[str, ...]

    def search(self, query: str) -> str:
        """The best-ranked sentence for `query` (ties: the first in corpus order), or `No result.`."""
        scores = bm25(self.corpus, query)
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return self.corpus[best] if scores[best] > 0 else NO_RESULT


def make_world(seed: int) -> World:
    rng = random.Random(f"rag-world-{seed}")
    people = list(PEOPLE)
    rng.shuffle(people)
    founder = dict(zip(COMPANIES, people, strict=True))
    birthplace = {person: rng.choice(CITIES) for person in PEOPLE}
    corpus = [f"The founder of {c} is {p}." for c, p in founder.items()]
    corpus += [f"{p} was born in {city}." for p, city in birthplace.items()]
    rng.shuffle(corpus)
    return World(founder, birthplace, tuple(corpus))


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def bm25(corpus: tuple[str, ...] | list[str], query: str, k1: float = 1.5, b: float = 0.75) -> list[float]:
    """Okapi BM25 score of every document of `corpus` for `query` (lower-cased word tokens)."""
    docs = [words(d) for d in corpus]
    average = sum(len(d) for d in docs) / len(docs)
    frequency = Counter(w for d in docs for w in set(d))
    scores = []
    for doc in docs:
        counts = Counter(doc)
        score = 0.0
        for term in words(query):
            if term not in counts:
                continue
            idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            tf = counts[term]
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / average))
        scores.append(score)
    return scores


@dataclass(frozen=True)
class RagTask:
    task_id: str
    question: str
    kind: str
    entity: str
    answer: str
    hops: int
    relations: tuple[str, ...]
    world: int
    """The seed of the world (corpus) the question is about."""

    def as_input(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "question": self.question,
            "kind": self.kind,
            "entity": self.entity,
            "answer": self.answer,
            "hops": self.hops,
            "relations": list(self.relations),
            "world": self.world,
        }


def all_tasks(world: World, seed: int) -> list[RagTask]:
    tasks = []
    for k, (text, kind, first, second) in enumerate(TEMPLATES):
        for entity in PEOPLE if kind == "born" else COMPANIES:
            if kind == "founder_born":
                answer = world.birthplace[world.founder[entity]]
            elif kind == "founder":
                answer = world.founder[entity]
            else:
                answer = world.birthplace[entity]
            relations = (first, second) if second else (first,)
            tasks.append(
                RagTask(
                    f"{kind}-{entity}-{k}",
                    text.format(e=entity),
                    kind,
                    entity,
                    answer,
                    len(relations),
                    relations,
                    seed,
                )
            )
    return tasks


def split_tasks(seed: int, heldout_fraction: float = 0.25) -> tuple[World, list[RagTask], list[RagTask]]:
    """A seeded split over (kind, entity) pairs: a held-out question asks about an entity in a way no
    train question does, in every phrasing (the entity itself is asked about in other ways in train)."""
    world = make_world(seed)
    tasks = all_tasks(world, seed)
    pairs = sorted({(t.kind, t.entity) for t in tasks})
    rng = random.Random(seed)
    rng.shuffle(pairs)
    held = set(pairs[: int(len(pairs) * heldout_fraction)])
    train = [t for t in tasks if (t.kind, t.entity) not in held]
    heldout = [t for t in tasks if (t.kind, t.entity) in held]
    return world, train, heldout


def last_word(text: str) -> str:
    """What an answer copies from a retrieved sentence: its last word (`unknown` for `No result.`)."""
    if text == NO_RESULT:
        return UNKNOWN
    found = re.findall(r"\w+", text)
    return found[-1] if found else UNKNOWN


def exact_match(prediction: str, gold: str) -> float:
    return 1.0 if normalize(prediction) == normalize(gold) else 0.0


def f1(prediction: str, gold: str) -> float:
    """SQuAD-style token F1."""
    pred, ref = words(prediction), words(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def normalize(text: str) -> str:
    return " ".join(words(text))


# ---- what the agent sends, for the warm-up: the OpenAI messages the Agents SDK builds ----------------


def tool_param() -> dict[str, Any]:
    """The `tools=` entry the Agents SDK sends for the agent's search tool (its own converter)."""
    from agents.models.chatcmpl_converter import Converter

    try:
        from agent import search_tool
    except ImportError:  # pragma: no cover - imported as a package
        from examples.rag.agent import search_tool
    return Converter.tool_to_openai(search_tool(make_world(0)))


def tool_call_text(query: str) -> str:
    """A search call as the model writes it (hermes style, exactly as the chat template renders it back)."""
    return "<tool_call>\n" + json.dumps({"name": "search", "arguments": {"query": query}}) + "\n</tool_call>"


def conversation(question: str, searches: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The messages of a run that made `searches` ((query, result) pairs), as the SDK sends them."""
    messages: list[dict[str, Any]] = [
        {"content": SYSTEM, "role": "system"},
        {"role": "user", "content": question},
    ]
    for i, (query, result) in enumerate(searches):
        call_id = f"chatcmpl-tool-{i}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"query": query})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return messages


def demonstrations(
    world: World, tasks: list[RagTask], seed: int, count: int
) -> list[tuple[list[dict[str, Any]], str, list[dict[str, Any]]]]:
    """Warm-up data: the format, the number of hops and copying the last sentence's fact, with WHAT to
    search picked AT RANDOM at every hop (the entity, or the relation word): it does not solve the task.
    """
    rng = random.Random(seed)
    tools = [tool_param()]
    out = []
    for _ in range(count):
        task = rng.choice(tasks)
        searches: list[tuple[str, str]] = []
        subject = task.entity
        for relation in task.relations:
            query = rng.choice([subject, relation])
            result = world.search(query)
            out.append((conversation(task.question, searches), tool_call_text(query), tools))
            searches.append((query, result))
            subject = last_word(result)
            if subject == UNKNOWN:
                subject = relation
        out.append((conversation(task.question, searches), last_word(searches[-1][1]), tools))
    return out


def vocabulary() -> list[str]:
    """Text that puts every word and JSON piece the agent's calls use into the tokenizer as one token."""
    world = make_world(0)
    lines = [SYSTEM, TOOL_DESCRIPTION, NO_RESULT, UNKNOWN, *world.corpus]
    lines += [t[0] for t in TEMPLATES] + list(COMPANIES) + list(PEOPLE) + list(CITIES)
    lines += [json.dumps(tool_param()), "# Tools\n<tools>\n</tools>", "<tool_response>\n</tool_response>"]
    lines += ['To call a tool, answer <tool_call>\n{"name": <name>, "arguments": <object>}\n</tool_call>']
    lines += [tool_call_text(w) for w in (*COMPANIES, *PEOPLE, *CITIES, "founder", "founded", "born", "city")]
    return lines
