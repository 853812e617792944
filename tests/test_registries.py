"""One registry per concept (``train.registry``): formats, sources, scorers and builders plugged in from outside
the package by ``module:attr`` and used through the real entries (compose, the CLI); unknown names list the valid
ones; the README's lists are the registries' names."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from train.builders import BUILDERS
from train.cli import main
from train.engine.config import ConfigError, compose
from train.evaluation import SCORERS
from train.evaluation.tasks import task_names
from train.formats import FORMATS
from train.registry import Registry
from train.schema import Conversation
from train.sources import SOURCES

REPO = Path(__file__).resolve().parents[1]
BUILD_OUT = "--out-dir"  # data build's output folder option (one place to change if its spelling changes)
CONVERSATIONS = [
    {"id": f"c{i}", "messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}
    for i in range(3)
]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Writes a module into tmp_path (on sys.path) and returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        return name

    return write


@pytest.fixture
def conversations(tmp_path) -> Path:
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS), encoding="utf-8")
    return path


def compose_error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as raised:
        compose(["recipe=tiny", *overrides])
    return str(raised.value)


# ---------------------------------------------------------------- the registry itself


def test_registry_names_lookups_and_errors():
    registry: Registry = Registry("widget", "widgets", callable)
    registry.register("len", len)

    @registry.register("upper")
    def upper(text):
        return text.upper()

    registry.register("later", "os.path:basename")  # imported on first use
    assert registry.names() == list(registry) == ["len", "upper", "later"]
    assert registry.get("upper") is upper and registry.get("later")("/a/b") == "b"
    assert registry.get("os.path:dirname")("/a/b") == "/a"
    assert "len" in registry and "os.path:dirname" not in registry and registry.known("os.path:dirname")
    with pytest.raises(ValueError, match=r"^unknown widget 'nope'; valid widgets: len, upper, later \(or module:attr"):
        registry.get("nope")
    with pytest.raises(ValueError, match="os:sep is not a widget"):
        registry.get("os:sep")
    with pytest.raises(ValueError, match=r"widget 'no_such_module_xyz:f': cannot import no_such_module_xyz"):
        registry.get("no_such_module_xyz:f")
    with pytest.raises(ValueError, match="os has no no_such_attr"):
        registry.get("os:no_such_attr")
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("len", len)


# ---------------------------------------------------------------- README lists


def readme_list(pattern: str) -> list[str]:
    match = re.search(pattern, (REPO / "README.md").read_text(encoding="utf-8"))
    assert match, pattern
    return [name.strip() for name in match.group(1).split(",")]


def test_readme_lists_are_the_registries():
    assert readme_list(r"converts a source \(`([^`]+)`") == SOURCES.names()
    assert readme_list(r"for a model family \(`([^`]+)`") == FORMATS.names()
    assert readme_list(r"score predictions \(`([^`]+)`") == SCORERS.names()
    assert readme_list(r"print a table \(`([^`]+)`") == task_names()
    assert readme_list(r"a recipe data builder's output \(`([^`]+)`") == BUILDERS.names()


# ---------------------------------------------------------------- unknown names


def test_unknown_names_list_the_valid_ones(tmp_path, conversations, capsys):
    problems = compose_error(["model.chat_format=nope"])
    assert f"model.chat_format=nope is not a chat format; valid: {', '.join(FORMATS)}" in problems
    problems = compose_error(["data.sources.0.name=nope"])
    assert f"data.sources.0.name=nope is not a source; valid: {', '.join(SOURCES)}" in problems
    problems = compose_error(["data.builder=nope"])
    valid = "valid builders: metatool, toolgt, toolselect, itc"
    assert f"data.builder=nope: unknown data builder 'nope'; {valid}" in problems
    assert main(["data", "convert", "nope", str(conversations), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err.startswith(f"error: unknown source 'nope'; valid sources: {', '.join(SOURCES)}")
    code = main(["eval", "score", "nope", "--predictions", str(conversations), "--references", str(conversations)])
    assert code == 2
    assert capsys.readouterr().err.startswith(f"error: unknown scorer 'nope'; valid scorers: {', '.join(SCORERS)}")
    assert main(["data", "build", "nope", str(conversations), BUILD_OUT, str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith(
        "error: unknown data builder 'nope'; valid builders: metatool, toolgt, toolselect"
    )
    assert main(["data", "build", "metatool", str(conversations), "teachr=x", BUILD_OUT, str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith("error: metatool builder: unknown argument 'teachr'; valid: alpha, ")
    assert (
        main(["data", "build", "metatool", str(conversations), "pool_size=many", BUILD_OUT, str(tmp_path / "out")]) == 2
    )
    assert capsys.readouterr().err == "error: metatool builder: pool_size must be int, got 'many'\n"
    assert not (tmp_path / "out").exists()


def test_score_help_lists_every_registered_scorer(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "score", "--help"])
    out = capsys.readouterr().out
    for name in SCORERS.names():
        assert f"\n  {name:<11} {SCORERS.get(name).layout.splitlines()[0]}\n" in out


# ---------------------------------------------------------------- plugged in from outside


def test_a_format_from_outside(plugin, conversations, tmp_path):
    plugin(
        "my_formats",
        """
        from train.formats.chatml import ChatMLFormat

        class TinyChatML(ChatMLFormat):
            default_tokenizer = "tiny_chatml"  # what tells it apart: it needs no --tokenizer for the tiny one
    """,
    )
    cfg = compose(["recipe=tiny", "model.chat_format=my_formats:TinyChatML"])
    assert cfg.model.chat_format == "my_formats:TinyChatML"
    mine, theirs = tmp_path / "mine.jsonl", tmp_path / "theirs.jsonl"
    assert main(["data", "render", str(conversations), "--format", "my_formats:TinyChatML", "-o", str(mine)]) == 0
    assert (
        main(
            [
                "data",
                "render",
                str(conversations),
                "--format",
                "chatml",
                "--tokenizer",
                "tiny_chatml",
                "-o",
                str(theirs),
            ]
        )
        == 0
    )
    assert mine.read_bytes() == theirs.read_bytes() and len(mine.read_text().splitlines()) == 3
    assert "my_formats has no Nope" in compose_error(["model.chat_format=my_formats:Nope"])
    assert "os:getcwd is not a chat format" in compose_error(["model.chat_format=os:getcwd"])


def test_a_source_reader_from_outside(plugin, tmp_path, capsys):
    plugin(
        "my_readers",
        """
        from train.schema import Conversation
        from train.sources import Rejected

        def read(inputs):
            for path in inputs:
                for n, line in enumerate(path.read_text().splitlines(), start=1):
                    question, sep, answer = line.partition("|")
                    if not sep:
                        yield Rejected(f"{path}:{n}", "no '|' between question and answer")
                        continue
                    yield Conversation.from_dict({"id": f"line{n}", "messages": [
                        {"role": "user", "content": question}, {"role": "assistant", "content": answer}]})
    """,
    )
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("hi|hello\nbroken\nbye|see you\n")
    out = tmp_path / "out.jsonl"
    assert main(["data", "convert", "my_readers:read", str(pairs), "-o", str(out)]) == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["line1", "line3"]
    assert "read 3, written 2, rejected 1" in capsys.readouterr().out
    cfg = compose(["recipe=tiny", "data.sources.0.name=my_readers:read", f"data.sources.0.inputs=[{pairs}]"])
    from train.data.dataset import BuildReport, read_conversations

    report = BuildReport()
    read = [
        c.id for c in read_conversations([{"name": s.name, "inputs": list(s.inputs)} for s in cfg.data.sources], report)
    ]
    assert read == ["line1", "line3"] and (report.read, report.rejected_by_reader) == (3, 1)
    assert "data.sources.0.name: source 'my_readers:reed': my_readers has no reed" in compose_error(
        ["data.sources.0.name=my_readers:reed"]
    )


def test_a_scorer_and_its_task_from_outside(plugin, tmp_path, conversations, capsys):
    plugin(
        "my_bench",
        """
        from train.evaluation import ScorerSpec
        from train.evaluation.task_base import Task

        def score(predictions, references):
            said = {row["id"]: row.get("content") for row in predictions}
            gold = {ref["id"]: ref["messages"][-1]["content"] for ref in references}
            per_item = [{"id": i, "correct": said.get(i) == answer} for i, answer in gold.items()]
            return {"accuracy": sum(r["correct"] for r in per_item) / len(per_item), "per_item": per_item}

        class EchoTask(Task):
            name = "echo"

        SPEC = ScorerSpec(score=score, task=EchoTask, layout="references: conversations. predictions: {id, content}.")
        ROWS_ONLY = ScorerSpec(score=score, layout="rows only")
    """,
    )
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(
        '{"id": "c0", "content": "a0"}\n{"id": "c1", "content": "wrong"}\n{"id": "c2", "content": "a2"}\n'
    )
    metrics = tmp_path / "metrics.json"
    assert (
        main(
            [
                "eval",
                "score",
                "my_bench:SPEC",
                "--predictions",
                str(predictions),
                "--references",
                str(conversations),
                "-o",
                str(metrics),
            ]
        )
        == 0
    )
    assert json.loads(metrics.read_text())["metrics"] == {"accuracy": 2 / 3}
    assert capsys.readouterr().out.startswith("my_bench:SPEC: 3 items scored")
    eval_overrides = ["eval=heldout", "data.eval_fraction=0.2", f"eval.benchmarks.0.data={conversations}"]
    cfg = compose(["recipe=tiny", *eval_overrides, "eval.benchmarks.0.name=my_bench:SPEC"])
    from train.evaluation.tasks import get_task

    task = get_task(cfg.eval.benchmarks[0].name)
    assert type(task).__name__ == "EchoTask"
    items = task.prepare([Conversation.from_dict(c) for c in CONVERSATIONS]).items
    assert task.score(items, [{"id": "c0", "content": "a0"}])["accuracy"] == 1 / 3  # found its scorer by module:attr
    problems = compose_error([*eval_overrides, "eval.benchmarks.0.name=my_bench:ROWS_ONLY"])
    assert "eval.benchmarks.0 (my_bench:ROWS_ONLY): my_bench:ROWS_ONLY is scored from rows only" in problems


def test_a_builder_from_outside(plugin, tmp_path, conversations, capsys):
    plugin(
        "my_builders",
        """
        from dataclasses import dataclass
        from train.builders import BuilderSpec

        @dataclass
        class FirstArgs:
            keep: int = 1
            tag: str = "kept"

        def first(conversations, *, seed, on_drop=None, keep=1, tag="kept"):
            for index, conv in enumerate(conversations):
                if index < keep:
                    conv.meta = {**conv.meta, "tag": tag, "seed": seed}
                    yield conv
                elif on_drop is not None:
                    on_drop("past keep")

        SPEC = BuilderSpec(build=first, args=FirstArgs)
    """,
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "data",
                "build",
                "my_builders:SPEC",
                str(conversations),
                "keep=2",
                "tag=mine",
                "--seed",
                "3",
                BUILD_OUT,
                str(out),
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert [(r["id"], r["meta"]) for r in rows] == [
        ("c0", {"tag": "mine", "seed": 3}),
        ("c1", {"tag": "mine", "seed": 3}),
    ]
    report = json.loads((out / "report.json").read_text())
    assert (report["read"], report["dropped"], report["train"]) == (3, {"past keep": 1}, {"rows": 2})
    assert capsys.readouterr().out.startswith("read 3: training rows 2, dropped 1, rejected 0\n")
    assert main(["data", "build", "my_builders:SPEC", str(conversations), "nope=1", BUILD_OUT, str(out)]) == 2
    assert capsys.readouterr().err == "error: my_builders:SPEC builder: unknown argument 'nope'; valid: keep, tag\n"
    cfg = compose(["recipe=tiny", "data.builder=my_builders:SPEC", "+data.builder_args.keep=2"])
    from train.builders import bind

    assert [
        c.id
        for c in bind(cfg.data.builder, 0, dict(cfg.data.builder_args))(
            [Conversation.from_dict(c) for c in CONVERSATIONS]
        )
    ] == ["c0", "c1"]
    assert "my_builders:SPEC builder: keep must be int, got 'two'" in compose_error(
        ["data.builder=my_builders:SPEC", "+data.builder_args.keep=two"]
    )
    problems = compose_error(["data.builder=my_builders:SPEC", "+data.builder_args.nope=1"])
    expected = "data.builder=my_builders:SPEC: my_builders:SPEC builder: unknown argument(s) ['nope']; valid: keep, tag"
    assert expected in problems


# ---------------------------------------------------------------- one canonical reader


def test_the_three_canonical_readers_are_one(tmp_path, plugin):
    """Training data, ``data build`` inputs and eval references read a canonical file alike: the same
    conversations, and every other line a counted reject (a tool query was silently skipped by the dataset)."""
    from train.data.dataset import BuildReport, read_conversations
    from train.evaluation.tasks import get_task, read_references

    path = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps(CONVERSATIONS[0]),
        '{"id": "q1", "query": "weather?", "gold_tools": ["get_weather"]}',
        '{"id": "n", "x": NaN}',
        '{"id": "d", "id": "e"}',
        json.dumps(CONVERSATIONS[1]),
        '{"id": "robot", "messages": [{"role": "robot", "content": "beep"}]}',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = BuildReport()
    trained = [c.id for c in read_conversations([{"name": "canonical", "inputs": [str(path)]}], report)]
    assert trained == ["c0", "c1"] and (report.read, report.rejected_by_reader) == (6, 4)
    references, rejected = read_references([path], None, get_task("heldout"))
    assert [c.id for c in references] == trained and len(rejected) == 4
    assert rejected[0] == {"location": f"{path}:2", "reason": "a tool_query, not a conversation"}
    plugin(
        "keep_all",
        """
        from dataclasses import dataclass
        from train.builders import BuilderSpec

        @dataclass
        class NoArgs:
            pass

        def build(conversations, *, seed, on_drop=None):
            yield from conversations

        SPEC = BuilderSpec(build=build, args=NoArgs)
    """,
    )
    assert main(["data", "build", "keep_all:SPEC", str(path), BUILD_OUT, str(tmp_path / "out")]) == 0
    built = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (built["read"], sum(built["rejected"].values()), built["train"]["rows"]) == (6, 4, 2)
