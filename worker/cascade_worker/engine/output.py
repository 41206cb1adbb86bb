"""A request's output text: streamed in deltas, cut before a stop string.

Text is produced token by token (via the incremental detokenizer) and checked against
the request's stop strings across chunk boundaries. The tail that could still become a
stop string is held back, so a client never receives text that later turns out to be
part of one; when a stop string appears the text is truncated right before it.
"""

from __future__ import annotations

from cascade_worker.engine.tokenizer import IncrementalDetokenizer


def held_back(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
    best = 0
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:k]):
                best = k
                break
    return best


class TextStream:
    def __init__(self, detokenizer: IncrementalDetokenizer | None, stops: list[str]) -> None:
        self._detok = detokenizer
        self._stops = [s for s in stops if s]
        self._longest = max((len(s) for s in self._stops), default=0)
        self.text = ""  # all output text so far (cut before a stop string once one is hit)
        self._emitted = 0
        self.stopped = False

    def add(self, token_id: int) -> bool:
        """Feed one generated token; True when the text now contains a stop string."""
        if self._detok is None or self.stopped:
            return self.stopped
        return self._append(self._detok.add(token_id))

    def resume(self, token_ids: list[int], text_chars: int) -> None:
        """Replay already generated tokens, one chunk each as when they were generated;
        the first `text_chars` characters count as handed out. ValueError if the replay
        contradicts that (more characters than the tokens make, or a stop string)."""
        for token in token_ids:
            self.add(token)
            self.take(final=False)
        if self.stopped:
            raise ValueError("the resumed tokens already contain a stop string")
        if self._detok is not None and text_chars > len(self.text):
            raise ValueError(
                f"text_chars {text_chars} is past the resumed tokens' text ({len(self.text)})"
            )
        self._emitted = text_chars if self._detok is not None else 0

    def take(self, *, final: bool) -> str:
        """Text not yet handed out; at the end (`final`) everything, held-back tail too."""
        if final and self._detok is not None and not self.stopped:
            self._append(self._detok.flush())
        end = len(self.text)
        if not final and not self.stopped:
            end = max(self._emitted, end - held_back(self.text, self._stops))
        out = self.text[self._emitted : end]
        self._emitted = end
        return out

    def _append(self, piece: str) -> bool:
        if not piece:
            return False
        search_from = max(0, len(self.text) - self._longest + 1)
        self.text += piece
        hits = [i for i in (self.text.find(s, search_from) for s in self._stops) if i >= 0]
        if hits:
            self.text = self.text[: min(hits)]
            self.stopped = True
        return self.stopped
