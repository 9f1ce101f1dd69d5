"""The built-in training text for tiny tokenizers, generated deterministically in code."""

from __future__ import annotations

import random
import string
from collections.abc import Iterable

_NOUNS = (
    "agent apple answer ball bird book box car cat city cloud code cup day dog door egg field fish "
    "friend game garden hand house idea key lake letter light list map message model moon number "
    "paper path plan question river road room rule score sea ship sky star step stone story sun "
    "table task team test time tool tree water way word world year"
).split()
_VERBS = (
    "add answer ask bring build call check choose count find give go help keep know learn look make "
    "move need open play read run say see send sort start stop take tell think try use walk want write"
).split()
_ADJECTIVES = (
    "big small red blue green old new good bad fast slow happy quiet bright dark warm cold short long "
    "simple clear right wrong first last next best"
).split()
_NAMES = "Alice Bob Carol Dave Eve Frank Grace Heidi Ivan Judy".split()
_FUNCTION_WORDS = (
    "a an the and or but if then so because of to in on at by for with from is are was were be been "
    "it this that these those i you he she we they me my your his her our their yes no not do does "
    "did can will would should could what which who where when why how all some any each many more "
    "most one two three four five six seven eight nine ten zero plus minus times equals result sum "
    "please thanks hello hi ok sure sorry here there now today"
).split()
_PUNCTUATION = ". , ! ? : ; ' \" ( ) [ ] { } - + * / = < > _ # @ % & | ~ ^ $ ` \\".split()


def base_words() -> list[str]:
    """Every word the built-in corpus uses, in a fixed order."""
    return [*_FUNCTION_WORDS, *_NOUNS, *_VERBS, *_ADJECTIVES, *_NAMES]


def _sentence(rng: random.Random) -> str:
    """One short declarative or question sentence."""
    name, noun, verb, adjective = (
        rng.choice(_NAMES),
        rng.choice(_NOUNS),
        rng.choice(_VERBS),
        rng.choice(_ADJECTIVES),
    )
    templates = (
        f"{name} can {verb} the {adjective} {noun}.",
        f"The {noun} is {adjective}.",
        f"Where is the {adjective} {noun}?",
        f"We {verb} a {noun} every day, and it is {adjective}!",
        f"Why did {name} {verb} my {noun}? Because it was {adjective}.",
        f"Please {verb} the {noun}: it is ({adjective}) and {rng.choice(_ADJECTIVES)}.",
    )
    return rng.choice(templates)


def _arithmetic(rng: random.Random) -> str:
    """One arithmetic fact written with digits."""
    a, b = rng.randint(0, 999), rng.randint(0, 999)
    op = rng.choice("+-*")
    value = a + b if op == "+" else a - b if op == "-" else a * b
    return f"{a} {op} {b} = {value}"


def _dialogue(rng: random.Random) -> str:
    """One question and answer written as a plain-text exchange."""
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    return f"user\nWhat is {a} plus {b}?\nassistant\nThe answer is {a + b}.\n"


def base_corpus(num_lines: int = 600, seed: int = 0) -> list[str]:
    """Lines of text: every word, letter, digit and punctuation mark, sentences and arithmetic."""
    rng = random.Random(seed)
    lines = [
        " ".join(base_words()),
        " ".join(string.ascii_letters),
        " ".join(string.digits),
        " ".join(_PUNCTUATION),
    ]
    for index in range(num_lines):
        kind = index % 4
        lines.append(_arithmetic(rng) if kind == 0 else _dialogue(rng) if kind == 1 else _sentence(rng))
    return lines


def training_lines(extra_text: Iterable[str] = ()) -> list[str]:
    """The built-in corpus followed by the caller's extra text (so its words are in the vocab)."""
    return [*base_corpus(), *(text for text in extra_text if text)]
