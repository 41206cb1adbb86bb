"""One reconcile at a time per deployment; a call that finds one waiting returns."""

from __future__ import annotations

import threading

from cascade_operator.serial import Serial


def test_a_burst_coalesces_into_the_call_already_waiting() -> None:
    serial, ran = Serial(), []
    inside, release = threading.Event(), threading.Event()

    def first() -> None:
        inside.set()
        assert release.wait(10)
        ran.append("first")

    t1 = threading.Thread(target=serial.run, args=("md", first))
    t1.start()
    assert inside.wait(10)
    # A second call waits for its turn: it will read after every change so far.
    t2 = threading.Thread(target=serial.run, args=("md", lambda: ran.append("waiter")))
    t2.start()
    while "md" not in serial._waiting:
        threading.Event().wait(0.001)
    # More calls return at once, leaving the work to the waiter; other keys do not wait.
    assert serial.run("md", lambda: ran.append("third")) is False
    assert serial.run("other", lambda: ran.append("other")) is True
    # A call that must run (an autoscaler tick) is not coalesced.
    t3 = threading.Thread(
        target=serial.run, args=("md", lambda: ran.append("tick")), kwargs={"coalesce": False}
    )
    t3.start()
    release.set()
    for t in (t1, t2, t3):
        t.join(10)
    assert ran[:2] == ["other", "first"] and sorted(ran[2:]) == ["tick", "waiter"]
    assert serial.run("md", lambda: ran.append("later")) is True  # nobody waits now
