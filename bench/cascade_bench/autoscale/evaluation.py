"""The autoscale comparison over an evaluation set instead of one window.

`cascade bench autoscale --windows busiest,median,quietest --synthetic poisson,gamma:2`
runs the same comparison (the same manifest, harness and runs) once per case and keeps
every case's document whole, with one overall row per case: the figures the goals are
judged on and how many goals held. Cases are trace windows chosen by windows.py's rule
and synthetic traces (synthetic.py) written beside the output, so a case can be rerun
alone with `--trace`. The comparison itself is `run.run` or `run.dry_run`, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cascade_bench.autoscale.synthetic import ArrivalProcess, synthetic_trace, to_csv
from cascade_bench.autoscale.windows import PICKS, TUNING, evaluation_windows, tuning_windows
from cascade_bench.replay.trace import load_trace

OWNERS = ("cascade", "fixed_max", "kpa")


@dataclass(frozen=True)
class Case:
    name: str
    trace: Path
    start_s: float
    duration_s: float
    rule: str  # how it was chosen, for the report


def window_cases(trace: Path, duration_s: float, picks: Sequence[str]) -> list[Case]:
    """The picked windows of `trace` (windows.py's rule over whole windows of `duration_s`);
    `tuning` stands for every window the other picks leave."""
    unknown = [p for p in picks if p not in (*PICKS, TUNING)]
    if unknown:
        raise ValueError(f"--windows: {unknown} not among {', '.join((*PICKS, TUNING))}")
    loaded = load_trace(trace)
    chosen = {w.name: [w] for w in evaluation_windows(loaded, duration_s)}
    chosen[TUNING] = tuning_windows(loaded, duration_s)
    missing = [p for p in picks if not chosen.get(p)]
    if missing:
        raise ValueError(f"{trace}: too few whole {duration_s:g} s windows for {missing}")
    return [
        Case(
            f"{w.name}@{w.start_s:g}s",
            trace,
            w.start_s,
            duration_s,
            f"{w.name} of the trace's whole {duration_s:g} s windows by requests "
            f"({w.requests}, {w.rate_per_s:.2f}/s)",
        )
        for p in picks
        for w in chosen[p]
    ]


def parse_synthetic(text: str) -> float:
    """`poisson` -> cv 1; `gamma:CV` -> CV."""
    if text == "poisson":
        return 1.0
    kind, _, cv = text.partition(":")
    try:
        value = float(cv)
    except ValueError:
        value = -1.0
    if kind != "gamma" or value <= 0:
        raise ValueError(f"--synthetic: {text!r} is neither poisson nor gamma:CV (e.g. gamma:2)")
    return value


def synthetic_cases(
    specs: Sequence[str], lengths: Path, duration_s: float, seed: int, out_dir: Path
) -> list[Case]:
    """One synthetic trace per spec, at the length trace's mean arrival rate (the bench
    scales every load to the same peak anyway), written to `out_dir`."""
    source = load_trace(lengths)
    if source.span_s <= 0:
        raise ValueError(f"{lengths}: needs requests over a time span to take a rate from")
    rate = len(source.rows) / source.span_s
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = []
    for spec in specs:
        process = ArrivalProcess(rate, parse_synthetic(spec), duration_s, seed)
        path = out_dir / f"{process.name}.csv"
        path.write_text(to_csv(synthetic_trace(process, source)))
        rule = f"Gamma gaps, CV {process.cv:g}, {rate:.2f}/s, lengths from {lengths.name}"
        cases.append(Case(spec, path, 0.0, duration_s, rule))
    return cases


def _rows(doc: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """The measured runs, or the simulated ones in a dry run."""
    if doc["runs"]:
        return doc["runs"], "measured"
    return doc["simulate"]["runs"], "simulated"


def overall_row(name: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    runs, source = _rows(doc)

    def att(owner: str) -> float | None:
        row = runs.get(owner)
        return None if row is None else row["slo_attainment"].get("interactive")

    def cost(owner: str) -> float | None:
        row = runs.get(owner)
        return None if row is None else row["instance_seconds"]

    def share(a: float | None, b: float | None) -> float | None:
        return None if a is None or not b else a / b

    judged = [g for g in doc["goals"] if g["holds"] is not None]
    return {
        "case": name,
        "source": source,
        "attainment": {o: att(o) for o in OWNERS},
        "instance_seconds": {o: cost(o) for o in OWNERS},
        "cascade_vs_fixed_max": share(cost("cascade"), cost("fixed_max")),
        "cascade_vs_kpa": share(cost("cascade"), cost("kpa")),
        "goals_held": sum(bool(g["holds"]) for g in judged),
        "goals_judged": len(judged),
    }


def evaluate(cases: Sequence[Case], compare: Callable[[Case], dict[str, Any]]) -> dict[str, Any]:
    """`compare(case)` is one bench document; the set's document holds them all."""
    docs = [(case, compare(case)) for case in cases]
    return {
        "benchmark": "autoscale-evaluation",
        "cases": [{"case": _case_doc(c), "document": d} for c, d in docs],
        "overall": [overall_row(c.name, d) for c, d in docs],
    }


def file_name(case: str) -> str:
    """A case's name as a file name part: busiest@480s -> busiest-480s, gamma:2 -> gamma-2."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in case)


def _case_doc(case: Case) -> dict[str, Any]:
    return {**asdict(case), "trace": str(case.trace)}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def overall_table(doc: Mapping[str, Any]) -> str:
    head = ["case", "rows", "att cascade", "fixed_max", "kpa", "inst-s/fixed_max", "/kpa", "goals"]
    rows = [head]
    for r in doc["overall"]:
        a = r["attainment"]
        rows.append([
            r["case"], r["source"], _pct(a["cascade"]), _pct(a["fixed_max"]), _pct(a["kpa"]),
            _x(r["cascade_vs_fixed_max"]), _x(r["cascade_vs_kpa"]),
            f"{r['goals_held']}/{r['goals_judged']}",
        ])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(["interactive SLO attainment (%), instance-seconds ratios", *lines])
