"""Reading what Slurm's commands print: `scontrol show -o`, `squeue`, `sacct --parsable2`.

Pure functions over text, so that the executor's decisions can be tested on recorded
output and the commands' quirks are written down in one place:

* times: every command runs with ``SLURM_TIME_FORMAT=%s``, so a time is Unix seconds, or
  ``None``/``Unknown``/``N/A``/``0`` when the job never got one;
* exit codes are ``CODE:SIGNAL``. `scontrol` keeps the whole code, while `sacct` prints
  only its low 7 bits (an ``exit 143`` reads ``15:0`` there), so `scontrol` is asked first;
* node lists are host-list expressions (``n[1-3,7],gpu-a[01-02]``);
* a job's state may carry a suffix (``CANCELLED by 0``) and a node's has flags
  (``IDLE+DRAIN``, ``DOWN*``, ``MIXED+NOT_RESPONDING``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from gpufleet.control.executors.base import RunKey
from gpufleet.telemetry.slurm import parse_tres

NodeState = Literal["up", "down", "drain"]

# job states after which Slurm holds nothing for the job any more
TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
# ends where the job's node, not the job, failed: reported as `lost`
NODE_LOSS_STATES = frozenset({"BOOT_FAIL", "NODE_FAIL", "PREEMPTED"})
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})

_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_:/]*)=")
_BRACKET = re.compile(r"^(?P<prefix>[^\[,]*)\[(?P<ranges>[^\]]+)\](?P<rest>.*)$")
_REASON_STAMP = re.compile(r"\s*\[[^\]@]+@[^\]]+\]\s*$")  # "test [root@1796157841]"
_NO_TIME = frozenset({"", "None", "Unknown", "N/A", "0", "(null)"})


def key_values(line: str) -> dict[str, str]:
    """`scontrol show ... -o`'s one line as a mapping; values may hold spaces (``OS=Linux 6.1``)."""
    matches = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m.group(1)] = line[m.end() : end].strip()
    return out


def epoch_s(text: str) -> float | None:
    """A time printed under ``SLURM_TIME_FORMAT=%s``, or None for "never"."""
    text = text.strip()
    if text in _NO_TIME:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


def exit_code(text: str) -> int:
    """``CODE:SIGNAL`` as one number: the signal as a negative code (killed by it), else CODE."""
    code, _, sig = text.strip().partition(":")
    try:
        signal_number = int(sig or 0)
        status = int(code or 0)
    except ValueError:
        return 0
    return -signal_number if signal_number else status


def base_state(text: str) -> str:
    """A job state without its suffix: ``CANCELLED by 0`` -> ``CANCELLED``."""
    return text.strip().split(" ", 1)[0].rstrip("+*")


def expand_hostlist(text: str) -> list[str]:
    """``n[1-3,7],gpu-a[01-02]`` -> n1 n2 n3 n7 gpu-a01 gpu-a02 (zero padding kept)."""
    names: list[str] = []
    for part in _split_top(text.strip()):
        names.extend(_expand_one(part))
    return names


def _split_top(text: str) -> Iterator[str]:
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            if text[start:i]:
                yield text[start:i]
            start = i + 1
    if text[start:]:
        yield text[start:]


def _expand_one(part: str) -> list[str]:
    m = _BRACKET.match(part)
    if m is None:
        return [part] if part and part != "(null)" else []
    out: list[str] = []
    for piece in m["ranges"].split(","):
        lo, _, hi = piece.partition("-")
        if not hi:
            heads = [lo]
        else:
            width = len(lo) if lo.startswith("0") else 0
            heads = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
        for head in heads:
            out.extend(f"{m['prefix']}{head}{tail}" for tail in _expand_one(m["rest"]) or [""])
    return out


def gres_gpus(text: str) -> tuple[int, str | None]:
    """GPUs in a node's ``Gres=`` and their type: ``gpu:h100:8(S:0-1)`` -> (8, "h100").

    Several GPU entries of different types (``gpu:a100:4,gpu:v100:2``) give their sum and
    no single type; other GRES (``shard``, ``mps``) are not GPUs."""
    total, types = 0, set()
    for entry in _split_top(text.strip()):
        fields = entry.split("(", 1)[0].split(":")
        if fields[0] != "gpu" or len(fields) < 2:
            continue
        try:
            count = int(fields[-1])
        except ValueError:
            continue
        total += count
        types.add(fields[1] if len(fields) == 3 else None)
    gpu_type = next(iter(types)) if len(types) == 1 else None
    return total, gpu_type


def tres_gpus(text: str) -> int:
    """GPUs in a TRES string: ``billing=2,cpu=2,gres/gpu=16,node=2`` -> 16 (typed entries
    such as ``gres/gpu:h100=16`` repeat the total and are not added again)."""
    try:
        return int(parse_tres(text).get("gres/gpu", "0"))
    except ValueError:
        return 0


def node_state(raw: str) -> NodeState:
    """gpufleet's view of a Slurm node state: ``down`` when its jobs are gone (DOWN, FUTURE,
    an unknown node), ``drain`` when it takes no new work but keeps what runs (DRAIN,
    FAIL, MAINT, REBOOT, powered down), ``up`` otherwise. NOT_RESPONDING alone stays up:
    Slurm marks the node DOWN itself after ``SlurmdTimeout``."""
    parts = {p.rstrip("*~#!%$@^-") for p in raw.upper().replace("*", "+NOT_RESPONDING").split("+")}
    if parts & {"DOWN", "FUTURE", "UNKNOWN", "ERROR"}:
        return "down"
    drainish = {
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "MAINT",
        "MAINTENANCE",
        "REBOOT_REQUESTED",
        "REBOOT_ISSUED",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWER_DOWN",
        "INVALID_REG",
    }
    return "drain" if parts & drainish else "up"


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node as `scontrol show node -o` describes it."""

    name: str
    addr: str
    state_raw: str
    gpus: int
    gpu_type: str | None
    cpus: int
    partitions: tuple[str, ...]
    reason: str = ""

    @property
    def state(self) -> NodeState:
        return node_state(self.state_raw)


def parse_nodes(text: str) -> list[SlurmNode]:
    """Every node in `scontrol show node -o` output (one node per line)."""
    nodes = []
    for line in text.splitlines():
        kv = key_values(line)
        name = kv.get("NodeName")
        if not name:
            continue
        gpus, gpu_type = gres_gpus(kv.get("Gres", ""))
        try:
            cpus = int(kv.get("CPUTot") or kv.get("CPUEfctv") or 0)
        except ValueError:
            cpus = 0
        partitions = tuple(p for p in kv.get("Partitions", "").split(",") if p)
        nodes.append(
            SlurmNode(
                name=name,
                addr=kv.get("NodeAddr") or name,
                state_raw=kv.get("State", ""),
                gpus=gpus,
                gpu_type=gpu_type,
                cpus=cpus,
                partitions=partitions,
                reason=_REASON_STAMP.sub("", kv.get("Reason", "")).strip(),
            )
        )
    return nodes


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """What one of squeue, scontrol or sacct says about a job (fields it lacks are None)."""

    job_id: str
    name: str
    state: str  # base state: RUNNING, COMPLETED, CANCELLED, ...
    reason: str = ""
    start_s: float | None = None
    end_s: float | None = None
    nodes: tuple[str, ...] = ()
    exit_code: int | None = None
    gpus: int | None = None
    elapsed_s: float | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and self.reason in HELD_REASONS

    @property
    def ran(self) -> bool:
        """It got nodes and started (a job cancelled while pending has a start time but no
        nodes)."""
        return self.start_s is not None and bool(self.nodes) and self.state != "PENDING"


SQUEUE_FORMAT = "%i|%j|%T|%r|%S|%e|%N"
SACCT_FIELDS = "JobIDRaw,JobName,State,ExitCode,Start,End,ElapsedRaw,NodeList,AllocTRES"
# jobcomp/filetxt's sacct -c crashes on AllocTRES (Slurm 22.05): it is not asked for there
JOBCOMP_FIELDS = "JobIDRaw,JobName,State,ExitCode,Start,End,ElapsedRaw,NodeList"


def parse_squeue(text: str) -> list[SlurmJob]:
    """`squeue -h -o SQUEUE_FORMAT` lines. A job name holding "|" would shift the fields, but
    the names read here are gpufleet's own."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != 7 or not fields[0].strip():
            continue
        job_id, name, state, reason, start, end, nodes = fields
        jobs.append(
            SlurmJob(
                job_id=job_id.strip(),
                name=name,
                state=base_state(state),
                reason=reason.strip(),
                start_s=epoch_s(start),
                end_s=epoch_s(end),
                nodes=tuple(expand_hostlist(nodes)),
            )
        )
    return jobs


def parse_sacct(text: str) -> list[SlurmJob]:
    """`sacct -X -n -P -o SACCT_FIELDS` (or JOBCOMP_FIELDS) lines."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 8 or not fields[0].strip():
            continue
        job_id, name, state, code, start, end, elapsed, nodes = fields[:8]
        tres = fields[8] if len(fields) > 8 else None
        try:
            elapsed_s: float | None = float(elapsed)
        except ValueError:
            elapsed_s = None
        jobs.append(
            SlurmJob(
                job_id=job_id.strip(),
                name=name,
                state=base_state(state),
                start_s=epoch_s(start),
                end_s=epoch_s(end),
                nodes=tuple(n for n in expand_hostlist(nodes) if n != "None assigned"),
                exit_code=exit_code(code),
                gpus=tres_gpus(tres) if tres is not None else None,
                elapsed_s=elapsed_s,
            )
        )
    return jobs


def parse_scontrol_job(text: str) -> SlurmJob | None:
    """`scontrol show job -o ID` (None if it printed no job)."""
    for line in text.splitlines():
        kv = key_values(line)
        if "JobId" not in kv:
            continue
        return SlurmJob(
            job_id=kv["JobId"],
            name=kv.get("JobName", ""),
            state=base_state(kv.get("JobState", "")),
            reason=kv.get("Reason", ""),
            start_s=epoch_s(kv.get("StartTime", "")),
            end_s=epoch_s(kv.get("EndTime", "")),
            nodes=tuple(expand_hostlist(kv.get("NodeList", ""))),
            exit_code=exit_code(kv.get("ExitCode", "0:0")),
            gpus=tres_gpus(kv.get("TRES", "")),
        )
    return None


def config_value(text: str, key: str) -> str | None:
    """One setting from `scontrol show config` (``Key = value`` lines)."""
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == key:
            return value.strip()
    return None


def parse_seconds(text: str) -> float | None:
    """A duration setting of `scontrol show config` (``30 sec``, ``30``), None if it is
    something else."""
    number = text.strip().removesuffix("sec").strip()
    try:
        return float(number)
    except ValueError:
        return None


# -- gpufleet's job names ---------------------------------------------------------------------


def job_name(tag: str, key: RunKey) -> str:
    """The Slurm job name of an attempt: how a restarted server finds its jobs again."""
    return f"{tag}-{key.name}"


def run_key(tag: str, name: str) -> RunKey | None:
    """The attempt a Slurm job name encodes (None: not one of this tag's jobs)."""
    prefix = f"{tag}-job-"
    if not name.startswith(prefix):
        return None
    job, sep, attempt = name[len(prefix) :].partition("-")
    if not sep or not job.isdigit() or not attempt.isdigit():
        return None
    return RunKey(int(job), int(attempt))


def natural_key(name: str) -> tuple[str | int, ...]:
    """Sort key that puts n2 before n10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def group_prefix(name: str) -> str:
    """A node name without its trailing index: ``n12`` -> ``n``, ``gpu-a-03`` -> ``gpu-a``."""
    return re.sub(r"[-_.]?\d+$", "", name) or name


def by_name(jobs: list[SlurmJob], tag: str) -> Mapping[RunKey, SlurmJob]:
    """This tag's jobs by attempt; of two jobs for one attempt (a resubmission) the later."""
    out: dict[RunKey, SlurmJob] = {}
    for job in sorted(jobs, key=lambda j: natural_key(j.job_id)):
        key = run_key(tag, job.name)
        if key is not None:
            out[key] = job
    return out
