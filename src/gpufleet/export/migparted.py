"""NVIDIA mig-parted: the MIG layouts of the cluster spec as a `version: v1` config, and the
`nvidia.com/mig.config` node labels with which the GPU Operator's MIG manager applies them.

Each gpufleet node group has one layout for all its GPUs, so every config is a
single `devices: all` entry; MIG-capable groups without a layout get
`all-disabled`. A layout keeps its catalog name (the same names as mig-parted's
default config, e.g. `all-balanced`) unless two accelerators of the cluster
would need different layouts under that name; then each is prefixed with its
accelerator.
"""

from __future__ import annotations

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import get_mig_profile, layouts_for
from gpufleet.errors import UserError
from gpufleet.export.bundle import Bundle, Origin, dump_yaml, yaml_documents
from gpufleet.export.k8s import MIG_CONFIG_LABEL, check_label_value, label_script, mig_name, obj
from gpufleet.export.model import Fleet
from gpufleet.specs.cluster import NodeGroup

DISABLED = "all-disabled"
CONFIGMAP = "gpufleet-mig-parted-config"
GPU_OPERATOR_NAMESPACE = "gpu-operator"

Layout = tuple[tuple[str, int], ...]


def group_layout(group: NodeGroup) -> Layout | None:
    """The group's MIG layout with catalog profile spellings, or None when its GPUs are whole."""
    instances = group.mig_instances()
    if not instances:
        return None
    return tuple((get_mig_profile(group.accelerator, p).profile, n) for p, n in instances.items())


def _candidate(group: NodeGroup, layout: Layout) -> str:
    if isinstance(group.mig_layout, str):
        return group.mig_layout.strip().lower()
    wanted = dict(layout)
    for known in layouts_for(group.accelerator):
        if dict(known.instances) == wanted:
            return known.name
    return "custom-" + "-".join(f"{n}x{mig_name(p)}" for p, n in layout)


def config_names(fleet: Fleet) -> dict[str, str]:
    """Node group -> mig-parted config name, for every group whose GPUs support MIG."""
    candidates: dict[str, tuple[str, Layout | None]] = {}
    for group in fleet.cluster_spec.node_groups:
        if not get_accelerator(group.accelerator).supports_mig:
            continue
        layout = group_layout(group)
        name = DISABLED if layout is None else _candidate(group, layout)
        candidates[group.name] = (name, layout)
    layouts_by_name: dict[str, set[frozenset[tuple[str, int]]]] = {}
    for name, layout in candidates.values():
        layouts_by_name.setdefault(name, set()).add(frozenset(layout or ()))
    out: dict[str, str] = {}
    for group in fleet.cluster_spec.node_groups:
        if group.name not in candidates:
            continue
        name, _ = candidates[group.name]
        if len(layouts_by_name[name]) > 1:
            name = f"{group.accelerator}-{name}"
        out[group.name] = check_label_value(name, f"node group {group.name}: MIG config name")
    return out


def mig_configs(fleet: Fleet) -> dict[str, Layout | None]:
    """Config name -> layout (None: MIG disabled), sorted by name."""
    names = config_names(fleet)
    out: dict[str, Layout | None] = {}
    for group in fleet.cluster_spec.node_groups:
        if group.name in names:
            out[names[group.name]] = group_layout(group)
    return dict(sorted(out.items()))


def config_document(fleet: Fleet) -> dict[str, object]:
    configs: dict[str, object] = {}
    for name, layout in mig_configs(fleet).items():
        if layout is None:
            configs[name] = [{"devices": "all", "mig-enabled": False}]
        else:
            configs[name] = [{"devices": "all", "mig-enabled": True, "mig-devices": dict(layout)}]
    return {"version": "v1", "mig-configs": configs}


def node_labels(fleet: Fleet) -> dict[str, dict[str, str]]:
    names = config_names(fleet)
    return {
        node.name: {MIG_CONFIG_LABEL: names[node.group]}
        for node in fleet.cluster.nodes
        if node.group in names
    }


def export_mig_parted(fleet: Fleet) -> Bundle:
    names = config_names(fleet)
    if not names:
        raise UserError(
            f"cluster '{fleet.cluster_spec.name}' has no GPUs that support MIG: "
            "there is no mig-parted config to write"
        )
    origin = Origin.of(fleet, "mig-parted", teams=False)
    document = config_document(fleet)
    configmap = obj(
        "v1",
        "ConfigMap",
        CONFIGMAP,
        namespace=GPU_OPERATOR_NAMESPACE,
        data={"config.yaml": dump_yaml(document)},
    )
    header = origin.header()
    files = {
        "mig-parted-config.yaml": yaml_documents(
            origin,
            [document],
            ["Apply on a node: nvidia-mig-parted apply -f mig-parted-config.yaml -c <name>"],
        ),
        "mig-parted-configmap.yaml": yaml_documents(
            origin,
            [configmap],
            [
                "For the GPU Operator's MIG manager: install with",
                f"--set migManager.config.name={CONFIGMAP} and label the nodes (label-nodes.sh).",
            ],
        ),
        "label-nodes.sh": label_script(header, node_labels(fleet)),
    }
    notes = [
        "Each config is one `devices: all` entry: gpufleet's node groups give every GPU of a "
        "node the same layout; no `device-filter` is written, so the node label alone picks "
        "the layout.",
        "Layouts pass the catalog's checks (profile counts, compute and memory budgets) but "
        "not NVIDIA's slice placement rules, which the catalog does not have: "
        "`nvidia-mig-parted assert` on a node is the final word.",
        "MIG re-layout proposals of `gpufleet schedule` are not exported: add the proposed "
        "layout to a node group and export again.",
    ]
    if any(
        g.mig_layout is not None and isinstance(g.mig_layout, dict)
        for g in fleet.cluster_spec.node_groups
    ):
        notes.append(
            "Explicit {profile: count} layouts are named after a catalog layout with "
            "the same instances, else `custom-<count>x<profile>-...`."
        )
    return Bundle(origin, files, tuple(notes))
