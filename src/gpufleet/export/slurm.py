"""Slurm: slurm.conf fragments, gres.conf, topology.conf and an sacctmgr script.

- nodes with `Gres=gpu:<type>:<n>` (a MIG slice is its own type, `<type>_<profile>`, as
  Slurm's NVML detection names them), one partition per accelerator (spot nodes apart);
- `PriorityType=priority/multifactor` with weights from the profile's queue order,
  `SchedulerType` from its head-of-line rule, `PreemptType=preempt/qos` with
  `PreemptMode=REQUEUE` when it preempts by priority; `KillWait` at the checkpoint grace
  (gpufleet stops a job with scancel: SIGTERM, then SIGKILL after KillWait);
- `TopologyPlugin=topology/tree` with a switch per topology group;
- accounts per team (projects as sub-accounts), a QOS per priority class that
  preempts the lower preemptible ones, each account given the QOS of the classes up to
  its team's `max_priority_class` (gpufleet's control plane refuses higher ones),
  fair-share from the team weights and `GrpTRES` caps at each team's borrowing ceiling:
  per GRES type, and on plain `gres/gpu` at their sum, since Slurm counts a request
  without a type (`--gres=gpu:4`) against plain `gres/gpu` only; for the same reason each
  partition admits only the accounts with a quota for its GPUs (`AllowAccounts`).

Slurm has no guarantees to lend and take back: what a team is guaranteed becomes
only its fair share and its cap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpufleet.errors import UserError
from gpufleet.export.bundle import Bundle, Origin
from gpufleet.export.k8s import k8s_name, mig_name, unique_names
from gpufleet.export.migparted import group_layout
from gpufleet.export.model import (
    Fleet,
    Resource,
    active_preemption,
    allowed_classes,
    integer_weights,
)
from gpufleet.sched.fairshare import DEFAULT_HALF_LIFE_S
from gpufleet.sched.orders import Multifactor
from gpufleet.sched.preempt import GRACE_PERIOD_S, MIN_RUNTIME_S
from gpufleet.sched.registry import QUEUE_ORDERS
from gpufleet.specs.cluster import NodeGroup

_SLURM_NAME = re.compile(r"[A-Za-z0-9._-]+")
_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<n>0|[1-9]\d*)$")


def gres_type(accelerator: str, profile: str | None = None) -> str:
    """The GRES type of an accelerator's whole GPUs, or of one of its MIG profiles."""
    base = accelerator.replace("-", "_")
    return base if profile is None else f"{base}_{mig_name(profile)}"


def _check(name: str, what: str) -> str:
    if not _SLURM_NAME.fullmatch(name):
        raise UserError(f"{what} '{name}' cannot be a Slurm name (letters, digits, '.', '_', '-')")
    return name


def hostlist(names: Iterable[str]) -> str:
    """Slurm's compressed host list: h100-0 ... h100-15 -> h100-[0-15]."""
    groups: dict[str, list[int]] = {}
    singles: list[str] = []
    order: list[tuple[str, str]] = []
    for name in names:
        m = _NUMBERED.match(name)
        if m is None:
            singles.append(name)
            order.append(("single", name))
            continue
        if m["prefix"] not in groups:
            order.append(("group", m["prefix"]))
        groups.setdefault(m["prefix"], []).append(int(m["n"]))
    parts: list[str] = []
    for kind, key in order:
        if kind == "single":
            parts.append(key)
            continue
        numbers = sorted(set(groups[key]))
        if len(numbers) == 1:
            parts.append(f"{key}{numbers[0]}")
            continue
        runs: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            if n is not None:
                start = prev = n
        parts.append(f"{key}[{','.join(runs)}]")
    return ",".join(parts)


def duration(seconds: float) -> str:
    """Seconds as Slurm's days-hours:minutes:seconds."""
    s = round(seconds)
    days, rest = divmod(s, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def priority_weights(fleet: Fleet, notes: list[str]) -> dict[str, int] | None:
    """PriorityWeight* for the profile's queue order; None for plain FIFO (priority/basic).

    `multifactor` is the order gpufleet models on Slurm, with its weights; the others put
    their first key far above their tie-breaks (factors 100 apart).
    """
    order = fleet.profile.queue_order
    if order == "multifactor":
        m = QUEUE_ORDERS["multifactor"]
        assert isinstance(m, Multifactor)
        return {
            "Age": int(m.weight_age),
            "Fairshare": int(m.weight_fairshare),
            "JobSize": int(m.weight_job_size),
            "QOS": int(m.weight_qos),
        }
    if order == "fair-share":
        return {"Age": 10, "Fairshare": 100_000, "JobSize": 0, "QOS": 1_000}
    if order == "priority":
        return {"Age": 1_000, "Fairshare": 0, "JobSize": 0, "QOS": 100_000}
    if order == "tiresias":
        notes.append(
            "Tiresias' least-attained-service order has no Slurm factor: the age factor "
            "alone stands in (it also promotes jobs that waited long)."
        )
        return {"Age": 1_000, "Fairshare": 0, "JobSize": 0, "QOS": 0}
    return None


def _gres(group: NodeGroup) -> str:
    layout = group_layout(group)
    if layout is None:
        return f"gpu:{gres_type(group.accelerator)}:{group.gpus_per_node}"
    return ",".join(
        f"gpu:{gres_type(group.accelerator, p)}:{n * group.gpus_per_node}" for p, n in layout
    )


def _nodes_of(fleet: Fleet, group: str) -> list[str]:
    return [_check(n.name, "node name") for n in fleet.cluster.nodes if n.group == group]


def team_accounts(fleet: Fleet) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Team -> its Slurm account and its projects' sub-accounts."""
    accounts = unique_names([t.name for t in fleet.teams], "team")
    return {
        t.name: (
            accounts[t.name],
            tuple(
                _check(k8s_name(f"{accounts[t.name]}-{p}", f"project {p}"), "account")
                for p in t.projects
            ),
        )
        for t in fleet.teams
    }


def allowed_accounts(fleet: Fleet, accelerator: str) -> list[str]:
    """The accounts that may run jobs on a partition of `accelerator`'s nodes: those of the
    teams (and their projects) that can hold any of its GPUs. A job asking for GPUs
    without a type counts only against an account's plain `gres/gpu` cap, so without this
    a team with no quota for a type would run such jobs on its nodes."""
    accounts = team_accounts(fleet)
    out: list[str] = []
    for team in fleet.teams:
        if any(q.flavor.accelerator == accelerator and q.ceiling for q in fleet.quotas[team.name]):
            account, subs = accounts[team.name]
            out += [account, *subs]
    return out


def slurm_conf(fleet: Fleet, origin: Origin, cluster: str, notes: list[str]) -> str:
    p = fleet.profile
    preempt = active_preemption(fleet)
    tres = ["gres/gpu"] + [
        f"gres/gpu:{gres_type(r.accelerator, r.profile)}" for r in fleet.resources()
    ]
    lines = [
        *origin.header(),
        "# Fragments to merge into slurm.conf. Add each node's CPUs, RealMemory and Sockets",
        "# (slurmd -C prints them) and NodeAddr/NodeHostname where gpufleet's names differ.",
        f"ClusterName={cluster}",
        "GresTypes=gpu",
        "SelectType=select/cons_tres",
        f"AccountingStorageTRES={','.join(tres)}",
        "AccountingStorageEnforce=associations,limits,qos",
    ]
    weights = priority_weights(fleet, notes)
    if weights is None:
        lines.append("PriorityType=priority/basic")
    else:
        lines += [
            "PriorityType=priority/multifactor",
            f"PriorityDecayHalfLife={duration(DEFAULT_HALF_LIFE_S)}",
        ]
        m = QUEUE_ORDERS["multifactor"]
        if isinstance(m, Multifactor):
            lines.append(f"PriorityMaxAge={duration(m.max_age_s)}")
        lines += [f"PriorityWeight{k}={v}" for k, v in weights.items()]
    if p.head_of_line == "strict":
        lines.append("SchedulerType=sched/builtin")
    else:
        lines.append("SchedulerType=sched/backfill")
        if p.head_of_line == "best-effort":
            notes.append(
                "Slurm's backfill reserves nodes for blocked jobs; gpufleet's best-effort "
                f"profile {fleet.profile_name} does not (Slurm has no pure best-effort mode)."
            )
    if "priority" in preempt:
        lines += [
            "PreemptType=preempt/qos",
            "PreemptMode=REQUEUE",
            f"PreemptExemptTime={duration(MIN_RUNTIME_S)}",
        ]
    else:
        lines.append("PreemptType=preempt/none")
    if "quota-reclaim" in preempt:
        notes.append(
            "Quota reclaim has no Slurm equivalent: accounts do not lend guarantees, so "
            "nothing is taken back; GrpTRES caps what each team holds."
        )
    # SIGTERM to SIGKILL when a job is cancelled: gpufleet stops a job with scancel (its
    # accounting then says CANCELLED), so this is the checkpoint grace its jobs get
    lines.append(f"KillWait={int(GRACE_PERIOD_S)}")
    if topology_switches(fleet):
        lines.append("TopologyPlugin=topology/tree")
    lines.append("")
    for group in fleet.cluster_spec.node_groups:
        features = [gres_type(group.accelerator), group.capacity]
        lines.append(
            f"NodeName={hostlist(_nodes_of(fleet, group.name))} Gres={_gres(group)} "
            f"Feature={','.join(features)} State=UNKNOWN"
        )
    lines.append("")
    partitions: dict[str, tuple[str, list[str]]] = {}
    for group in fleet.cluster_spec.node_groups:
        name = gres_type(group.accelerator) + ("_spot" if group.capacity == "spot" else "")
        partitions.setdefault(name, (group.accelerator, []))[1].extend(_nodes_of(fleet, group.name))
    closed: list[str] = []
    for i, (name, (accelerator, nodes)) in enumerate(partitions.items()):
        default = "YES" if i == 0 else "NO"
        allowed = allowed_accounts(fleet, accelerator)
        if not allowed:
            closed.append(name)
        lines.append(
            f"PartitionName={name} Nodes={hostlist(nodes)} Default={default} "
            f"MaxTime=INFINITE State=UP AllowAccounts={','.join(allowed or ['root'])}"
        )
    notes.append(
        "Slurm counts a job that asks for GPUs without a type (--gres=gpu:N, --gpus=N) "
        "against an account's plain gres/gpu limit only, never its typed ones. So each "
        "account's GrpTRES also caps gres/gpu at the sum of its typed caps, and each "
        "partition admits only the accounts (AllowAccounts) of the teams with a quota for "
        "its GPUs. A team with quotas for several GPU types can still hold, with untyped "
        "requests, up to that sum of one type: ask for the type (--gres=gpu:<type>:N), or "
        "have a job_submit plugin require one."
    )
    if closed:
        notes.append(
            f"No team has a quota for the GPUs of partition {', '.join(closed)}: only the "
            "root account (administrators) may use it (AllowAccounts=root)."
        )
    if any(g.capacity == "spot" for g in fleet.cluster_spec.node_groups):
        notes.append(
            "Spot nodes are in their own partitions (<type>_spot): jobs that accept "
            "spot capacity submit to them."
        )
    if any(g.fractions for g in fleet.cluster_spec.node_groups):
        notes.append(
            "GPU fractions are not exported: Slurm would need gres/shard or MPS, "
            "which do not fence the processes."
        )
    return "\n".join(lines) + "\n"


def gres_conf(fleet: Fleet, origin: Origin) -> str:
    lines = [*origin.header()]
    for group in fleet.cluster_spec.node_groups:
        nodes = hostlist(_nodes_of(fleet, group.name))
        if group_layout(group) is None:
            last = group.gpus_per_node - 1
            files = "/dev/nvidia0" if last == 0 else f"/dev/nvidia[0-{last}]"
            lines.append(
                f"NodeName={nodes} AutoDetect=off Name=gpu Type={gres_type(group.accelerator)} "
                f"File={files}"
            )
        else:
            lines += [
                "# MIG slices: partition them first (export mig-parted); NVML reports them.",
                "# Their types must match slurm.conf's: check with `slurmd -G` on a node.",
                f"NodeName={nodes} AutoDetect=nvml",
            ]
    return "\n".join(lines) + "\n"


Switch = tuple[str, ...]


def topology_switches(fleet: Fleet) -> dict[Switch, tuple[list[Switch], list[str]]]:
    """Switch (its topology path) -> (child switches, nodes), from the cluster's groups.

    A '-' level (no group there) is skipped; a switch that would hold both switches and
    nodes gets its nodes under a leaf `<switch>_nodes`; nodes with no group at all hang
    off the root.
    """
    tree: dict[Switch, tuple[list[Switch], list[str]]] = {}
    for node in fleet.cluster.nodes:
        path = tuple(c for c in node.path if c != "-")
        for i in range(1, len(path) + 1):
            tree.setdefault(path[:i], ([], []))
            if i > 1 and path[:i] not in tree[path[: i - 1]][0]:
                tree[path[: i - 1]][0].append(path[:i])
        if path:
            tree[path][1].append(node.name)
    if not tree:
        return {}
    for switch in list(tree):
        children, nodes = tree[switch]
        if children and nodes:
            leaf = (*switch, "nodes")
            tree[leaf] = ([], nodes)
            tree[switch] = ([*children, leaf], [])
    orphans = [n.name for n in fleet.cluster.nodes if all(c == "-" for c in n.path)]
    tops = [s for s in tree if len(s) == 1]
    if len(tops) > 1 or orphans:
        root_children: list[Switch] = list(tops)
        if orphans:
            tree[("unplaced",)] = ([], orphans)
            root_children.append(("unplaced",))
        tree[()] = (root_children, [])
    return tree


def topology_conf(fleet: Fleet, origin: Origin, cluster: str) -> str | None:
    tree = topology_switches(fleet)
    if not tree:
        return None

    def name(s: Switch) -> str:
        return cluster if not s else _check("_".join(s), "topology group")

    lines = [*origin.header()]
    for switch in sorted(tree, key=lambda s: -len(s)):  # leaves first; stable within a depth
        children, nodes = tree[switch]
        if nodes:
            lines.append(f"SwitchName={name(switch)} Nodes={hostlist(nodes)}")
        else:
            lines.append(
                f"SwitchName={name(switch)} Switches={','.join(name(c) for c in children)}"
            )
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def sacctmgr_script(fleet: Fleet, origin: Origin, cluster: str, notes: list[str]) -> str:
    preempt = "priority" in active_preemption(fleet)
    teams = fleet.teams
    accounts = team_accounts(fleet)
    qos = unique_names([c.name for c in fleet.priority_classes], "priority class")
    lines = [
        "#!/bin/sh",
        *origin.header(),
        "# Run as a Slurm administrator (accounting through slurmdbd is required: Slurm",
        "# refuses TRES gres/gpu limits without it). Each entity is added (an error if it",
        "# exists is harmless) and then set, so the script can be run again after the teams",
        "# change; any other error stops it with a non-zero status.",
        "set -eu",
        f"sacctmgr -i add cluster {cluster} || true",
    ]
    classes = sorted(fleet.priority_classes, key=lambda c: (c.value, c.name))
    # Every QOS is added before any is set (a list may only name existing ones). Preemption
    # lists are emptied first, then set: Slurm refuses a list that would close
    # a loop with another QOS's current one (after a change of priorities on a second run),
    # and an empty `Preempt=` leaves slurmdbd (22.05) refusing every later list as a loop,
    # so a list is emptied by removing every other name (`Preempt-=`), never by `Preempt=`.
    lines.extend(f"sacctmgr -i add qos {qos[c.name]} || true" for c in classes)  # all named
    for c in classes:
        value = c.value
        if value < 0:
            notes.append(f"QOS {qos[c.name]}: Slurm priorities are not negative; {value} -> 0.")
            value = 0
        settings = [f"Priority={value}"]
        others = [qos[o.name] for o in classes if o.name != c.name]
        if preempt:
            settings.append(f"GraceTime={int(GRACE_PERIOD_S)}")
        if others:
            settings.append(f"Preempt-={','.join(others)}")
        lines.append(f"sacctmgr -i modify qos where name={qos[c.name]} set {' '.join(settings)}")
    if preempt:
        for c in classes:
            victims = [qos[v.name] for v in classes if v.preemptible and v.value < c.value]
            if victims:
                lines.append(
                    f"sacctmgr -i modify qos where name={qos[c.name]} set "
                    f"Preempt={','.join(victims)}"
                )
    shares = integer_weights([t.weight for t in teams])
    capped = False
    for team, share in zip(teams, shares, strict=True):
        account, subs = accounts[team.name]
        caps: dict[Resource, int] = dict.fromkeys(fleet.resources(), 0)
        for q in fleet.quotas[team.name]:
            for r, n in q.ceiling_units.items():
                caps[r] += n
        # plain gres/gpu first: a request without a type counts against it alone
        grp = ",".join(
            [f"gres/gpu={sum(caps.values())}"]
            + [f"gres/gpu:{gres_type(r.accelerator, r.profile)}={n}" for r, n in caps.items()]
        )
        allowed = allowed_classes(fleet, team)
        capped = capped or len(allowed) < len(classes)
        lines.append(
            f"sacctmgr -i add account {account} Cluster={cluster} "
            f"Description={_quoted('gpufleet team ' + team.name)} Organization=gpufleet || true"
        )
        lines.append(
            f"sacctmgr -i modify account where name={account} cluster={cluster} set "
            f"Fairshare={share} GrpTRES={grp} "
            f"QOS={','.join(sorted(qos[c.name] for c in allowed))} "
            f"DefaultQOS={qos[team.default_priority]}"
        )
        for project, sub in zip(team.projects, subs, strict=True):
            lines.append(
                f"sacctmgr -i add account {sub} Parent={account} Cluster={cluster} "
                f"Description={_quoted(f'gpufleet project {project} of team {team.name}')} "
                "Organization=gpufleet || true"
            )
            lines.append(
                f"sacctmgr -i modify account where name={sub} cluster={cluster} set "
                "Fairshare=parent"
            )
    if capped:
        notes.append(
            "Each account has the QOS of the priority classes up to its team's "
            "max_priority_class (default: its default_priority), as gpufleet's control plane "
            "allows; gpufleet's admins may use any class: give them an account with every "
            "QOS."
        )
    lines.append("# Add users with: sacctmgr -i add user <name> Account=<team or project>")
    return "\n".join(lines) + "\n"


def export_slurm(fleet: Fleet) -> Bundle:
    fleet.require_teams("slurm")
    origin = Origin.of(fleet, "slurm")
    cluster = _check(
        k8s_name(fleet.cluster_spec.name, "cluster name").replace("-", "_"), "cluster name"
    )
    notes: list[str] = [
        "Slurm has no guaranteed quota: a team's guarantee shapes only its fair share "
        "(Fairshare from its weight) and its cap (GrpTRES at its borrowing ceiling).",
        "Cohorts have no Slurm equivalent: every account competes for every partition it "
        "may use, within its GrpTRES.",
    ]
    if any(len(f.resources) > 1 for f in fleet.flavors.values()):
        notes.append(
            "A team's cap of an accelerator with MIG slices is split over its GRES types in "
            "proportion to their capacity (slices weighed by compute share)."
        )
    if fleet.profile.guaranteed_first:
        notes.append(
            "Jobs within their team's guarantee are not looked at first: Slurm has no guarantees."
        )
    if fleet.profile.placement not in ("topology-best-fit",):
        notes.append(
            f"Placement {fleet.profile.placement} has no Slurm counterpart: select/cons_tres "
            "with topology/tree packs jobs onto the fewest switches."
        )
    files = {
        "slurm.conf": slurm_conf(fleet, origin, cluster, notes),
        "gres.conf": gres_conf(fleet, origin),
        "sacctmgr.sh": sacctmgr_script(fleet, origin, cluster, notes),
    }
    topo = topology_conf(fleet, origin, cluster)
    if topo is not None:
        files["topology.conf"] = topo
    if not topology_switches(fleet):
        notes.append("The cluster has no topology groups: no topology.conf is written.")
    warnings = fleet.overcommit_warnings(
        "Slurm has no guarantees (they become fair share and GrpTRES caps, exported as they "
        "are), so these files promise none, but the teams file's plan does not hold."
    )
    return Bundle(origin, files, tuple(dict.fromkeys(notes)), warnings)
