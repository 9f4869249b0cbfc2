"""The batch script of one attempt: a pure function of the launch and the cluster's names.

Apart from the executor because the script is where gpufleet's placement becomes Slurm's
(one srun step per node, ranks, GPUs per task, gang exit) and can be checked as text, on
golden files, without Slurm; the executor only writes it and submits it.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufleet.control.executors.base import Launch
from gpufleet.control.executors.slurm_attempt import OUTPUT_LOG, STAGING_FAILED_EXIT_CODE
from gpufleet.control.executors.slurm_commands import SlurmOptions

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# set per task by the batch script, not once for the job
PER_TASK_ENV = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "RANK",
        "NODE_RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "PET_NODE_RANK",
        "MASTER_PORT",
        "PET_MASTER_PORT",
        "GPUFLEET_GPU_FRACTION",
    }
)


class UnsupportedLaunchError(Exception):
    """A launch the executor cannot express as a Slurm job."""


def check_launch(launch: Launch) -> None:
    """Raise `UnsupportedLaunchError` for a launch a batch job cannot express."""
    for w in launch.workers:
        if w.gpu_fraction is not None:
            raise UnsupportedLaunchError(
                "GPU fractions are not supported by the slurm executor yet"
            )
        if w.devices and not w.gpus:
            raise UnsupportedLaunchError("MIG slices are not supported by the slurm executor yet")
    if not launch.workers:
        raise UnsupportedLaunchError("a launch without workers")
    if len({len(w.gpus) for w in launch.workers}) != 1:
        raise UnsupportedLaunchError("workers with different GPU counts")


@dataclass(frozen=True)
class BatchPlan:
    """What `sbatch` gets for one attempt."""

    script: str
    hostfile: str | None  # SLURM_HOSTFILE for an uneven placement


# Run by each srun task: its rank from the node's rank list, its share of the node's GPUs,
# its output into worker-<rank>.log, then the job's command.
TASK_PRELUDE = r"""set -u
IFS=, read -r -a gpufleet_ranks <<<"$GPUFLEET_RANKS"
export RANK=${gpufleet_ranks[$SLURM_LOCALID]} LOCAL_RANK=$SLURM_LOCALID
gpufleet_g=${GPUFLEET_GPUS_PER_TASK:-0}
if ((gpufleet_g == 0)); then
  export CUDA_VISIBLE_DEVICES= NVIDIA_VISIBLE_DEVICES=
elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a gpufleet_d <<<"$CUDA_VISIBLE_DEVICES"
  gpufleet_n=${#gpufleet_d[@]}
  if ((gpufleet_n > gpufleet_g && gpufleet_n >= (SLURM_LOCALID + 1) * gpufleet_g)); then
    gpufleet_v=$(IFS=,; echo "${gpufleet_d[*]:$((SLURM_LOCALID * gpufleet_g)):$gpufleet_g}")
    export CUDA_VISIBLE_DEVICES=$gpufleet_v NVIDIA_VISIBLE_DEVICES=$gpufleet_v
  else
    export NVIDIA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES
  fi
fi
exec >>"$GPUFLEET_RUN_DIR/worker-$RANK.log" 2>&1
: >"$GPUFLEET_RUN_DIR/started-$RANK"
exec "$@"
"""

# How the batch shell treats the signals it gets: with scope "batch" it is the only one
# signalled and passes the signal on to the steps (scancel without --batch reaches every
# task once; srun itself would end its step on SIGTERM instead of passing it on); with
# "full" the steps get it directly too, so the shell only survives it.
_SIGNAL_HANDLERS = {
    "steps": "",
    "batch": (
        'gpufleet_pass_on() { scancel --signal="$1" "$SLURM_JOB_ID" || true; }\n'
        + "".join(
            f"trap 'gpufleet_pass_on {s}' {s}\n" for s in ("USR1", "USR2", "TERM", "INT", "HUP")
        )
    ),
    "full": "".join(f"trap ':' {s}\n" for s in ("USR1", "USR2", "TERM", "INT", "HUP")),
}

_WAIT_FOR_STEPS = r"""gpufleet_running() {  # is any of these pids running (not gone, not a zombie)?
  local p st
  for p in "$@"; do
    read -r _ _ st _ 2>/dev/null <"/proc/$p/stat" || continue
    [ "$st" = Z ] || return 0
  done
  return 1
}
gpufleet_rc=0
while ((${#gpufleet_pids[@]})); do
  gpufleet_done=
  wait -n -p gpufleet_done "${gpufleet_pids[@]}"
  gpufleet_status=$?
  [ -n "${gpufleet_done:-}" ] || continue  # a signal interrupted the wait
  gpufleet_left=()
  for gpufleet_p in "${gpufleet_pids[@]}"; do
    [ "$gpufleet_p" = "$gpufleet_done" ] || gpufleet_left+=("$gpufleet_p")
  done
  gpufleet_pids=("${gpufleet_left[@]}")
  if ((gpufleet_status != 0 && gpufleet_rc == 0)); then
    gpufleet_rc=$gpufleet_status
    # 143 is a worker that ended on SIGTERM: a stop, which the others got too (and the
    # kill follows the grace period); any other failure stops the gang after a moment
    for _ in $(seq 20); do
      ((gpufleet_status != 143)) && gpufleet_running "${gpufleet_pids[@]}" || break
      sleep 0.1
    done
    if ((gpufleet_status != 143)) && gpufleet_running "${gpufleet_pids[@]}"; then
      echo "gpufleet: a worker step exited with $gpufleet_status; stopping the others" >&2
      kill -TERM "${gpufleet_pids[@]}" 2>/dev/null
    fi
  fi
done
exit "$gpufleet_rc"
"""

_STAGE = r"""gpufleet_stage() {
  mkdir -p -- "$(dirname -- "$2")" || return 1
  if [ -d "$1" ]; then
    mkdir -p -- "$2" && cp -a -- "$1/." "$2/"
  elif [ -e "$1" ]; then
    cp -a -- "$1" "$2"
  else
    echo "data source $1 does not exist" >&2
    return 1
  fi
}
gpufleet_t0=$(date +%s%N)
if ! { @STEPS@; } 2>.staging.err; then
  { printf 'staging failed: '; cat .staging.err; } >.staging.tmp
  mv -f .staging.tmp staging-error.txt
  exit @CODE@
fi
gpufleet_t1=$(date +%s%N)
printf '{"at_s": %d.%09d, "seconds": %d.%09d}\n' \
  $((gpufleet_t1 / 1000000000)) $((gpufleet_t1 % 1000000000)) \
  $(((gpufleet_t1 - gpufleet_t0) / 1000000000)) $(((gpufleet_t1 - gpufleet_t0) % 1000000000)) \
  >.staged.tmp
mv -f .staged.tmp staged.json
"""


def plan_batch_job(
    launch: Launch,
    *,
    name: str,
    run_dir: Path,
    slurm_nodes: Mapping[str, str],
    gpu_types: Mapping[str, str | None],
    env: Mapping[str, str],
    options: SlurmOptions,
    data: Sequence[tuple[str, str]] = (),
) -> BatchPlan:
    """The batch script (and host file) for one attempt: a pure function of its inputs.

    `slurm_nodes` maps each worker's gpufleet node to its Slurm node; `gpu_types` gives
    each Slurm node's GRES type (None: untyped ``gpu:N``). Nodes appear in the order of
    their first worker, so node rank 0 holds rank 0 and ``MASTER_ADDR`` points there.
    """
    workers = launch.workers
    per_task = len(workers[0].gpus)
    order = list(dict.fromkeys(w.node for w in workers))
    ranks: dict[str, list[int]] = defaultdict(list)
    for w in workers:
        ranks[w.node].append(w.rank)
    counts = Counter(len(r) for r in ranks.values())
    even = len(counts) == 1
    types = {gpu_types.get(slurm_nodes[n]) for n in order}
    gpu_type = next(iter(types)) if len(types) == 1 else None
    typed = f"{gpu_type}:" if gpu_type else ""
    directives = [
        f"--job-name={name}",
        f"--output={run_dir / OUTPUT_LOG}",
        "--open-mode=append",
        "--no-requeue",
        "--export=NONE",
        f"--nodes={len(order)}",
        f"--nodelist={','.join(slurm_nodes[n] for n in order)}",
    ]
    hostfile = None
    if even:
        per_node = len(ranks[order[0]])
        directives.append(f"--ntasks-per-node={per_node}")
        if per_task:
            directives.append(f"--gres=gpu:{typed}{per_node * per_task}")
    else:
        # an uneven placement (2 workers here, 1 there): tasks laid out by a host file
        directives += [f"--ntasks={len(workers)}", "--distribution=arbitrary"]
        if per_task:
            directives.append(f"--gpus-per-task={typed}{per_task}")
        hostfile = "".join(f"{slurm_nodes[w.node]}\n" for w in workers)
    for flag, value in (
        ("partition", options.partition),
        ("account", options.account),
        ("qos", options.qos),
    ):
        if value:
            directives.append(f"--{flag}={value}")
    lines = [
        "#!/bin/bash",
        f"# gpufleet job {launch.key.job_id} attempt {launch.key.attempt} "
        f"({launch.team}/{_one_line(launch.job_name)}), written by gpufleet's slurm executor",
        *(f"#SBATCH {d}" for d in directives),
        "set -u",
        "# each step below takes its node's share of the allocation, placed by gpufleet",
        "unset SLURM_HOSTFILE SLURM_DISTRIBUTION SLURM_GPUS_PER_TASK SLURM_TRES_PER_TASK",
    ]
    for k, v in sorted(env.items()):
        if _ENV_NAME.match(k):
            lines.append(f"export {k}={shlex.quote(v)}")
    port = str(launch.master_port) if launch.master_port else "$((29500 + SLURM_JOB_ID % 30000))"
    lines += [
        f"export MASTER_PORT={port} PET_MASTER_PORT={port}",
        f"export GPUFLEET_GPUS_PER_TASK={per_task}",
        f"cd {shlex.quote(str(run_dir))}",
    ]
    if data:
        steps = " && ".join(
            f"gpufleet_stage {shlex.quote(src)} {shlex.quote(dst)}" for src, dst in data
        )
        lines.append(
            _STAGE.replace("@STEPS@", steps).replace("@CODE@", str(STAGING_FAILED_EXIT_CODE))
        )
    lines.append(_SIGNAL_HANDLERS[options.signal_scope].rstrip("\n"))
    lines.append(f"GPUFLEET_TASK={shlex.quote(TASK_PRELUDE)}")
    lines.append(f"gpufleet_command=({' '.join(shlex.quote(c) for c in launch.command)})")
    lines.append("gpufleet_pids=()")
    for node_rank, node in enumerate(order):
        node_ranks = ranks[node]
        lines.append(
            f"GPUFLEET_RANKS={','.join(map(str, node_ranks))} NODE_RANK={node_rank} "
            f"PET_NODE_RANK={node_rank} LOCAL_WORLD_SIZE={len(node_ranks)} "
            f"srun --export=ALL --nodes=1 --ntasks={len(node_ranks)} "
            f"--nodelist={slurm_nodes[node]} --distribution=block --kill-on-bad-exit=1 "
            f'/bin/bash -c "$GPUFLEET_TASK" gpufleet-task "${{gpufleet_command[@]}}" &'
        )
        lines.append("gpufleet_pids+=($!)")
    lines.append(_WAIT_FOR_STEPS.rstrip("\n"))
    script = "\n".join(line for line in lines if line) + "\n"
    return BatchPlan(script=script, hostfile=hostfile)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:80]
