"""``tooltrain export RUN_DIR --push-to-hub REPO``: a complete export folder uploaded to a Hugging Face model repo.

Through ``huggingface_hub`` alone, no HTTP of tooltrain's own: ``HfApi.create_repo(exist_ok=True)`` then
``HfApi.upload_folder``, to the endpoint the library reads (``HF_ENDPOINT``). What can be told without the network is
checked before the export starts (``check_push``): a repo id the Hub accepts, offline mode off (``HF_HUB_OFFLINE`` /
``TRANSFORMERS_OFFLINE``: refused, never attempted) and a token (``HF_TOKEN`` or ``hf auth login``), so a push that
cannot begin exports nothing. What fails on the way (authentication, the network, the Hub refusing) is a
``PushError`` naming the repo and the reason (``push_reason``); the export is complete by then and is kept.

Waits are bounded: huggingface_hub's HTTP client waits forever by default, so for the push it gets a timeout per
request (``REQUEST_TIMEOUT``: to connect, and between bytes read or written); the library retries a timed-out
upload or commit at most 5 times. The creation of the repo, the first request, is not retried: an unreachable Hub
fails within the connect timeout. Large files go through ``hf_xet`` where the Hub asks for it, with its own limits.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

# (connect, read, write, pool) seconds for each request of the push
REQUEST_TIMEOUT = (10.0, 60.0, 60.0, 10.0)


class PushError(Exception):
    """A push refused or failed: ``str`` is one clause naming the repo and the reason."""


def _failed(repo: str, reason: str) -> PushError:
    return PushError(f"cannot push to the Hub repo {repo}: {reason}")


def check_push(repo: str) -> str:
    """The token to push ``repo`` with, or a ``PushError``: an id the Hub refuses, offline mode, no token."""
    from huggingface_hub import constants, get_token
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError as err:
        raise _failed(repo, f"not a repo id ({str(err).splitlines()[0]}); give OWNER/NAME") from None
    if constants.is_offline_mode():
        set_ = [name for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") if os.environ.get(name)]
        named = " / ".join(f"{name}={os.environ[name]}" for name in set_) or "HF_HUB_OFFLINE"
        raise _failed(repo, f"offline mode is on ({named}): unset it to push")
    token = get_token()
    if not token:
        raise _failed(repo, "no Hugging Face token: set HF_TOKEN or run `hf auth login`")
    return token


@contextlib.contextmanager
def bounded_requests(timeout: tuple[float, float, float, float] | None = None) -> Iterator[None]:
    """huggingface_hub's shared HTTP client with ``timeout`` (default ``REQUEST_TIMEOUT``) on every request while the
    block runs; the client the library made before (its own, or one a user set with ``set_client_factory``) comes
    back after it."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    timeout = timeout or REQUEST_TIMEOUT
    previous = _http._GLOBAL_CLIENT_FACTORY  # the library has no public getter for it

    def bounded():  # the library's client, hooks and all (offline mode, request ids), with a timeout
        client = previous()
        client.timeout = timeout
        return client

    set_client_factory(bounded)
    try:
        yield
    finally:
        set_client_factory(previous)


def push_reason(err: BaseException, endpoint: str) -> str:
    """One clause for what stopped the push: an HTTP refusal with the Hub's own message, a timeout, the network."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(err, OfflineModeIsEnabled):
        return "offline mode is on (HF_HUB_OFFLINE): unset it to push"
    if isinstance(err, HfHubHTTPError):
        status = err.response.status_code if err.response is not None else None
        said = (err.server_message or str(err).splitlines()[0]).strip().rstrip(".")
        if status == 401:
            return f"authentication failed (HTTP 401: {said}): check the token (HF_TOKEN or `hf auth login`)"
        if status == 403:
            return f"the token may not write to it (HTTP 403: {said})"
        return f"the Hub answered HTTP {status}: {said}"
    kinds = {cls.__name__ for cls in type(err).__mro__}
    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    if "TimeoutException" in kinds:
        return f"{endpoint} did not answer within {REQUEST_TIMEOUT[1]:g} s ({first})"
    if kinds & {"NetworkError", "ConnectError", "RemoteProtocolError", "ConnectionError"}:
        return f"cannot reach {endpoint} ({first})"
    return f"{type(err).__name__}: {first}"


def push_folder(folder: Path, repo: str, token: str, private: bool = False) -> str:
    """``folder`` uploaded to the model repo ``repo`` (created when missing; ``private`` then), as one upload of
    every file; the URL of the repo. A ``PushError`` for anything that stops it."""
    from huggingface_hub import HfApi, constants

    api = HfApi(token=token)
    try:
        with bounded_requests():
            url = api.create_repo(repo, private=private or None, exist_ok=True)
            api.upload_folder(
                repo_id=url.repo_id,
                folder_path=str(folder),
                commit_message="Upload model exported by tooltrain export",
            )
    except Exception as err:  # noqa: BLE001 - whatever the library raises, the export is complete: one line
        raise _failed(repo, push_reason(err, api.endpoint or constants.ENDPOINT)) from None
    return str(url)
