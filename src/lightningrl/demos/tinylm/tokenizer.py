"""Tokenizers trained locally on shipped text: byte-level BPE or word-level, with a ChatML template.

Both kinds are byte-level BPE models with Qwen2's normalizer and pre-tokenizer, because
`AutoTokenizer` always loads a `qwen2` checkpoint as `Qwen2Tokenizer`, which rebuilds the backend
from the vocabulary and merges with exactly those components. Keeping to them makes the saved
directory reload into the very same tokenizer. Qwen2's pre-tokenizer splits text into words (with one
leading space or punctuation mark), single digits, punctuation runs and whitespace runs.

- `"bpe"`: merges learned up to `vocab_size` (pairs seen at least twice).
- `"word"`: merges learned until every piece of the training text is one token, so every word of
  the corpus and of the caller's extra text is a single token (also capitalized and after a space).
  Unseen text falls back to smaller pieces and at worst to bytes: there is no unknown token.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from lightningrl.demos.tinylm.spec import TokenizerKind
from lightningrl.serving.bytelevel import token_bytes

PAD_TOKEN = "<|pad|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Qwen2Tokenizer defaults its unknown token to this one; shipping it keeps the reloaded vocab identical.
ENDOFTEXT = "<|endoftext|>"
SPECIAL_TOKENS = (ENDOFTEXT, PAD_TOKEN, IM_START, IM_END)

CHAT_TEMPLATE = (
    # Without `tools` every message renders as plain ChatML. With them (hermes style, as Qwen2.5 and
    # vLLM's `--tool-call-parser hermes` expect) a system turn lists the tools, an assistant's
    # `tool_calls` render as <tool_call> blocks and a tool result as a <tool_response> in a user turn.
    "{% if tools %}"
    "{{ '<|im_start|>system\\n' }}"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n\\n' }}{% endif %}"
    "{{ '# Tools\\n<tools>' }}"
    "{% for tool in tools %}{{ '\\n' + (tool | tojson) }}{% endfor %}"
    '{{ \'\\n</tools>\\nTo call a tool, answer <tool_call>\\n{"name": <name>, "arguments": <object>}\\n\''
    " + '</tool_call><|im_end|>\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if tools and loop.first and message['role'] == 'system' %}"
    "{% elif message['role'] == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{% elif message['role'] == 'assistant' and message['tool_calls'] %}"
    "{{ '<|im_start|>assistant\\n' + (message['content'] or '') }}"
    "{% for call in message['tool_calls'] %}"
    "{% set function = call['function'] if call['function'] is defined else call %}"
    # arguments as a JSON object (vLLM passes a dict; our server parses the OpenAI string first)
    "{{ '<tool_call>\\n' + ({'name': function['name'], 'arguments': function['arguments']} | tojson)"
    " + '\\n</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|im_end|>\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Qwen2's pre-tokenizer pattern (transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX).
PRETOKENIZE_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
_ROLE_WORDS = ("system", "user", "assistant", "tool")
_WORD_VOCAB_CAP = 200_000


def _empty_backend() -> Tokenizer:
    """An untrained byte-level BPE tokenizer with Qwen2's normalizer, pre-tokenizer and decoder."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _spellings(word: str) -> tuple[str, ...]:
    """A word as it may appear at a message start or after a space, lower-case and capitalized."""
    capital = word[:1].upper() + word[1:]
    return word, " " + word, capital, " " + capital


def word_pieces(lines: Sequence[str]) -> list[str]:
    """The sorted distinct pieces of `lines`, with every alphabetic word in all its spellings."""
    pre = _empty_backend().pre_tokenizer
    assert pre is not None
    pieces: set[str] = set()
    for line in [*lines, *_ROLE_WORDS]:
        for piece, _ in pre.pre_tokenize_str(line):
            raw = token_bytes(piece)
            assert raw is not None
            text = raw.decode("utf-8", errors="replace")
            word = text.lstrip(" ")
            pieces.update(_spellings(word) if word.isalpha() else (text,))
    return sorted(pieces)


def train_backend(kind: TokenizerKind, lines: Sequence[str], vocab_size: int) -> Tokenizer:
    """Train the `tokenizers` backend of a `kind` tokenizer on `lines`."""
    if kind not in ("bpe", "word"):
        raise ValueError(f"tokenizer kind must be 'bpe' or 'word', got {kind!r}")
    tokenizer = _empty_backend()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size if kind == "bpe" else _WORD_VOCAB_CAP,
        min_frequency=2 if kind == "bpe" else 1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [*lines, *_ROLE_WORDS] if kind == "bpe" else word_pieces(lines)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS]
    )
    return tokenizer


def train_tokenizer(
    kind: TokenizerKind, lines: Sequence[str], *, vocab_size: int = 1024, model_max_length: int = 1024
) -> PreTrainedTokenizerFast:
    """Train a `kind` tokenizer on `lines` and wrap it with the special tokens and chat template."""
    return PreTrainedTokenizerFast(
        tokenizer_object=train_backend(kind, lines, vocab_size),
        unk_token=ENDOFTEXT,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        extra_special_tokens=[IM_START],
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=model_max_length,
    )
