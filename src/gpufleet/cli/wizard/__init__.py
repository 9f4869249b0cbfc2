"""`gpufleet wizard`: a guided interview that writes a plan spec and runs the planner.

The wizard asks in plain language what the user trains or serves, how big, by
when, with what budget, and where (cloud, on-prem or both), explaining each
trade-off as it asks, with numbers computed for the chosen model. Every answer
is checked at once with the same pydantic fields and quantity parsers the spec
files use, so the written spec always loads; a bad answer is asked again with
the message (or, with `--answers FILE`, is a user error naming the key).

Every question has a key. `--answers FILE` reads the same keys from a YAML
mapping and asks nothing: that is how the wizard is scripted and tested. Keys
are documented in docs/guide/wizard.md.

The modules, bottom up: `answers` checks one answer; `askers` holds the two ways
of answering (a terminal, an answers file) and the question keys; `explain` the
numbers for the explanations; `model_choice`, `questions` and `plan_questions`
the questions; `interview` the interview, the spec file, the planner and the
Typer command.
"""

from gpufleet.cli.wizard.askers import PLAN_KEYS, WORKLOAD_KEYS, WORKLOADS_KEY
from gpufleet.cli.wizard.interview import render_spec, run_wizard, wizard, write_atomic

__all__ = [
    "PLAN_KEYS",
    "WORKLOADS_KEY",
    "WORKLOAD_KEYS",
    "render_spec",
    "run_wizard",
    "wizard",
    "write_atomic",
]
