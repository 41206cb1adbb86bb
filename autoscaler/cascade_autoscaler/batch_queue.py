"""Batch instances from batch backpressure: Chiron's Algorithm 2, pure.

Batch requests have TTFT deadlines of minutes to hours, so a queue is fine as long as
every request is expected to start before its deadline. Each tick the queue is cut into
request groups by deadline, each request's wait is estimated from the output tokens
ahead of it over the token throughput of the batch instances plus the mixed instances'
spare capacity (Equation 1), BBP counts the groups expected to miss (Equation 2), and
the recommendation is the fewest batch instances that bring BBP to 0.

Where the paper is vague, decided here:

- Groups: fixed-width buckets of the absolute deadline, ``floor(deadline / width)``,
  not k-means. A request's group never changes as time passes or others arrive (k-means
  and gap clustering regroup on every arrival: the hysteresis groups exist to avoid),
  there is no k to choose, and the result is deterministic. FCFS within a group, groups
  in deadline order: the dispatch order the estimate assumes.
- A group misses if any member misses: member i waits ``T_i / Θ`` where ``T_i`` are the
  tokens ahead of it (earlier groups and earlier members of its own group).
- Unknown output lengths (§5.3, via QLM): the n outputs ahead sum to about
  Normal(n·μ, √n·sigma) by the CLT; ``T_i`` is that sum's ``quantile`` (default 95 %,
  z ≈ 1.645), each mean clipped to the request's ``max_tokens`` and the sum to their
  total (a bound the normal model does not know). Prompt tokens count with ``prompt_token_weight``
  output tokens each: 0 by default, as in the paper (prefill is far cheaper per token).
- Tokens of requests already running are not counted (Equation 1 counts the queue).
- No partial scale-down: while there is batch work the count never falls, so groups run
  to completion without instance churn. All batch instances retire only when the queue
  is empty and they run nothing, as Algorithm 2's last step says.
- A request whose deadline has passed (or is now, with tokens still ahead) can be met by
  no count: its group counts in BBP, and, as Algorithm 2's loop would, the count goes
  to the maximum to drain the late queue; the reason says so.
- With no throughput at all (no instance, no spare) a non-empty queue waits forever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class QueuedBatchRequest:
    """One batch request waiting in the gateway's batch queue."""

    arrival_s: float  # FCFS order within a request group
    deadline_s: float  # absolute TTFT deadline: arrival + the request's TTFT SLO
    prompt_tokens: int  # known at arrival; weighted by prompt_token_weight
    max_tokens: int  # caps the output-length estimate of this request

    @classmethod
    def with_slo(
        cls, arrival_s: float, ttft_slo_s: float, prompt_tokens: int, max_tokens: int
    ) -> QueuedBatchRequest:
        """A request whose deadline is its arrival plus its TTFT SLO."""
        return cls(arrival_s, arrival_s + ttft_slo_s, prompt_tokens, max_tokens)


@dataclass(frozen=True)
class BatchQueueConfig:
    """Tunables; fixed per ModelDeployment, not per tick."""

    max_instances: int  # the policy never recommends more batch instances
    quantile: float = 0.95  # of the CLT sum of unknown outputs; higher = more cautious
    group_width_s: float = 60.0  # request-group bucket width on the deadline axis
    prompt_token_weight: float = 0.0  # cost of a prompt token in output tokens

    def __post_init__(self) -> None:
        if self.max_instances < 0:
            raise ValueError("max_instances must be >= 0")
        if not 0.0 < self.quantile < 1.0:
            raise ValueError("quantile must be in (0, 1)")
        if self.group_width_s <= 0.0:
            raise ValueError("group_width_s must be > 0")
        if self.prompt_token_weight < 0.0:
            raise ValueError("prompt_token_weight must be >= 0")


@dataclass(frozen=True)
class BatchQueueContext:
    """What the policy observes at one tick (`now_s` inside, so ticks replay)."""

    now_s: float
    queue: tuple[QueuedBatchRequest, ...]
    instance_tokens_per_s: float  # Θ of one batch instance (capacity profile / load reports)
    batch_instances: int  # batch instances now
    batch_running: int  # requests running on batch instances: retire only at 0
    output_mean_tokens: float  # μ of observed output lengths
    output_std_tokens: float  # sigma of observed output lengths
    mixed_spare_tokens_per_s: float = 0.0  # mixed instances' spare capacity for batch work

    def __post_init__(self) -> None:
        if self.instance_tokens_per_s <= 0.0:
            raise ValueError("instance_tokens_per_s must be > 0")
        if min(self.batch_instances, self.batch_running) < 0:
            raise ValueError("instance and running counts must be >= 0")
        if min(self.output_mean_tokens, self.output_std_tokens) < 0.0:
            raise ValueError("output mean and deviation must be >= 0")
        if self.mixed_spare_tokens_per_s < 0.0:
            raise ValueError("mixed_spare_tokens_per_s must be >= 0")


@dataclass(frozen=True)
class GroupEstimate:
    """One request group at the recommended count, for status and debugging."""

    bucket: int  # floor(deadline / group_width_s): stable across ticks
    deadline_s: float  # earliest deadline in the group
    requests: int
    tokens_ahead: float  # quantile tokens ahead of the group's last request
    wait_s: float  # estimated wait of the group's last request (inf: no throughput)
    slack_s: float  # min over members of deadline - (now + wait); < 0 means a miss
    violated: bool  # counts in BBP
    late: bool  # a member can be met by no count (its deadline has passed)


@dataclass(frozen=True)
class BatchRecommendation:
    """Algorithm 2's answer for one tick."""

    desired_instances: int
    bbp_before: int  # groups expected to miss at the current count
    bbp_after: int  # groups expected to miss at desired_instances
    groups: tuple[GroupEstimate, ...]  # in dispatch order, at desired_instances
    reason: str


@dataclass(frozen=True)
class _Member:
    """A queued request in dispatch order with the quantile tokens ahead of it."""

    request: QueuedBatchRequest
    tokens_ahead: float


def _groups(ctx: BatchQueueContext, cfg: BatchQueueConfig) -> list[list[_Member]]:
    """Request groups in dispatch order, each member with its tokens ahead."""
    ordered = sorted(
        ctx.queue, key=lambda r: (math.floor(r.deadline_s / cfg.group_width_s), r.arrival_s)
    )
    z = NormalDist().inv_cdf(cfg.quantile)
    mean_sum = bound_sum = 0.0
    groups: list[list[_Member]] = []
    bucket: int | None = None
    for k, req in enumerate(ordered):
        quantile = mean_sum + z * ctx.output_std_tokens * math.sqrt(k)
        member = _Member(req, max(0.0, min(bound_sum, quantile)))
        key = math.floor(req.deadline_s / cfg.group_width_s)
        if key != bucket:
            groups.append([])
            bucket = key
        groups[-1].append(member)
        prompt = cfg.prompt_token_weight * req.prompt_tokens
        mean_sum += min(ctx.output_mean_tokens, float(req.max_tokens)) + prompt
        bound_sum += req.max_tokens + prompt
    return groups


def _throughput(ctx: BatchQueueContext, instances: int) -> float:
    return instances * ctx.instance_tokens_per_s + ctx.mixed_spare_tokens_per_s


def _wait(tokens_ahead: float, throughput: float) -> float:
    return tokens_ahead / throughput if throughput > 0.0 else math.inf


def _late(m: _Member, now_s: float) -> bool:
    """No throughput can start this member in time: W > deadline - now for every Θ."""
    slack = m.request.deadline_s - now_s
    return slack < 0.0 or (slack == 0.0 and m.tokens_ahead > 0.0)


def _estimate(
    group: list[_Member], ctx: BatchQueueContext, cfg: BatchQueueConfig, instances: int
) -> GroupEstimate:
    throughput = _throughput(ctx, instances)
    slack = min(m.request.deadline_s - ctx.now_s - _wait(m.tokens_ahead, throughput) for m in group)
    last = group[-1]
    return GroupEstimate(
        bucket=math.floor(last.request.deadline_s / cfg.group_width_s),
        deadline_s=min(m.request.deadline_s for m in group),
        requests=len(group),
        tokens_ahead=last.tokens_ahead,
        wait_s=_wait(last.tokens_ahead, throughput),
        slack_s=slack,
        violated=slack < 0.0,
        late=any(_late(m, ctx.now_s) for m in group),
    )


def _bbp(groups: list[list[_Member]], ctx: BatchQueueContext, instances: int) -> int:
    """Equation 2: groups with a member whose estimated wait exceeds its time left."""
    throughput = _throughput(ctx, instances)
    return sum(
        any(_wait(m.tokens_ahead, throughput) > m.request.deadline_s - ctx.now_s for m in g)
        for g in groups
    )


def _fewest(groups: list[list[_Member]], ctx: BatchQueueContext, cap: int) -> int:
    """Fewest instances, at most `cap`, that bring BBP of the meetable groups to 0.

    Closed form (each member needs Θ >= T_i / time left), then nudged against the exact
    count: float rounding in the division cannot add or drop an instance, and the head
    of the queue (nothing ahead) still needs some throughput to start at all.
    """
    meetable = [[m for m in g if not _late(m, ctx.now_s)] for g in groups]
    meetable = [g for g in meetable if g]
    if not meetable:
        return 0
    members = [m for g in meetable for m in g]
    need = max(
        (m.tokens_ahead / (m.request.deadline_s - ctx.now_s) for m in members if m.tokens_ahead),
        default=0.0,
    )
    spare = ctx.mixed_spare_tokens_per_s
    n = max(0, math.ceil((need - spare) / ctx.instance_tokens_per_s))
    n = min(n, cap)
    while n > 0 and _bbp(meetable, ctx, n - 1) == 0:
        n -= 1
    while n < cap and _bbp(meetable, ctx, n) > 0:
        n += 1
    return n


def decide(ctx: BatchQueueContext, cfg: BatchQueueConfig) -> BatchRecommendation:
    """Algorithm 2: the fewest batch instances with BBP 0, bounded by the maximum."""
    current, cap = ctx.batch_instances, cfg.max_instances
    if not ctx.queue:
        if ctx.batch_running == 0:
            what = f"retire all {current}" if current else "none to retire"
            reason = f"batch queue empty and batch instances idle: {what}"
            return BatchRecommendation(0, 0, 0, (), reason)
        keep = min(current, cap)
        reason = (
            f"batch queue empty; {ctx.batch_running} requests still running on batch "
            f"instances: keep {keep} until idle"
        )
        return BatchRecommendation(keep, 0, 0, (), reason)

    groups = _groups(ctx, cfg)
    before = _bbp(groups, ctx, current)
    late = sum(any(_late(m, ctx.now_s) for m in g) for g in groups)
    needed = cap if late else _fewest(groups, ctx, cap)
    desired = min(max(current, needed), cap)
    after = _bbp(groups, ctx, desired)
    estimates = tuple(_estimate(g, ctx, cfg, desired) for g in groups)

    summary = f"{len(ctx.queue)} queued batch requests in {len(groups)} groups"
    if late:
        reason = (
            f"{summary}: {late} groups already past their TTFT deadline (counted as "
            f"violated, no count can meet them): scale to max {cap}"
        )
    elif after == 0 and desired == current:
        reason = f"{summary} meet their deadlines with {current} batch instances (BBP 0)"
    elif after == 0 and desired > current:
        reason = (
            f"{summary}: BBP {before} at {current} batch instances; "
            f"fewest with BBP 0: {desired} (+{desired - current})"
        )
    elif after == 0:
        reason = f"{summary} meet their deadlines at max {cap} (clamped from {current})"
    else:
        reason = f"{summary}: BBP {before} at {current}; capped at max {cap}, BBP still {after}"
    return BatchRecommendation(desired, before, after, estimates, reason)
