"""Request bodies as JSON, bounded in nesting: one reader for every HTTP surface.

`json.loads` recurses once per nesting level, so a body of ~1,000 nested arrays (a few
KB, far under any size limit) raises RecursionError, which handlers that catch
ValueError turned into a 500. No request Cascade takes nests deeper than a few levels
(an OpenAI chat body with tool schemas: about ten), so a body nested past `MAX_DEPTH`
is refused like malformed JSON, with a message that says so.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64


class BodyError(ValueError):
    """The body is not JSON a handler takes; the message says why (answer 400)."""


class TooDeep(BodyError):
    """Valid JSON, or JSON too deep for the parser to tell, nested past the bound."""


def load(raw: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """The parsed body; BodyError if it is not valid JSON or nests past `max_depth`."""
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise TooDeep(f"body is nested more than {max_depth} levels deep") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise BodyError(f"body is not valid JSON: {exc}") from None
    if nesting(doc, max_depth) > max_depth:
        raise TooDeep(f"body is nested more than {max_depth} levels deep")
    return doc


def nesting(doc: Any, limit: int = MAX_DEPTH) -> int:
    """How deep arrays and objects nest in `doc` (a scalar: 0), counted without
    recursion and only up to one past `limit`."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        children = list(node.values()) if isinstance(node, dict) else node
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest
