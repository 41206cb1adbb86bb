"""Image -> executable mapping of the node agent."""

from __future__ import annotations

import pytest

from cascade_dev.nodeagent import images

BIN = "/venv/bin"
EXISTING = {
    "/venv/bin/cascade-worker",
    "/venv/bin/cascade-gateway",
    "/venv/bin/cascade-operator",
    "/venv/bin/python",
}
HOST = {"sleep": "/usr/bin/sleep", "sh": "/bin/sh", "python3": "/usr/bin/python3"}


def resolve(
    image: str, command: list[str] | None = None, args: list[str] | None = None
) -> images.Resolved | images.Unavailable:
    return images.resolve(
        image, command, args, bin_dir=BIN, which=HOST.get, is_exec=EXISTING.__contains__
    )


@pytest.mark.parametrize(
    ("image", "name"),
    [
        ("ghcr.io/cascade-dev/cascade-worker:0.1.0", "cascade-worker"),
        ("cascade-worker", "cascade-worker"),
        ("localhost:5000/x/cascade-gateway:dev", "cascade-gateway"),
        ("registry.example.com:443/team/cascade-operator@sha256:abcd", "cascade-operator"),
        ("reg/cascade-worker:1.2@sha256:ffff", "cascade-worker"),
        ("busybox", "busybox"),
        ("docker.io/library/busybox:1.36", "busybox"),
    ],
)
def test_image_name_strips_registry_tag_digest(image: str, name: str) -> None:
    assert images.image_name(image) == name


def test_known_images_come_from_constants() -> None:
    assert set(images.KNOWN_IMAGES) == {"cascade-worker", "cascade-gateway", "cascade-operator"}


def test_known_image_runs_console_script_with_args() -> None:
    r = resolve("ghcr.io/cascade-dev/cascade-worker:0.1.0", args=["--port", "8080"])
    assert isinstance(r, images.Resolved)
    assert r.argv == ["/venv/bin/cascade-worker", "--port", "8080"]
    assert r.image_id == "cascade://cascade-worker"


def test_known_image_by_digest() -> None:
    r = resolve("ghcr.io/cascade-dev/cascade-operator@sha256:0123")
    assert isinstance(r, images.Resolved)
    assert r.argv == ["/venv/bin/cascade-operator"]


def test_command_replaces_entrypoint_and_prefers_venv_bin() -> None:
    r = resolve("ghcr.io/cascade-dev/cascade-worker:0.1.0", ["python", "-m", "x"], ["--y"])
    assert isinstance(r, images.Resolved)
    assert r.argv == ["/venv/bin/python", "-m", "x", "--y"]


def test_unknown_image_with_host_command() -> None:
    r = resolve("busybox", ["sleep", "3600"])
    assert isinstance(r, images.Resolved)
    assert r.argv == ["/usr/bin/sleep", "3600"]
    assert r.image_id == "cascade-host:///usr/bin/sleep"


def test_unknown_image_args_only_run_as_command() -> None:
    r = resolve("busybox:1.36", None, ["sh", "-c", "echo hi"])
    assert isinstance(r, images.Resolved)
    assert r.argv == ["/bin/sh", "-c", "echo hi"]


def test_unknown_image_without_command_is_err_image_pull() -> None:
    r = resolve("nginx:1.25")
    assert isinstance(r, images.Unavailable)
    assert r.reason == "ErrImagePull"
    assert "nginx:1.25" in r.message
    for known in images.KNOWN_IMAGES:
        assert known in r.message


def test_unknown_image_with_missing_command() -> None:
    r = resolve("nginx", ["nginx", "-g", "daemon off;"])
    assert isinstance(r, images.Unavailable)
    assert "'nginx'" in r.message


def test_known_image_not_installed() -> None:
    r = images.resolve(
        "cascade-worker:1", None, None, bin_dir="/nowhere", which=HOST.get, is_exec=lambda p: False
    )
    assert isinstance(r, images.Unavailable)
    assert "not installed" in r.message


def test_absolute_and_relative_commands() -> None:
    ok = images.resolve(
        "busybox",
        ["/venv/bin/python"],
        None,
        bin_dir=BIN,
        which=HOST.get,
        is_exec=EXISTING.__contains__,
    )
    assert isinstance(ok, images.Resolved) and ok.argv == ["/venv/bin/python"]
    rel = resolve("busybox", ["./run.sh"])
    assert isinstance(rel, images.Unavailable)
