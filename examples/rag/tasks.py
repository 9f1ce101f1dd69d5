"""Questions over a generated corpus for the retrieval agent: one- and two-hop, train and held-out splits.

The corpus has two collections of one-sentence facts: `companies` (`The founder of Zorbex is Alice.`)
and `people` (`Alice was born in Paris.`). Who founded what and who was born where is drawn from the
seed. Questions need one hop (`Who is the founder of Zorbex?`, `Where was Alice born?`) or two
(`Where was the founder of Zorbex born?`: search the companies for Zorbex, read the founder, search
the people for the founder, read the city).

The agent has one search tool per collection; each ranks its collection with BM25 (`bm25`, a few lines
below) and returns the best sentence, or `No result.` when no word of the query is in it. Searching
the wrong collection for a name therefore finds nothing.
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

COMPANIES = ("Zorbex", "Quantix", "Velora", "Brixon", "Omnira", "Caldex", "Nuvant", "Pexora")
PEOPLE = ("Alice", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hiro")
CITIES = ("Paris", "Lima", "Oslo", "Cairo", "Tokyo", "Dublin")

SYSTEM = "Name the relation and where to search, search, then answer with one word."
NO_RESULT = "No result."
UNKNOWN = "unknown"

# (text, kind, the collections its hops search, in order); {e} is the entity asked about.
TEMPLATES = (
    ("Where was the founder of {e} born?", "founder_born", ("companies", "people")),
    ("In which city was the founder of {e} born?", "founder_born", ("companies", "people")),
    ("Who is the founder of {e}?", "founder", ("companies",)),
    ("Who founded {e}?", "founder", ("companies",)),
    ("Where was {e} born?", "born", ("people",)),
    ("In which city was {e} born?", "born", ("people",)),
)
COLLECTIONS = ("companies", "people")
HOP_WORDS = {"founder_born": ("founder", "born"), "founder": ("founder",), "born": ("born",)}
"""The relation each hop of a question kind looks up: what the model names before it searches."""
TOOL_DESCRIPTIONS = {"companies": "Search the company facts.", "people": "Search the people facts."}
KINDS = ("founder_born", "founder", "born")


@dataclass(frozen=True)
class World:
    """The seed's facts and the two collections built from them (sentences in a seeded order)."""

    founder: dict[str, str]
    birthplace: dict[str, str]
    corpus: dict[str, tuple[str, ...]]

    def search(self, collection: str, query: str) -> str:
        """The best-ranked sentence of `collection` for `query` (ties: the first), or `No result.`."""
        documents = self.corpus[collection]
        scores = bm25(documents, query)
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return documents[best] if scores[best] > 0 else NO_RESULT


def make_world(seed: int) -> World:
    rng = random.Random(f"rag-world-{seed}")
    people = list(PEOPLE)
    rng.shuffle(people)
    founder = dict(zip(COMPANIES, people, strict=True))
    birthplace = {person: rng.choice(CITIES) for person in PEOPLE}
    companies = [f"The founder of {c} is {p}." for c, p in founder.items()]
    persons = [f"{p} was born in {city}." for p, city in birthplace.items()]
    rng.shuffle(companies)
    rng.shuffle(persons)
    return World(founder, birthplace, {"companies": tuple(companies), "people": tuple(persons)})


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
    collections: tuple[str, ...]
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
            "collections": list(self.collections),
            "world": self.world,
        }


def all_tasks(world: World, seed: int) -> list[RagTask]:
    tasks = []
    for k, (text, kind, collections) in enumerate(TEMPLATES):
        for entity in PEOPLE if kind == "born" else COMPANIES:
            if kind == "founder_born":
                answer = world.birthplace[world.founder[entity]]
            elif kind == "founder":
                answer = world.founder[entity]
            else:
                answer = world.birthplace[entity]
            tasks.append(
                RagTask(
                    f"{kind}-{entity}-{k}",
                    text.format(e=entity),
                    kind,
                    entity,
                    answer,
                    len(collections),
                    collections,
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


def tool_name(collection: str) -> str:
    return f"search_{collection}"


def tool_params() -> list[dict[str, Any]]:
    """The `tools=` entries the Agents SDK sends for the agent's search tools (its own converter)."""
    from agents.models.chatcmpl_converter import Converter

    try:
        from agent import search_tools
    except ImportError:  # pragma: no cover - imported as a package
        from examples.rag.agent import search_tools
    return [Converter.tool_to_openai(tool) for tool in search_tools(make_world(0))]


def thought_text(word: str, collection: str) -> str:
    """What the model says before a search: the hop's relation, then the collection it picks (`founder
    companies`). The collection is decided right after the word it depends on, where a 2-layer model
    learns the mapping with RL (as in examples/calc); the call then copies it (taught by the warm-up)."""
    return f"{word} {collection}"


def tool_call_text(collection: str, query: str) -> str:
    """A search call as the model writes it (hermes style, exactly as the chat template renders it back)."""
    call = {"name": tool_name(collection), "arguments": {"query": query}}
    return "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"


Search = tuple[str, str, str, str]
"""(thought, collection, query, result) of one search: the model's words before the call, the call,
the tool's answer."""


def conversation(question: str, searches: list[Search]) -> list[dict[str, Any]]:
    """The messages of a run that made `searches`, as the SDK sends them."""
    messages: list[dict[str, Any]] = [
        {"content": SYSTEM, "role": "system"},
        {"role": "user", "content": question},
    ]
    for i, (thought, collection, query, result) in enumerate(searches):
        call_id = f"chatcmpl-tool-{i}"
        function = {"name": tool_name(collection), "arguments": json.dumps({"query": query})}
        messages.append(
            {
                "role": "assistant",
                "content": thought,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return messages


WARMUP_WORLDS = 8
"""Worlds the warm-up's demonstrations come from: others than the demo's (see `warmup_tasks`)."""


def warmup_tasks(seed: int, worlds: int = WARMUP_WORLDS) -> list[RagTask]:
    """Every question of `worlds` OTHER worlds (same names, other founders and birthplaces): the warm-up
    asks about every entity in every way, so copying a name is the only way to fit it. Drawn from the
    demo's own train split, the tiny model memorized each question's name (few questions) and did not
    copy the name of a held-out question. No fact of the demo's world is shown, and the collection is
    random: the warm-up does not answer a held-out question."""
    return [
        task for k in range(1, worlds + 1) for task in all_tasks(make_world(seed + 1000 * k), seed + 1000 * k)
    ]


def demonstrations(
    tasks: list[RagTask], seed: int, count: int
) -> list[tuple[list[dict[str, Any]], str, list[dict[str, Any]]]]:
    """Warm-up data: the format, the number of hops, searching the name (the question's, then the one
    the last sentence gave) and copying the fact of the last sentence into the answer, with WHICH
    collection to search picked AT RANDOM at every hop: it does not solve the task. Before each call the
    model names the hop's relation and the collection (`thought_text`), and the call copies that."""
    rng = random.Random(seed)
    tools = tool_params()
    worlds = {w: make_world(w) for w in {task.world for task in tasks}}
    out = []
    for _ in range(count):
        task = rng.choice(tasks)
        world = worlds[task.world]
        searches: list[Search] = []
        subject = task.entity
        for hop in range(task.hops):
            collection = rng.choice(COLLECTIONS)
            result = world.search(collection, subject)
            thought = thought_text(HOP_WORDS[task.kind][hop], collection)
            call = thought + tool_call_text(collection, subject)
            out.append((conversation(task.question, searches), call, tools))
            searches.append((thought, collection, subject, result))
            if result != NO_RESULT:
                subject = last_word(result)
        out.append((conversation(task.question, searches), last_word(searches[-1][3]), tools))
    return out


def vocabulary() -> list[str]:
    """Text that puts every word and JSON piece the agent's calls use into the tokenizer as one token."""
    world = make_world(0)
    lines = [SYSTEM, NO_RESULT, UNKNOWN, *TOOL_DESCRIPTIONS.values()]
    lines += [*world.corpus["companies"], *world.corpus["people"]]
    lines += [t[0] for t in TEMPLATES] + list(COMPANIES) + list(PEOPLE) + list(CITIES)
    lines += [json.dumps(tool) for tool in tool_params()]
    lines += ["# Tools\n<tools>\n</tools>", "<tool_response>\n</tool_response>"]
    lines += ['To call a tool, answer <tool_call>\n{"name": <name>, "arguments": <object>}\n</tool_call>']
    lines += [tool_call_text(c, w) for c in COLLECTIONS for w in (*COMPANIES, *PEOPLE, *CITIES)]
    lines += [thought_text(w, c) for words in HOP_WORDS.values() for w in words for c in COLLECTIONS]
    return lines


# ---- the natural form, for a real pretrained model (examples/rag/demo_smollm2.py) -----------------

NATURAL_SYSTEM = "Answer the user's question with one word. Use the search tools to find the facts."
TRAIN_WORLDS = 16
HELDOUT_WORLDS = 3
"""Worlds a real-model run trains on and is held out on: 48 questions a world, 144 held-out."""


def natural_split(
    seed: int, train_worlds: int = TRAIN_WORLDS, heldout_worlds: int = HELDOUT_WORLDS
) -> tuple[list[RagTask], list[RagTask]]:
    """Every question of `train_worlds` worlds to train on, every question of `heldout_worlds` OTHER
    worlds held out: the same names with other founders and birthplaces, so a held-out answer is
    found by searching, never remembered from training."""
    base = 10_000 * (seed + 1)
    train = [t for k in range(train_worlds) for t in all_tasks(make_world(base + k), base + k)]
    held = [base + 1000 + k for k in range(heldout_worlds)]
    return train, [t for w in held for t in all_tasks(make_world(w), w)]


def natural_conversation(question: str, searches: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """The messages the Agents SDK sends after `searches` ((collection, query, result) each) with
    `NATURAL_SYSTEM`: a call alone in its assistant message, no words before it."""
    messages: list[dict[str, Any]] = [
        {"content": NATURAL_SYSTEM, "role": "system"},
        {"role": "user", "content": question},
    ]
    for i, (collection, query, result) in enumerate(searches):
        call_id = f"call_{i}"
        function = {"name": tool_name(collection), "arguments": json.dumps({"query": query})}
        messages.append(
            {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function", "function": function}]}
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return messages


def natural_demonstrations(
    tasks: list[RagTask], seed: int, count: int, random_collection: bool = True
) -> list[tuple[list[dict[str, Any]], str, list[dict[str, Any]]]]:
    """Warm-up data for a real model, `count` calls: each hop's search of the name (the question's, then
    the one the last sentence gave) in a collection picked AT RANDOM (`random_collection`: the format
    only, RL learns which) or the right one, then the answer copying the last sentence's fact."""
    from lightningrl.serving.tool_prompt import tool_call_block  # transformers: not for the agent's import

    rng = random.Random(seed)
    tools = tool_params()
    out: list[tuple[list[dict[str, Any]], str, list[dict[str, Any]]]] = []
    while len(out) < count:
        task = rng.choice(tasks)
        world = world_for(task.world)
        searches: list[tuple[str, str, str]] = []
        subject = task.entity
        for hop in range(task.hops):
            collection = rng.choice(COLLECTIONS) if random_collection else task.collections[hop]
            call = tool_call_block({"name": tool_name(collection), "arguments": {"query": subject}})
            out.append((natural_conversation(task.question, searches), call, tools))
            result = world.search(collection, subject)
            searches.append((collection, subject, result))
            if result != NO_RESULT:
                subject = last_word(result)
        out.append((natural_conversation(task.question, searches), last_word(searches[-1][2]), tools))
    return out[:count]


@functools.lru_cache(maxsize=64)
def world_for(seed: int) -> World:
    return make_world(seed)
