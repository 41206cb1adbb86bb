"""Typed reads of single fields of an OpenAI request body, each failing with a 400.

JSON gives the gateway untyped values; a wrong type must come back as a 400 whose
``param`` names the field (not a 500 from deep inside, nor a pydantic dump of the
internal protocol). Booleans are not numbers here, unlike in Python, because OpenAI's
API would refuse ``"max_tokens": true`` too.

Chat ``messages`` are read here too: text content (a string or a list of text parts)
is flattened to the plain string the worker's chat template takes; other parts (images,
audio) are refused by name. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cascade_gateway.errors import bad_request
from cascade_protocol import limits
from cascade_protocol.generate import ChatMessage


def optional_int(
    body: Mapping[str, Any], name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"'{name}' must be an integer, got {_shown(value)}.", name)
    if minimum is not None and value < minimum:
        raise bad_request(f"'{name}' must be at least {minimum}, got {_shown(value)}.", name)
    if maximum is not None and value > maximum:
        raise bad_request(f"'{name}' must be at most {maximum}, got {_shown(value)}.", name)
    return value


def number(
    body: Mapping[str, Any],
    name: str,
    default: float | None,
    *,
    low: float,
    high: float,
    low_open: bool = False,
) -> float | None:
    """A float in [low, high] (or (low, high] when ``low_open``); None means default."""
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request(f"'{name}' must be a number, got {_shown(value)}.", name)
    too_low = value <= low if low_open else value < low
    if too_low or value > high:
        left = "(" if low_open else "["
        raise bad_request(f"'{name}' must be in {left}{low:g}, {high:g}], got {value}.", name)
    return float(value)


def flag(body: Mapping[str, Any], name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(f"'{name}' must be a boolean, got {_shown(value)}.", name)
    return value


def string_list(
    body: Mapping[str, Any],
    name: str,
    *,
    max_items: int = limits.MAX_STOP_STRINGS,
    max_chars: int = limits.MAX_STOP_CHARS,
) -> list[str]:
    """A string or a list of strings (OpenAI's ``stop``); None means none."""
    value = body.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise bad_request(f"'{name}' must be a string or a list of strings.", name)
    if len(value) > max_items:
        raise bad_request(f"'{name}' may hold at most {max_items} strings, got {len(value)}.",
                          name)  # fmt: skip
    if any(len(v) > max_chars for v in value):
        raise bad_request(f"'{name}' strings may be at most {max_chars} characters long.", name)
    return [v for v in value if v]


def token_ids(value: Any, name: str, max_items: int = limits.MAX_CONTEXT_TOKENS) -> list[int]:
    """A non-empty list of token ids (non-negative integers in int32)."""
    if not isinstance(value, list) or not value:
        raise bad_request(f"'{name}' must be a non-empty list of token ids.", name)
    if len(value) > max_items:
        raise bad_request(f"'{name}' may hold at most {max_items} token ids, got {len(value)}.",
                          name)  # fmt: skip
    for token in value:
        if (
            isinstance(token, bool)
            or not isinstance(token, int)
            or not 0 <= token <= limits.MAX_TOKEN_ID
        ):
            raise bad_request(f"'{name}' holds an invalid token id: {_shown(token)}.", name)
    return list(value)


def optional_token_ids(body: Mapping[str, Any], name: str) -> list[int]:
    value = body.get(name)
    if value is None or value == []:
        return []
    return token_ids(value, name, limits.MAX_STOP_TOKEN_IDS)


def unsupported(body: Mapping[str, Any], name: str, allowed: tuple[Any, ...]) -> None:
    """Refuse a feature this server does not implement rather than silently ignore it."""
    value = body.get(name)
    if value in allowed:
        return
    raise bad_request(
        f"'{name}'={_shown(value)} is not supported by this server.", name, "unsupported"
    )


def chat_messages(value: Any) -> list[ChatMessage]:
    """OpenAI chat messages as the worker takes them: role and plain-text content."""
    if not isinstance(value, list) or not value:
        raise bad_request("'messages' must be a non-empty list of messages.", "messages")
    if len(value) > limits.MAX_CHAT_MESSAGES:
        raise bad_request(f"'messages' may hold at most {limits.MAX_CHAT_MESSAGES} messages, "
                          f"got {len(value)}.", "messages")  # fmt: skip
    out = []
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_request(f"'{where}' must be an object.", where)
        role = message.get("role")
        if not isinstance(role, str) or not role or len(role) > limits.MAX_ROLE_CHARS:
            raise bad_request(f"'{where}.role' must be a non-empty string of at most "
                              f"{limits.MAX_ROLE_CHARS} characters.", f"{where}.role")  # fmt: skip
        content = _content(message.get("content"), where)
        if len(content) > limits.MAX_PROMPT_CHARS:
            raise bad_request(f"'{where}.content' may be at most {limits.MAX_PROMPT_CHARS} "
                              "characters long.", f"{where}.content")  # fmt: skip
        out.append(ChatMessage(role=role, content=content))
    return out


def _content(content: Any, where: str) -> str:
    """A string, null (an assistant turn with tool calls), or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise bad_request(f"Only text content parts are supported in '{where}'.",
                                  f"{where}.content", "unsupported")  # fmt: skip
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_request(f"'{where}.content' text parts need a string 'text'.",
                                  f"{where}.content")  # fmt: skip
            texts.append(text)
        return "".join(texts)
    raise bad_request(f"'{where}.content' must be a string or a list of parts.",
                      f"{where}.content")  # fmt: skip


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
