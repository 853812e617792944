"""One spelling across the CLI's verbs: ``-o`` always names a file (``--output``) and ``--out-dir`` always a folder;
``eval run`` and ``eval score`` take BENCH first; a recipe is ``recipe=NAME`` (``launch`` included). Every verb's
parser is listed here, so a new verb or option that breaks the rule fails. The old spellings a user may still type
are refused with the new one."""

from __future__ import annotations

import argparse

import pytest

from train.cli import TOP_VERBS, _build_parser, demo_parser, main, verb_tables
from train.commands.outputs import RenamedOption, output_file, output_path

# Folder options spelled any other way than --out-dir.
FOLDER_SPELLINGS = ("--output-dir", "--outdir", "--out", "--output-folder", "--out-folder", "--dir")


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    """'group verb' (or 'verb') -> the parser that verb runs with."""
    from train.commands import launch

    parsers = {"demo": demo_parser(), "launch": launch.build_parser()}
    groups = verb_tables().items()  # the CLI's own verbs and the papers'
    commands = [[group, verb] for group, verbs in groups for verb in verbs] + [[verb] for verb in TOP_VERBS]
    for command in commands:
        root = _build_parser(command)
        for part in command:
            root = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction)).choices[part]
        parsers[" ".join(command)] = root
    return parsers


PARSERS = verb_parsers()


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, (argparse._HelpAction, RenamedOption))]


def test_every_verb_is_listed():
    assert set(PARSERS) >= {
        "data build",
        "data convert",
        "data render",
        "eval run",
        "eval score",
        "eval retrieval",
        "bench train",
        "export",
        "demo",
        "launch",
    }
    assert len(PARSERS) == sum(map(len, verb_tables().values())) + len(TOP_VERBS) + 2


@pytest.mark.parametrize("verb", sorted(PARSERS))
def test_o_is_a_file_and_out_dir_a_folder(verb):
    for action in options(PARSERS[verb]):
        spelled = action.option_strings
        assert not set(spelled) & set(FOLDER_SPELLINGS), f"{verb} {spelled}: a folder is --out-dir"
        if "-o" in spelled:
            assert spelled == ["-o", "--output"], f"{verb}: -o is --output, a file; got {spelled}"
            assert action.type in (output_file, output_path), f"{verb} -o: an output file path type"
            assert "folder" not in (action.help or "") and "DIR" not in (action.metavar or ""), f"{verb} -o: a file"
        if "--out-dir" in spelled:
            assert spelled == ["--out-dir"] and action.metavar == "DIR", f"{verb}: --out-dir DIR alone, got {spelled}"


def test_the_folder_verbs_take_out_dir():
    folders = {
        verb for verb, parser in PARSERS.items() if any("--out-dir" in a.option_strings for a in options(parser))
    }
    assert folders == {"data build", "export", "bench train", "demo"}


def test_eval_run_and_eval_score_take_bench_first():
    def positionals(verb: str) -> list[str]:
        return [a.dest for a in PARSERS[verb]._actions if not a.option_strings]

    assert positionals("eval run")[0] == positionals("eval score")[0] == "bench"
    assert positionals("eval run") == ["bench", "model"]


def test_a_recipe_is_named_recipe_equals_name_everywhere():
    # launch takes no RECIPE positional: recipe=NAME is one of its overrides, as for train and bench train
    for verb in ("launch", "bench train"):
        assert [a.dest for a in PARSERS[verb]._actions if not a.option_strings] == ["overrides"]
        assert "recipe" not in {a.dest for a in PARSERS[verb]._actions}


@pytest.mark.parametrize(
    "argv, old",
    [
        (["data", "build", "metatool", "in.jsonl", "-o", "out"], "-o"),
        (["data", "build", "metatool", "in.jsonl", "--output", "out"], "--output"),
        (["export", "runs/x", "-o", "out"], "-o"),
        (["export", "runs/x", "--output", "out"], "--output"),
        (["bench", "train", "recipe=tiny", "-o", "out"], "-o"),
        (["bench", "train", "recipe=tiny", "--output-dir", "out"], "--output-dir"),
        (["demo", "-o", "out"], "-o"),
        (["demo", "--output-dir", "out"], "--output-dir"),
    ],
)
def test_an_old_folder_spelling_is_refused_with_the_new_one(capsys, tmp_path, monkeypatch, argv, old):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].endswith(f"error: {old} is now --out-dir (-o always names a file, --out-dir a folder)")
    assert list(tmp_path.iterdir()) == []  # nothing ran
