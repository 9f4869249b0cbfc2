"""The two ways of answering: a person at a terminal, or an answers file.

The questions are written once, against `Asker`, so the interview a person types
and the one a YAML file scripts cannot drift apart: the same keys, the same
checks, the same defaults. Only what happens to a bad answer differs: at a
terminal it is asked again, from a file it is a user error naming the key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TextIO, TypeVar, cast

from rich.console import Console
from rich.markup import escape
from rich.prompt import Confirm, Prompt
from rich.table import Table

from gpufleet.cli.wizard.answers import as_bool
from gpufleet.errors import UserError, suggest

T = TypeVar("T")

# When each key is asked: for "not used" errors in answers files and for the docs.
PLAN_KEYS: dict[str, str] = {
    "deployment": "always",
    "providers": "when deployment is cloud or both",
    "regions": "when deployment is cloud or both",
    "expected_utilization": "when deployment is on-prem or both",
    "rack_power_kw": "when deployment is on-prem or both",
    "electricity_usd_per_kwh": "when deployment is on-prem or both",
    "accelerators": "always",
    "plan_name": "always",
    "overwrite": "when the --spec file already exists",
}
WORKLOAD_KEYS: dict[str, str] = {
    "kind": "always",
    "model": "always",
    "model_layers": "when model is custom",
    "model_hidden": "when model is custom",
    "model_heads": "when model is custom",
    "model_kv_heads": "when model is custom",
    "model_ffn_hidden": "when model is custom",
    "model_ffn_type": "when model is custom",
    "model_vocab": "when model is custom",
    "model_max_seq_len": "when model is custom",
    "tokens": "for training workloads",
    "seq_len": "for training workloads",
    "global_batch": "for training workloads",
    "deadline": "for training workloads",
    "budget_usd": "for training workloads",
    "request_rate": "for serving workloads",
    "input_tokens": "for serving workloads",
    "output_tokens": "for serving workloads",
    "ttft_p99_ms": "for serving workloads",
    "tpot_p99_ms": "for serving workloads",
    "engine": "for serving workloads",
    "precision": "always",
    "max_gpus": "always",
    "team": "always",
    "name": "always",
}
WORKLOADS_KEY = "workloads"

_NONE_WORDS = frozenset({"none", "null", "-"})


class _Lines:
    """A text stream read like `input()`: no newline, EOFError at the end."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def readline(self) -> str:
        line = self._stream.readline()
        if not line:
            raise EOFError
        return line.rstrip("\r\n")


class Asker(ABC):
    """Where answers come from: a person at a terminal, or an answers file."""

    @abstractmethod
    def ask(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T:
        """An answer that must be given (or defaults to `default`)."""

    @abstractmethod
    def ask_optional(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
        blank: str = "none",
    ) -> T | None:
        """An answer that may be `none`; blank takes `default`, or none without one.

        `blank` says what no answer means, in the prompt (`(blank: BLANK)`) when there is no
        `default`: "none" only where nothing stands in for it; where the planner then assumes
        something (a 90-day deadline, every catalog region), the prompt says what.
        """

    @abstractmethod
    def confirm(self, key: str, question: str, *, default: bool) -> bool: ...

    @abstractmethod
    def workloads(self) -> Iterator[Asker]:
        """One asker per workload, until the user (or the file) has no more."""

    @abstractmethod
    def note(self, text: str) -> None:
        """A remark after an answer (shown interactively only)."""

    @abstractmethod
    def show(self, intro: str, table: Table) -> None:
        """An explanation and a table to choose from (shown interactively only)."""

    @abstractmethod
    def finish(self) -> None:
        """Called once every question was asked."""

    def fail(self, key: str, message: str) -> UserError:
        """An error about the answer to `key` that cannot be asked again."""
        return UserError(f"{key}: {message}")


def _settle(
    value: object, parse: Callable[[Any], T], default: str | None, *, missing: bool
) -> T | None:
    """Blank (or missing) takes the default; `none` is no answer; anything else is parsed."""
    blank = missing or value is None or (isinstance(value, str) and not value.strip())
    if blank:
        return None if default is None else parse(default)
    if isinstance(value, str) and value.strip().lower() in _NONE_WORDS:
        return None
    return parse(value)


class Interactive(Asker):
    def __init__(self, console: Console, stream: TextIO | None) -> None:
        self.console = console
        self.stream = cast(TextIO, _Lines(stream)) if stream is not None else None
        self.key = ""

    def _explain(self, text: str) -> None:
        if text:
            self.console.print(text, style="cyan", highlight=False)

    def _input(self, key: str, question: str, default: str | None) -> str:
        self.key = key
        prompt = f"[bold]{escape(question)}[/bold] [dim]{escape(f'[{key}]')}[/dim]"
        return Prompt.ask(
            prompt,
            console=self.console,
            stream=self.stream,
            default=default if default is not None else "",
            show_default=default is not None,
        )

    def _loop(self, key: str, question: str, attempt: Callable[[str], T], default: str | None) -> T:
        while True:
            raw = self._input(key, question, default)
            try:
                return attempt(raw)
            except (ValueError, UserError) as exc:
                self.console.print(f"[red]✗ {escape(str(exc))}[/red]", highlight=False)

    def ask(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T:
        self._explain(explain)

        def attempt(raw: str) -> T:
            value = _settle(raw, parse, default, missing=False)
            if value is None:
                raise ValueError("this one needs an answer")
            return value

        return self._loop(key, question, attempt, default)

    def ask_optional(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
        blank: str = "none",
    ) -> T | None:
        self._explain(explain)
        return self._loop(
            key,
            question if default is not None else f"{question} (blank: {blank})",
            lambda raw: _settle(raw, parse, default, missing=False),
            default,
        )

    def confirm(self, key: str, question: str, *, default: bool) -> bool:
        self.key = key
        prompt = f"[bold]{escape(question)}[/bold] [dim]{escape(f'[{key}]')}[/dim]"
        return Confirm.ask(prompt, console=self.console, stream=self.stream, default=default)

    def workloads(self) -> Iterator[Asker]:
        index = 1
        while True:
            self.console.rule(f"Workload {index}")
            yield self
            more = self.confirm(
                "another",
                "Add another workload (serving the model you train, another team's job)?",
                default=False,
            )
            if not more:
                return
            index += 1

    def note(self, text: str) -> None:
        self.console.print(f"  {text}", style="green", highlight=False)

    def show(self, intro: str, table: Table) -> None:
        self._explain(intro)
        self.console.print(table)

    def finish(self) -> None:
        pass


class Scripted(Asker):
    """Answers from a YAML mapping; a bad or missing answer is a UserError naming its key."""

    def __init__(self, data: Mapping[str, Any], source: str, prefix: str = "") -> None:
        self.data = data
        self.source = source
        self.prefix = prefix
        self.used: set[str] = set()
        self.children: list[Scripted] = []

    def fail(self, key: str, message: str) -> UserError:
        return UserError(f"{self.source}: {self.prefix}{key}: {message}")

    def _answer(
        self, key: str, parse: Callable[[Any], T], default: str | None
    ) -> tuple[T | None, bool]:
        self.used.add(key)
        missing = key not in self.data
        try:
            return _settle(self.data.get(key), parse, default, missing=missing), missing
        except (ValueError, UserError) as exc:
            raise self.fail(key, str(exc)) from None

    def ask(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T:
        value, missing = self._answer(key, parse, default)
        if value is None:
            why = "missing" if missing else "needs an answer"
            raise self.fail(key, f"{why}; the question is: {question}?")
        return value

    def ask_optional(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
        blank: str = "none",
    ) -> T | None:
        return self._answer(key, parse, default)[0]

    def confirm(self, key: str, question: str, *, default: bool) -> bool:
        value, _ = self._answer(key, as_bool, "yes" if default else "no")
        return bool(value)

    def note(self, text: str) -> None:
        pass

    def show(self, intro: str, table: Table) -> None:
        pass

    def mark_used(self, key: str) -> None:
        self.used.add(key)

    def workloads(self) -> Iterator[Asker]:
        entries = self.data.get(WORKLOADS_KEY)
        if entries is None:  # the flat form: one workload, its keys at the top level
            yield self
            return
        for index, entry in enumerate(entries):
            child = Scripted(entry, self.source, f"{WORKLOADS_KEY}[{index}].")
            self.children.append(child)
            yield child

    def finish(self) -> None:
        """Answers that no question used would be silently ignored: refuse them."""
        for asker in [self, *self.children]:
            for key in asker.data:
                if key in asker.used or key == WORKLOADS_KEY:
                    continue
                when = WORKLOAD_KEYS.get(key) or PLAN_KEYS.get(key, "")
                raise asker.fail(key, f"not used with these answers: it is asked only {when}")


def check_keys(data: Mapping[str, Any], source: str) -> None:
    """Unknown keys are errors with the closest known key, before anything is asked."""

    def unknown(key: object, known: Sequence[str], where: str) -> UserError:
        hints = suggest(str(key), known, limit=1)
        tail = f"; did you mean '{hints[0]}'?" if hints else "; see docs/guide/wizard.md"
        return UserError(f"{source}: {where}{key}: unknown question key{tail}")

    entries = data.get(WORKLOADS_KEY)
    if entries is None:
        allowed = [*PLAN_KEYS, *WORKLOAD_KEYS, WORKLOADS_KEY]
        for key in data:
            if key not in allowed:
                raise unknown(key, allowed, "")
        return
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{source}: {WORKLOADS_KEY}: expected a list of at least one workload")
    for key in data:
        if key in WORKLOAD_KEYS:
            raise UserError(
                f"{source}: {key}: a workload question; with a {WORKLOADS_KEY} list, "
                "put it inside the workload's entry"
            )
        if key not in PLAN_KEYS and key != WORKLOADS_KEY:
            raise unknown(key, [*PLAN_KEYS, WORKLOADS_KEY], "")
    for index, entry in enumerate(entries):
        where = f"{WORKLOADS_KEY}[{index}]."
        if not isinstance(entry, Mapping):
            raise UserError(f"{source}: {WORKLOADS_KEY}[{index}]: expected a mapping of answers")
        for key in entry:
            if key in PLAN_KEYS:
                raise UserError(f"{source}: {where}{key}: a plan question; put it at the top level")
            if key not in WORKLOAD_KEYS:
                raise unknown(key, list(WORKLOAD_KEYS), where)
