"""Stage 2's questions asked in batches across queries, for a backbone that answers many at once (``HFBackend``,
a tooltrain run folder: ``ask_many``), with the answers one-by-one asking would give.

Design: a prefetch pass, not a batched pipeline. For a chunk of test queries, ``prefetch_coverage`` asks every
D.1 question of the chunk in one ``ask_many`` call, reads the requirements out of the answers exactly as stage 2
does (``coverage.requirements_from_answer``), then asks all of the chunk's D.2 questions in another; the answers
wait in ``PrefetchingBackend``. The unchanged per-query pipeline (``pipeline.Recommender.recommend``) then asks its
questions through the ``Teacher`` as before, and the backend serves each from what was fetched. So the trace, the
issue counts, the response cache and the teacher's counts (``asked``, ``backend_calls``, ``failures``) are what
they were, and a question the prefetch did not foresee or could not answer (a failed batch) is simply asked alone:
the prefetch can make a run faster, never different, provided a batched greedy answer equals the one-by-one answer
(left padding with an attention mask; ``tests/recommend/test_ptr_batching.py`` checks it on a tiny model).

A batched pipeline (stage 2 rewritten over many queries) would have had to repeat stage 2's logic, its issue
counts and trace in a second form; the prefetch keeps one stage 2.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from train.papers.ptr.coverage import bundle_tools, requirements_from_answer, with_params
from train.papers.ptr.teacher import match_request, requirements_request
from train.teacher.backends import StageParams, TeacherError, TeacherRequest
from train.teacher.cache import cache_key


class PrefetchingBackend:
    """A backend with ``ask_many`` behind the ``Teacher``: ``prefetch`` fetches answers in batches,
    ``complete`` serves a fetched answer or asks the wrapped backend; ``forget`` drops what was fetched (after each
    chunk, so memory stays one chunk's answers). ``kind`` and ``model`` are the wrapped backend's: the response
    cache keys are unchanged."""

    def __init__(self, backend: Any, batch_size: int):
        if batch_size < 1:
            raise ValueError(f"the batch size must be at least 1, got {batch_size}")
        self.backend, self.batch_size = backend, batch_size
        self.kind = backend.kind
        self.answers: dict[str, str] = {}
        self.batches = 0  # ask_many calls made (each at most batch_size questions)

    @property
    def model(self) -> str:
        return self.backend.model

    def key(self, request: TeacherRequest) -> str:
        return cache_key(self.kind, str(self.model), request)

    def complete(self, request: TeacherRequest) -> str:
        answer = self.answers.get(self.key(request))
        return answer if answer is not None else self.backend.complete(request)

    def answer(self, request: TeacherRequest, cache: Any = None) -> str | None:
        """What asking would return without a backend call (fetched, or in the response cache), else None."""
        key = self.key(request)
        if key in self.answers:
            return self.answers[key]
        return cache.get(key) if cache is not None else None

    def prefetch(self, requests: Sequence[TeacherRequest], cache: Any = None) -> None:
        """Fetch the answers of ``requests`` that are neither fetched nor cached, ``batch_size`` per ``ask_many``
        call. A failed batch is left unanswered: those questions are asked one by one when the pipeline asks."""
        pending = {}
        for request in requests:
            if self.answer(request, cache) is None:
                pending.setdefault(self.key(request), request)
        keys = list(pending)
        for start in range(0, len(keys), self.batch_size):
            chunk = keys[start : start + self.batch_size]
            self.batches += 1
            try:
                texts = self.backend.ask_many([pending[key] for key in chunk], batch_size=self.batch_size)
            except TeacherError:
                continue
            self.answers.update((key, text) for key, text in zip(chunk, texts) if isinstance(text, str))

    def forget(self) -> None:
        self.answers.clear()


def can_prefetch(backend: Any) -> bool:
    return callable(getattr(backend, "ask_many", None))


def prefetch_coverage(
    teacher: Any,
    items: Sequence[tuple[str, Sequence[str]]],
    library: dict[str, str],
    params: StageParams | None = None,
) -> None:
    """Fetch stage 2's questions for ``items`` ((query, bundle) per query; an empty bundle: D.1 only) into
    ``teacher.backend`` (a ``PrefetchingBackend``): all D.1 questions, then the D.2 questions their answers lead to,
    built as ``coverage.map_coverage`` builds them."""
    backend: PrefetchingBackend = teacher.backend
    cache = getattr(teacher, "cache", None)
    firsts = [with_params(requirements_request(query), params) for query, _ in items]
    backend.prefetch(firsts, cache)
    seconds = []
    for (query, bundle), first in zip(items, firsts):
        tools = bundle_tools(bundle, library)
        answer = backend.answer(first, cache)
        if not tools or answer is None:  # nothing to match, or D.1 unanswered: the pipeline asks it alone
            continue
        # the issues are counted when the pipeline reads the same answer, not here
        for requirement in requirements_from_answer(query, answer, Counter()):
            seconds.append(with_params(match_request(requirement, tools), params))
    backend.prefetch(seconds, cache)


__all__ = ["PrefetchingBackend", "can_prefetch", "prefetch_coverage"]
