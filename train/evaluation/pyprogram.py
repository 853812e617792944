"""Run a SambaNova ToolBench Home/Booking program against a recording mock ``API`` — without executing it.

The Home and Booking tasks answer with short Python programs::

    API.select_booking_type("trip tickets")
    location_from = Loc("Ontario")
    API.set_origin(location_from)
    API.set_departure_date(Date(12, 19, 2022))
    API.search()

SambaNova's evaluator ``exec``s such a program with a Python ``API`` object whose setters fill a
``search_criteria`` dict, then compares the dicts of prediction and gold (``evaluator/home_search_evaluator.py``
and ``booking_evaluator.py`` in sambanova/toolbench). Model text is never executed here: ``run_program``
parses it with ``ast``, walks the statements and replays each ``API`` call on a mock that records the same
fields by the same rules. The result is the field dict; anything the walk cannot replay raises
``ProgramError`` with the reason, which the scorer records (the original would have crashed, or we refuse
to run what we cannot read).

What a program may contain
--------------------------
* ``API.<method>(arg)`` statements, one argument given positionally or by the method's parameter name;
* ``name = <value>`` assignments, and names used as arguments once assigned;
* values: Python literals (strings, numbers, booleans, None, lists, tuples, dicts; unary minus), names,
  and ``Loc(location)`` / ``Date(month, day, year)`` (Booking only) whose arguments are values again.
Anything else — another call, an attribute of something other than ``API``, arithmetic, f-strings,
``import``, loops, an unknown method — makes the program invalid, with the statement's line in the reason.

Rules restated from SambaNova's mock APIs (the facts the gold fields depend on)
-------------------------------------------------------------------------------
* Field names are SambaNova's ``search_criteria`` keys (``set_min_ticket_price`` -> ``min_price_ticket``,
  ``select_transportation`` -> ``means_of_transportation``, ``set_hotel_location`` -> ``location`` ...);
  ``FIELDS`` below lists them all.
* ``search()`` adds defaults: Home ``min_price=0`` and ``min_square_feet=0``; Booking ``min_price_ticket=0``
  and ``min_price_room=0``; for ``hotels`` and ``both`` ``num_rooms=1``; for ``both`` the departure/return
  dates default to the check-in/check-out dates. Booking's ``search()`` also requires, per booking type,
  the fields the type needs (transportation, origin, destination, departure date; hotel location, check-in,
  check-out). Without ``search()`` no default is added.
* Home: ``set_location`` must come first, ``set_buy_or_rent`` ("buy" or "rent") second, every other setter
  after it. ``select_home_type`` takes a list of strings, lowercases them, checks them against the buy or
  rent choices, sorts them and stores them joined with ","; so ``["Condo", "House"]`` and ``["house",
  "condo"]`` are the same field. No other string is normalised: ``"Cape Coral"`` != ``"cape coral"``.
* Booking: ``select_booking_type`` ("hotels", "trip tickets", "both") must come first;
  ``select_transportation`` takes "flight", "train", "bus" or "cruise"; origin, destination and hotel
  location must be ``Loc`` values (stored as their location), the four dates ``Date`` values (stored as
  ``f"{month}-{day}-{year}"``, so ``Date(12, 9, 2022)`` is ``"12-9-2022"`` and differs from ``Date(12,
  "09", 2022)``). Other setters store their argument as given.
* ``clear()`` empties the fields.
* Values compare with Python ``==`` as in the original (``2 == 2.0``).

One convention of ours, from the data: ToolVerifier's demonstrations (the ``api`` column of ``test.csv``)
list every setter and pass the string ``'None'`` to the ones the instruction does not mention. A setter
called with ``'None'`` or ``None`` therefore leaves its field unset (it is skipped before any check), so
the csv form and the jsonl gold of each case give the same fields.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from train.base.pysyntax import MAX_SOURCE_CHARS, PySyntaxError, literal


class ProgramError(ValueError):
    """The program cannot be replayed; the message says which statement and why."""


@dataclass(frozen=True)
class Loc:
    location: Any


@dataclass(frozen=True)
class Date:
    month: Any
    day: Any
    year: Any

    @property
    def text(self) -> str:
        return f"{self.month}-{self.day}-{self.year}"  # SambaNova's Date.date, formatted the same way


@dataclass(frozen=True)
class Setter:
    field: str
    param: str = "value"
    kind: str = "any"  # "any" | "loc" | "date" | "home_types" | "choice"
    choices: tuple[str, ...] = ()


_BUY_TYPES = ("house", "townhouse", "condo", "land", "multi-family", "mobile", "co-op")
_RENT_TYPES = ("house", "townhouse", "condo", "apartment")

HOME_SETTERS: dict[str, Setter] = {
    "set_location": Setter("location"),
    "set_buy_or_rent": Setter("buy_or_rent", kind="choice", choices=("buy", "rent")),
    "select_home_type": Setter("home_type", param="home_types", kind="home_types"),
    **{
        f"set_{field}": Setter(field)
        for field in (
            "max_price", "min_price", "max_square_feet", "min_square_feet", "num_baths", "num_beds",
            "num_garages", "num_swimming_pools", "floor_number", "max_commute_time", "num_balconies",
        )
    },
}  # fmt: skip

BOOKING_SETTERS: dict[str, Setter] = {
    "select_booking_type": Setter("booking_type", "booking_type", "choice", ("hotels", "trip tickets", "both")),
    "select_transportation": Setter(
        "means_of_transportation", "transportation_type", "choice", ("flight", "train", "bus", "cruise")
    ),
    "set_origin": Setter("location_from", kind="loc"),
    "set_destination": Setter("location_to", kind="loc"),
    "set_min_ticket_price": Setter("min_price_ticket"),
    "set_max_ticket_price": Setter("max_price_ticket"),
    "set_num_adults": Setter("num_adults"),
    "set_num_children": Setter("num_children"),
    "set_departure_date": Setter("departure_date", kind="date"),
    "set_return_date": Setter("return_date", kind="date"),
    "set_hotel_location": Setter("location", kind="loc"),
    "set_checkin_date": Setter("checkin_date", kind="date"),
    "set_checkout_date": Setter("checkout_date", kind="date"),
    "set_num_rooms": Setter("num_rooms"),
    "select_room_type": Setter("room_type"),
    "set_min_room_price": Setter("min_price_room"),
    "set_max_room_price": Setter("max_price_room"),
}

SETTERS = {"home": HOME_SETTERS, "booking": BOOKING_SETTERS}
FIELDS = {task: sorted({s.field for s in setters.values()}) for task, setters in SETTERS.items()}
_CONSTRUCTORS = {"home": {}, "booking": {"Loc": (Loc, ("location",)), "Date": (Date, ("month", "day", "year"))}}
_BOOKING_REQUIRED = {
    "trip tickets": ("means_of_transportation", "location_from", "location_to", "departure_date"),
    "hotels": ("location", "checkin_date", "checkout_date"),
    "both": ("means_of_transportation", "location_from", "location_to", "location", "checkin_date", "checkout_date"),
}


def run_program(text: Any, task: str) -> dict[str, Any]:
    """The fields SambaNova's mock API would hold after running ``text`` (task "home" or "booking")."""
    if task not in SETTERS:
        raise ValueError(f"no mock API for task {task!r}; tasks with one: {', '.join(SETTERS)}")
    fields: dict[str, Any] = {}
    for line, method, value in _api_calls(text, task):
        try:
            _apply(fields, task, method, value)
        except ProgramError as err:
            raise ProgramError(f"line {line}: {err}") from None
    return fields


def _api_calls(text: Any, task: str):
    """Yield ``(line, method, argument value)`` for each API call, resolving names and constructors."""
    module = _parse(text)
    names: dict[str, Any] = {}
    for statement in module.body:
        line = statement.lineno
        try:
            if isinstance(statement, ast.Assign):
                if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
                    raise ProgramError("only 'name = value' assignments are allowed")
                names[statement.targets[0].id] = _value(statement.value, names, task)
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                method, argument = _api_call(statement.value, names, task)
                yield line, method, argument
            else:
                raise ProgramError(f"unsupported statement {_source(statement)}")
        except ProgramError as err:
            raise ProgramError(f"line {line}: {err}") from None


_NO_ARGUMENT = object()


def _api_call(call: ast.Call, names: dict[str, Any], task: str) -> tuple[str, Any]:
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "API"):
        raise ProgramError(f"{_source(call)} is not a call on API")
    method = func.attr
    if method in ("search", "clear"):
        if call.args or call.keywords:
            raise ProgramError(f"API.{method}() takes no arguments")
        return method, _NO_ARGUMENT
    setter = SETTERS[task].get(method)
    if setter is None:
        raise ProgramError(f"API has no method {method!r}")
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise ProgramError(f"API.{method}: * and ** arguments are not allowed")
    if len(call.args) + len(call.keywords) != 1 or (call.keywords and call.keywords[0].arg != setter.param):
        raise ProgramError(f"API.{method} takes exactly one argument ({setter.param})")
    node = call.args[0] if call.args else call.keywords[0].value
    return method, _value(node, names, task)


def _value(node: ast.expr, names: dict[str, Any], task: str) -> Any:
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ProgramError(f"name {node.id!r} is not defined")
        return names[node.id]
    if isinstance(node, ast.Call):
        return _construct(node, names, task)
    try:
        return literal(node)
    except PySyntaxError as err:
        raise ProgramError(str(err)) from None


def _construct(call: ast.Call, names: dict[str, Any], task: str) -> Loc | Date:
    name = call.func.id if isinstance(call.func, ast.Name) else None
    if name not in _CONSTRUCTORS[task]:
        allowed = "API calls and Loc/Date" if task == "booking" else "API calls"
        raise ProgramError(f"call {_source(call)} is not a value (only {allowed})")
    cls, params = _CONSTRUCTORS[task][name]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise ProgramError(f"{name}: * and ** arguments are not allowed")
    given: dict[str, Any] = {}
    for param, node in zip(params, call.args):
        given[param] = _value(node, names, task)
    for keyword in call.keywords:
        if keyword.arg not in params or keyword.arg in given:
            raise ProgramError(f"{name}() got an unexpected or repeated argument {keyword.arg!r}")
        given[keyword.arg] = _value(keyword.value, names, task)
    if len(call.args) > len(params) or set(given) != set(params):
        raise ProgramError(f"{name}() takes exactly {len(params)} argument(s): {', '.join(params)}")
    return cls(**given)


def _apply(fields: dict[str, Any], task: str, method: str, value: Any) -> None:
    if method == "clear":
        fields.clear()
    elif method == "search":
        (_search_home if task == "home" else _search_booking)(fields)
    elif value is None or value == "None":
        return  # ToolVerifier's "not mentioned" placeholder: the field stays unset
    else:
        (_set_home if task == "home" else _set_booking)(fields, method, SETTERS[task][method], value)


def _set_home(fields: dict[str, Any], method: str, setter: Setter, value: Any) -> None:
    if method == "set_location":
        if fields:
            raise ProgramError("set_location must be called before any other criterion")
    elif method == "set_buy_or_rent":
        _check_choice(method, setter, value)
        if "location" not in fields or len(fields) != 1:
            raise ProgramError("set_buy_or_rent must be called right after set_location")
    elif "buy_or_rent" not in fields:
        raise ProgramError(f"{method} called before set_buy_or_rent")
    if setter.kind == "home_types":
        value = _home_types(value, fields["buy_or_rent"])
    fields[setter.field] = value


def _home_types(value: Any, buy_or_rent: str) -> str:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ProgramError("select_home_type expects a list of strings")
    allowed = _RENT_TYPES if buy_or_rent == "rent" else _BUY_TYPES
    types = sorted(t.lower() for t in value)
    invalid = [t for t in types if t not in allowed]
    if invalid:
        raise ProgramError(f"invalid {buy_or_rent!r} home type(s) {invalid}; choices: {', '.join(allowed)}")
    return ",".join(types)


def _set_booking(fields: dict[str, Any], method: str, setter: Setter, value: Any) -> None:
    if method == "select_booking_type":
        _check_choice(method, setter, value)
        if fields:
            raise ProgramError("select_booking_type must be called before any other criterion")
    elif setter.kind == "choice":
        _check_choice(method, setter, value)
    elif setter.kind == "loc":
        if not isinstance(value, Loc):
            raise ProgramError(f"{method} expects a Loc(...) value, got {_describe(value)}")
        value = value.location
    elif setter.kind == "date":
        if not isinstance(value, Date):
            raise ProgramError(f"{method} expects a Date(month, day, year) value, got {_describe(value)}")
        value = value.text
    fields[setter.field] = value


def _check_choice(method: str, setter: Setter, value: Any) -> None:
    if not isinstance(value, str) or value not in setter.choices:
        raise ProgramError(f"{method}: {value!r} is not one of {', '.join(map(repr, setter.choices))}")


def _search_home(fields: dict[str, Any]) -> None:
    fields.setdefault("min_price", 0)
    fields.setdefault("min_square_feet", 0)


def _search_booking(fields: dict[str, Any]) -> None:
    fields.setdefault("min_price_ticket", 0)
    fields.setdefault("min_price_room", 0)
    booking_type = fields.get("booking_type")
    if booking_type is None:
        raise ProgramError("search() before select_booking_type")
    missing = [field for field in _BOOKING_REQUIRED[booking_type] if field not in fields]
    if missing:
        raise ProgramError(f"search() for {booking_type!r} without {', '.join(missing)}")
    if booking_type == "both":
        fields.setdefault("departure_date", fields["checkin_date"])
        fields.setdefault("return_date", fields["checkout_date"])
    if booking_type in ("hotels", "both"):
        fields.setdefault("num_rooms", 1)


def _parse(text: Any) -> ast.Module:
    if not isinstance(text, str):
        raise ProgramError(f"expected program text, got {type(text).__name__}")
    if len(text) > MAX_SOURCE_CHARS:
        raise ProgramError(f"program of {len(text)} characters exceeds {MAX_SOURCE_CHARS}")
    try:
        return ast.parse(text.strip(), mode="exec")
    except SyntaxError as err:
        raise ProgramError(f"not valid Python: {err.msg} at line {err.lineno}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ProgramError("not valid Python: nested too deeply or contains NUL") from None


def _source(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except (RecursionError, ValueError):
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:80]
