"""Teacher backends: one question (system + user prompt, per-stage parameters) -> one text answer.

* ``OfflineBackend``: no model. Each stage name maps to a deterministic writer that answers from the request's
  structured ``context`` (what the prompt was written from); a stage without a writer is a ``TeacherError``.
* ``HttpBackend``: an OpenAI-compatible ``/chat/completions`` endpoint, or with ``completion`` its plain-completion
  ``/completions`` (a base model: ``prompt`` is the user prompt alone, the answer ``choices[0].text``, as vLLM
  serves it), asked through the ``openai`` SDK: the SDK retries what may pass (unreachable, 408, 409, 429, 5xx)
  with jittered exponential waits honouring ``Retry-After``, none for another client error;
  ``train.teacher.transport`` holds each question within a wall-clock deadline; ``ask_many`` asks a batch's
  questions concurrently (``concurrency`` at once); an endpoint that fails question after question is given up on
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
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from train.teacher import transport

SDK_LONGEST_WAIT = 8.0  # seconds: the openai SDK's longest own wait between retries (when no Retry-After)
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
    """An OpenAI-compatible chat-completions endpoint (``completion``: its plain ``/completions``, for a base model),
    asked through the ``openai`` SDK: its retries, each question within a wall-clock deadline, questions of a batch
    asked concurrently, and a stop when the endpoint keeps failing.

    * ``retries``: the SDK's ``max_retries``, attempts after the first for what may pass (unreachable, a broken
      answer, the read timeout, 408, 409, 429, 5xx), none after another client error. Its waits: a server's
      ``Retry-After`` / ``retry-after-ms`` when it gives one (up to 2 minutes), else 0.5 s doubling up to 8 s, less
      up to 25 % jitter.
    * ``timeout``: seconds the SDK's client waits for each operation of an attempt (connecting, each read).
    * ``max_time``: wall-clock seconds for one question, attempts and waits together, from connecting to the last
      byte of the answer (``train.teacher.transport``: a server trickling a byte a second is cut off too). None:
      ``retries + 1`` times ``timeout`` + 1 s, plus the SDK's longest wait (8 s) per retry.
    * ``concurrency``: questions of one ``ask_many`` batch in flight at once.

    An answer that is not JSON or has no text is not retried (the SDK retries what HTTP says may pass; such an
    answer is the server's, and usually the same again). A question that gets no answer raises ``TeacherError``
    with the reason; ``failures_in_a_row`` questions failing one after the other mean the endpoint is down, not
    the question: ``TeacherUnavailable`` names the endpoint, what was tried and what it answered, and every later
    question is refused at once (the response cache keeps what was answered: a rerun resumes there).
    """

    kind = "http"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        max_time: float | None = None,
        failures_in_a_row: int = 3,
        completion: bool = False,
        concurrency: int = 8,
    ):
        if not base_url or not model:
            raise ValueError("the http teacher needs base_url and model")
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url {base_url!r} is not an http:// or https:// URL")
        self.completion = bool(completion)
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + ("/completions" if self.completion else "/chat/completions")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout, self.retries, self.concurrency = float(timeout), int(retries), int(concurrency)
        self.max_time = float(max_time) if max_time is not None else None
        seconds = [self.timeout] if self.max_time is None else [self.timeout, self.max_time]
        if not all(0 < s < math.inf for s in seconds) or self.retries < 0 or self.concurrency < 1:
            raise ValueError(
                f"timeout ({timeout}) and max_time ({max_time}) must be finite seconds > 0, retries ({retries}) >= 0 "
                f"and concurrency ({concurrency}) >= 1"
            )
        # a second more per attempt than its timeouts: a silent server is the SDK's timeout, said as such
        longest = (self.retries + 1) * (self.timeout + 1.0) + self.retries * SDK_LONGEST_WAIT
        self.deadline = self.max_time if self.max_time is not None else longest
        self.failures_in_a_row = max(1, int(failures_in_a_row))
        self.failed = 0  # questions failed one after the other
        self.down: str | None = None  # why the endpoint was given up on
        self.counts: Counter = Counter()  # attempts, retries
        self._lock = threading.Lock()  # counts and the failure streak: ask_many's questions run in threads
        self._clients: dict[str | None, Any] = {}  # one SDK client per API key (its connection pool is shared)

    def _api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise TeacherError(f"environment variable {self.api_key_env} (the teacher's API key) is not set")
        return key

    def _client(self, key: str | None) -> Any:
        import openai

        with self._lock:
            if key not in self._clients:
                self._clients[key] = openai.OpenAI(
                    base_url=self.base_url,
                    api_key=key or "unused",  # the SDK insists on one; without a key no Authorization is sent
                    max_retries=self.retries,
                    timeout=openai.Timeout(self.timeout),
                    http_client=openai.DefaultHttpxClient(event_hooks=transport.HOOKS),
                )
            return self._clients[key]

    def body(self, request: TeacherRequest) -> dict[str, Any]:
        """What is sent: the model, the messages (``completion``: the prompt) and the stage's sampling."""
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
        return self.ask_body(self.body(request))

    def post(self, data: bytes) -> str:
        """``ask_body`` of a JSON body already serialised (Meta-Tool's wing sends its prompts without a seed)."""
        return self.ask_body(json.loads(data))

    def ask_many(self, requests: Sequence[TeacherRequest], batch_size: int | None = None) -> list[str | TeacherError]:
        """``complete`` of each request, up to ``concurrency`` in flight at once, in the requests' order: the answer's
        text, or the ``TeacherError`` that question raised (``PrefetchingBackend`` then asks it alone; ``batch_size``
        is its chunk, already bounded by it). ``TeacherUnavailable`` once the endpoint is given up on."""

        def one(request: TeacherRequest) -> str | TeacherError:
            try:
                return self.complete(request)
            except TeacherError as err:
                return err

        if not requests:
            return []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests)), thread_name_prefix="teacher") as pool:
            return list(pool.map(one, requests))

    def ask_body(self, body: dict[str, Any]) -> str:
        """The answer's text; ``TeacherError`` with the reason once the SDK's retries are spent or the deadline
        passed, or ``TeacherUnavailable`` once the endpoint has failed ``failures_in_a_row`` questions in a row."""
        if self.down is not None:
            raise TeacherUnavailable(self.down)
        began = time.monotonic()
        question = transport.Question()
        try:
            text = self._ask(body, self._api_key(), question)
        except _Failed as err:
            failed = err
        except TeacherError as err:  # no API key: nothing was sent
            failed = _Failed(str(err), str(err))
        else:
            with self._lock:
                self.failed = 0
            return text
        finally:
            self._count(len(question.tried))
        with self._lock:
            self.failed += 1
            if self.failed >= self.failures_in_a_row and self.down is None:
                self.down = self._down_message(failed, question.tried, time.monotonic() - began)
            if self.down is not None:
                raise TeacherUnavailable(self.down)
        raise TeacherError(failed.reason)

    def _count(self, attempts: int) -> None:
        with self._lock:
            self.counts["attempts"] += attempts
            self.counts["retries"] += max(0, attempts - 1)

    def _ask(self, body: dict[str, Any], key: str | None, question: transport.Question) -> str:
        """One question through the SDK (its retries inside), within ``deadline``; ``_Failed`` saying why not."""
        import openai

        client = self._client(key)
        create = client.completions if self.completion else client.chat.completions
        headers = {} if key else {"extra_headers": {"Authorization": openai.omit}}
        try:
            raw = transport.run(self.deadline, lambda: create.with_raw_response.create(**body, **headers), question)
        except transport.AttemptError as err:
            raise _Failed(f"{self.url}: {err}") from None
        except openai.APIStatusError as err:
            reason = f"HTTP {err.status_code} from {self.url}"
            raise _Failed(reason, f"{reason}: {transport.excerpt(err.response.content)}") from None
        except openai.APITimeoutError:  # before APIConnectionError: it is one
            raise _Failed(f"{self.url}: no answer within {self.timeout:g} s (the timeout of each read)") from None
        except openai.APIConnectionError as err:
            raise _Failed(self._unreached(err.__cause__)) from None
        return self._text(raw.http_response.content)

    def _unreached(self, cause: BaseException | None) -> str:
        """What the SDK's connection error was, named as what the server did."""
        name = type(cause).__name__
        if name.startswith("Connect"):
            return f"cannot reach {self.url}: {cause}"
        return f"{self.url} broke the exchange ({name}): {transport.excerpt(str(cause), 2 * transport.EXCERPT)}"

    def _text(self, answer: bytes) -> str:
        """The answer's text, or ``_Failed`` saying what is wrong with it."""
        try:
            payload = json.loads(answer.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            reason = f"{self.url} answered with something that is not JSON"
            raise _Failed(reason, f"{reason}: {transport.excerpt(answer)}") from None
        where = "choices[0].text" if self.completion else "choices[0].message.content"
        try:
            choice = payload["choices"][0]
            content = choice["text"] if self.completion else choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            reason = f"{self.url} answered without {where}"
            raise _Failed(reason, f"{reason}: {transport.excerpt(answer)}") from None
        if not isinstance(content, str):
            reason = f"{where} is not text"
            raise _Failed(reason, f"{reason}: {transport.excerpt(answer)}")
        return content

    def _short(self, answered: str) -> str:
        """An attempt's failure without the endpoint (the message names it once)."""
        for prefix in (f"{self.url}: ", f"{self.url} "):
            answered = answered.removeprefix(prefix)
        return answered.replace(f" from {self.url}", "").replace(f"cannot reach {self.url}: ", "cannot reach it: ")

    def _down_message(self, failed: _Failed, tried: list[str | None], seconds: float) -> str:
        if not tried:
            return f"the http teacher {self.url} (model {self.model}): {failed.reason}"
        # what the attempts got (an error status, seen by the response hook; an attempt with no response is said by
        # the last failure, the only one the SDK hands back), each said once
        answers = [*(a for a in tried if a), failed.answered]
        said = "; ".join(dict.fromkeys(map(self._short, answers)))
        questions = f"{self.failed} question{'s' if self.failed != 1 else ''}"
        return (
            f"the http teacher {self.url} (model {self.model}) failed {questions} in a row; the last one "
            f"was tried {len(tried)} time(s) in {seconds:.1f} s (timeout {self.timeout:g} s, {self.retries} retries, "
            f"max_time {self.deadline:g} s): {said}"
        )


class _Failed(Exception):
    """A question that got no answer: ``reason`` (what its ``TeacherError`` says) and ``answered`` (with a quote of
    the answer, for the report of a teacher given up on)."""

    def __init__(self, reason: str, answered: str | None = None):
        super().__init__(reason)
        self.reason, self.answered = reason, answered or reason


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
