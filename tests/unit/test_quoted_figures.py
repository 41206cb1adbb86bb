"""The figures README.md and bench/README.md quote, recomputed from their committed JSON.

A quoted figure lives in a table whose header is `| figure | value | JSON |`: a label,
the value as the text quotes it, and a link to the document under bench/results/ that
it comes from. FIGURES maps each label to a function that computes the value from that
document, formatted (rounded) as quoted. The test fails when a quoted value differs from
what its JSON gives, when a row has no function (a new figure needs one here), and when
a function has no row left (a figure dropped from the docs goes from here too).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
DOCS = (ROOT / "README.md", ROOT / "bench" / "README.md")
HEADER = "| figure | value | JSON |"
LINK = re.compile(r"\]\(([^)\s]+\.json)\)")

Doc = dict[str, Any]
Figure = Callable[[Doc], str]


# --- formats, as the docs write numbers ---------------------------------------------


def pct(share: float) -> str:
    return f"{100 * share:.1f} %"


def whole(value: float) -> str:
    return f"{value:,.0f}"


def times(ratio: float, digits: int = 3) -> str:
    return f"{ratio:.{digits}f}x"


# --- cascade bench multicast ------------------------------------------------------


def multicast(method: str, receivers: int, model_mb: float, nic_mbit: int) -> Figure:
    """Each run's slowest receiver over M/B, with the host's CPU busy share."""

    def figure(doc: Doc) -> str:
        p = doc["params"]
        setup = (p["nodes"] - p["k"], p["model_mb"], p["nic_mbit"])
        if setup != (receivers, model_mb, nic_mbit):
            raise ValueError(f"the JSON is for receivers, MB, Mbit/s = {setup}")
        runs = doc["results"][method]["runs"]
        return ", ".join(
            f"{times(r['completion_s'] / doc['bound_s'])} ({100 * r['cpu']['host_busy']:.0f} %)"
            for r in runs
        )

    return figure


# --- cascade bench scaleup ----------------------------------------------------------

MODELS = {"6.6 MiB": "tiny-llama", "199.4 MiB": "llama-200mb", "1000.1 MiB": "llama-1gb"}
TOLERANCE = 0.15  # bench/cascade_bench/scaleup.py


def scaleup_ratios(doc: Doc, size: str) -> list[float]:
    """measured / predicted of each Completed plan's slowest network receiver, in the
    newest set (the last in the document) that ran the model of that size."""
    model = MODELS[size]
    found: list[float] = []
    for runs in doc["sets"].values():
        ratios = [
            p["network"]["measured_s"] / p["network"]["predicted_s"]
            for run in runs
            if Path(run["doc"]["model_path"]).name == model
            for p in run["doc"]["plans"]
            if p["phase"] == "Completed" and p.get("network") and p["network"].get("ratio")
        ]
        found = ratios or found
    if not found:
        raise ValueError(f"no set ran {model}")
    return found


def scaleup_within(size: str) -> Figure:
    def figure(doc: Doc) -> str:
        ratios = scaleup_ratios(doc, size)
        within = sum(abs(r - 1) <= TOLERANCE for r in ratios)
        return f"{within} of {len(ratios)}"

    return figure


def scaleup_range(size: str) -> Figure:
    def figure(doc: Doc) -> str:
        ratios = scaleup_ratios(doc, size)
        return f"{min(ratios):.3f}-{max(ratios):.3f}"

    return figure


def scaleup_each(size: str) -> Figure:
    return lambda doc: ", ".join(f"{r:.3f}" for r in scaleup_ratios(doc, size))


# --- cascade bench autoscale (cluster runs, then cascade simulate on their arrivals) --

POLICIES = ("cascade", "fixed_max", "kpa")


def autoscale_attainment(doc: Doc) -> str:
    return " / ".join(pct(doc["runs"][r]["slo_attainment"]["interactive"]) for r in POLICIES)


def autoscale_instance_seconds(doc: Doc) -> str:
    return " / ".join(whole(doc["runs"][r]["instance_seconds"]) for r in POLICIES)


def autoscale_share(doc: Doc) -> str:
    runs = doc["runs"]
    return pct(runs["cascade"]["instance_seconds"] / runs["fixed_max"]["instance_seconds"])


def autoscale_batch(doc: Doc) -> str:
    run = doc["runs"]["cascade"]
    return f"{run['ttft_met']['batch']} of {run['requests']['batch']}"


def autoscale_simulated(doc: Doc) -> str:
    measured, simulated = doc["runs"]["cascade"], doc["simulate"]["runs"]["cascade"]
    points = 100 * (
        simulated["slo_attainment"]["interactive"] - measured["slo_attainment"]["interactive"]
    )
    rel = simulated["instance_seconds"] / measured["instance_seconds"] - 1
    return f"{points:+.1f} points, {100 * rel:+.1f} %"


def evaluation_case(doc: Doc) -> str:
    """An evaluation document of one case: Cascade's instance-seconds over fixed_max's,
    and its interactive attainment."""
    (case,) = doc["cases"]
    runs = case["document"]["runs"]
    share = runs["cascade"]["instance_seconds"] / runs["fixed_max"]["instance_seconds"]
    return f"{times(share, 2)} ({pct(runs['cascade']['slo_attainment']['interactive'])})"


# --- cascade bench burst ------------------------------------------------------------


def burst_p99_ratio(doc: Doc) -> str:
    modes = doc["modes"]
    base = modes["stop_the_world"]["ttft_p99_s"]
    return " / ".join(f"{modes[m]['ttft_p99_s'] / base:.2f}" for m in ("pipelines", "cooperative"))


def burst_p99(doc: Doc) -> str:
    modes = doc["modes"]
    return (
        " / ".join(f"{modes[m]['ttft_p99_s']:.2f}" for m in ("stop_the_world", "prescaled")) + " s"
    )


def burst_first_token(doc: Doc) -> str:
    modes = doc["modes"]
    order = ("stop_the_world", "pipelines", "cooperative")
    return " / ".join(f"{modes[m]['first_new_token_s']:.1f}" for m in order) + " s"


# --- cascade bench coldstart --------------------------------------------------------


def coldstart_seconds(doc: Doc) -> str:
    modes = doc["modes"]
    return " / ".join(f"{modes[m]['to_first_token_s']:.2f}" for m in ("storage", "pool")) + " s"


def coldstart_pool_share(doc: Doc) -> str:
    modes = doc["modes"]
    return times(modes["pool"]["to_first_token_s"] / modes["storage"]["to_first_token_s"], 2)


def coldstart_peer(doc: Doc) -> str:
    return f"{doc['modes']['peer']['to_first_token_s']:.2f} s"


# --- cascade bench capacity ---------------------------------------------------------


def capacity_decode(doc: Doc) -> str:
    speed = {p["batch"]: p["tokens_per_s"] for p in doc["curve"]}
    return " / ".join(whole(speed[b]) for b in (1, 8, 32))


def capacity_prefill(doc: Doc) -> str:
    return whole(doc["prefill"]["tokens_per_s"])


def capacity_one_vs_two(doc: Doc) -> str:
    s = doc["scaling"]
    return f"{s['one']:.1f} vs {s['two']:.1f} ({times(s['two'] / s['one'], 2)})"


# --- cascade bench engine -----------------------------------------------------------


def engine(phase: str, batch: int, prompt: int, threads: int = 1, ratio: bool = False) -> Figure:
    """The engine (eager) vs transformers, tokens/s (and their ratio: the median of the
    per-round ratios and their range where the document has them, else the ratio of
    the medians); rows of documents with several thread counts say theirs, older
    documents have one at the top."""

    def figure(doc: Doc) -> str:
        rows = {
            r["path"]: r
            for r in doc["rows"]
            if (r["phase"], r["batch"], r["prompt"]) == (phase, batch, prompt)
            and r.get("threads", doc["threads"]) == threads
        }
        eager, hf = rows["eager"]["tokens_per_s"], rows["transformers"]["tokens_per_s"]
        text = f"{whole(eager)} vs {whole(hf)}"
        if not ratio:
            return text
        pair = rows["eager"].get("vs_transformers")  # per-round ratios, where recorded
        if pair is None:
            return f"{text} ({times(eager / hf, 2)})"
        spread = f"{pair['min']:.2f}-{pair['max']:.2f}"
        return f"{text} (paired {times(pair['median'], 2)}, {spread})"

    return figure


# --- cascade bench plan -------------------------------------------------------------


def plan_ms(nodes: int, field: str = "plan_ms", digits: int = 1) -> Figure:
    """Median over the document's runs of one case's figure (auto, 512 targets)."""

    def figure(doc: Doc) -> str:
        values = [
            c[field]
            for run in doc["runs"]
            for c in run["cases"]
            if (c["nodes"], c["targets"], c["strategy"]) == (nodes, 512, "auto")
        ]
        return f"{statistics.median(values):.{digits}f} ms"

    return figure


FIGURES: dict[str, Figure] = {
    "multicast 1 → 2 (100 MB, 100 Mbit/s), chain: time ÷ M/B (host busy)": multicast(
        "chain", 2, 100, 100
    ),
    "multicast 1 → 4 (100 MB, 100 Mbit/s), chain: time ÷ M/B (host busy)": multicast(
        "chain", 4, 100, 100
    ),
    "multicast 1 → 8 (100 MB, 100 Mbit/s), chain: time ÷ M/B (host busy)": multicast(
        "chain", 8, 100, 100
    ),
    "multicast 1 → 15 (100 MB, 100 Mbit/s), chain: time ÷ M/B (host busy)": multicast(
        "chain", 15, 100, 100
    ),
    "multicast 1 → 2 (100 MB, 100 Mbit/s), binomial: time ÷ M/B (host busy)": multicast(
        "binomial", 2, 100, 100
    ),
    "multicast 1 → 4 (100 MB, 100 Mbit/s), binomial: time ÷ M/B (host busy)": multicast(
        "binomial", 4, 100, 100
    ),
    "multicast 1 → 8 (100 MB, 100 Mbit/s), binomial: time ÷ M/B (host busy)": multicast(
        "binomial", 8, 100, 100
    ),
    "multicast 1 → 15 (100 MB, 100 Mbit/s), binomial: time ÷ M/B (host busy)": multicast(
        "binomial", 15, 100, 100
    ),
    "multicast 1 → 7 (200 MB, 200 Mbit/s), chain: time ÷ M/B (host busy)": multicast(
        "chain", 7, 200, 200
    ),
    "scale-up, 6.6 MiB: plans within 15 % of the prediction": scaleup_within("6.6 MiB"),
    "scale-up, 6.6 MiB: measured ÷ predicted, lowest-highest": scaleup_range("6.6 MiB"),
    "scale-up, 199.4 MiB: measured ÷ predicted": scaleup_each("199.4 MiB"),
    "scale-up, 1000.1 MiB: measured ÷ predicted": scaleup_each("1000.1 MiB"),
    "autoscale, interactive SLO attainment: Cascade / fixed at max / KPA": autoscale_attainment,
    "autoscale, instance-seconds: Cascade / fixed at max / KPA": autoscale_instance_seconds,
    "autoscale, instance-seconds: Cascade ÷ fixed at max": autoscale_share,
    "autoscale, product defaults, Poisson: Cascade's instance-seconds ÷ fixed at max's "
    "(interactive attainment)": evaluation_case,
    "autoscale, product defaults, busiest window: Cascade's instance-seconds ÷ fixed at "
    "max's (interactive attainment)": evaluation_case,
    "autoscale, batch requests within their TTFT SLO (Cascade)": autoscale_batch,
    "autoscale, `cascade simulate` minus the cluster (Cascade): attainment, instance-seconds": (
        autoscale_simulated
    ),
    "burst P99 TTFT ÷ stop-the-world's: pipelines / cooperative (goal ≤ 0.5)": burst_p99_ratio,
    "burst P99 TTFT: stop-the-world / prescaled": burst_p99,
    "burst, decision → first token of new capacity: stop-the-world / pipelines / cooperative": (
        burst_first_token
    ),
    "cold start 0 → 1, to first token: storage / host copy": coldstart_seconds,
    "cold start 0 → 1, to first token: host copy ÷ storage": coldstart_pool_share,
    "cold start 1 → 2 from a serving peer, to first token": coldstart_peer,
    "capacity at 0.2 core, decode tok/s at batch 1 / 8 / 32": capacity_decode,
    "capacity at 0.2 core, prefill tok/s (512-token prompt)": capacity_prefill,
    "capacity, 1 vs 2 instances, tok/s (over 2x: a defect to find)": capacity_one_vs_two,
    "engine vs transformers, decode tok/s at batch 1 (4 x 512, one thread)": engine(
        "decode", 1, 16
    ),
    "engine vs transformers, decode tok/s at batch 16 (4 x 512, one thread)": engine(
        "decode", 16, 16
    ),
    "engine vs transformers, prefill tok/s of a 512-token prompt (4 x 512, one thread)": engine(
        "prefill", 1, 512
    ),
    "SmolLM2-135M, engine vs transformers, decode tok/s at batch 1 (one thread)": engine(
        "decode", 1, 16, ratio=True
    ),
    "SmolLM2-135M, engine vs transformers, decode tok/s at batch 16 (one thread)": engine(
        "decode", 16, 16, ratio=True
    ),
    "SmolLM2-135M, engine vs transformers, decode tok/s at batch 64 (one thread)": engine(
        "decode", 64, 16, ratio=True
    ),
    "SmolLM2-135M, engine vs transformers, prefill tok/s of a 512-token prompt (one thread)": (
        engine("prefill", 1, 512, ratio=True)
    ),
    "SmolLM2-135M, engine vs transformers, decode tok/s at batch 16 (two threads)": engine(
        "decode", 16, 16, threads=2, ratio=True
    ),
    "plan, 1,000 nodes / 512 targets, auto: median of the runs": plan_ms(1000),
    "plan, 10,000 nodes / 512 targets, auto: median of the runs": plan_ms(10000),
    "plan, a node event on the index at 10,000 nodes: median of the runs": plan_ms(
        10000, "event_ms", 3
    ),
}


def quoted_rows() -> list[tuple[str, str, str, Path]]:
    """(doc, label, value, JSON path) of every row of every figures table."""
    rows: list[tuple[str, str, str, Path]] = []
    for doc in DOCS:
        name = str(doc.relative_to(ROOT))
        lines = doc.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() != HEADER:
                continue
            for row in lines[i + 2 :]:  # past the |---| line
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip().strip("|").split("|")]
                assert len(cells) == 3, f"{name}: a figures row needs 3 cells: {row}"
                label, value, link = cells
                target = LINK.search(link)
                assert target, f"{name}: no JSON link in {row}"
                rows.append((name, label, value, (doc.parent / target[1]).resolve()))
    return rows


ROWS = quoted_rows()


def test_both_readmes_quote_their_figures_in_tables() -> None:
    assert sum(1 for doc, *_ in ROWS if doc == "README.md") >= 5
    assert sum(1 for doc, *_ in ROWS if doc == "bench/README.md") >= 20


@pytest.mark.parametrize(
    ("doc", "label", "value", "path"), ROWS, ids=[f"{d}: {label}" for d, label, _, _ in ROWS]
)
def test_a_quoted_figure_is_what_its_json_gives(
    doc: str, label: str, value: str, path: Path
) -> None:
    assert path.parent == RESULTS, f"{doc}: {path} is not under bench/results/"
    assert label in FIGURES, f"{doc}: no function computes {label!r}; add one to FIGURES"
    computed = FIGURES[label](json.loads(path.read_text()))
    assert computed == value, f"{doc}: {label!r} quotes {value!r}; {path.name} gives {computed!r}"


def test_every_figure_function_is_quoted() -> None:
    unused = set(FIGURES) - {label for _, label, _, _ in ROWS}
    assert not unused, f"figures no doc quotes any more: {sorted(unused)}"
