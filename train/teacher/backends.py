"""Teacher backends: one question (system + user prompt, per-stage parameters) -> one text answer.

* ``OfflineBackend``: no model. Each stage name maps to a deterministic writer that answers from the request's
  structured ``context`` (what the prompt was written from); a stage without a writer is a ``TeacherError``.
* ``HttpBackend``: an OpenAI-compatible ``/chat/completions`` endpoint, or with ``completion`` its plain-completion
  ``/completions`` (a base model: ``prompt`` is the user prompt alone, the answer ``choices[0].text``, as vLLM
  serves it); ``train.teacher.transport`` (stdlib) holds each attempt within a wall-clock deadline; retries with
  exponential backoff for what may pass (5xx, 429, unreachable, broken or malformed answers) bounded in count and
  in time, none for a client error; an endpoint that fails question after question is given up on
  (``TeacherUnavailable``). The API key is read from the environment variable ``api_key_env`` names, never from a
  config.
* ``HFBackend``: a local Hugging Face causal LM, prompted through a tooltrain chat format, Llama-2-Chat's template
  (``chat_format: llama2``, ``train.teacher.llama2``) or, with ``completion``, the user prompt alone after the
  tokenizer's BOS (a base model); greedy at temperature 0, sampled (torch's generator seeded from the request;
  nucleus sampling when ``top_p`` is set) above it.

A backend never decides what is kept: it answers or raises ``TeacherError`` with the reason (``TeacherUnavailable``:
no question can be answered, the run stops). ``train.teacher.cache``
puts the response cache and the counts in front of it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from train.teacher import transport

LLAMA2 = "llama2"  # the HF teacher's chat_format for Llama-2-Chat (train.teacher.llama2), not a tooltrain format


class TeacherError(RuntimeError):
    """The teacher gave no usable answer to one question (network error, timeout, empty text, no writer for a
    stage): the caller counts it and goes on."""


class TeacherUnavailable(ValueError):
    """The teacher cannot be used at all: its endpoint failed question after question, or its response cache
    cannot be written. The run stops with this one line. Not a ``TeacherError``, so no per-question handler counts
    it as one more drop; a ``ValueError``, as ``ConfigError`` and ``DataError`` are, so every verb that takes the
    teacher's settings already reports it as one ``error:`` line (a wrong base_url is the common cause)."""


@dataclass(frozen=True)
class StageParams:
    """How one stage samples: part of the cache key (a changed temperature is another question).

    ``top_p`` (nucleus sampling, used only when sampling: temperature > 0) is None for "the backend's default": the
    HTTP backend then sends no ``top_p`` and the HF backend samples from the full distribution. A None ``top_p`` is
    left out of the cache key and the digest (``key_fields``), so answers cached before the field existed stay valid.
    """

    temperature: float = 0.0
    max_tokens: int = 1024
    seed: int = 0
    top_p: float | None = None

    def key_fields(self) -> dict[str, Any]:
        """The fields that identify the sampling (the cache key's ``params``): all of them, ``top_p`` when set."""
        fields = asdict(self)
        if fields["top_p"] is None:
            del fields["top_p"]
        return fields


@dataclass(frozen=True)
class TeacherRequest:
    """One question. ``stage`` names the step (``<paper>.<step>``: the key of its offline writer); ``context`` is what
    the offline writers read (the structured inputs the prompts were written from) and is not sent anywhere nor part of
    the cache key: it must be a function of the prompts."""

    stage: str
    system: str | None
    user: str
    params: StageParams = field(default_factory=StageParams)
    context: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def messages(self) -> list[dict[str, str]]:
        head = [{"role": "system", "content": self.system}] if self.system is not None else []
        return [*head, {"role": "user", "content": self.user}]

    def completion_prompt(self) -> str:
        """What a plain-completion (base) model is given: the user prompt alone. A base model has no system turn,
        and a few-shot prompt (ToolVerifier's A.6.7, ending ``API:``) is complete in itself."""
        return self.user

    def digest(self) -> str:
        """A stable hex digest of the prompts and parameters (what seeds an offline writer's choices)."""
        fields = self.params.key_fields()
        text = json.dumps([self.stage, self.system, self.user, fields], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


OfflineWriter = Callable[[TeacherRequest], str]


class OfflineBackend:
    """Deterministic writers by stage name: the tests' and tiny recipes' teacher, no model and no network."""

    kind = "offline"

    def __init__(self, writers: Mapping[str, OfflineWriter] | None = None, version: str = "v1"):
        self.writers = dict(writers or {})
        self.model = f"offline-{version}"  # bump the version when a writer's text changes: the cache then misses

    def complete(self, request: TeacherRequest) -> str:
        writer = self.writers.get(request.stage)
        if writer is None:
            raise TeacherError(f"the offline teacher has no writer for stage {request.stage!r}")
        return writer(request)


class HttpBackend:
    """An OpenAI-compatible chat-completions endpoint (``completion``: its plain ``/completions``, for a base model):
    each attempt within a wall-clock deadline, a bounded number of retries within a bounded time, and a stop when the
    endpoint keeps failing.

    * ``timeout``: seconds for one attempt, from connecting to the last byte of the answer (``train.teacher.http``:
      a trickling server is cut off too).
    * ``retries``: attempts after the first, for what may pass (unreachable, the deadline, a broken or incomplete
      answer, 5xx, 429, an answer without text), none after a client error (4xx); waits of ``backoff`` doubling.
    * ``max_time``: seconds for one question, attempts and waits together (None: ``retries + 1`` deadlines plus the
      waits); no retry starts that the rest of it cannot hold.

    A question that gets no answer raises ``TeacherError`` with the last failure (the caller counts it and goes
    on). ``failures_in_a_row`` questions failing one after the other mean the endpoint is down, not the question:
    ``TeacherUnavailable`` names the endpoint, what was tried and what it answered, and every later question is
    refused at once (the response cache keeps what was answered: a rerun resumes there).
    """

    kind = "http"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 0.1,
        max_time: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        opener: Callable[..., Any] | None = None,
        failures_in_a_row: int = 3,
        completion: bool = False,
    ):
        if not base_url or not model:
            raise ValueError("the http teacher needs base_url and model")
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url {base_url!r} is not an http:// or https:// URL")
        self.completion = bool(completion)
        self.url = base_url.rstrip("/") + ("/completions" if self.completion else "/chat/completions")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.max_time = float(max_time) if max_time is not None else None
        seconds = [self.timeout] if self.max_time is None else [self.timeout, self.max_time]
        if not all(0 < s < math.inf for s in seconds) or self.retries < 0 or not 0 <= self.backoff < math.inf:
            raise ValueError(
                f"timeout ({timeout}) and max_time ({max_time}) must be finite seconds > 0, retries ({retries}) and "
                f"backoff ({backoff}) >= 0"
            )
        self.sleep = sleep
        self.opener = opener  # urlopen's shape, injectable: tests answer without a network
        self.failures_in_a_row = max(1, int(failures_in_a_row))
        self.failed = 0  # questions failed one after the other
        self.down: str | None = None  # why the endpoint was given up on
        self.counts: Counter = Counter()  # attempts, retries

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise TeacherError(f"environment variable {self.api_key_env} (the teacher's API key) is not set")
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def body(self, request: TeacherRequest) -> dict[str, Any]:
        params = request.params
        asked = {"prompt": request.completion_prompt()} if self.completion else {"messages": request.messages()}
        body = {
            "model": self.model,
            **asked,
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
        }
        if params.top_p is not None:  # None: the endpoint's default
            body["top_p"] = params.top_p
        return body

    def complete(self, request: TeacherRequest) -> str:
        return self.post(json.dumps(self.body(request)).encode("utf-8"))

    def post(self, body: bytes) -> str:
        """The answer's text; ``TeacherError`` with the last failure once the retries are spent, or
        ``TeacherUnavailable`` once the endpoint has failed ``failures_in_a_row`` questions in a row."""
        if self.down is not None:
            raise TeacherUnavailable(self.down)
        began = time.monotonic()
        try:
            text = self._ask(body, self._headers(), began)
        except _Failed as err:
            failed = err
        except TeacherError as err:  # no API key: nothing was sent
            failed = _Failed(str(err), [], 0)
        else:
            self.failed = 0
            return text
        self.failed += 1
        if self.failed >= self.failures_in_a_row:
            self.down = self._down_message(failed, time.monotonic() - began)
            raise TeacherUnavailable(self.down)
        raise TeacherError(failed.reason)

    def _ask(self, body: bytes, headers: dict[str, str], began: float) -> str:
        """One question's attempts; ``_Failed`` with every attempt's failure when none gave an answer."""
        limit = self.max_time if self.max_time is not None else math.inf
        tried: list[str] = []
        last: _Attempt | None = None
        attempts = 0
        for attempt in range(self.retries + 1):
            if attempt:
                wait = min(self.backoff * 2.0**attempt, 30.0)
                if time.monotonic() - began + wait >= limit:
                    tried.append(f"no time left for retry {attempt} (max_time {limit:g} s)")
                    break
                self.sleep(wait)
                self.counts["retries"] += 1
            seconds = min(self.timeout, limit - (time.monotonic() - began))
            self.counts["attempts"] += 1
            attempts += 1
            try:
                return self._attempt(body, headers, seconds)
            except _Attempt as failed:
                last = failed
                tried.append(failed.answered)
                if not failed.retry:
                    break
        assert last is not None
        raise _Failed(last.reason, tried, attempts)

    def _attempt(self, body: bytes, headers: dict[str, str], seconds: float) -> str:
        """One attempt's text, or ``_Attempt`` saying what the endpoint did."""
        try:
            status, answer = transport.post(self.url, body, headers, seconds, self.opener)
        except transport.AttemptError as err:
            reason = f"{self.url}: {err}" if err.kind == "deadline" else str(err)
            raise _Attempt(reason, reason, retry=True) from None
        if status >= 400 or status < 200:
            reason = f"HTTP {status} from {self.url}"
            retry = status >= 500 or status == 429  # a client error does not get better by asking again
            raise _Attempt(reason, f"{reason}: {transport.excerpt(answer)}", retry=retry)
        try:
            payload = json.loads(answer.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            reason = f"{self.url} answered with something that is not JSON"
            raise _Attempt(reason, f"{reason}: {transport.excerpt(answer)}", retry=True) from None
        where = "choices[0].text" if self.completion else "choices[0].message.content"
        try:
            choice = payload["choices"][0]
            content = choice["text"] if self.completion else choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            reason = f"{self.url} answered without {where}"
            raise _Attempt(reason, f"{reason}: {transport.excerpt(answer)}", retry=True) from None
        if not isinstance(content, str):
            reason = f"{where} is not text"
            raise _Attempt(reason, f"{reason}: {transport.excerpt(answer)}", retry=True)
        return content

    def _short(self, answered: str) -> str:
        """An attempt's failure without the endpoint (the message names it once)."""
        for prefix in (f"{self.url}: ", f"{self.url} "):
            answered = answered.removeprefix(prefix)
        return answered.replace(f" from {self.url}", "").replace(f"cannot reach {self.url}: ", "cannot reach it: ")

    def _down_message(self, failed: _Failed, seconds: float) -> str:
        budget = f", max_time {self.max_time:g} s" if self.max_time is not None else ""
        answers = "; ".join(dict.fromkeys(map(self._short, failed.tried)))  # the same answer each time: said once
        if not failed.attempts:
            return f"the http teacher {self.url} (model {self.model}): {failed.reason}"
        questions = f"{self.failed} question{'s' if self.failed != 1 else ''}"
        return (
            f"the http teacher {self.url} (model {self.model}) failed {questions} in a row; the last one "
            f"was tried {failed.attempts} time(s) in {seconds:.1f} s (deadline {self.timeout:g} s per attempt, "
            f"{self.retries} retries{budget}): {answers}"
        )


class _Attempt(Exception):
    """One failed attempt: ``reason`` (what a question's ``TeacherError`` says), ``answered`` (with a quote of the
    answer, for the report of a teacher given up on) and whether asking again may help."""

    def __init__(self, reason: str, answered: str, retry: bool):
        super().__init__(reason)
        self.reason, self.answered, self.retry = reason, answered, retry


class _Failed(Exception):
    """A question none of whose attempts was answered: the last reason and what each attempt got."""

    def __init__(self, reason: str, tried: list[str], attempts: int):
        super().__init__(reason)
        self.reason, self.tried, self.attempts = reason, tried, attempts


class HFBackend:
    """A local causal LM, prompted through a tooltrain chat format, through Llama-2-Chat's template
    (``chat_format="llama2"``) or, with ``completion``, with the user prompt alone after BOS (a base model; the chat
    format is then unused). Llama-2's and a base model's answers end at the tokenizer's EOS."""

    kind = "hf"

    def __init__(
        self,
        path: str,
        chat_format: str = "chatml",
        tokenizer: str | None = None,
        model: Any = None,
        tokenizer_object: Any = None,
        completion: bool = False,
    ):
        from train.formats import get_format

        self.completion = bool(completion)
        self.chat_format = chat_format
        # llama2 and completion prompts are the teacher's own (train.teacher.llama2): no tooltrain format
        self.format = None if completion or chat_format == LLAMA2 else get_format(chat_format)
        self.model_name = path
        if tokenizer_object is None:
            from train.tokenizers import load_tokenizer

            tokenizer_object = load_tokenizer(tokenizer or path)
        self.tokenizer = tokenizer_object
        if model is None:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(path)
        self.lm = model.eval()
        if self.format is None:
            ends = [self.tokenizer.eos_token_id]
        else:
            ends = [self.tokenizer.convert_tokens_to_ids(t) for t in self.format.end_of_turn_texts()]
        self.stop_ids = [i for i in ends if isinstance(i, int)]

    @property
    def model(self) -> str:
        return self.model_name

    def prompt_ids(self, request: TeacherRequest) -> list[int]:
        """The request's prompt through the chat format, up to the assistant turn the model writes (a completion
        model: BOS and the user prompt)."""
        from train.formats.tokenize import tokenize_prompt
        from train.schema import Conversation, Message
        from train.teacher.llama2 import llama2_ids

        if self.completion:
            head = [self.tokenizer.bos_token_id] if self.tokenizer.bos_token_id is not None else []
            return head + self.tokenizer.encode(request.completion_prompt(), add_special_tokens=False)
        if self.format is None:
            return llama2_ids(request.messages(), self.tokenizer)

        messages = [Message(role=m["role"], content=m["content"]) for m in request.messages()]
        conv = Conversation(id="teacher", messages=messages)
        return tokenize_prompt(self.format, conv, len(messages), self.tokenizer)

    def complete(self, request: TeacherRequest) -> str:
        import torch

        ids = self.prompt_ids(request)
        pad = self.stop_ids[0] if self.stop_ids else 0
        sample = request.params.temperature > 0
        extra = {"temperature": request.params.temperature} if sample else {}
        if sample and request.params.top_p is not None:
            extra["top_p"] = request.params.top_p
        if sample:
            torch.manual_seed(int(request.digest()[:8], 16))  # sampled, yet the same request gives the same text
        with torch.no_grad():
            out = self.lm.generate(
                torch.tensor([ids]),
                max_new_tokens=request.params.max_tokens,
                do_sample=sample,
                eos_token_id=self.stop_ids or None,
                pad_token_id=pad,
                **extra,
            )
        new = out[0, len(ids) :].tolist()
        if new and new[-1] in self.stop_ids:
            new = new[:-1]
        return self.tokenizer.decode(new, skip_special_tokens=True)

    def ask_many(self, requests: Sequence[TeacherRequest], batch_size: int = 8) -> list[str]:
        """The answers ``complete`` gives, one per request, from batched ``generate`` calls: greedy requests with the
        same ``max_tokens`` share batches of up to ``batch_size`` (longest prompts first, so a batch pads little),
        left-padded with an attention mask (the model's position ids follow the mask), each row cut at its first
        end-of-turn. A sampled request is answered alone by ``complete`` (its seed is per request).
        ``TeacherError`` when generation fails; the caller may then ask one by one."""
        answers: list[str | None] = [None] * len(requests)
        groups: dict[int, list[int]] = {}
        for index, request in enumerate(requests):
            if request.params.temperature > 0:
                answers[index] = self.complete(request)
            else:
                groups.setdefault(request.params.max_tokens, []).append(index)
        for max_tokens, members in groups.items():
            prompts = {index: self.prompt_ids(requests[index]) for index in members}
            order = sorted(members, key=lambda i: (-len(prompts[i]), i))
            for start in range(0, len(order), max(1, batch_size)):
                batch = order[start : start + max(1, batch_size)]
                for index, ids in zip(batch, self._generate([prompts[i] for i in batch], max_tokens)):
                    answers[index] = self.tokenizer.decode(ids, skip_special_tokens=True)
        return [answer if answer is not None else "" for answer in answers]

    def _generate(self, prompts: list[list[int]], max_tokens: int) -> list[list[int]]:
        """Greedy new tokens per prompt, each cut before its first end-of-turn (a finished row is padded with one)."""
        import torch

        pad = self.stop_ids[0] if self.stop_ids else 0
        width = max(len(ids) for ids in prompts)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        device = next(self.lm.parameters()).device
        try:
            with torch.no_grad():
                out = self.lm.generate(
                    input_ids.to(device),
                    attention_mask=attention_mask.to(device),
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    eos_token_id=self.stop_ids or None,
                    pad_token_id=pad,
                )
        except (RuntimeError, ValueError) as err:  # out of memory, a model that cannot batch
            raise TeacherError(f"batched generation failed: {err}") from None
        stops = set(self.stop_ids)
        rows = []
        for row in out[:, width:].tolist():
            end = next((position for position, token in enumerate(row) if token in stops), len(row))
            rows.append(row[:end])
        return rows


__all__ = [
    "HFBackend",
    "HttpBackend",
    "OfflineBackend",
    "OfflineWriter",
    "StageParams",
    "TeacherError",
    "TeacherRequest",
    "TeacherUnavailable",
]
