"""One workload's questions: what it is, and what sizes it (tokens or request rate).

Each question explains its trade-off as it asks, with numbers for the chosen model,
and suggests a default worked out from the earlier answers (the model's context for
the sequence length, about 4M tokens per step for the batch), so a newcomer can
accept the suggestions and still get a plan that means something.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from gpufleet.catalog.architecture import ModelArch
from gpufleet.cli.wizard.answers import (
    Quantity,
    check,
    choice,
    describe_errors,
    field,
    number,
    positive_int,
    quantity,
)
from gpufleet.cli.wizard.askers import Asker
from gpufleet.cli.wizard.explain import (
    compute_note,
    deadline_note,
    hbm_note,
    short_count,
    training_memory_note,
)
from gpufleet.cli.wizard.model_choice import ask_model
from gpufleet.errors import suggest
from gpufleet.estimate.params import parameter_count
from gpufleet.quantities import parse_count
from gpufleet.specs.inference import ServingParams, Slo, TokenLength
from gpufleet.specs.plan import Constraints, TrainingWorkload
from gpufleet.specs.training import TrainingParams

# Tokens per optimizer step that 70B-class pretraining runs use (Llama 2 and 3: 4M).
TOKENS_PER_STEP = 4 * 2**20
# Chinchilla's compute-optimal ratio (Hoffmann et al. 2022).
CHINCHILLA_TOKENS_PER_PARAM = 20
# Sanity bounds: an answer past them is a unit mistake (15e15 for 15T, a count in bytes),
# not a plan, and planning it gave "12,380,136,828,156,233,383,936 H100-days". The largest
# training runs published use a few tens of trillions of tokens (Llama 3: 15T), so 1,000T
# leaves room for growth; the longest published context is 10M tokens (Llama 4 Scout), so a
# prompt past it cannot fit any model whose context the wizard was not told.
MAX_TRAINING_TOKENS = 10**15
MAX_PROMPT_TOKENS = 10_000_000

_KINDS = {
    "training": "training",
    "train": "training",
    "pretraining": "training",
    "pre-training": "training",
    "fine-tuning": "training",
    "finetuning": "training",
    "fine-tune": "training",
    "serving": "inference",
    "serve": "inference",
    "service": "inference",
    "inference": "inference",
}


def _parse_kind(value: object) -> str:
    text = str(value).strip().lower()
    if text in _KINDS:
        return _KINDS[text]
    hints = suggest(text, _KINDS, limit=1)
    tail = f"; did you mean '{hints[0]}'?" if hints else ""
    raise ValueError(f"answer training or serving, got {value!r}{tail}")


def _parse_budget(value: object) -> float:
    if isinstance(value, str):
        text = value.strip().replace(",", "").replace("_", "").removeprefix("$").strip()
        text = text.removesuffix("USD").removesuffix("usd").strip()
        try:
            value = float(text)
        except ValueError:
            try:
                value = parse_count(text)
            except ValueError:
                raise ValueError(
                    f"expected an amount in USD such as 5M, $2.5M or 750000, got {value!r}"
                ) from None
    return float(check(Constraints, "budget_usd", value))


def _parse_tokens(value: object) -> Quantity:
    tokens = quantity(TrainingParams, "tokens")(value)
    if tokens.amount > MAX_TRAINING_TOKENS:
        said = value.strip() if isinstance(value, str) else f"{tokens.amount:.3g}"
        raise ValueError(
            f"{said} is more than 1,000 trillion tokens (1e15), far past the largest "
            "training runs (tens of trillions): check the unit (15T = 15 trillion, 2B = 2 "
            "billion)"
        )
    return tokens


def _ask_training(w: Asker, arch: ModelArch) -> tuple[dict[str, Any], dict[str, Any]]:
    w.note(training_memory_note(arch))
    counts = parameter_count(arch)
    basis = counts.active_per_token if arch.is_moe else counts.total
    chinchilla = short_count(CHINCHILLA_TOKENS_PER_PARAM * basis)
    tokens = w.ask(
        "tokens",
        "How many tokens will it train on (e.g. 15T, 2B)",
        _parse_tokens,
        default=chinchilla,
        explain=(
            f"Tokens set the compute. About {CHINCHILLA_TOKENS_PER_PARAM} tokens per parameter "
            f"is compute-optimal (Chinchilla: {chinchilla} here); Llama 3 trained far past it "
            "(15T) to get a smaller model that is cheaper to serve. Fine-tunes use billions."
        ),
    )
    w.note(compute_note(arch, tokens.amount))
    seq_default = min(arch.max_seq_len, 8192) if arch.max_seq_len else 4096
    seq_len: int = w.ask(
        "seq_len",
        "Sequence length in tokens",
        field(TrainingParams, "seq_len"),
        default=str(seq_default),
        explain=(
            "Longer sequences teach longer context but cost activation memory and attention "
            "compute; pretraining usually runs at 4k-8k and extends context in a short later "
            "phase."
        ),
    )
    batch_default = max(1, round(TOKENS_PER_STEP / seq_len))
    global_batch: int = w.ask(
        "global_batch",
        "Global batch in sequences per optimizer step",
        field(TrainingParams, "global_batch"),
        default=str(batch_default),
        explain=(
            f"About 4M tokens per step is what 70B-class pretraining runs use: "
            f"{TOKENS_PER_STEP:,} ÷ {seq_len:,} = {batch_default:,} sequences. A bigger batch "
            "keeps more GPUs busy (more data parallelism), but past the critical batch size "
            "extra tokens per step stop speeding up learning."
        ),
    )
    precision: str = w.ask(
        "precision",
        "Training precision: bf16 or fp8",
        choice(TrainingParams, "precision"),
        default="bf16",
        explain=(
            "fp8 runs the matrix multiplies up to 2× faster on H100-class and newer GPUs "
            "(A100 has no fp8); weights and optimizer states stay in higher precision, so it "
            "saves little memory. bf16 is the safe, proven choice."
        ),
    )
    # imported here: `gpufleet --help` imports this module and need not load the planner
    from gpufleet.plan.assemble import DEFAULT_DEADLINE_S

    default_days = f"{DEFAULT_DEADLINE_S / 86_400:g} days"
    deadline = w.ask_optional(
        "deadline",
        "Deadline: how long may it run (e.g. 90d, 6w)",
        quantity(Constraints, "deadline"),
        explain=(
            "A tighter deadline needs more GPUs at once; doubling them less than halves the "
            f"time, because communication grows. Blank: the planner assumes {default_days}."
        ),
        blank=f"{default_days}, the planner's default",
    )
    w.note(
        deadline_note(
            arch, tokens.amount, DEFAULT_DEADLINE_S if deadline is None else deadline.amount
        )
    )
    max_gpus = w.ask_optional(
        "max_gpus",
        "Most GPUs it may use at once",
        field(Constraints, "max_gpus"),
        explain="A quota or the size of a cluster you already have.",
        blank="no limit",
    )
    budget = w.ask_optional(
        "budget_usd",
        "Budget for the run in USD (e.g. 5M)",
        _parse_budget,
        explain="Layouts whose GPU-hours × price exceed it are rejected.",
        blank="no limit",
    )
    training = {
        "seq_len": seq_len,
        "global_batch": global_batch,
        "tokens": tokens.written,
        "precision": precision,
    }
    constraints: dict[str, Any] = {}
    if deadline is not None:
        constraints["deadline"] = deadline.written
    if max_gpus is not None:
        constraints["max_gpus"] = max_gpus
    if budget is not None:
        constraints["budget_usd"] = number(budget)
    return training, constraints


def _parse_length(value: object) -> int | dict[str, Any]:
    """A mean length, or (answers files) a mapping {mean, p99}."""
    if isinstance(value, Mapping):
        try:
            length = TokenLength.model_validate(dict(value))
        except ValidationError as exc:
            raise ValueError(describe_errors(TokenLength, exc)) from None
        return length.model_dump(exclude_none=True)
    return positive_int(value)


def _longest(length: int | dict[str, Any]) -> int:
    if isinstance(length, int):
        return length
    return int(length.get("p99") or length["mean"])


def _mean(length: int | dict[str, Any]) -> int:
    return length if isinstance(length, int) else int(length["mean"])


def _ask_serving(w: Asker, arch: ModelArch) -> tuple[dict[str, Any], dict[str, Any]]:
    rate: float = w.ask(
        "request_rate",
        "Peak requests per second",
        field(ServingParams, "request_rate"),
        default="10",
        explain=(
            "The fleet grows about linearly with the rate; the planner adds queueing headroom "
            "so the p99 latency holds at this peak."
        ),
    )
    # a prompt past the model's context cannot be served; without one, past any model's
    context = arch.max_seq_len or MAX_PROMPT_TOKENS
    within = (
        f"the model's context ({context:,})"
        if arch.max_seq_len
        else f"{MAX_PROMPT_TOKENS:,} tokens, the longest context of any published model; check "
        "the number"
    )

    def input_of(value: object) -> int | dict[str, Any]:
        length = _parse_length(value)
        if _longest(length) > context:
            raise ValueError(f"a prompt of {_longest(length):,} tokens exceeds {within}")
        return length

    input_tokens = w.ask(
        "input_tokens",
        "Prompt length in tokens (mean)",
        input_of,
        default="1500",
        explain=(
            "System prompt, history and question together. Longer prompts cost prefill compute "
            "(time to first token) and KV-cache memory."
        ),
    )

    def output_of(value: object) -> int | dict[str, Any]:
        output = _parse_length(value)
        longest = _longest(input_tokens) + _longest(output)
        if longest > context:
            raise ValueError(f"input + output tokens ({longest:,}) exceed {within}")
        return output

    output_tokens = w.ask(
        "output_tokens",
        "Answer length in tokens (mean)",
        output_of,
        default="300",
        explain="Each output token is one decode step: it sets how long a request holds a slot.",
    )
    precision: str = w.ask(
        "precision",
        "Weight precision: bf16, fp8, int8 or int4",
        choice(ServingParams, "precision"),
        default="bf16",
        explain=(
            "fp8 halves weight and KV-cache memory versus bf16 and speeds up decoding, with "
            "little quality loss; it needs H100-class or newer GPUs (int8/int4 are weight-only "
            "and run on older ones). " + hbm_note(arch, _mean(input_tokens) + _mean(output_tokens))
        ),
    )
    engine: str = w.ask(
        "engine",
        "Serving engine: vllm, tensorrt-llm, sglang or generic",
        choice(ServingParams, "engine"),
        default="vllm",
        explain=(
            "What runs the model decides its speed: vLLM, SGLang and TensorRT-LLM batch "
            "requests continuously and page the KV cache; 'generic' is plain Hugging Face "
            "generation, several times slower. Production services use one of the first three."
        ),
    )
    ttft = w.ask_optional(
        "ttft_p99_ms",
        "Time to first token, p99, in ms",
        field(Slo, "ttft_p99_ms"),
        default="800",
        explain=(
            "How long until the answer starts to appear, for 99 % of requests. 800 ms feels "
            "responsive in a chat; a tighter target needs more spare capacity (less queueing). "
            "Answer none for no target."
        ),
    )
    tpot = w.ask_optional(
        "tpot_p99_ms",
        "Time per output token, p99, in ms",
        field(Slo, "tpot_p99_ms"),
        default="60",
        explain=(
            "The streaming speed once it starts: 60 ms is ~17 tokens/s, faster than people "
            "read. Lower needs smaller batches per GPU, so more GPUs. Answer none for no target."
        ),
    )
    max_gpus = w.ask_optional(
        "max_gpus",
        "Most GPUs the service may use",
        field(Constraints, "max_gpus"),
        explain="A quota or the size of a cluster you already have.",
        blank="no limit",
    )
    slo = {k: number(v) for k, v in (("ttft_p99_ms", ttft), ("tpot_p99_ms", tpot)) if v}
    serving: dict[str, Any] = {
        "precision": precision,
        "engine": engine,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "request_rate": number(rate),
    }
    if slo:
        serving["slo"] = slo
    constraints = {} if max_gpus is None else {"max_gpus": max_gpus}
    return serving, constraints


def _default_name(kind: str, arch: ModelArch, taken: Sequence[str]) -> str:
    base = f"{'train' if kind == 'training' else 'serve'}-{arch.name or 'model'}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def ask_workload(w: Asker, index: int, taken: list[str]) -> dict[str, Any]:
    kind = w.ask(
        "kind",
        f"Workload {index + 1}: training a model, or serving one (training/serving)",
        _parse_kind,
        explain=(
            "A training run needs GPUs until it finishes, sized by tokens and deadline; a "
            "service needs them all the time, sized by request rate and latency targets."
        ),
    )
    model, arch = ask_model(w)
    if kind == "training":
        body, constraints = _ask_training(w, arch)
    else:
        body, constraints = _ask_serving(w, arch)
    team = w.ask_optional(
        "team",
        "Which team owns it",
        field(TrainingWorkload, "team"),
        explain="Teams get a guaranteed GPU quota each in a shared cluster.",
    )

    def name_of(value: object) -> str:
        name = str(check(TrainingWorkload, "name", value))
        if name in taken:
            raise ValueError(
                f"'{name}' is already the name of workload {taken.index(name) + 1}; "
                "names must be unique"
            )
        return name

    name = w.ask("name", "A short name for it", name_of, default=_default_name(kind, arch, taken))
    workload: dict[str, Any] = {"name": name, "kind": kind}
    if team is not None:
        workload["team"] = team
    workload["model"] = model
    workload["training" if kind == "training" else "serving"] = body
    if constraints:
        workload["constraints"] = constraints
    return workload
