"""Reading prediction/reference rows and printing what a scorer found: shared by ``eval score`` (one file or
BFCL folders, ``score_bfcl``) and ``eval run``, so no verb imports another.

``read_rows`` reads rows with an id and lists unreadable lines as ``file:line``; ``split_result`` separates a
scorer's metrics from its issues (``ISSUE_KEYS``); ``metric_tables`` and ``issue_lines`` are the plain-text
report; ``counts`` the report's counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from train.base.records import Rejected, SourceError, iter_json_records

ISSUE_KEYS = (
    "missing_prediction_ids",
    "unknown_prediction_ids",
    "duplicate_prediction_ids",
    "duplicate_reference_ids",
    "rows_without_id",
    "unreadable_predictions",
    "reference_errors",
)
MAX_LISTED = 10


def read_rows(path: Path, role: str) -> tuple[list[dict[str, Any]], dict[Any, str], list[dict[str, str]]]:
    """(rows with an id, id -> "file:line", unreadable lines as {"location", "reason"}); SourceError if unreadable."""
    if not path.is_file():
        raise SourceError(f"{path}: {'not a file' if path.exists() else 'no such file'}")
    rows: list[dict[str, Any]] = []
    where: dict[Any, str] = {}
    bad: list[dict[str, str]] = []
    for item in iter_json_records(path, salvage=False):  # a broken array of rows: exit 2, as before
        if isinstance(item, Rejected):
            bad.append({"location": item.location, "reason": item.reason})
            continue
        location, row = item
        row_id = row.get("id") if isinstance(row, dict) else None
        if not isinstance(row_id, (str, int)) or isinstance(row_id, bool):
            bad.append({"location": location, "reason": f"{role} row is not an object with a string 'id'"})
            continue
        rows.append(row)
        where.setdefault(row_id, location)
    return rows, where, bad


def split_result(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, issues): scorers return both in one dict; issues are the keys in ISSUE_KEYS."""
    metrics = {k: v for k, v in result.items() if k not in ISSUE_KEYS and k != "per_item"}
    issues = {k: result[k] for k in ISSUE_KEYS if result.get(k)}
    # A reference the scorer could not use is not scored at all, so it is not "missing a prediction".
    unusable = {error.get("id") for error in issues.get("reference_errors", [])}
    missing = [i for i in issues.get("missing_prediction_ids", []) if i not in unusable]
    issues.pop("missing_prediction_ids", None)
    if missing:
        issues["missing_prediction_ids"] = missing
    return metrics, issues


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _flat(section: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:  # the first column is text (left-aligned), the numbers right-aligned
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))

    return [fmt(header), *(fmt(row) for row in rows)]


def metric_tables(metrics: dict[str, Any]) -> str:
    """Top-level scalars as one table; a section of scalars as metric/value rows; a section of sections
    (by category, by task) as one row per entry and one column per metric."""
    blocks: list[str] = []
    scalars = {k: v for k, v in metrics.items() if not isinstance(v, (dict, list))}
    if scalars:
        blocks.append("\n".join(_table(["metric", "value"], [[k, _cell(v)] for k, v in scalars.items()])))
    for name, section in metrics.items():
        if not isinstance(section, dict) or not section:
            continue
        if not all(isinstance(v, dict) for v in section.values()):
            table = _table([name, "value"], [[key, _cell(value)] for key, value in _flat(section).items()])
            blocks.append("\n".join(table))
            continue
        rows = {row: _flat(values) for row, values in section.items()}
        columns = list(dict.fromkeys(column for values in rows.values() for column in values))
        table = _table(
            [name, *columns], [[row, *(_cell(values.get(c)) for c in columns)] for row, values in rows.items()]
        )
        blocks.append("\n".join(table))
    return "\n\n".join(blocks)


def issue_lines(
    issues: dict[str, Any], where: dict[str, dict[Any, str]], unreadable: list[dict[str, str]]
) -> list[str]:
    """One summary line per kind of issue, then up to MAX_LISTED details each, with file:line where known."""
    lines: list[str] = []

    def listed(title: str, details: list[str]) -> None:
        if details:
            lines.append(f"{title}: {len(details)}")
            lines.extend(f"  {detail}" for detail in details[:MAX_LISTED])
            if len(details) > MAX_LISTED:
                lines.append(f"  ... {len(details) - MAX_LISTED} more")

    ref, pred = where["references"], where["predictions"]
    listed("unreadable lines (skipped)", [f"{bad['location']}: {bad['reason']}" for bad in unreadable])
    listed(
        "references without a prediction (scored wrong)",
        [f"{ref.get(i, '?')}: id {i!r}" for i in issues.get("missing_prediction_ids", [])],
    )
    listed(
        "predictions without a reference (not scored)",
        [f"{pred.get(i, '?')}: id {i!r}" for i in issues.get("unknown_prediction_ids", [])],
    )
    listed("repeated prediction ids (first kept)", [f"id {i!r}" for i in issues.get("duplicate_prediction_ids", [])])
    listed("repeated reference ids (first kept)", [f"id {i!r}" for i in issues.get("duplicate_reference_ids", [])])
    listed(
        "references the scorer cannot use (not scored)",
        [
            f"{ref.get(e.get('id'), '?')}: id {e.get('id')!r}: {e.get('reason')}"
            for e in issues.get("reference_errors", [])
        ],
    )
    listed(
        "other rows not scored",
        [
            json.dumps(row, ensure_ascii=False)
            for row in issues.get("rows_without_id", []) + issues.get("unreadable_predictions", [])
        ],
    )
    return lines


def counts(result: dict[str, Any], issues: dict[str, Any], unreadable: list[dict[str, str]]) -> dict[str, int]:
    return {
        "items": len(result.get("per_item", [])),
        "unreadable_lines": len(unreadable),
        **{key.removesuffix("_ids"): len(value) for key, value in issues.items()},
    }
