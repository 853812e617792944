"""Stage 2's questions in batches (``HFBackend.ask_many``, ``batching.PrefetchingBackend``): a batched greedy answer
is the one-by-one answer (tiny random model, left padding, rows that stop at different steps), the prefetch asks a
chunk's D.1 questions in one batch and then their D.2 questions, and the pipeline's rankings, traces and teacher
counts are those of asking one by one. ``--batch-size`` and ``--max-new-tokens`` reach the questions."""

from __future__ import annotations

from pathlib import Path

import pytest
from ptr_fakes import AngleEmbedder

from train.papers.ptr.batching import PrefetchingBackend
from train.papers.ptr.data import Example
from train.papers.ptr.evaluate import Settings, evaluate, make_backbone, recommend_with_stages, stage_params
from train.papers.ptr.pipeline import Recommender
from train.teacher.backends import OfflineBackend, StageParams, TeacherError, TeacherRequest
from train.teacher.cache import ResponseCache, Teacher

LIBRARY = {"A": "a", "B": "b", "C": "c", "D": "d"}
HISTORY = [Example("h1", "past one", ("C",)), Example("h2", "past two", ("D",))]
TEST = [
    Example("t1", "need A and C", ("A", "C")),
    Example("t2", "need B and D", ("B", "D")),
    Example("t3", "need A and D", ("A", "D")),
]
BUNDLES = [("B", "A"), ("B", "C"), ("A",)]
ANGLES = {"A: a": 0, "B: b": 90, "C: c": 180, "D: d": 270, "past one": 180, "past two": 270}
ANGLES |= {f"need {x}": angle for x, angle in (("A", 0), ("B", 90), ("C", 180), ("D", 270))}
ANGLES |= {ex.query: 45 for ex in TEST}


def d1(request: TeacherRequest) -> str:
    first, second = request.context["query"].split(" and ")  # "need A and C" -> "need A", "need C"
    return f"- {first}\n- need {second}"


def d2(request: TeacherRequest) -> str:
    wanted = request.context["requirement"].removeprefix("need ")
    return f"- {wanted}: x" if wanted in request.context["tools"] else "None"


class BatchingScript(OfflineBackend):
    """The scripted answers, with ``ask_many``: records each batch (stage names) and each one-by-one question."""

    def __init__(self, fail_batches: bool = False):
        super().__init__({"ptr.requirements": d1, "ptr.match": d2}, "scripted")
        self.batches: list[list[str]] = []
        self.singles: list[str] = []
        self.fail_batches = fail_batches

    def complete(self, request: TeacherRequest) -> str:
        self.singles.append(request.stage)
        return super().complete(request)

    def ask_many(self, requests: list[TeacherRequest], batch_size: int = 8) -> list[str]:
        self.batches.append([r.stage for r in requests])
        if self.fail_batches:
            raise TeacherError("batched generation failed: out of memory")
        return [super(BatchingScript, self).complete(r) for r in requests]


def run(teacher: Teacher, chunk: int):
    recommender = Recommender(LIBRARY, HISTORY, teacher, AngleEmbedder(ANGLES), "1,2,3", k=1)
    rankings, traces = recommend_with_stages(recommender, TEST, BUNDLES, chunk)
    return rankings, [{k: v for k, v in trace.items() if k != "seconds"} for trace in traces], recommender.issues


def test_prefetch_asks_a_chunks_d1_then_its_d2_in_batches_and_changes_nothing():
    one_by_one = run(Teacher(BatchingScript()), chunk=1)
    script = BatchingScript()
    teacher = Teacher(PrefetchingBackend(script, batch_size=2))
    assert run(teacher, chunk=2) == one_by_one
    # chunk 1 (t1, t2): both D.1 in one batch, then their four D.2 in batches of 2; chunk 2 (t3): D.1, then its 2
    assert script.batches == [["ptr.requirements"] * 2, ["ptr.match"] * 2, ["ptr.match"] * 2,
                              ["ptr.requirements"], ["ptr.match"] * 2]  # fmt: skip
    assert script.singles == []  # every question the pipeline asked had been fetched
    assert teacher.counts["asked"] == 9 and teacher.counts["backend_calls"] == 9
    assert one_by_one[1][0]["ranking"] == ["A", "C"] and one_by_one[1][1]["kept"] == ["B"]
    assert teacher.backend.answers == {}  # forgotten after each chunk


def test_a_failed_batch_is_asked_one_by_one_and_a_cached_answer_is_not_fetched(tmp_path: Path):
    one_by_one = run(Teacher(BatchingScript()), chunk=1)
    failing = BatchingScript(fail_batches=True)
    assert run(Teacher(PrefetchingBackend(failing, batch_size=8)), chunk=3) == one_by_one
    assert len(failing.singles) == 9  # the D.1 batch failed: nothing planned, every question asked alone

    cache = ResponseCache(tmp_path)
    run(Teacher(BatchingScript(), cache), chunk=1)  # fills the response cache
    again = BatchingScript()
    teacher = Teacher(PrefetchingBackend(again, batch_size=8), cache)
    assert run(teacher, chunk=3) == one_by_one
    assert again.batches == [] and again.singles == [] and teacher.counts["cache_hits"] == 9


def test_only_a_backend_that_batches_is_wrapped_and_batch_size_1_never_is():
    settings = Settings([], Path("."), stages=(1, 2, 3), llm=".")
    assert isinstance(make_backbone(settings, None, lambda path: BatchingScript()).backend, PrefetchingBackend)
    plain = OfflineBackend({}, "plain")
    assert make_backbone(settings, None, lambda path: plain).backend is plain  # no ask_many: asked as before
    settings.batch_size = 1
    assert isinstance(make_backbone(settings, None, lambda path: BatchingScript()).backend, BatchingScript)
    with pytest.raises(ValueError, match="batch size must be at least 1"):
        PrefetchingBackend(BatchingScript(), 0)


def test_max_new_tokens_reaches_every_question():
    asked: list[StageParams] = []

    class Recording(BatchingScript):
        def ask_many(self, requests, batch_size=8):
            asked.extend(r.params for r in requests)
            return super().ask_many(requests, batch_size)

    teacher = Teacher(PrefetchingBackend(Recording(), batch_size=4))
    recommender = Recommender(LIBRARY, HISTORY, teacher, AngleEmbedder(ANGLES), "1,2,3", k=1,
                              params=stage_params(Settings([], Path("."), max_new_tokens=32)))  # fmt: skip
    recommend_with_stages(recommender, TEST, BUNDLES, chunk=3)
    assert len(asked) == 9 and {p.max_tokens for p in asked} == {32} and {p.temperature for p in asked} == {0.0}
    assert stage_params(Settings([], Path("."))) is None  # default: the paper's 1024 (train.papers.ptr.teacher.PARAMS)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("batch_size", 0, "--batch-size must be at least 1, got 0"),
    ("max_new_tokens", 0, "--max-new-tokens must be at least 1, got 0"),
])  # fmt: skip
def test_bad_batch_settings_are_refused(field, value, message):
    settings = Settings(["rectools"], Path("missing"), stages=(1, 2, 3))
    setattr(settings, field, value)
    with pytest.raises(ValueError, match=message):
        evaluate(settings)


# ---------------------------------------------------------------- a real (tiny, random) model


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory):
    import torch

    from train.engine.config import compose
    from train.engine.model import build_model
    from train.teacher.backends import HFBackend
    from train.tokenizers import load_tokenizer

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLTRAIN_CACHE", str(tmp_path_factory.mktemp("cache")))
        cfg = compose(["recipe=tiny"])
        tok = load_tokenizer(cfg.model.tokenizer)
        model = build_model(cfg.model, len(tok), torch.float32, "sdpa", seed=42).eval()
    torch.set_num_threads(1)
    return HFBackend("tiny", "chatml", model=model, tokenizer_object=tok)


def questions(max_tokens: int) -> list[TeacherRequest]:
    params = StageParams(max_tokens=max_tokens)
    users = ["hi", "list the tools that book a flight and a hotel in Paris", "weather?", "a much longer question " * 6]
    return [TeacherRequest("ptr.requirements", None, user, params) for user in users]


def test_hf_batched_answers_equal_one_by_one(tiny_hf):
    requests = questions(10)
    assert len({len(tiny_hf.prompt_ids(r)) for r in requests}) == 4  # four widths: every row but one is padded
    single = [tiny_hf.complete(r) for r in requests]
    assert tiny_hf.ask_many(requests, batch_size=4) == single
    assert tiny_hf.ask_many(requests, batch_size=3) == single
    assert len({*single}) > 1 and all(single)


def test_hf_rows_stop_at_their_own_end_of_turn(tiny_hf):
    requests = questions(10)
    single_ids = [tiny_hf._generate([tiny_hf.prompt_ids(r)], 10)[0] for r in requests]
    # make a token the first question writes early the end of turn: that row stops there, the others run on
    stop = single_ids[0][2]
    saved = tiny_hf.stop_ids
    tiny_hf.stop_ids = [stop, *saved]
    try:
        single = [tiny_hf.complete(r) for r in requests]
        lengths = [len(tiny_hf._generate([tiny_hf.prompt_ids(r)], 10)[0]) for r in requests]
        assert tiny_hf.ask_many(requests, batch_size=4) == single
    finally:
        tiny_hf.stop_ids = saved
    assert lengths[0] <= 2 and max(lengths) == 10  # the rows did stop at different steps


def test_the_pipeline_over_a_tiny_model_is_the_same_batched(tiny_hf):
    params = StageParams(max_tokens=6)

    def pipeline(backend, chunk):
        teacher = Teacher(backend)
        recommender = Recommender(LIBRARY, HISTORY, teacher, AngleEmbedder(ANGLES), "1,2", k=1, params=params)
        rankings, traces = recommend_with_stages(recommender, TEST, BUNDLES, chunk)
        return rankings, [{k: v for k, v in t.items() if k != "seconds"} for t in traces], dict(teacher.counts)

    batching = PrefetchingBackend(tiny_hf, batch_size=4)
    assert pipeline(batching, chunk=3) == pipeline(tiny_hf, chunk=1)
    assert batching.batches >= 2  # the D.1 batch and at least one D.2 batch were generated batched
