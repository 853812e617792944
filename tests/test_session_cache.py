"""build_once: a session's shared result is built by one process, and a failed build is not retried."""

from __future__ import annotations

import uuid

import pytest
from session_cache import build_once, session_folder


def test_a_result_is_built_once_and_then_read(tmp_path_factory):
    name, builds = f"selftest-{uuid.uuid4().hex}", []

    def build(folder):
        builds.append(folder)
        (folder / "result.txt").write_text("built")

    first = build_once(tmp_path_factory, name, build)
    second = build_once(tmp_path_factory, name, build)
    assert first == second == session_folder(tmp_path_factory) / name
    assert builds == [first] and (first / "result.txt").read_text() == "built"


def test_a_failed_build_fails_the_next_caller_at_once_with_its_error(tmp_path_factory):
    name, builds = f"selftest-{uuid.uuid4().hex}", []

    def build(folder):
        builds.append(folder)
        raise RuntimeError("torchrun exited 1")

    with pytest.raises(RuntimeError, match="torchrun exited 1"):
        build_once(tmp_path_factory, name, build)
    with pytest.raises(
        pytest.fail.Exception, match=rf"(?s)building {name} failed in another worker:.*torchrun exited 1"
    ):
        build_once(tmp_path_factory, name, build)
    assert len(builds) == 1
