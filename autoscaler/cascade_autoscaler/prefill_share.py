"""Does halving the batch help an ITL over its SLO? Not when prefill makes the excess.

A step of the engine's chunked prefill carries the running decodes and up to
maxPrefillTokensPerStep prompt tokens of newly admitted requests, and every decoding
request waits the whole step for its token. Where prompts are long and outputs short,
the chunk can be most of a step; halving the cap then halves the decode part only: ITL
barely moves, while the requests finished per second fall with the cap (a request needs
its output's steps whatever the cap), the gateway's queue grows and time to first token
is lost instead (`cascade bench autoscale` run 13: caps halved to 3-12 through a burst
while 120-199 requests waited). Measured there (tiny-llama, one thread, the trace's
~180-token prompts): a step with a 125-token chunk took 32.9 ms of CPU beside ~10
running, a pure decode step of 4-8 running 15.6-16.6 ms, so decode was about half a
step and the rule below still halves; the 0.2-core quota's lumps, which a CPU-time share
cannot see, drove those halvings (bench/results/JOURNAL.md, 2026-11-24, runs 16-19).

So before halving for latency, Algorithm 1 asks what half the batch would give:

    decode share f = (running / decode tokens/s) / mean step time of the window
    ITL at half the batch ~= ITL · (1 - f / 2)

both times the engine's compute time, so the share holds under a CPU quota that
stretches every step alike. In a burst most steps may carry a prompt chunk, so the
window may have no pure decode step: the decode speed is remembered from the last windows
that had some (`DecodeSpeeds`, by batch size in powers of two, as the capacity curve),
and the step at `running` is read at the nearest batch measured at or below it (a
smaller batch decodes fewer tokens per second: the share comes out high, toward the
paper's halving), else above it. The cap halves when half the batch meets the SLO, or when
the batch's own decode is at least half of a step (`DECODE_BOUND`): ITL then falls
about as much as throughput, the paper's trade, and repeated halvings reach the SLO
(with a decode-only load f is 1: the paper's rule). Otherwise halving would cut
throughput by half to shave ITL by less than a quarter, and still miss: the cap holds.
Unknown share (no decode speed measured yet, a window without step times): halve.
"""

from __future__ import annotations

from dataclasses import dataclass

DECODE_BOUND = 0.5  # decode share of a step from which halving is the paper's trade


@dataclass(frozen=True)
class HalvingOutlook:
    helps: bool  # False: halving would not bring ITL under the SLO (prefill makes it)
    decode_share: float | None  # f above; None: unknown
    itl_at_half_s: float | None


DecodeSpeeds = tuple[tuple[int, float], ...]  # (batch bucket, pure decode tokens/s), sorted


def bucket(running: int) -> int:
    """The power of two at or below `running` (1, 2, 4, ...)."""
    return 1 << (max(1, running).bit_length() - 1)


def remember(speeds: DecodeSpeeds, running: int, tokens_per_s: float) -> DecodeSpeeds:
    """`speeds` with the bucket of `running` set to an EWMA (weight 1/2) of its speed."""
    b = bucket(running)
    old = dict(speeds)
    old[b] = (old[b] + tokens_per_s) / 2 if b in old else tokens_per_s
    return tuple(sorted(old.items()))


def decode_step_s(speeds: DecodeSpeeds, running: int) -> float | None:
    """The pure decode step of `running` requests from the nearest remembered bucket."""
    if not speeds or running <= 0:
        return None
    below = [tps for b, tps in speeds if b <= running]
    tps = below[-1] if below else speeds[0][1]
    return running / tps if tps > 0 else None


def halving_outlook(
    itl_s: float | None, slo_s: float | None, decode_s: float | None, mean_step_s: float | None
) -> HalvingOutlook:
    """The ITL expected at half the batch, and whether halving is worth it."""
    if itl_s is None or slo_s is None or not decode_s or not mean_step_s or mean_step_s <= 0:
        return HalvingOutlook(True, None, None)
    share = min(1.0, decode_s / mean_step_s)
    at_half = itl_s * (1 - share / 2)
    return HalvingOutlook(at_half < slo_s or share >= DECODE_BOUND, share, at_half)
