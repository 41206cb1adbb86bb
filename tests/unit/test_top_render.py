"""`cascade top`'s frame: a golden frame, progress bars, and every terminal size from
0x0 up drawn without a line wider than the terminal or a frame taller than it."""

# ruff: noqa: E501 (the golden frame is as wide as the frame)

from __future__ import annotations

from datetime import UTC, datetime

from cascade_cli import top_model as tm
from cascade_cli.top_render import render

NOW = datetime(2026, 11, 25, 12, 0, 30, tzinfo=UTC)
MIB = 1 << 20


def target(pod: str, got: int, complete: bool = False) -> tm.TargetView:
    return tm.TargetView(
        pod=pod, bytes_received=got * MIB, bytes_total=8 * MIB, blocks_received=got,
        blocks_total=8, complete=complete, predicted_s=19.5,
        measured_s=17.0 if complete else None,
    )  # fmt: skip


def snapshot(scope: str = "demo", error: str = "") -> tm.Snapshot:
    gateway = tm.GatewayView(
        classes={
            "interactive": tm.ClassView(queued=2, in_flight=5, ttft_p50_s=0.012, ttft_p99_s=1.5),
            "batch": tm.ClassView(queued=7, in_flight=1),
        },
        backends_ready=1,
        backends_total=3,
    )
    llama = tm.DeploymentView(
        namespace="demo", name="llama", spec_replicas=3, ready=1, loading=2,
        roles={"mixed": (1, 3)}, modes={"loading": 2, "local": 1},
        autoscaler="external (kubectl scale, HPA, KEDA)", gateway=gateway,
    )  # fmt: skip
    cold = tm.DeploymentView("demo", "cold", gateway=tm.GatewayView(error="no gateway pod"))
    running = tm.PlanView(
        "demo", "llama-g2-abc", "llama", "Running", "chain",
        [target("llama-1", 4), target("llama-2", 8, complete=True)],
        elapsed_s=3.25, predicted_s=20.0, measured_s=None, created="2",
    )  # fmt: skip
    done = tm.PlanView(
        "demo", "llama-g1-def", "llama", "Completed", "binomial", [target("llama-1", 8, True)],
        elapsed_s=18.0, predicted_s=20.0, measured_s=17.2, created="1",
    )  # fmt: skip
    return tm.Snapshot(NOW, scope, [cold, llama], [done, running], error=error)


GOLDEN = """\
cascade top   namespace demo   every 1s   12:00:30   q quit

DEPLOYMENTS (2)
NAME   SPEC  READY  LOADING  ROLES ready/pods  MODES               AUTOSCALER
cold      0      0        0  -                 -                   -
  gateway: no gateway pod
llama     3      1        2  mixed 1/3         loading 2  local 1  external (kubectl scale, HPA, KEDA)
  gateway: interactive queue 2 running 5 ttft p50/p99 12ms/1.50s  |  batch queue 7 running 1 ttft p50/p99 -/-  |  backends 1/3 ready

SCALEPLANS IN FLIGHT (1)
llama-g2-abc (llama)  Running  chain  targets 1/2  elapsed 3.25s  predicted 20.0s
  llama-1  [██████████░░░░░░░░░░]  50%    4.0 MiB/8.0 MiB  blocks     4/8  predicted  19.5s  measured -
  llama-2  [████████████████████] done    8.0 MiB/8.0 MiB  blocks     8/8  predicted  19.5s  measured 17.0s

RECENT SCALEPLANS
llama-g1-def (llama)  Completed  binomial  targets 1  predicted 20.0s  measured 17.2s (0.86x)"""


def test_golden_frame() -> None:
    assert "\n".join(render(snapshot(), 200, None, 1.0)) == GOLDEN


def test_all_namespaces_names_each_row_with_its_namespace() -> None:
    text = "\n".join(render(snapshot(scope=""), 200))
    assert "all namespaces" in text
    assert "\ndemo/llama " in text and "demo/llama-g2-abc (llama)  Running" in text


def test_a_failed_read_is_said_under_the_header() -> None:
    lines = render(snapshot(error="API server unreachable: MaxRetryError"), 120)
    assert lines[1] == "! API server unreachable: MaxRetryError"


def test_no_plans_in_flight_says_none() -> None:
    snap = tm.Snapshot(NOW, "demo")
    assert render(snap, 80) == [
        "cascade top   namespace demo   12:00:30   q quit",
        "",
        "DEPLOYMENTS (0)   none",
        "",
        "SCALEPLANS IN FLIGHT (0)   none",
    ]


def test_every_size_fits_the_terminal() -> None:
    snap = snapshot()
    full = render(snap, 1000)
    for width in range(0, 170, 7):
        for height in (None, 0, 1, 2, 5, 12, 40):
            lines = render(snap, width, height)
            assert all(len(line) <= width for line in lines), (width, height)
            if height is not None:
                assert len(lines) <= height
                if width and height and height < len(full):
                    assert lines[-1].startswith("... "[:width])
    narrow = render(snap, 20)
    assert narrow[3] == "NAME   SPEC  READY …"  # cut with an ellipsis, not wrapped


def test_a_short_terminal_says_how_much_it_left_out() -> None:
    lines = render(snapshot(), 200, 6)
    assert len(lines) == 6
    assert (
        lines[-1]
        == f"... {len(render(snapshot(), 200)) - 5} more lines (a taller terminal shows them)"
    )
