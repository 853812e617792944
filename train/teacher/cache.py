"""The teacher a builder talks to: a backend behind an on-disk response cache, with counts.

The cache key is the sha256 of a canonical JSON of (backend kind, model, stage, system prompt, user prompt,
parameters; ``top_p`` only when set, so a key from before that field is the key of ``top_p=None``): the same
question to the same model is asked once. Each answer is its own file
(``<dir>/<key[:2]>/<key>.json``), written to a temporary file and renamed into place, so a build that crashes
keeps every answer it got and the next build resumes from them; a rebuild reads the same answers and writes the
same bytes. ``Teacher.ask_many`` serves a batch's cache hits at once and sends only the rest to the backend
(the http backend asks them concurrently). Failures are not cached: a rerun asks again. A cache folder that
cannot be made or written (a file, no permission, a full disk) is ``TeacherUnavailable`` naming it: the answers
would be lost.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from train.teacher.backends import TeacherError, TeacherRequest, TeacherUnavailable


def cache_key(kind: str, model: str, request: TeacherRequest) -> str:
    canonical = json.dumps(
        {
            "backend": kind,
            "model": model,
            "stage": request.stage,
            "system": request.system,
            "user": request.user,
            "params": request.params.key_fields(),  # top_p only when set: old keys hold
        },
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Answers on disk, one JSON file per key, written atomically (temporary file + rename)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        try:  # now, before any question is asked: an answer paid for must have a place to go
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise self._unusable(err) from None

    def _unusable(self, err: OSError) -> TeacherUnavailable:
        why = "it is a file" if self.folder.is_file() else (err.strerror or str(err))
        return TeacherUnavailable(f"teacher cache_dir {self.folder}: cannot keep answers there: {why}")

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        try:
            record = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # absent, or unreadable: ask again (a rename never leaves half a file)
            return None
        text = record.get("text") if isinstance(record, dict) else None
        return text if isinstance(text, str) and record.get("key") == key else None

    def put(self, key: str, text: str, request: TeacherRequest) -> None:
        path = self._path(key)
        record = {"key": key, "stage": request.stage, "text": text}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        except OSError as err:
            raise self._unusable(err) from None
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(record, ensure_ascii=False))
            os.replace(temporary, path)
        except OSError as err:  # a full disk, a folder made read-only under the build
            Path(temporary).unlink(missing_ok=True)
            raise self._unusable(err) from None
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


class Teacher:
    """``ask(request) -> text`` through the cache; ``TeacherError`` when the backend fails (the caller counts it),
    ``TeacherUnavailable`` when it cannot be used at all (the run stops).

    ``counts``: ``asked`` (requests), ``backend_calls`` (answers the backend was asked for), ``cache_hits`` and
    ``failures``, so a report can show that a second build asked the backend nothing.
    """

    def __init__(self, backend: Any, cache: ResponseCache | None = None):
        self.backend = backend
        self.cache = cache
        self.counts: Counter = Counter()

    @property
    def kind(self) -> str:
        return self.backend.kind

    def ask(self, request: TeacherRequest) -> str:
        self.counts["asked"] += 1
        key = cache_key(self.backend.kind, str(self.backend.model), request)
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                self.counts["cache_hits"] += 1
                return cached
        self.counts["backend_calls"] += 1
        try:
            text = self.backend.complete(request)
        except (TeacherError, TeacherUnavailable):
            self.counts["failures"] += 1
            raise
        if not isinstance(text, str):
            self.counts["failures"] += 1
            raise TeacherError("the teacher's answer is not text")
        if self.cache is not None:
            self.cache.put(key, text, request)
        return text

    def ask_many(self, requests: Sequence[TeacherRequest]) -> list[str | TeacherError]:
        """``ask`` of each request, in order: the answer's text or the ``TeacherError`` of that question (counted as
        ``ask`` counts it). Cache hits are served here, without a worker; the questions left (each distinct one once)
        go to the backend's ``ask_many`` when it has one (the http backend's asks them concurrently), else one by
        one. ``TeacherUnavailable`` stops the batch, as it stops ``ask``."""
        answers: list[str | TeacherError | None] = [None] * len(requests)
        missing: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            self.counts["asked"] += 1
            key = cache_key(self.backend.kind, str(self.backend.model), request)
            cached = self.cache.get(key) if self.cache is not None and key not in missing else None
            if cached is not None:
                self.counts["cache_hits"] += 1
                answers[index] = cached
            else:
                missing.setdefault(key, []).append(index)
        asked = [requests[indexes[0]] for indexes in missing.values()]
        if asked:
            self.counts["backend_calls"] += len(asked)
        for (key, indexes), request, text in zip(missing.items(), asked, self._backend_answers(asked)):
            if isinstance(text, str) and self.cache is not None:
                self.cache.put(key, text, request)
            elif not isinstance(text, str):
                self.counts["failures"] += 1
                text = text if isinstance(text, TeacherError) else TeacherError("the teacher's answer is not text")
            for index in indexes:
                answers[index] = text
        return answers  # type: ignore[return-value]  # every slot is filled

    def _backend_answers(self, requests: list[TeacherRequest]) -> list[Any]:
        many = getattr(self.backend, "ask_many", None)
        if callable(many) and requests:
            try:
                return list(many(requests))
            except TeacherUnavailable:
                raise
            except TeacherError:  # a batch that failed as a whole (hf): each question alone
                pass
        answers: list[Any] = []
        for request in requests:
            try:
                answers.append(self.backend.complete(request))
            except TeacherError as err:
                answers.append(err)
        return answers

    def report(self) -> dict[str, Any]:
        retried = getattr(self.backend, "counts", None)  # the http backend's attempts after a failed one
        return {
            "backend": self.backend.kind,
            "model": str(self.backend.model),
            "cache": str(self.cache.folder) if self.cache is not None else None,
            **{k: self.counts.get(k, 0) for k in ("asked", "backend_calls", "cache_hits", "failures")},
            **({"retries": retried.get("retries", 0)} if isinstance(retried, Counter) else {}),
        }


def default_cache(kind: str, cache_dir: str | None = None) -> ResponseCache | None:
    """The response cache a teacher of ``kind`` uses: ``cache_dir`` when given (``"none"``: no cache), else none for
    the offline teacher (its answers cost nothing) and ``$XDG_CACHE_HOME/tooltrain/teacher`` for a model, shared by
    every builder and eval that asks one (a question is asked once, across runs)."""
    if cache_dir == "none" or (not cache_dir and kind == "offline"):
        return None
    if cache_dir:
        return ResponseCache(cache_dir)
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return ResponseCache(Path(root) / "tooltrain" / "teacher")


__all__ = ["ResponseCache", "Teacher", "cache_key", "default_cache"]
