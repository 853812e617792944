"""ITC's spec (``PAPERS["itc"]``): the ``itc:`` config node its recipes set, its check and resume rule, and
``--summary itc`` for ``eval run itc`` and ``eval score itc``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from train.papers.spec import PaperSpec, Summary, fed_to_builder


@dataclass
class ITCConfig:
    """The ITC recipes' choice (seed 002): ``itc.languages=en`` is Table 7's English-only arm (training tasks in
    those languages only; the test set is unchanged). A comma list of Table 10's language codes, "" for all. The
    itc recipes feed it to the builder as ``data.builder_args.languages: ${itc.languages}``."""

    languages: str = ""


def problems(cfg: Any) -> list[str]:
    """``itc.languages`` must be what the builder is given, as ``toolgt.*``. The builder's own check (``make_args``,
    in the config's data checks) names an unknown language and lists the valid ones."""
    return fed_to_builder(cfg, "itc", ("languages",))


def summary(bench: str, metrics: dict[str, Any], names: list[str]) -> tuple[list[str], dict[str, Any]]:
    from train.papers.itc.paper_tables import summary as tables_summary

    return tables_summary(metrics, names)


def table(cfg: Any, summary: dict[str, Any]) -> Any:
    from train.papers.itc.table import table as itc_table

    return itc_table(cfg, summary)


PAPER = PaperSpec(
    title="International Tool Calling (seed 002)",
    node="itc",
    section=ITCConfig,
    checks=problems,
    resume=("fixed", "ITC's training languages choose the training samples (data.builder_args.languages)"),
    summary=Summary(
        lines=summary,
        run_benches=("itc",),
        score_benches=("itc",),
        help="itc: the ITC paper's Table 3 / 5 / 7 rows for the model beside the measured macro and micro numbers",
    ),
    table=table,
    builders=("itc",),
)
