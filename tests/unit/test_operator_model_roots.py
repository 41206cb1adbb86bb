"""`file://` models below the operator's model roots only (issue 34 item 2): a spec the
URI pattern accepts but that would have a worker read the node's /etc is refused, naming
spec.model.uri and the roots."""

from __future__ import annotations

import pytest

from cascade_operator.config import DEFAULT_MODEL_ROOTS, OperatorConfig, parse_roots
from cascade_operator.spec import parse_spec

ROOTS = ("/var/lib/cascade/models", "/data/weights")


@pytest.mark.parametrize(
    "uri",
    [
        "file:///var/lib/cascade/models/tiny-llama",
        "file:///var/lib/cascade/models/org/llama/",
        "file:///data/weights",
        "pvc://weights/etc",  # a claim is its own root: only its mount is read
    ],
)
def test_models_below_a_root_are_accepted(uri: str) -> None:
    assert parse_spec({"model": {"uri": uri}}, ROOTS).accepted is not None


@pytest.mark.parametrize(
    "uri",
    [
        "file:///etc/shadow",
        "file:///var/lib/cascade/models-evil/x",  # a prefix of characters is not a root
        "file:///var/lib/cascade",
        "file:///data",
    ],
)
def test_file_models_outside_every_root_are_refused_naming_them(uri: str) -> None:
    parsed = parse_spec({"model": {"uri": uri}}, ROOTS)
    assert parsed.accepted is None
    [problem] = parsed.problems
    assert problem.field == "spec.model.uri"
    assert uri in problem.message and "/data/weights" in problem.message
    assert "models.fileRoots" in problem.message


def test_no_roots_check_nothing() -> None:
    assert parse_spec({"model": {"uri": "file:///etc"}}).accepted is not None


def test_the_roots_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OperatorConfig.from_env().model_roots == DEFAULT_MODEL_ROOTS
    monkeypatch.setenv("CASCADE_MODEL_ROOTS", " /a/b/ ,/c,")
    assert OperatorConfig.from_env().model_roots == ("/a/b", "/c")
    assert parse_roots("/") == ("/",)


def test_a_relative_root_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'models' is not an absolute path"):
        parse_roots("/ok,models")
