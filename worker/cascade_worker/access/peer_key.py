"""The worker process's peer key, for the parts that open or accept pipeline
connections deep inside the engine (a head's stage chain, a stage server).

A worker process serves one deployment, so it holds one key; the app installs it at
build (main.build_app) rather than threading a credential through every engine layer.
Library use and tests that install nothing stay open, and may pass a key explicitly.
"""

from __future__ import annotations

from cascade_protocol.peer_auth import PeerKey

_key: PeerKey | None = None


def install(key: PeerKey | None) -> None:
    global _key
    _key = key


def current() -> PeerKey | None:
    return _key


def or_current(key: PeerKey | None) -> PeerKey | None:
    """`key` when given, else the process's."""
    return key if key is not None else _key
