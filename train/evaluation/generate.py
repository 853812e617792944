"""Generation for evaluation: chat-format prompts in, parsed ``{content, tool_calls}`` out.

One conversation and the index of the assistant turn to write make a prompt: the chat format
renders everything before that turn plus its header (``ChatFormat.render_prompt``, what the model
saw in training), as token ids. A backend turns prompt ids into new ids:

* ``HFBackend``: batched ``model.generate`` with left padding, greedy unless a temperature is
  given, stopping at the format's end-of-turn tokens. ``synced_gpus`` keeps ranks in lock-step
  while every forward gathers sharded weights (ZeRO-3, FSDP); the caller decides (the training
  callback: off where it gathered the whole model once for the evaluation).
* ``VllmBackend``: vLLM on a GPU machine when it is installed (prompts go in as token ids, so the
  chat format, not vLLM's template, renders them).

Output is cut at the first end-of-turn token, decoded with every token kept (formats whose calls
start with a control token, Mistral's ``[TOOL_CALLS]``, need it), and parsed by the format. A
prompt the format cannot render (or one over a task's ``max_prompt_tokens``) or an output it cannot parse becomes a
``Generation`` with an empty prediction and the reason in ``error`` (scored wrong), never an exception.

An episodic task (``Task.episodic``: multi-turn, with the task answering between the model's turns) is driven by
``run_episodes``: each round, every unfinished episode's next prompt goes into one ``generate`` call, and each
answer goes back to its episode. ``generate_for_task`` picks the way for a task (``eval run``, the eval callback).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from train.formats.base import ChatFormat
from train.formats.tokenize import tokenize_prompt
from train.schema import Conversation, ToolCall

# (prompt ids per prompt, max new tokens, stop ids) -> new ids per prompt
Backend = Callable[[list[list[int]], int, list[int]], list[list[int]]]


@dataclass
class Generation:
    text: str | None  # the decoded output without its end-of-turn token; None when nothing was generated
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None  # "prompt: ..." or "parse: ...": the prediction is empty and scores wrong
    prompt_tokens: int = 0
    new_tokens: int = 0
    stopped: bool = False  # ended with an end-of-turn token (False: ran into max_new_tokens)
    # the answer after the format's reasoning block, when the format reads answers as text (answer_style): what a
    # benchmark that decodes text its own way reads (BFCL's Java / JavaScript categories)
    answer_text: str | None = None
    # the format's reasoning block (Qwen3's <think>, Harmony's analysis), None without one: an episode writes it back
    # into the history (``reasoning_content``), so the next prompt shows the turn as the template keeps it
    reasoning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "content": self.content,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "stopped": self.stopped,
            **({"answer_text": self.answer_text} if self.answer_text is not None else {}),
            **({"reasoning": self.reasoning} if self.reasoning is not None else {}),
        }

    @classmethod
    def summarize(cls, generations: Sequence[Generation]) -> dict[str, int]:
        """The generation counts ``eval run`` prints and writes: prompts, the ones that failed (``prompt`` /
        ``parse``), the answers that stopped and those that ran into max_new_tokens."""
        return {
            "prompts": len(generations),
            "prompt_errors": sum(1 for g in generations if (g.error or "").startswith("prompt")),
            "parse_errors": sum(1 for g in generations if (g.error or "").startswith("parse")),
            "stopped": sum(1 for g in generations if g.stopped),
            "hit_max_new_tokens": sum(1 for g in generations if g.text is not None and not g.stopped),
        }


class GenerationError(RuntimeError):
    """The backend cannot run at all (vLLM missing, no GPU); per-prompt failures are never raised."""


def stop_token_ids(fmt: ChatFormat, tokenizer: Any) -> list[int]:
    """Ids of the format's end-of-turn control tokens in this tokenizer."""
    ids = []
    for text in fmt.end_of_turn_texts():
        token_id = tokenizer.convert_tokens_to_ids(text)
        if token_id is None or (token_id == tokenizer.unk_token_id and text != tokenizer.unk_token):
            raise GenerationError(f"the tokenizer has no {text!r} token, which ends a {fmt.name} assistant turn")
        ids.append(token_id)
    return ids


def cut_at_stop(ids: Sequence[int], stop_ids: Sequence[int]) -> tuple[list[int], bool]:
    """(the ids before the first stop id, whether one was found)."""
    stops = set(stop_ids)
    for position, token in enumerate(ids):
        if token in stops:
            return list(ids[:position]), True
    return list(ids), False


def parse_output(fmt: ChatFormat, text: str) -> tuple[str | None, list[ToolCall], str | None]:
    """(content, calls, error): the format's parse, with a failure turned into an empty prediction."""
    try:
        content, calls = fmt.parse(text)
    except (ValueError, RecursionError) as err:  # every format's parse error is a ValueError
        return None, [], f"parse: {err}"
    return content, calls, None


def prompt_ids(fmt: ChatFormat, tokenizer: Any, conv: Conversation, index: int) -> tuple[list[int] | None, str | None]:
    """(ids, None) or (None, "prompt: <why the format cannot render it>")."""
    try:
        return tokenize_prompt(fmt, conv, index, tokenizer), None
    except ValueError as err:
        return None, f"prompt: {err}"


def generate(
    prompts: Sequence[tuple[Conversation, int]],
    fmt: ChatFormat,
    tokenizer: Any,
    backend: Backend,
    max_new_tokens: int,
    pad_to: int = 0,
    max_prompt_tokens: int | None = None,
) -> list[Generation]:
    """One ``Generation`` per ``(conversation, assistant message index)``, in order.

    The backend sees every prompt, including a stand-in for one the format cannot render (or one longer than
    ``max_prompt_tokens``), and stand-ins up to ``pad_to`` prompts, so that ranks generating in lock-step make the
    same calls whatever their prompts hold.
    """
    stop_ids = stop_token_ids(fmt, tokenizer)
    rendered = [prompt_ids(fmt, tokenizer, conv, index) for conv, index in prompts]
    if max_prompt_tokens is not None:
        rendered = [
            (None, f"prompt: {len(ids)} tokens, over max_prompt_tokens={max_prompt_tokens}")
            if ids is not None and len(ids) > max_prompt_tokens
            else (ids, error)
            for ids, error in rendered
        ]
    stand_in = [stop_ids[0]]
    batch = [ids if ids is not None else stand_in for ids, _ in rendered]
    batch += [stand_in] * (pad_to - len(batch))
    outputs = backend(batch, max_new_tokens, stop_ids) if batch else []
    generations = []
    for (ids, error), new_ids in zip(rendered, outputs):
        if ids is None:
            generations.append(Generation(text=None, error=error))
            continue
        generations.append(read_output(fmt, tokenizer, ids, new_ids, stop_ids)[0])
    return generations


def read_output(
    fmt: ChatFormat, tokenizer: Any, ids: Sequence[int], new_ids: Sequence[int], stop_ids: Sequence[int]
) -> tuple[Generation, list[int]]:
    """What a backend wrote after prompt ``ids``: the ``Generation`` (cut at the first end-of-turn token, decoded
    with every token kept, parsed by the format) and the ids the model sampled, through that token (what a
    rollout trains; the ids after it are padding of a batch)."""
    kept, stopped = cut_at_stop(new_ids, stop_ids)
    text = tokenizer.decode(kept, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    content, calls, parse_error = parse_output(fmt, text)
    generation = Generation(
        text=text,
        content=content,
        tool_calls=calls,
        error=parse_error,
        prompt_tokens=len(ids),
        new_tokens=len(kept) + int(stopped),
        stopped=stopped,
        answer_text=fmt.split_reasoning_block(text)[1] if fmt.text_answers else None,
        reasoning=None if parse_error else fmt.reasoning_of(text),
    )
    return generation, list(new_ids[: len(kept) + int(stopped)])


def run_episodes(
    episodes: Sequence[Any],
    fmt: ChatFormat,
    tokenizer: Any,
    backend: Backend,
    max_new_tokens: int,
    lockstep: Callable[[bool], bool] | None = None,
    max_prompt_tokens: int | None = None,
) -> list[Any]:
    """Every episode (``task_base.Episode``) played to its end; their records, in order.

    ``lockstep`` (ranks generating in lock-step): told whether this rank has an episode left, it says whether any
    rank has; rounds go on until none has, each with ``len(episodes)`` prompts (stand-ins for finished episodes),
    so every rank makes the same backend calls.
    """
    while True:
        pending = [(episode, prompt) for episode in episodes if (prompt := episode.prompt()) is not None]
        if not (lockstep(bool(pending)) if lockstep is not None else pending):
            break
        pad_to = len(episodes) if lockstep is not None else 0
        prompts = [prompt for _, prompt in pending]
        answers = generate(prompts, fmt, tokenizer, backend, max_new_tokens, pad_to, max_prompt_tokens)
        for (episode, _), generation in zip(pending, answers):
            episode.take(generation)
    return [episode.record() for episode in episodes]


def generate_for_task(
    task: Any,
    items: Sequence[Any],
    fmt: ChatFormat,
    tokenizer: Any,
    backend: Backend,
    max_new_tokens: int,
    lockstep: Callable[[bool], bool] | None = None,
) -> list[Any]:
    """What ``task.predictions`` reads for ``items`` (``task_base.EvalItem``): one ``Generation`` per item, or one
    episode record per item for an episodic task. ``lockstep``: see ``run_episodes`` (one-shot tasks need none: every
    rank passes the same number of items)."""
    if task.episodic:
        episodes = [task.episode(item) for item in items]
        return run_episodes(episodes, fmt, tokenizer, backend, max_new_tokens, lockstep, task.max_prompt_tokens)
    return generate([(item.conversation, item.target) for item in items], fmt, tokenizer, backend, max_new_tokens)


class HFBackend:
    """Batched ``generate`` on a transformers (or peft) model: left padding, longest prompts first."""

    def __init__(
        self, model: Any, pad_id: int, batch_size: int = 8, temperature: float = 0.0, synced_gpus: bool = False
    ):
        self.model, self.pad_id, self.batch_size = model, pad_id, batch_size
        self.temperature, self.synced_gpus = temperature, synced_gpus

    def __call__(self, prompts: list[list[int]], max_new_tokens: int, stop_ids: list[int]) -> list[list[int]]:
        # Similar lengths share a batch (less padding); the order is fixed by the prompts alone, so
        # ranks and reruns batch the same way.
        order = sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), i))
        outputs: list[list[int]] = [[] for _ in prompts]
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            for index, ids in zip(batch, self._generate([prompts[i] for i in batch], max_new_tokens, stop_ids)):
                outputs[index] = ids
        return outputs

    def _generate(self, batch: list[list[int]], max_new_tokens: int, stop_ids: list[int]) -> list[list[int]]:
        import torch
        from transformers import GenerationConfig

        width = max(len(ids) for ids in batch)
        device = next(self.model.parameters()).device
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        greedy = self.temperature <= 0
        sampling = {"do_sample": False} if greedy else {"do_sample": True, "temperature": self.temperature}
        # A config of our own: a pretrained model's sampling defaults must not leak into greedy eval.
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            eos_token_id=list(stop_ids),
            pad_token_id=self.pad_id,
            use_cache=True,
            **sampling,
        )
        with torch.no_grad():
            output = self.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                generation_config=config,
                synced_gpus=self.synced_gpus,
            )
        return [row.tolist() for row in output[:, width:].cpu()]


class VllmBackend:
    """vLLM, when installed on a GPU machine: a model directory (an exported run, a HF model)."""

    def __init__(self, model_dir: str, temperature: float = 0.0, **engine_args: Any):
        try:
            from vllm import LLM
        except ImportError as err:
            raise GenerationError("the vllm backend needs vLLM installed (pip install vllm, on a GPU machine)") from err
        self.temperature = temperature
        self.llm = LLM(model=model_dir, **engine_args)

    def __call__(self, prompts: list[list[int]], max_new_tokens: int, stop_ids: list[int]) -> list[list[int]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(
            temperature=self.temperature, max_tokens=max_new_tokens, stop_token_ids=list(stop_ids), detokenize=False
        )
        results = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompts], params, use_tqdm=False)
        return [list(result.outputs[0].token_ids) for result in results]


__all__ = [
    "Generation",
    "GenerationError",
    "HFBackend",
    "VllmBackend",
    "cut_at_stop",
    "generate",
    "generate_for_task",
    "parse_output",
    "read_output",
    "run_episodes",
    "stop_token_ids",
]
