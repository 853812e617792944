"""A paper's main table at the end of a run: the paper's rows with the run's measured row beside them.

Every recipe ends with its paper's table (``PaperSpec.table``): printed last in the end-of-run summary, kept in
``summary.json`` under ``paper_tables`` and drawn under report.png's panels. A cell the run could not measure is
``Unrun(why)``, never a blank or a zero: it prints as ``n/a[k]`` with the reason as footnote ``[k]`` (a paper
column whose benchmark was not run here, a model the run is not, a tiny recipe's subset).

The table travels as plain JSON (``to_dict``) and prints from that form (``table_lines``), so ``summary.json`` alone
reprints it; the rule for a cell's text lives in ``cell_text`` and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Unrun:
    """A measured cell this run could not fill, and why (one short clause: "BFCL live not in the tiny eval")."""

    why: str


@dataclass
class PaperTable:
    """``title``: the paper's table ("ToolGT Table 2: BFCL and Nexus, %"); ``columns``: its column names;
    ``paper_rows``: ``(label, {column: value})`` as the paper prints them (a column the paper left empty is absent);
    ``measured``: the run's rows, ``(label, {column: value or Unrun})`` (the trained model, and the base model
    where the run evaluated it at step 0); ``notes``: lines printed under the table (what was measured on what)."""

    title: str
    columns: list[str]
    paper_rows: list[tuple[str, dict[str, float | None]]]
    measured: list[tuple[str, dict[str, float | Unrun]]]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def cell(value: float | Unrun | None) -> Any:
            return {"unrun": value.why} if isinstance(value, Unrun) else value

        return {
            "title": self.title,
            "columns": list(self.columns),
            "paper": [{"row": label, **{c: row.get(c) for c in self.columns}} for label, row in self.paper_rows],
            "measured": [
                {"row": label, **{c: cell(row.get(c, Unrun("not measured"))) for c in self.columns}}
                for label, row in self.measured
            ],
            "notes": list(self.notes),
        }


def cell_text(value: Any, footnotes: list[str]) -> str:
    """A cell as printed: a number with two decimals, ``-`` where the paper printed nothing, ``n/a[k]`` for a cell
    the run could not measure (its reason becomes footnote k, shared by cells with the same reason)."""
    if isinstance(value, dict) and "unrun" in value:
        if value["unrun"] not in footnotes:
            footnotes.append(value["unrun"])
        return f"n/a[{footnotes.index(value['unrun']) + 1}]"
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.2f}"


def table_lines(table: dict[str, Any]) -> list[str]:
    """The table (``PaperTable.to_dict``'s form) as fixed-width lines: title, header, the paper's rows, a rule,
    the measured rows, then the footnotes and notes."""
    columns = table["columns"]
    footnotes: list[str] = []
    rows = [[row["row"], *(cell_text(row.get(c), footnotes) for c in columns)] for row in table["paper"]]
    measured = [[row["row"], *(cell_text(row.get(c), footnotes) for c in columns)] for row in table["measured"]]
    header = ["", *columns]
    widths = [max(len(line[i]) for line in (header, *rows, *measured)) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  " + "  ".join([cells[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(cells[1:], widths[1:]))])

    rule = "  " + "-" * (sum(widths) + 2 * (len(widths) - 1))
    lines = [table["title"], line(header), *(line(row) for row in rows), rule, *(line(row) for row in measured)]
    lines += [f"  [{k}] {why}" for k, why in enumerate(footnotes, 1)]
    lines += [f"  {note}" for note in table.get("notes") or []]
    return lines


def measured_value(
    evals: dict[str, Any], bench: str, metric: str, when: str = "after", scale: float = 100.0
) -> float | Unrun:
    """``summary["eval"][bench][when][metric]`` times ``scale`` (rates to the papers' percent), or ``Unrun``
    saying why it is missing. ``when``: ``after`` (the last evaluation of the trained model) or ``before`` (step 0:
    the base model, when the run evaluated it)."""
    point = (evals.get(bench) or {}).get(when)
    if point is None:
        moment = "after training" if when == "after" else "at step 0 (eval.at_start)"
        return Unrun(f"{bench} was not evaluated {moment}")
    value = point.get(metric)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return Unrun(f"{bench} logged no {metric}")
    return value * scale


__all__ = ["PaperTable", "Unrun", "cell_text", "measured_value", "table_lines"]
