"""PAPERS, the fifth registry: the five wings load, and a new paper is one folder, one registration, its recipe.

The toy paper below is written to a temporary folder (a package ``toypaper`` with its ``paper.py``) and a temporary
recipe folder on Hydra's search path; it is registered with one ``PAPERS.register`` line, and nothing in the
package is edited: its config node composes, its check refuses a bad value with its own message, its resume rule
and range hold, its input is checked before training, and its after-training step and evaluation-only job are what
the engine calls. A second toy paper brings a verb of its own and a form of ``eval run`` (``PaperSpec.verbs``,
``eval_run_form``): the CLI lists and runs the verb under its group, ``eval run`` takes the form's options, and
``tooltrain data stats`` imports neither it nor any paper.
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest

from train.papers import PAPERS, PaperSpec, active, specs, summaries

TOY_PAPER = '''
"""A toy paper: a ``toy:`` node with one choice, checked, fixed on resume, with an after-training step."""
from dataclasses import dataclass
from pathlib import Path

from train.engine.config_ranges import Range
from train.papers.spec import PaperSpec

CALLS = []


@dataclass
class ToyConfig:
    level: int = 1
    flavour: str = "plain"
    notes: str = "notes.txt"


def problems(cfg):
    return [] if cfg.toy.flavour in ("plain", "spicy") else [f"toy.flavour={cfg.toy.flavour}: valid: plain, spicy"]


def inputs(cfg):
    return [("toy.notes", cfg.toy.notes)]


def after_training(cfg, model, tokenizer, out, world_size):
    CALLS.append((cfg.toy.level, model, tokenizer, Path(out), world_size))
    return {"toy": {"level": cfg.toy.level}}


def table(cfg, summary):
    from train.engine.paper_table import PaperTable, Unrun

    return PaperTable(
        title="Toy Table 1",
        columns=["A", "B"],
        paper_rows=[("Toy (paper)", {"A": 50.0, "B": 60.0})],
        measured=[("this run", {"A": summary["steps"] * 10.0, "B": Unrun("B needs a GPU")})],
    )


PAPER = PaperSpec(
    title="A toy paper",
    node="toy",
    section=ToyConfig,
    checks=problems,
    resume=("fixed", "the toy level chooses the samples"),
    ranges={"level": Range(1, 3)},
    inputs=inputs,
    after_training=after_training,
    table=table,
)
'''

TOY_RECIPE = """\
# @package _global_
defaults:
  - override /model: tiny_llama
  - override /data: tiny

run_name: toy
toy:
  level: 2
"""


def test_papers_lists_the_five_wings_and_each_spec_loads():
    assert PAPERS.names() == ["metatool", "toolgt", "itc", "ptr", "toolverifier"]
    loaded = dict(specs())
    assert all(isinstance(spec, PaperSpec) for spec in loaded.values())
    assert {name: spec.node for name, spec in loaded.items()} == {
        "metatool": None,
        "toolgt": "toolgt",
        "itc": "itc",
        "ptr": "ptr",
        "toolverifier": "eval.toolbench_verify",
    }
    assert list(summaries()) == ["toolgt", "itc"]
    assert [name for name, spec in loaded.items() if spec.job] == ["ptr"]
    assert [name for name, spec in loaded.items() if spec.after_training] == ["toolverifier"]


def test_a_spec_keeps_its_parts_with_its_node():
    with pytest.raises(ValueError, match="belong to a config node"):
        PaperSpec(title="x", checks=lambda cfg: [])
    with pytest.raises(ValueError, match="fixed\\|free"):
        PaperSpec(title="x", node="x", section=dict, resume=("sometimes", "why"))


@pytest.fixture
def toy(tmp_path: Path, monkeypatch):
    """The toy paper's three places: its folder (a package on sys.path), its registration, its recipe."""
    package = tmp_path / "wing" / "toypaper"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A toy paper\'s wing."""\n')
    (package / "paper.py").write_text(textwrap.dedent(TOY_PAPER))
    recipes = tmp_path / "conf" / "recipe"
    recipes.mkdir(parents=True)
    (recipes / "toy_tiny.yaml").write_text(TOY_RECIPE)
    (tmp_path / "notes.txt").write_text("notes\n")
    monkeypatch.syspath_prepend(str(tmp_path / "wing"))
    monkeypatch.setattr(PAPERS, "_entries", dict(PAPERS._entries))  # the registration is undone after the test
    PAPERS.register("toy", "toypaper.paper:PAPER")  # the one registration
    yield [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "recipe=toy_tiny", f"toy.notes={tmp_path / 'notes.txt'}"]
    sys.modules.pop("toypaper.paper", None)
    sys.modules.pop("toypaper", None)


def test_a_toy_paper_composes_is_checked_and_resumes_by_its_own_rule(toy):
    from train.engine.config import ConfigError, compose, schema
    from train.engine.resume_config import FIXED, rule_for

    cfg = compose(toy)
    assert (cfg.toy.level, cfg.toy.flavour, cfg.run_name) == (2, "plain", "toy")
    assert "toy" in {f.name for f in dataclasses.fields(schema())}
    assert [name for name, _ in active(cfg)] == ["toy"]
    assert rule_for("toy.level") == (FIXED, "the toy level chooses the samples")
    with pytest.raises(ConfigError, match="toy.flavour=sour: valid: plain, spicy"):
        compose([*toy, "toy.flavour=sour"])
    with pytest.raises(ConfigError, match=r"toy.level must be in \[1, 3\]"):
        compose([*toy, "toy.level=7"])
    with pytest.raises(ConfigError, match="unknown key toy.depth"):
        compose([*toy, "+toy.depth=1"])


def test_a_toy_papers_input_is_checked_before_training(toy, tmp_path):
    from train.engine.config import compose
    from train.engine.run_dir import RunSetupError, check_inputs

    check_inputs(compose(toy))  # its notes file is there
    with pytest.raises(RunSetupError, match="toy.notes: .*gone.txt: no such file"):
        check_inputs(compose([*toy, f"toy.notes={tmp_path / 'gone.txt'}"]))


def test_the_engine_calls_a_toy_papers_after_training_step_and_no_other(toy, tmp_path):
    from train.engine.config import compose
    from train.engine.run import after_training

    cfg = compose(toy)
    assert after_training(cfg, "MODEL", "TOKENIZER", tmp_path, 1) == {"toy": {"level": 2}}
    from toypaper.paper import CALLS

    assert CALLS == [(2, "MODEL", "TOKENIZER", tmp_path, 1)]
    assert after_training(compose(["recipe=tiny"]), "MODEL", "TOKENIZER", tmp_path, 1) == {}  # no paper set: nothing
    assert len(CALLS) == 1


def test_the_engine_keeps_a_toy_papers_table_and_only_for_its_runs(toy):
    from train.engine.config import compose
    from train.engine.run import paper_tables

    tables = paper_tables(compose(toy), {"steps": 3})
    assert tables == {
        "toy": {
            "title": "Toy Table 1",
            "columns": ["A", "B"],
            "paper": [{"row": "Toy (paper)", "A": 50.0, "B": 60.0}],
            "measured": [{"row": "this run", "A": 30.0, "B": {"unrun": "B needs a GPU"}}],
            "notes": [],
        }
    }
    assert paper_tables(compose(["recipe=tiny"]), {"steps": 3}) == {}


def test_a_papers_builder_makes_a_run_its_own_without_a_node():
    from train.engine.config import compose
    from train.papers import in_run

    spec = PAPERS.get("metatool")
    assert spec.node is None and spec.builders == ("metatool",)
    assert spec.in_run(compose(["recipe=mt_llama_tiny"]))
    assert not spec.in_run(compose(["recipe=tiny"]))
    assert [name for name, _ in in_run(compose(["recipe=toolgt_tiny"]))] == ["toolgt"]
    assert [name for name, _ in in_run(compose(["recipe=mt_llama_tiny"]))] == ["metatool"]


def test_the_entry_dispatches_an_evaluation_only_job_through_the_registry(monkeypatch):
    from train.engine.config import compose
    from train.engine.entry import evaluation_job

    assert evaluation_job(compose(["recipe=tiny"])) is None  # a training recipe trains
    assert evaluation_job(compose(["recipe=ptr_tiny"])) is PAPERS.get("ptr").job


def test_a_config_with_the_papers_nodes_pickles_for_a_sweeps_jobs(tmp_path):
    """submitit pickles each job's config: the schema built from the registry must be found again by name, in this
    process and in a fresh one (which builds the same schema from its own registry)."""
    import pickle
    import subprocess

    from train.engine.config import compose

    cfg = compose(["recipe=toolgt_tiny", "toolgt.arm=cot"])
    assert pickle.loads(pickle.dumps(cfg)).toolgt.arm == "cot"
    (tmp_path / "cfg.pkl").write_bytes(pickle.dumps(cfg))
    code = "import pickle, sys; print(pickle.load(open(sys.argv[1], 'rb')).toolgt.arm)"
    repo = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-c", code, str(tmp_path / "cfg.pkl")]
    done = subprocess.run(argv, cwd=repo, check=False, capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout.strip()) == (0, "cot"), done.stderr


# ---------------------------------------------------------------- a paper's own verb, found through its spec

TOY_VERB = '''
"""``tooltrain eval toyverb NAME``: the toy paper's own verb."""
import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")


def run(args: argparse.Namespace) -> int:
    print(f"toy verb: hello {args.name}")
    return 3
'''
TOY_FORM = '''
"""``tooltrain eval run heldout MODEL --toy-form``: the toy paper's form of ``eval run``."""


def add_arguments(parser):
    parser.add_argument("--toy-form", action="store_true", help="the toy paper's form")


def chosen(args):
    return args.toy_form


def problem(args):
    return f"--toy-form is for heldout, not {args.bench}" if args.toy_form and args.bench != "heldout" else None


def run(args, load_model, inputs):
    print(f"toy form on {args.bench}, reading {[path.name for path in inputs]}")
    return 4
'''
TOY_VERB_PAPER = """
from train.papers.spec import PaperSpec

PAPER = PaperSpec(
    title="A toy paper with a verb",
    verbs={"eval toyverb": ("toyverbpaper.verbs.toyverb", "say hello")},
    eval_run_form="toyverbpaper.verbs.toyform",
)
TAKEN = PaperSpec(title="A verb of the CLI's own name", verbs={"eval score": ("toyverbpaper.verbs.toyverb", "x")})
"""


def _toy_verb_wing(root: Path) -> None:
    """The toy paper's folder: ``toyverbpaper/paper.py`` (its spec, naming the verb) and ``verbs/toyverb.py``."""
    (root / "toyverbpaper" / "verbs").mkdir(parents=True)
    (root / "toyverbpaper" / "__init__.py").write_text("")
    (root / "toyverbpaper" / "paper.py").write_text(textwrap.dedent(TOY_VERB_PAPER))
    (root / "toyverbpaper" / "verbs" / "__init__.py").write_text("")
    (root / "toyverbpaper" / "verbs" / "toyverb.py").write_text(textwrap.dedent(TOY_VERB))
    (root / "toyverbpaper" / "verbs" / "toyform.py").write_text(textwrap.dedent(TOY_FORM))


@pytest.fixture
def toy_verb(tmp_path: Path, monkeypatch):
    _toy_verb_wing(tmp_path / "wing")
    monkeypatch.syspath_prepend(str(tmp_path / "wing"))
    monkeypatch.setattr(PAPERS, "_entries", dict(PAPERS._entries))  # the registration is undone after the test
    PAPERS.register("toyverb", "toyverbpaper.paper:PAPER")  # the one registration
    yield
    for name in [name for name in sys.modules if name.split(".")[0] == "toyverbpaper"]:
        sys.modules.pop(name)


def test_a_toy_papers_verb_is_listed_under_its_group_and_runs(toy_verb, capsys):
    from train.cli import VERBS, main, verb_tables

    eval_verbs = list(verb_tables()["eval"])
    assert eval_verbs == [*VERBS["eval"], "retrieval", "recommend", "toyverb"]  # the CLI's own, then PAPERS order
    with pytest.raises(SystemExit) as shown:
        main(["eval", "--help"])
    assert shown.value.code == 0
    listed = capsys.readouterr().out
    assert "{score,run,retrieval,recommend,toyverb}" in listed and "say hello" in listed
    assert "toyverbpaper.verbs.toyverb" not in sys.modules  # listing a verb does not import it
    assert main(["eval", "toyverb", "world"]) == 3
    assert capsys.readouterr().out == "toy verb: hello world\n"


def test_eval_run_takes_a_toy_papers_form_through_the_registry(toy_verb, capsys, tmp_path):
    from train.cli import main

    with pytest.raises(SystemExit):
        main(["eval", "run", "--help"])
    assert "--toy-form" in capsys.readouterr().out
    (tmp_path / "refs.jsonl").write_text("")
    assert main(["eval", "run", "heldout", "tiny", "--toy-form", "--data", str(tmp_path / "refs.jsonl")]) == 4
    assert capsys.readouterr().out == "toy form on heldout, reading ['refs.jsonl']\n"
    assert main(["eval", "run", "nexus", "tiny", "--toy-form"]) == 2
    assert capsys.readouterr().err == "error: --toy-form is for heldout, not nexus\n"


def test_a_paper_verb_cannot_take_a_verbs_name(toy_verb):
    from train.cli import verb_tables

    PAPERS.register("taken", "toyverbpaper.paper:TAKEN")
    with pytest.raises(ValueError, match=r"paper taken: verb 'eval score' is taken \(by train.commands.eval.score\)"):
        verb_tables()
    with pytest.raises(ValueError, match="'GROUP VERB'"):
        PaperSpec(title="x", verbs={"recommend": ("m", "help")})


def test_data_stats_imports_no_paper_verb_nor_paper(tmp_path):
    """``tooltrain data stats`` (one of the CLI's own verbs), with a toy paper's verb registered: no verb module of a
    paper is imported, nor any paper's spec, nor torch."""
    import json
    import subprocess

    _toy_verb_wing(tmp_path / "wing")
    rows = tmp_path / "rows.jsonl"
    row = {"id": "a", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    rows.write_text(json.dumps(row) + "\n")
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path / 'wing')!r})\n"
        "from train.papers import PAPERS\n"
        "PAPERS.register('toyverb', 'toyverbpaper.paper:PAPER')\n"
        "from train.cli import main\n"
        f"rc = main(['data', 'stats', {str(rows)!r}])\n"
        "wings = ('toyverbpaper', *(f'train.papers.{name}' for name in PAPERS.names()), 'torch')\n"
        "print(rc, sorted(m for m in sys.modules if m.startswith(wings)))\n"
    )
    repo = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-c", code]
    done = subprocess.run(argv, cwd=repo, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"
