"""Issue 28 item 7: ``tooltrain export RUN_DIR --push-to-hub REPO [--private]`` uploads the finished export through
huggingface_hub, here to a local stub of the Hub's endpoints (create repo, preupload, commit) that
``huggingface_hub.constants.ENDPOINT`` points at: never the network. A push that cannot begin (a bad repo id, offline
mode, no token) exports nothing; one that fails later (authentication, the network, no answer) is one ``error:`` line
naming the repo and the reason, exit 2, the export kept."""

from __future__ import annotations

import base64
import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from train.cli import main
from train.engine import hub_push

TOKEN = "hf_stubtoken"
REPO = "me/tool-model"


class StubHub:
    """The endpoints ``create_repo`` and ``upload_folder`` call (create, validate-yaml, preupload, commit), answering
    as the Hub does for files it takes inline ("regular"), and recording what arrived. ``refuse``: an HTTP status
    every request gets; ``hang``: seconds each request waits before its answer."""

    def __init__(self, refuse: int | None = None, hang: float = 0.0):
        self.refuse, self.hang = refuse, hang
        self.released = threading.Event()  # set by close: a hanging answer ends with the test, leaving no thread
        self.requests: list[tuple[str, str]] = []
        self.created: list[dict] = []
        self.files: dict[str, bytes] = {}
        self.authorized: list[str] = []
        self.validated: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stub.requests.append(("POST", self.path))
                stub.authorized.append(self.headers.get("authorization", ""))
                if stub.hang and stub.released.wait(stub.hang):
                    return None  # the test is over: no answer
                if stub.refuse or self.headers.get("authorization") != f"Bearer {TOKEN}":
                    return self.answer(stub.refuse or 401, {"error": "Invalid credentials in Authorization header"})
                path = self.path.split("?")[0]
                if path == "/api/repos/create":
                    stub.created.append(json.loads(body))
                    payload = json.loads(body)
                    return self.answer(200, {"url": f"{stub.url}/{payload['organization']}/{payload['name']}"})
                if path == "/api/validate-yaml":  # the Hub checks README.md's front matter before the upload
                    stub.validated.append(json.loads(body)["content"])
                    return self.answer(200, {"errors": [], "warnings": []})
                if path.endswith("/preupload/main"):
                    files = json.loads(body)["files"]
                    answer = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]
                    return self.answer(200, {"files": answer})
                if path.endswith("/commit/main"):
                    for line in body.decode().splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            stub.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                    repo = path.removeprefix("/api/models/").removesuffix("/commit/main")
                    return self.answer(
                        200, {"commitUrl": f"{stub.url}/{repo}/commit/{'a' * 40}", "commitOid": "a" * 40}
                    )
                return self.answer(404, {"error": f"no route {path}"})

            def answer(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting: nothing to answer
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """A stub Hub the library talks to: its endpoint, offline mode off, a token in HF_TOKEN and none on disk."""
    from huggingface_hub import constants

    stub = StubHub()
    monkeypatch.setattr(constants, "ENDPOINT", stub.url)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    for name in ("HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    yield stub
    stub.close()


@pytest.fixture
def run_copy(single_run, tmp_path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(single_run, run_dir)
    return run_dir


def export(engine, capsys, *argv: str) -> tuple[int, str, str]:
    with engine.in_process():
        code = main(["export", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_push_uploads_every_file_of_the_export_to_a_private_repo(engine, hub, run_copy, tmp_path, capsys):
    from huggingface_hub import ModelCard

    out = tmp_path / "served"
    code, stdout, err = export(engine, capsys, str(run_copy), "--out-dir", str(out), "--push-to-hub", REPO, "--private")
    assert code == 0, err
    assert stdout.splitlines()[-1] == f"pushed to {hub.url}/{REPO}"
    assert hub.created == [{"name": "tool-model", "organization": "me", "visibility": "private"}]
    assert set(hub.authorized) == {f"Bearer {TOKEN}"}
    exported = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert hub.files == exported  # every file, byte for byte, in one commit
    assert [path for _, path in hub.requests][-1] == f"/api/models/{REPO}/commit/main"
    assert hub.validated == [hub.files["README.md"].decode()]
    card = ModelCard(hub.files["README.md"].decode())
    assert card.data.library_name == "transformers" and "tooltrain" in card.data.tags


def test_a_refused_push_is_one_error_line_and_the_export_is_kept(engine, hub, run_copy, tmp_path, capsys):
    hub.refuse = 401
    out = tmp_path / "served"
    code, stdout, err = export(engine, capsys, str(run_copy), "--out-dir", str(out), "--push-to-hub", REPO)
    assert code == 2
    # (transformers' own "Writing model shards" progress comes first on stderr)
    assert [line for line in err.splitlines() if "error" in line] == [err.splitlines()[-1]]
    assert err.splitlines()[-1] + "\n" == (
        f"error: cannot push to the Hub repo {REPO}: authentication failed (HTTP 401: Invalid credentials in "
        "Authorization header): check the token (HF_TOKEN or `hf auth login`); the export is complete and kept in "
        f"{out} (upload it with `hf upload {REPO} {out}`)\n"
    )
    assert stdout.startswith("exported ") and (out / "tooltrain_export.json").is_file()
    assert (out / "model.safetensors").is_file() and hub.files == {}


@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ("offline", "offline mode is on (HF_HUB_OFFLINE=1): unset it to push"),
        ("no token", "no Hugging Face token: set HF_TOKEN or run `hf auth login`"),
        ("bad id", "not a repo id"),
    ],
)
def test_a_push_that_cannot_begin_exports_nothing(
    engine, hub, run_copy, tmp_path, capsys, monkeypatch, setting, reason
):
    from huggingface_hub import constants

    repo = REPO
    if setting == "offline":
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    elif setting == "no token":
        monkeypatch.delenv("HF_TOKEN")
    else:
        repo = "me/../x"
    out = tmp_path / "served"
    code, stdout, err = export(engine, capsys, str(run_copy), "--out-dir", str(out), "--push-to-hub", repo)
    assert (code, stdout) == (2, "")
    assert err.startswith(f"error: cannot push to the Hub repo {repo}: {reason}") and err.count("\n") == 1
    assert err.endswith("; nothing was exported\n")
    assert not out.exists() and hub.requests == []


def test_private_without_a_repo_is_refused(engine, run_copy, capsys):
    code, stdout, err = export(engine, capsys, str(run_copy), "--private")
    assert (code, stdout, err) == (2, "", "error: --private goes with --push-to-hub REPO\n")


def small_export(tmp_path: Path) -> Path:
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "README.md").write_text("---\nlibrary_name: transformers\n---\n# x\n", encoding="utf-8")
    (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


def test_an_unreachable_hub_fails_at_once(hub, tmp_path, monkeypatch):
    from huggingface_hub import constants

    hub.close()  # nothing listens on its port any more
    start = time.monotonic()
    with pytest.raises(hub_push.PushError) as raised:
        hub_push.push_folder(small_export(tmp_path), REPO, TOKEN)
    assert str(raised.value).startswith(f"cannot push to the Hub repo {REPO}: cannot reach {constants.ENDPOINT} (")
    assert time.monotonic() - start < 10


def test_a_hub_that_does_not_answer_is_given_up_within_the_timeout(hub, tmp_path, monkeypatch):
    from huggingface_hub import get_session

    monkeypatch.setattr(hub_push, "REQUEST_TIMEOUT", (1.0, 0.5, 0.5, 1.0))
    hub.hang = 5
    start = time.monotonic()
    with pytest.raises(hub_push.PushError) as raised:
        hub_push.push_folder(small_export(tmp_path), REPO, TOKEN)
    assert str(raised.value).startswith(f"cannot push to the Hub repo {REPO}: {hub.url} did not answer within 0.5 s")
    assert time.monotonic() - start < 4
    assert get_session().timeout.read is None  # the library's own client is back after the push


def test_a_push_of_a_small_folder_uploads_it(hub, tmp_path):
    folder = small_export(tmp_path)
    assert hub_push.push_folder(folder, REPO, TOKEN) == f"{hub.url}/{REPO}"
    assert hub.files == {"README.md": (folder / "README.md").read_bytes(), "config.json": b"{}"}
    assert hub.created == [{"name": "tool-model", "organization": "me"}]  # public unless --private (org default)
