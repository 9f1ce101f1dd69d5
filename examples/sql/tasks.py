"""Generated SQLite databases and questions for the SQL agent: a train split and a held-out split, by seed.

Five databases (schemas), one table each with two numeric columns. A question asks for an aggregate
of one column ("What is the highest price in products?"); the gold query is
`SELECT MAX(price) FROM products`. The words name the table and the column (copied), and one word
names the aggregate: that is the decision RL teaches. Held-out questions are (column, aggregate)
combinations never asked in training, in every phrasing and on every database variant.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

SCHEMAS: dict[str, tuple[str, tuple[str, str]]] = {
    "shop": ("products", ("price", "stock")),
    "company": ("employees", ("salary", "age")),
    "atlas": ("cities", ("population", "area")),
    "library": ("books", ("pages", "year")),
    "zoo": ("animals", ("weight", "speed")),
}
AGGREGATES: dict[str, tuple[str, ...]] = {
    "MAX": ("highest", "largest"),
    "MIN": ("lowest", "smallest"),
    "SUM": ("total",),
    "AVG": ("average",),
}
TEMPLATES = (
    "What is the {word} {column} in {table}?",
    "Find the {word} {column} of {table}.",
    "Tell me the {word} {column} in {table}.",
)
VARIANTS = 3
"""Database variants per schema (different rows), so a question's answer is not one fixed number."""
ROWS = 4
NAMES = ("alpha", "beta", "gamma", "delta")
WRITER_SYSTEM = "Database {db}, table {table}. Name the aggregate, then answer with one SQL query."
CHECKER_SYSTEM = "Check the SQL query for the question. Reply approve or reject."
VERDICTS = ("approve", "reject")
WRITER_TURNS = 2
"""Writer calls per rollout at most: the first query, and one rewrite after an error."""


@dataclass(frozen=True)
class SqlTask:
    task_id: str
    question: str
    db: str
    variant: int
    table: str
    column: str
    aggregate: str
    word: str
    """The question's word for the aggregate (`highest`)."""

    @property
    def gold_sql(self) -> str:
        return sql_for(self.aggregate, self.column, self.table)

    def as_input(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "question": self.question,
            "db": self.db,
            "variant": self.variant,
            "table": self.table,
            "column": self.column,
            "aggregate": self.aggregate,
            "word": self.word,
            "gold_sql": self.gold_sql,
        }


def sql_for(aggregate: str, column: str, table: str) -> str:
    """The query, spaced inside the parentheses so the column is the same token as in the question (the
    word tokenizer makes `(price` one token and ` price` another: a copy, not a learned mapping)."""
    return f"SELECT {aggregate}( {column} ) FROM {table}"


SQL_LOCK = threading.Lock()


def thought_text(word: str, aggregate: str) -> str:
    """What the writer says before its call: the question's aggregate word, then the function (`highest
    MAX`). The function is decided right after the word it depends on, where a 2-layer model learns the
    mapping with RL (as in examples/calc); the query then copies it (the warm-up teaches the copy)."""
    return f"{word} {aggregate}"


def open_database(db: str, variant: int) -> sqlite3.Connection:
    """The generated database `db` (variant `variant`) in memory: the same rows every time."""
    table, (c1, c2) = SCHEMAS[db]
    rng = random.Random(f"{db}-{variant}")
    # LangGraph's ToolNode runs sync tools in worker threads, several calls at once: the connection
    # crosses threads, and `run_sql` lets one thread use it at a time.
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute(f"CREATE TABLE {table} (name TEXT, {c1} INTEGER, {c2} INTEGER)")
    # distinct values, so MAX, MIN, SUM and AVG of a column all differ
    first, second = rng.sample(range(1, 100), ROWS), rng.sample(range(1, 100), ROWS)
    conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", list(zip(NAMES, first, second, strict=True)))
    return conn


def run_sql(conn: sqlite3.Connection, sql: str) -> tuple[bool, str]:
    """(ran, text): the rows as text (one line per row, values joined by ", "), or `error: ...`."""
    try:
        with SQL_LOCK:  # a sqlite3 connection must not run two statements at once
            rows = conn.execute(sql).fetchmany(20)
    except (sqlite3.Error, sqlite3.Warning, ValueError) as error:
        return False, f"error: {error}"
    text = "\n".join(", ".join(_value(v) for v in row) for row in rows)
    return True, text or "no rows"


def _value(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def writer_system(db: str) -> str:
    """The writer's system message. It names the table, not its columns: the question's column is then
    the only column word in the prompt, which the query copies (listed columns made the copy a guess)."""
    return WRITER_SYSTEM.format(db=db, table=SCHEMAS[db][0])


def writer_messages(task: dict[str, Any]) -> list[dict[str, str]]:
    """The writer's first call (the tools are offered beside these messages)."""
    return [
        {"role": "system", "content": writer_system(task["db"])},
        {"role": "user", "content": task["question"]},
    ]


def checker_messages(question: str, sql: str, result: str) -> list[dict[str, str]]:
    """The checker's one call: the question, the query that ran and its result."""
    return [
        {"role": "system", "content": CHECKER_SYSTEM},
        {"role": "user", "content": f"{question}\nSQL: {sql}\nresult: {result}"},
    ]


def all_tasks() -> list[SqlTask]:
    tasks = []
    for db, (table, columns) in SCHEMAS.items():
        for column in columns:
            for aggregate, words in AGGREGATES.items():
                for word in words:
                    for k, template in enumerate(TEMPLATES):
                        for variant in range(VARIANTS):
                            question = template.format(word=word, column=column, table=table)
                            tasks.append(
                                SqlTask(
                                    f"{db}-{column}-{word}-{k}-v{variant}",
                                    question,
                                    db,
                                    variant,
                                    table,
                                    column,
                                    aggregate,
                                    word,
                                )
                            )
    return tasks


def split_tasks(seed: int, heldout_fraction: float = 0.25) -> tuple[list[SqlTask], list[SqlTask]]:
    """A seeded split over (column, aggregate) pairs: held-out pairs are never asked in training.

    Every aggregate keeps at least one held-out pair and most of its pairs in training."""
    rng = random.Random(seed)
    per_aggregate = max(1, round(len(SCHEMAS) * 2 * heldout_fraction))
    held: set[tuple[str, str]] = set()
    columns = [c for _, cols in SCHEMAS.values() for c in cols]
    for aggregate in AGGREGATES:
        held.update((c, aggregate) for c in rng.sample(columns, per_aggregate))
    tasks = all_tasks()
    train = [t for t in tasks if (t.column, t.aggregate) not in held]
    heldout = [t for t in tasks if (t.column, t.aggregate) in held]
    return train, heldout


# ---- the hermes rendering the inference server applies (for format-only demonstrations) ----------


def tools_block(tools: list[dict[str, Any]]) -> str:
    """What the chat template appends to the system message when `tools` are offered."""
    listed = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        "\n\n# Tools\n<tools>"
        + listed
        + '\n</tools>\nTo call a tool, answer <tool_call>\n{"name": <name>, "arguments": <object>}\n</tool_call>'
    )


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """A tool call as the model writes it (and as the template renders it back in the history)."""
    return (
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        + "\n</tool_call>"
    )


def rendered_writer_messages(
    task: dict[str, Any], tools: list[dict[str, Any]] | None, failed: tuple[str, str, str] | None = None
) -> list[dict[str, str]]:
    """The writer's messages with the tools folded into plain text: rendered WITHOUT tools they give the
    same prompt the server renders for `writer_messages(task)` WITH them (tests check it). `failed` is a
    first (thought, sql, error) before a rewrite. `tools=None` leaves the listing out (a short prompt for
    the first, cheap phase of the warm-up)."""
    messages = writer_messages(task)
    if tools is not None:
        messages[0] = {"role": "system", "content": messages[0]["content"] + tools_block(tools)}
    if failed is not None:
        thought, sql, error = failed
        messages += [
            {"role": "assistant", "content": thought + tool_call_text("run_query", {"sql": sql})},
            {"role": "user", "content": f"<tool_response>\n{error}\n</tool_response>"},
        ]
    return messages


def demonstrations(
    tasks: list[SqlTask],
    tools: list[dict[str, Any]] | None,
    seed: int,
    count: int,
    rewrite_share: float = 0.15,
) -> list[tuple[list[dict[str, str]], str]]:
    """Warm-up data: FORMAT only. The writer restates the question's aggregate word and names a function
    picked AT RANDOM, and its query copies that function and the question's table and column; some first
    queries name a wrong column and are rewritten after the error (again with a random function); the
    checker's verdict is AT RANDOM. `tools=None`: the writer's prompts without the tool listing."""
    rng = random.Random(seed)
    columns = [c for _, cols in SCHEMAS.values() for c in cols]
    out = []
    for _ in range(count):
        task = rng.choice(tasks)
        source = task.as_input()
        failed = None
        if rng.random() < rewrite_share:
            wrong = rng.choice([c for c in columns if c not in SCHEMAS[task.db][1]])
            bad_aggregate = rng.choice(list(AGGREGATES))
            bad_thought = thought_text(task.word, bad_aggregate)
            bad_sql = sql_for(bad_aggregate, wrong, task.table)
            _, error = run_sql(open_database(task.db, task.variant), bad_sql)
            bad_call = bad_thought + tool_call_text("run_query", {"sql": bad_sql})
            out.append((rendered_writer_messages(source, tools), bad_call))
            failed = (bad_thought, bad_sql, error)
        aggregate = rng.choice(list(AGGREGATES))
        sql = sql_for(aggregate, task.column, task.table)
        call = thought_text(task.word, aggregate) + tool_call_text("run_query", {"sql": sql})
        out.append((rendered_writer_messages(source, tools, failed), call))
        _, result = run_sql(open_database(task.db, task.variant), sql)
        out.append((checker_messages(task.question, sql, result), rng.choice(VERDICTS)))
    return out


def checker_cases(tasks: list[SqlTask], seed: int, count: int) -> list[tuple[list[dict[str, str]], str]]:
    """Fixed checker inputs with their right verdicts: half the queries right, half a wrong aggregate."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        task = rng.choice(tasks)
        aggregate = (
            task.aggregate if i % 2 == 0 else rng.choice([a for a in AGGREGATES if a != task.aggregate])
        )
        sql = sql_for(aggregate, task.column, task.table)
        _, result = run_sql(open_database(task.db, task.variant), sql)
        cases.append((checker_messages(task.question, sql, result), "approve" if i % 2 == 0 else "reject"))
    return cases


def vocabulary(tools: list[dict[str, Any]]) -> list[str]:
    """Text that puts every word and punctuation run of the prompts and answers into the tokenizer."""
    lines = [CHECKER_SYSTEM, *VERDICTS, "SQL: result: no rows", tools_block(tools), *TEMPLATES]
    lines += [writer_system(db) + tools_block(tools) for db in SCHEMAS]
    lines += [thought_text(word, aggregate) for aggregate, words in AGGREGATES.items() for word in words]
    columns = [c for _, cols in SCHEMAS.values() for c in cols]
    for db, (table, _) in SCHEMAS.items():
        for column in columns:
            sql = sql_for("MAX", column, table)
            lines.append(tool_call_text("run_query", {"sql": sql}))
            lines.append(f"<tool_response>\n{run_sql(open_database(db, 0), sql)[1]}\n</tool_response>")
    lines.append("error: no such table: x; near syntax error; incomplete input; misuse of aggregate")
    return lines


# ---- the natural form, for a real pretrained model (examples/sql/demo_smollm2.py) -----------------

NATURAL_WRITER_SYSTEM = (
    "You are a SQLite assistant. The database has one table, {table}, with the columns name, {c1} and "
    "{c2}. Answer the user's question by calling run_query with one SQL query."
)


def natural_writer_system(db: str) -> str:
    """A writer's system message as a user would write it: the schema and the job, no thought format."""
    table, (c1, c2) = SCHEMAS[db]
    return NATURAL_WRITER_SYSTEM.format(table=table, c1=c1, c2=c2)


def natural_sql(aggregate: str, column: str, table: str) -> str:
    return f"SELECT {aggregate}({column}) FROM {table}"


def natural_demonstrations(
    tasks: list[SqlTask], tools: list[dict[str, Any]], seed: int, count: int, random_aggregate: bool = True
) -> list[tuple[list[dict[str, str]], str, list[dict[str, Any]]]]:
    """Warm-up data for a real model: the writer's first call (the natural system message, the question,
    the tools as LangChain offers them) answered by a `run_query` call on the question's table and
    column, with the aggregate picked AT RANDOM (`random_aggregate`: the format only, RL learns which)
    or the right one."""
    from lightningrl.serving.tool_prompt import tool_call_block  # transformers: not for the agent's import

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        task = rng.choice(tasks)
        aggregate = rng.choice(list(AGGREGATES)) if random_aggregate else task.aggregate
        messages = [
            {"role": "system", "content": natural_writer_system(task.db)},
            {"role": "user", "content": task.question},
        ]
        call = {"name": "run_query", "arguments": {"sql": natural_sql(aggregate, task.column, task.table)}}
        out.append((messages, tool_call_block(call), tools))
    return out
