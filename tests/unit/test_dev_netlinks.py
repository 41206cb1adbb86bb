"""`ensure_switches` replaces a link's qdisc only where its rate differs (no `ip`/`tc` run)."""

from __future__ import annotations

import pytest

from cascade_dev import netlinks
from cascade_dev.topology import ClusterPlan, link_names, plan_cluster


def _ensure(
    monkeypatch: pytest.MonkeyPatch,
    plan: ClusterPlan,
    have: set[str],
    rates: dict[str, int],
    ran: list[tuple[str, ...]] | None = None,
) -> list[tuple[str, ...]]:
    """Run ensure_switches against a fabric that has `have` shaped at `rates`; the
    `tc` commands it ran (every command in `ran`, if given)."""
    ran = [] if ran is None else ran

    def sh(*cmd: str, check: bool = True) -> str:
        ran.append(cmd)
        return ""

    monkeypatch.setattr(netlinks, "sh", sh)
    monkeypatch.setattr(netlinks, "links", lambda: set(have))
    monkeypatch.setattr(netlinks, "tbf_rates", lambda: dict(rates))
    monkeypatch.setattr(netlinks, "_sysctl", lambda key, value: None)
    monkeypatch.setattr(netlinks, "_disable_bridge_netfilter", lambda: None)
    netlinks.ensure_switches(plan)
    return [cmd for cmd in ran if cmd[0] == "tc"]


def _shaped(plan: ClusterPlan) -> dict[str, int]:
    rates = {lf.up_veth: lf.spine_mbit for lf in plan.leaves}
    rates |= {lf.down_veth: lf.spine_mbit for lf in plan.leaves}
    rates |= {n.up_veth: n.nic_out_mbit for n in plan.nodes}
    return rates | {n.down_veth: n.nic_in_mbit for n in plan.nodes}


def test_matching_rates_touch_no_qdisc(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_cluster(2, nic_mbit=200)
    assert _ensure(monkeypatch, plan, set(link_names(plan)), _shaped(plan)) == []


def test_only_links_at_another_rate_are_reshaped(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_cluster(2, nic_mbit=200)
    tc = _ensure(monkeypatch, plan, set(link_names(plan)), {**_shaped(plan), "cxnd1": 1000})
    assert [cmd[4] for cmd in tc] == ["cxnd1"]
    assert tc[0][5:9] == ("root", "tbf", "rate", "200mbit")


def test_a_recreated_pair_is_shaped_at_both_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_cluster(2, nic_mbit=200)
    tc = _ensure(monkeypatch, plan, set(link_names(plan)) - {"cxnu1"}, _shaped(plan))
    assert [cmd[4] for cmd in tc] == ["cxnu1", "cxnd1"]


def test_every_switch_link_and_running_pod_gets_the_fabric_mtu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = plan_cluster(2, nic_mbit=200, mtu=4200)
    ran: list[tuple[str, ...]] = []
    monkeypatch.setattr(netlinks, "netns_names", lambda: {"cxp-abc", "other"})
    _ensure(monkeypatch, plan, set(link_names(plan)), _shaped(plan), ran)
    set_mtu = {cmd[-3] if cmd[1] == "-n" else cmd[3] for cmd in ran if cmd[-2:] == ("mtu", "4200")}
    assert set(link_names(plan)) <= set_mtu  # bridges and both ends of every shaped pair
    assert {"cxvabc", "eth0"} <= set_mtu  # the running pod's veth, both ends
    assert not any("other" in cmd for cmd in ran)
