"""The ITC builder (seed 002, §3-§5.1, Figs 4 and 17-20): canonical conversations -> International Tool Calling tasks.

ITC's dataset is not public; this builds tasks in its exact format from any canonical corpus (glaive, ToolACE, ...):

1. Tasks. A conversation without tools is rejected (an ITC task always comes with its API list). Every assistant
   turn that calls tools right after the user starts one task: query = the user turns since the previous call
   turn (joined by a newline), gold = its calls. When tool results follow and the next assistant turn calls again
   (no user turn between), that turn belongs to the same task: a **nested** task, multi-turn (Fig. 20). A
   conversation with tools and no call turn gives one no-call task from its first answer: Action ``[]``.
   ``meta.task_type``: ``single`` (one call), ``repeated`` (one API, several calls), ``parallel`` (several APIs in
   one answer), ``nested`` (calls chained through tool results), ``none`` (no call).
2. Language. ``meta.language`` of the conversation when it has one, else langid of all its user turns over Table
   10's 29 languages (``train.papers.itc.teacher.TABLE10_LANGUAGES``): one short query alone is often misread (four
   English glaive queries read as Italian).
3. Split by API (§3): the APIs (tool names) are shuffled with ``split_seed`` (42 by default; NOT the run's seed, so
   a run with ``seed=7`` trains on the side of the same split as a ``test.jsonl`` built with the default) and moved
   to the test side one by one until the tasks offering any of them reach ``test_fraction`` of all tasks; a task
   offering a test API is a test task, so no training task offers (nor calls) a test API. Tasks are split before
   any filter, so a filtered build (``languages=en``, Table 7's EN ablation) keeps the same test set.
4. ``languages=en`` (comma list, "" = all) keeps training tasks in those languages only; test tasks are all kept
   (Table 7 evaluates both arms on the same non-English test data).
5. Thought. The teacher writes the Thought of each answer from (query, APIs, gold calls, language):
   ``train.papers.itc.teacher``. A Thought whose langid language is not the query's is rejected (counted), as is a
   task in
   a language the offline teacher does not write (its Thoughts are English and Chinese only).

Each task is a conversation: system = Fig. 17's prompt with the offered APIs as Fig. 4 records (``country`` from the
conversation's ``meta.country``, else the ``country`` argument), the user's query, and the assistant's answer as
TEXT, ``json{"Thought": ..., "Action": "[api(p='v')]"}``, with no ``tool_calls`` (conversations carry no ``tools``:
the APIs are in the prompt), so any native chat format trains the JSON answer. A nested task's tool results are one
``user`` turn holding the results' text (one per line): a ``tool`` turn must answer a structured call (validate and
the native formats link results to calls), and a text answer has none. ``meta``: ``task_type``, ``language``,
``split``, ``source_id``, ``turn`` (the scored answer: the last), ``apis``, ``country``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from train.base.languages import language_classifier
from train.papers.itc import teacher as prompts
from train.schema import Conversation, Message, Tool, ToolCall
from train.sources.itc import parse_answer
from train.teacher import (
    StageParams,
    Teacher,
    TeacherError,
    TeacherRequest,
    TeacherUnavailable,
    default_cache,
    make_backend,
    teacher_config_problem,
)

BUILDER_VERSION = "2"  # 2: the split follows split_seed, not the run seed
SPLITS = ("train", "test", "all")
SOURCES = ("synth", "release")
RELEASE_SOURCE = "itc_release"  # meta.source of train.sources.itc_release's rows
TASK_TYPES = ("single", "repeated", "parallel", "nested", "none")


@dataclass
class ITCOptions:
    """``data.builder_args`` of a recipe and ``data build itc key=value``: one set of arguments."""

    split: str = "train"  # train | test | all: the side the recipe's builder yields (data build writes both)
    # synth: build ITC tasks from another corpus; release: the ITC release's rows (the itc_release reader)
    # passed through as they are: their own Thoughts, their own split, no teacher
    source: str = "synth"
    test_fraction: float = 0.1  # share of tasks whose APIs are held out for test (1: every task is a test task)
    # the split's own seed, not the run's: a run with another seed must not train on a prebuilt test.jsonl's APIs
    split_seed: int = 42
    languages: str = ""  # comma list of training languages ("en": Table 7's EN ablation); "" = all
    country: str = "Global"  # the records' country when a conversation's meta has none (Fig. 16: "Global")
    teacher: dict[str, Any] = field(default_factory=lambda: {"kind": "offline"})  # train.teacher.make_backend
    cache_dir: str = ""  # "" = none for offline, ~/.cache/tooltrain/teacher otherwise; "none" = no cache
    thought_temperature: float = 0.0
    thought_max_tokens: int = 512

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> ITCOptions:
        options = cls(**args)
        if options.source not in SOURCES:
            raise ValueError(f"itc builder: unknown source {options.source!r}; valid: {', '.join(SOURCES)}")
        if options.split not in SPLITS:
            raise ValueError(f"itc builder: unknown split {options.split!r}; valid: {', '.join(SPLITS)}")
        if not 0.0 < options.test_fraction <= 1.0:
            raise ValueError(f"itc builder: test_fraction must be in (0, 1], got {options.test_fraction}")
        unknown = sorted(set(options.language_set()) - set(prompts.TABLE10_LANGUAGES))
        if unknown:
            raise ValueError(
                f"itc builder: unknown language(s) {unknown}; valid: {', '.join(prompts.TABLE10_LANGUAGES)}"
            )
        options.teacher = dict(options.teacher or {"kind": "offline"})
        problem = teacher_config_problem(options.teacher, "itc builder")
        if problem:
            raise ValueError(problem)
        return options

    def language_set(self) -> tuple[str, ...]:
        return tuple(word.strip() for word in self.languages.split(",") if word.strip())


@dataclass
class Step:
    """One answer of a task: the tool results it follows (nested steps) and its gold calls."""

    calls: list[ToolCall]
    results: list[str] = field(default_factory=list)


@dataclass
class Task:
    id: str
    source_id: str
    query: str
    tools: list[Tool]
    steps: list[Step]
    language: str
    country: str

    @property
    def task_type(self) -> str:
        if len(self.steps) > 1:
            return "nested"
        calls = self.steps[0].calls
        if not calls:
            return "none"
        if len(calls) == 1:
            return "single"
        return "repeated" if len({c.name for c in calls}) == 1 else "parallel"

    @property
    def apis(self) -> list[str]:
        return [t.name for t in self.tools]


def langid_of() -> Callable[[str], str]:
    """langid over Table 10's languages (train.base.languages: one decoded model per process)."""
    return language_classifier(tuple(prompts.TABLE10_LANGUAGES))


def tasks_of(conv: Conversation, country: str, note: Callable[[str], None]) -> list[Task]:
    """The conversation's ITC tasks (see the module docstring, 1); language left to the caller. ``note(reason)``
    hears why a conversation gives no task, and each call turn that starts none."""
    if not conv.tools:
        note("no tools offered (an ITC task comes with its API list)")
        return []
    country = conv.meta.get("country") if isinstance(conv.meta.get("country"), str) else country
    tasks: list[Task] = []
    users: list[str] = []
    messages = conv.messages
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role == "user":
            users.append(message.content or "")
        elif message.role == "assistant" and message.tool_calls and users:
            steps = [Step([ToolCall(c.name, dict(c.arguments)) for c in message.tool_calls])]
            start, query, users = index, "\n".join(users), []
            while True:  # tool results then another call turn: the same (nested) task
                after = index + 1
                results = []
                while after < len(messages) and messages[after].role == "tool":
                    results.append(messages[after].content or "")
                    after += 1
                follow = messages[after] if after < len(messages) else None
                if not results or follow is None or follow.role != "assistant" or not follow.tool_calls:
                    break
                steps.append(Step([ToolCall(c.name, dict(c.arguments)) for c in follow.tool_calls], results))
                index = after
            tasks.append(Task(f"{conv.id}#{start}", conv.id, query, list(conv.tools), steps, "", country))
        elif message.role == "assistant" and message.tool_calls:
            note("call turn follows tool results outside a call chain (no user turn of its own)")
        elif message.role == "assistant" and users and not any(m.tool_calls for m in messages):
            query = "\n".join(users)
            tasks.append(Task(f"{conv.id}#{index}", conv.id, query, list(conv.tools), [Step([])], "", country))
            break  # the first answer only: later turns of a chat without calls depend on it
        index += 1
    if not tasks:
        note("no task: no call turn answers a user turn, nor any answer")
    return tasks


def split_by_api(tasks: list[Task], test_fraction: float, seed: int) -> set[str]:
    """The test APIs: shuffled with the seed, taken until the tasks offering them reach ``test_fraction``."""
    apis = sorted({name for task in tasks for name in task.apis})
    random.Random(seed).shuffle(apis)
    target = test_fraction * len(tasks)
    held: set[str] = set()
    covered = 0
    offering: dict[str, list[int]] = {}
    for position, task in enumerate(tasks):
        for name in set(task.apis):
            offering.setdefault(name, []).append(position)
    taken: set[int] = set()
    for name in apis:
        if covered >= target:
            break
        held.add(name)
        fresh = [p for p in offering[name] if p not in taken]
        taken.update(fresh)
        covered += len(fresh)
    return held


class ITCBuilder:
    """Tasks, split, filter and Thoughts, with every drop counted by reason (``report``)."""

    def __init__(self, options: ITCOptions, seed: int, teacher: Teacher | None = None):
        self.options, self.seed = options, seed
        self.teacher = teacher or Teacher(
            make_backend(options.teacher, prompts.OFFLINE_WRITERS, prompts.OFFLINE_VERSION),
            default_cache(options.teacher.get("kind", "offline"), options.cache_dir),
        )
        self.counts: Counter = Counter()
        self.dropped_conversations: Counter = Counter()  # reason -> conversations that give no task
        self.dropped_tasks: Counter = Counter()  # "side: reason" -> tasks
        self.skipped_turns: Counter = Counter()  # call turns that start no task, in conversations that give some
        self.kept: dict[str, Counter] = {"train": Counter(), "test": Counter()}
        self.test_apis: list[str] = []

    def thought(self, task: Task, step: Step, after_result: bool) -> str:
        """The teacher's Thought of one answer; TeacherError with the reason when there is none to keep."""
        system, user = prompts.thought_prompts(task.query, task.tools, step.calls, task.language, task.country)
        params = StageParams(float(self.options.thought_temperature), int(self.options.thought_max_tokens), self.seed)
        context = {
            "query": task.query,
            "tools": task.tools,
            "calls": step.calls,
            "language": task.language,
            "after_result": after_result,
        }
        if after_result:  # the same question after a tool result is another question (the cache key is the prompt)
            user += "\n(after the tool results: " + " ".join(step.results)[:200] + ")"
        answer = self.teacher.ask(TeacherRequest(prompts.THOUGHT_STAGE, system, user, params, context))
        try:
            parsed = parse_answer(answer, "teacher")
        except ValueError as err:
            raise TeacherError(f"answer is not a json{{Thought, Action}}: {str(err)[:80]}") from None
        if parsed is None or not parsed[0].strip():
            raise TeacherError("no Thought in the answer")
        thought = parsed[0].strip()
        found = langid_of()(thought)
        if found != task.language:
            raise TeacherError(f"Thought in {found}, query in {task.language}")
        return thought

    def conversation(self, task: Task, side: str) -> Conversation:
        messages = [
            Message(role="system", content=prompts.system_prompt(task.tools, task.country)),
            Message(role="user", content=task.query),
        ]
        for position, step in enumerate(task.steps):
            if step.results:
                messages.append(Message(role="user", content="\n".join(step.results)))
            thought = self.thought(task, step, after_result=position > 0)
            messages.append(Message(role="assistant", content=prompts.answer_text(thought, step.calls)))
        meta = {
            "task_type": task.task_type,
            "language": task.language,
            "split": side,
            "source_id": task.source_id,
            "turn": len(messages) - 1,
            "apis": task.apis,
            "country": task.country,
        }
        return Conversation(id=task.id, messages=messages, tools=[], meta=meta)

    def build_sides(self, conversations: Iterable[Conversation], on_drop: Any = None) -> dict[str, list[Conversation]]:
        """{"train": [...], "test": [...]} (only the sides ``split`` asks for; both for ``all``).

        Counts: conversations = those giving tasks + ``dropped_conversations``; tasks = train_tasks + test_tasks;
        each side's tasks = kept + ``dropped_tasks`` (reasons prefixed by the side), unless the side is not built.
        """
        tasks: list[Task] = []
        kept_of: dict[str, int] = {}  # conversation id -> tasks kept from it (on_drop once per empty one)
        reason_of: dict[str, str] = {}
        languages = self.options.language_set()
        for conv in conversations:
            self.counts["conversations"] += 1
            notes: list[str] = []
            found = tasks_of(conv, self.options.country, notes.append)
            if not found:
                self.dropped_conversations[notes[0]] += 1
                reason_of[conv.id] = notes[0]
                kept_of[conv.id] = 0
                continue
            self.skipped_turns.update(notes)
            language = conv.meta.get("language")
            if not isinstance(language, str):  # all the user's words: a short query alone misleads langid
                language = langid_of()("\n".join(m.content or "" for m in conv.messages if m.role == "user"))
            for task in found:
                task.language = language
            tasks.extend(found)
            kept_of.setdefault(conv.id, 0)
        self.counts["tasks"] = len(tasks)
        held = split_by_api(tasks, self.options.test_fraction, self.options.split_seed)
        self.test_apis = sorted(held)
        wanted = ("train", "test") if self.options.split == "all" else (self.options.split,)
        sides: dict[str, list[Conversation]] = {side: [] for side in wanted}
        offline = self.teacher.kind == "offline"
        for task in tasks:
            side = "test" if held & set(task.apis) else "train"
            self.counts[f"{side}_tasks"] += 1
            if side not in sides:
                reason_of.setdefault(task.source_id, f"its tasks are on the {side} side, not built (split={side}?)")
                continue
            reason = None
            if side == "train" and languages and task.language not in languages:
                reason = f"language {task.language} not in languages={self.options.languages}"
            elif offline and task.language not in prompts.OFFLINE_LANGUAGES:
                reason = f"the offline teacher writes no Thought in {task.language}"
            if reason is None:
                try:
                    sides[side].append(self.conversation(task, side))
                    self.kept[side][task.task_type] += 1
                    kept_of[task.source_id] += 1
                    continue
                except TeacherUnavailable:  # the teacher stopped answering: the build stops, not every task
                    raise
                except (TeacherError, ValueError) as err:
                    reason = f"thought: {err}"[:160]
            self.dropped_tasks[f"{side}: {reason}"] += 1
            reason_of.setdefault(task.source_id, f"{side}: {reason}")
        for side, rows in sides.items():  # a seeded order: languages and sources mixed (an eval ``limit`` sees both)
            order_seed = self.options.split_seed if side == "test" else self.seed  # the test rows: the split's
            random.Random(f"{order_seed}:{side}").shuffle(rows)
        if on_drop is not None:
            for conv_id, kept in kept_of.items():
                if not kept:
                    on_drop(reason_of[conv_id])
        return sides

    def build(self, conversations: Iterable[Conversation], on_drop: Any = None) -> Iterator[Conversation]:
        sides = self.build_sides(conversations, on_drop)
        for side in ("train", "test"):
            yield from sides.get(side, [])

    def report(self) -> dict[str, Any]:
        return {
            "conversations": self.counts["conversations"],
            "tasks": self.counts["tasks"],
            "split": {
                "test_apis": self.test_apis,  # held out: every task offering one is a test task
                "train_tasks": self.counts["train_tasks"],
                "test_tasks": self.counts["test_tasks"],
            },
            "kept": {side: dict(sorted(counter.items())) for side, counter in self.kept.items()},
            "dropped_conversations": dict(sorted(self.dropped_conversations.items())),
            "dropped_tasks": dict(sorted(self.dropped_tasks.items())),
            "skipped_turns": dict(sorted(self.skipped_turns.items())),
            "teacher": {"backend": self.teacher.kind, "model": str(self.teacher.backend.model)},
        }


def release_rows(
    conversations: Iterable[Conversation], options: ITCOptions, on_drop: Any = None
) -> Iterator[Conversation]:
    """``source=release``: the release's rows as they are. A row labelled with another split (``meta.split``) than
    ``split`` asks for is dropped (the release's own split; an unlabelled row is of the side its file is), and a
    training row outside ``languages`` (Table 7's EN arm); nothing is rewritten nor re-split. A row that is not
    the release reader's is an error: passing another corpus through would train no ITC answer."""
    languages = options.language_set()
    for conv in conversations:
        if conv.meta.get("source") != RELEASE_SOURCE:
            raise ValueError(
                f"itc builder: source=release passes the ITC release's rows through; {conv.id} is not one (read the "
                "release with data.sources.N.name: itc_release, or use source=synth)"
            )
        side = conv.meta.get("split") if conv.meta.get("split") in ("train", "test") else options.split
        reason = None
        if options.split != "all" and side != options.split:
            reason = f"the release puts it in {side}, not {options.split}"
        elif side != "test" and languages and conv.meta.get("language") not in languages:
            reason = f"language {conv.meta.get('language')} not in languages={options.languages}"
        if reason is None:
            yield conv
        elif on_drop is not None:
            on_drop(reason)


def build(
    conversations: Iterable[Conversation], *, seed: int, on_drop: Any = None, **args: Any
) -> Iterator[Conversation]:
    """``data.builder: itc``: the tasks of ``split`` (see the module docstring); ``source=release``: the
    release's rows passed through (``release_rows``)."""
    options = ITCOptions.from_args(args)
    if options.source == "release":
        yield from release_rows(conversations, options, on_drop)
        return
    yield from ITCBuilder(options, seed).build(conversations, on_drop)


__all__ = [
    "BUILDER_VERSION",
    "SOURCES",
    "SPLITS",
    "TASK_TYPES",
    "ITCBuilder",
    "ITCOptions",
    "Task",
    "build",
    "release_rows",
    "split_by_api",
]
