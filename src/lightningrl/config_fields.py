"""LightningRLConfig from plain data: a dict (Python, a TOML table) or command-line text, and its help.

One converter for `fit(config={...})` and `lightningrl train`: unknown keys and wrong types raise
naming the key and the value; nested dataclasses (`advantage`, `trainer`, `trainer.loss`) take
nested dicts. Help text is each field's docstring (the string literal after the field).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import inspect
import json
import textwrap
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightningrl.rl.config import LightningRLConfig


@dataclass(frozen=True)
class ConfigField:
    """One leaf field of a config tree: its dotted name, type, default and help."""

    name: str
    hint: Any
    default: Any
    help: str


def config_from(value: LightningRLConfig | Mapping[str, Any] | None) -> LightningRLConfig:
    """`value` itself, the defaults for None, or a LightningRLConfig built from a dict of its fields."""
    if value is None:
        return LightningRLConfig()
    if isinstance(value, LightningRLConfig):
        return value
    if isinstance(value, Mapping):
        return dataclass_from_dict(LightningRLConfig, value, "config")
    raise TypeError(f"config must be a LightningRLConfig or a dict of its fields, got {type(value).__name__}")


def dataclass_from_dict(cls: type, data: Mapping[str, Any], path: str) -> Any:
    """`cls(**data)` with nested dicts converted and every value checked against the field's type."""
    kwargs = _field_values(cls, data, path, None)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {error}") from None


def replaced_from_dict(value: Any, data: Mapping[str, Any], path: str) -> Any:
    """`value` (a dataclass) with the fields `data` names replaced, nested dicts replacing inside nested
    dataclasses; unknown keys and wrong types raise naming `path.key` and the value."""
    changes = _field_values(type(value), data, path, value)
    try:
        return dataclasses.replace(value, **changes)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {error}") from None


def _field_values(cls: type, data: Mapping[str, Any], path: str, current: Any) -> dict[str, Any]:
    """`data` checked against the init fields of `cls`; with `current`, a dict given for a nested
    dataclass field replaces inside that field's value."""
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    values: dict[str, Any] = {}
    for key, given in data.items():
        if key not in names:
            raise ValueError(
                f"unknown key {path}.{key} (given {given!r:.60}); valid keys: {', '.join(names)}"
            )
        inner = None if current is None else getattr(current, key)
        if dataclasses.is_dataclass(inner) and isinstance(given, Mapping):
            values[key] = replaced_from_dict(inner, given, f"{path}.{key}")
        else:
            values[key] = _coerce(given, hints[key], f"{path}.{key}")
    return values


def config_fields(cls: type = LightningRLConfig, prefix: str = "") -> list[ConfigField]:
    """Every leaf field of `cls`, nested dataclasses flattened into dotted names (`trainer.lr`)."""
    out: list[ConfigField] = []
    hints, docs = _hints(cls), field_docs(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint, name = hints[f.name], prefix + f.name
        nested = _dataclass_in(hint)
        if nested is not None:
            out += config_fields(nested, name + ".")
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        out.append(ConfigField(name, hint, default, docs.get(f.name, "")))
    return out


def parse_field_text(text: str, hint: Any, name: str) -> Any:
    """A command-line value for a field of type `hint`: TOML syntax (3, 1e-4, true, [0.9, 0.99]) or
    plain text; `none` for an optional field; comma-separated items for sets and tuples."""
    optional = _is_optional(hint)
    base = _strip_none(hint)
    if optional and text.strip().lower() in ("none", "null"):
        return None
    if base in (str, Path):
        return _coerce(text, hint, name)
    try:
        value: Any = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    if isinstance(value, str) and typing.get_origin(base) in (frozenset, set, tuple, list):
        value = [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, str) and typing.get_origin(base) is dict or base is dict:
        try:
            value = json.loads(value) if isinstance(value, str) else value
        except json.JSONDecodeError:
            raise ValueError(f"{name} must be a JSON object, got {text!r}") from None
    return _coerce(value, hint, name)


def set_dotted(data: dict[str, Any], name: str, value: Any) -> None:
    """data["a"]["b"] = value for name "a.b" (creating the inner dicts)."""
    *parents, leaf = name.split(".")
    for part in parents:
        inner = data.setdefault(part, {})
        if not isinstance(inner, dict):
            raise ValueError(f"config key {part!r} must be a table, got {inner!r}")
        data = inner
    data[leaf] = value


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring after each field in the class body (one line, whitespace collapsed)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def type_name(hint: Any) -> str:
    """A short readable name of a type hint (`int`, `str | None`, `tuple[float, float]`)."""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("pathlib.", "")


# ---- coercion -----------------------------------------------------------------------------------


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_optional(hint: Any) -> bool:
    return _is_union(hint) and type(None) in typing.get_args(hint)


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _strip_none(hint: Any) -> Any:
    if not _is_union(hint):
        return hint
    rest = [a for a in typing.get_args(hint) if a is not type(None)]
    return rest[0] if len(rest) == 1 else hint


def _dataclass_in(hint: Any) -> type | None:
    base = _strip_none(hint)
    return base if isinstance(base, type) and dataclasses.is_dataclass(base) else None


def _coerce(value: Any, hint: Any, name: str) -> Any:
    """`value` as type `hint`, or a ValueError naming the field, the expected type and the value."""
    if hint is Any:
        return value
    if _is_union(hint):
        if value is None and type(None) in typing.get_args(hint):
            return None
        for option in typing.get_args(hint):
            if option is type(None):
                continue
            with contextlib.suppress(ValueError):
                return _coerce(value, option, name)
        raise ValueError(f"{name} must be {type_name(hint)}, got {value!r}")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    nested = _dataclass_in(hint)
    if nested is not None:
        if isinstance(value, nested):
            return value
        if isinstance(value, Mapping):
            return dataclass_from_dict(nested, value, name)
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif hint is Path:
        if isinstance(value, str | Path):
            return Path(value)
    elif origin in (frozenset, set, list) or hint in (frozenset, set, list):
        if isinstance(value, list | tuple | set | frozenset):
            item = args[0] if args else Any
            items = [_coerce(v, item, f"{name}[]") for v in value]
            return (origin or hint)(items)
    elif origin is tuple:
        if isinstance(value, list | tuple) and (len(args) == len(value) or Ellipsis in args):
            item_hints = [args[0]] * len(value) if Ellipsis in args else list(args)
            return tuple(
                _coerce(v, h, f"{name}[{i}]") for i, (v, h) in enumerate(zip(value, item_hints, strict=True))
            )
    elif origin is dict or hint is dict:
        if isinstance(value, Mapping):
            return dict(value)
    raise ValueError(f"{name} must be {type_name(hint)}, got {value!r}")
