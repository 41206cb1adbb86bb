"""Hypothesis strategies that follow pydantic models, for the tests/unit/test_fuzz_* suites.

`documents(Model)` draws JSON-ready dicts shaped like the model (its field names or
aliases, values of roughly the annotated type, nested models recursively) and bent out
of shape: fields dropped, values swapped for arbitrary JSON, numbers at the edges that
size allocations (negative, 2**32, 10**15). A field added to a model is fuzzed without
touching the tests. `json_values` is arbitrary JSON; `error_names_field` is the one
property every refusal must have.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from pydantic import BaseModel

# The default tier's settings: no example database in the work tree, no per-example
# deadline (the first examples import and build validators), example counts per test.
FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def fuzz(max_examples: int) -> settings:
    """`FUZZ` with this test's number of examples."""
    return settings(FUZZ, max_examples=max_examples)


def _same(value: Any) -> Any:
    return value


EDGE_INTS = [-1, 0, 1, 2**31, 2**32, 2**63, 2**64, 10**15, -(10**15), 10**30]
ints = st.one_of(
    [st.integers(0, 300).map(_same) for _ in range(4)] + [st.sampled_from(EDGE_INTS), st.integers()]
)
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -1.0, 1e308])
scalars = st.none() | st.booleans() | ints | floats | st.text(max_size=12)
json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# Shallow wrong-typed values for one field (cheaper to draw than nested JSON).
junk = (
    scalars
    | st.lists(scalars, max_size=3)
    | st.dictionaries(st.text(max_size=4), scalars, max_size=2)
)
MAX_DEPTH = 5


def values_for(annotation: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of roughly `annotation`'s type (constraints ignored: those are fuzzed)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if depth > MAX_DEPTH:
        return scalars
    if origin is typing.Annotated:
        return values_for(args[0], depth)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([values_for(a, depth + 1) for a in args])
    if origin in (list, tuple, set, frozenset):
        items = [a for a in args if a is not Ellipsis] or [Any]
        if origin is tuple and Ellipsis not in args:
            return st.tuples(*[values_for(a, depth + 1) for a in items]).map(list)
        return st.lists(values_for(items[0], depth + 1), max_size=max(1, 4 - depth))
    if origin is dict:
        key, value = args or (str, Any)
        keys, values = values_for(key, depth + 1), values_for(value, depth + 1)
        return st.dictionaries(keys, values, max_size=max(1, 3 - depth))
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return documents(annotation, depth + 1)
        if issubclass(annotation, enum.Enum):
            return st.sampled_from([m.value for m in annotation])
        if issubclass(annotation, bool):
            return st.booleans()
        if issubclass(annotation, int):
            return ints
        if issubclass(annotation, float):
            return floats | ints
        if issubclass(annotation, str):
            return st.text(max_size=16)
    return json_values


def _field_value(annotation: Any, depth: int) -> st.SearchStrategy[Any]:
    """Mostly well-typed (one in six wrong-typed): so that whole documents validate often
    enough for the accepting side of each property to be exercised too."""
    typed = values_for(annotation, depth)
    return _weighted(typed, 5, junk)


def _weighted(often: st.SearchStrategy[Any], times: int, rarely: st.SearchStrategy[Any]) -> Any:
    """`often` `times` times as likely as `rarely` (one_of would flatten a nested
    one_of's branches into its own and weigh each of them alike)."""
    return st.integers(0, times).flatmap(lambda i: rarely if i == 0 else often)


@functools.cache
def documents(model: type[BaseModel], depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """Built once per model: strategies are drawn from thousands of times."""
    # One field in twenty is missing (required ones too); one document in twenty has a
    # field no model has.
    fields = {
        field.alias or name: st.tuples(st.integers(0, 19), _field_value(field.annotation, depth))
        for name, field in model.model_fields.items()
    }
    stray = st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=1)
    return st.tuples(st.fixed_dictionaries(fields), st.integers(0, 19), stray).map(
        lambda t: {k: v for k, (keep, v) in t[0].items() if keep} | (t[2] if t[1] == 0 else {})
    )


def mutations(model: type[BaseModel], base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`base` (a valid document) with one or two of its model's fields redrawn or
    dropped: most stay valid, so what validates is exercised as well as what fails."""
    fields = {f.alias or n: _field_value(f.annotation, 1) for n, f in model.model_fields.items()}
    change = st.sampled_from(sorted(fields)).flatmap(
        lambda key: st.tuples(st.just(key), st.none() | fields[key].map(lambda v: [v]))
    )
    return st.lists(change, min_size=1, max_size=2).map(lambda changes: _apply(base, changes))


def _apply(base: dict[str, Any], changes: list[tuple[str, list[Any] | None]]) -> dict[str, Any]:
    doc = dict(base)
    for key, value in changes:
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value[0]
    return doc


def union_members(union: Any) -> list[type[BaseModel]]:
    """The models of a (possibly Annotated) union type."""
    if typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    return [m for m in typing.get_args(union) if isinstance(m, type) and issubclass(m, BaseModel)]


def field_names(*models: type[BaseModel]) -> set[str]:
    """Every field name and alias of `models` and the models nested in them."""
    names: set[str] = set()
    todo, seen = list(models), set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            names |= {name, field.alias or name}
            todo += _nested_models(field.annotation)
    return names


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _nested_models(a)]


def keys_in(doc: Any) -> set[str]:
    """Every dict key anywhere in a JSON document (an unknown field is named as sent)."""
    if isinstance(doc, dict):
        return {str(k) for k in doc} | {k for v in doc.values() for k in keys_in(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in keys_in(v)}
    return set()


def error_names_field(message: str, names: set[str]) -> bool:
    """A refusal's message names one of the fields (or says the body itself is wrong)."""
    return any(name in message for name in names)


def _deep(depth: int, kind: int) -> bytes:
    """JSON bytes nested `depth` levels: arrays, objects, or the two alternating."""
    opens = [b"[", b'{"a":', b'{"messages":['][kind]
    closes = [b"]", b"}", b"]}"][kind]
    return opens * depth + b"1" + closes * depth


# Bodies nested from 1 to far past what json.loads can recurse into (~1,000 levels).
deep_json: st.SearchStrategy[bytes] = st.builds(
    _deep, st.integers(1, 3000) | st.sampled_from([63, 64, 65, 999, 1000, 1001]), st.integers(0, 2)
)
