"""Per-GPU readings from a DCGM exporter's Prometheus endpoint (`dcgm-exporter`).

Kubernetes clusters (the GPU operator) and many Slurm sites already run the exporter on
every GPU node, so reading its ``/metrics`` costs the site nothing new. Over NVML it adds
DCGM's profiling fields: how many SMs had work (`DCGM_FI_PROF_SM_ACTIVE`) and how busy the
tensor cores were (`DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`), which tell a GPU running one small
kernel at a time from one doing real work; plain utilisation reads 100 % for both.

Field units as the exporter sends them: utilisation in %, PROF fields as 0-1 ratios (made
%), framebuffer in MiB (made bytes), power in W, temperature in C, Xid as the last Xid's
number (0: none). Label names changed over exporter versions and scrape setups: `Hostname`
(3.x) or `hostname`; `pod`/`namespace`/`container` (old: `pod_name`, `pod_namespace`,
`container_name`; after Prometheus relabels a scrape: `exported_pod`...); `hpc_job` when
the exporter maps Slurm jobs (`--hpc-job-mapping-dir`). All are read.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from gpufleet.telemetry.samples import GpuSample, TelemetryError, xid_problem

SOURCE = "dcgm"
MIB = 2**20
FIELDS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
)


class DcgmError(TelemetryError):
    """The exporter could not be reached, or what it sent is not Prometheus text."""


@dataclass(frozen=True, slots=True)
class DcgmHolder:
    """Who the exporter says holds a GPU: a Kubernetes pod, a Slurm job, or nobody."""

    pod: str = ""
    namespace: str = ""
    container: str = ""
    hpc_job: str = ""

    @property
    def text(self) -> str:
        parts = []
        if self.pod:
            pod = f"{self.namespace}/{self.pod}" if self.namespace else self.pod
            parts.append(f"pod {pod}" + (f" ({self.container})" if self.container else ""))
        if self.hpc_job:
            parts.append(f"job {self.hpc_job}")
        return ", ".join(parts)


JobOfHolder = Callable[[DcgmHolder], str | None]


def _label(labels: Mapping[str, str], *names: str) -> str:
    for name in names:
        for key in (name, f"exported_{name}"):
            if labels.get(key):
                return labels[key]
    return ""


def holder_of(labels: Mapping[str, str]) -> DcgmHolder:
    return DcgmHolder(
        pod=_label(labels, "pod", "pod_name"),
        namespace=_label(labels, "namespace", "pod_namespace"),
        container=_label(labels, "container", "container_name"),
        hpc_job=_label(labels, "hpc_job", "job_id"),
    )


@dataclass
class _Gpu:
    labels: Mapping[str, str]
    values: dict[str, float]


def parse(text: str) -> dict[tuple[str, str, str], _Gpu]:
    """The exporter's text as {(host, gpu, MIG instance): the fields gpufleet reads}."""
    gpus: dict[tuple[str, str, str], _Gpu] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise DcgmError(f"not Prometheus text exposition: {exc}") from exc
    for family in families:
        if family.name not in FIELDS:
            continue
        for sample in family.samples:
            labels = sample.labels
            if "gpu" not in labels:
                continue
            key = (
                _label(labels, "Hostname", "hostname"),
                labels["gpu"],
                labels.get("GPU_I_ID", ""),
            )
            gpu = gpus.setdefault(key, _Gpu(labels, {}))
            gpu.values[family.name] = float(sample.value)
            if not holder_of(gpu.labels).text and holder_of(labels).text:
                gpu.labels = labels  # keep the series that names the holder
    return gpus


def samples_from_text(
    text: str, now_s: float, node: str = "", job_of: JobOfHolder | None = None
) -> tuple[list[GpuSample], str]:
    """(one sample per GPU or MIG instance, why some were left out). `node` names GPUs
    whose series carry no host name label."""
    out: list[GpuSample] = []
    missing: list[str] = []
    for (host, gpu_label, instance), gpu in sorted(parse(text).items(), key=_order):
        sample = _sample(
            gpu, now_s, node=host or node, gpu_label=gpu_label, instance=instance, job_of=job_of
        )
        if sample is None:
            missing.append(f"{host or node} GPU {gpu_label}: no utilisation field")
        else:
            out.append(sample)
    return out, "; ".join(missing)


def _order(item: tuple[tuple[str, str, str], _Gpu]) -> tuple[str, int, str]:
    (host, gpu, instance), _ = item
    return host, int(gpu) if gpu.isdigit() else -1, instance


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else min(max(ratio * 100, 0.0), 100.0)


def _sample(
    gpu: _Gpu,
    now_s: float,
    *,
    node: str,
    gpu_label: str,
    instance: str,
    job_of: JobOfHolder | None,
) -> GpuSample | None:
    v = gpu.values.get
    util = v("DCGM_FI_DEV_GPU_UTIL")
    if (
        util is None
    ):  # MIG instances report no GPU_UTIL: the engine-active ratio is the MIG-safe one
        util = _pct(v("DCGM_FI_PROF_GR_ENGINE_ACTIVE"))
    if util is None:
        return None
    used, free = v("DCGM_FI_DEV_FB_USED"), v("DCGM_FI_DEV_FB_FREE")
    total = (
        used + free + (v("DCGM_FI_DEV_FB_RESERVED") or 0)
        if used is not None and free is not None
        else None
    )
    problems: list[tuple[bool, str]] = []
    if xid := int(v("DCGM_FI_DEV_XID_ERRORS") or 0):
        problems.append(xid_problem(xid))
    if v("DCGM_FI_DEV_ROW_REMAP_FAILURE"):
        problems.append((True, "row remapping failed"))
    if rows := int(v("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS") or 0):
        problems.append((False, f"{rows} rows remapped after uncorrected errors"))
    holder = holder_of(gpu.labels)
    model = gpu.labels.get("modelName") or None
    if instance and model:
        model = f"{model} MIG {gpu.labels.get('GPU_I_PROFILE', instance)}"
    return GpuSample(
        time_s=now_s,
        node=node,
        gpu_index=int(gpu_label) if gpu_label.isdigit() else None,
        source=SOURCE,
        sm_util_pct=min(max(util, 0.0), 100.0),
        uuid=gpu.labels.get("UUID") or gpu.labels.get("uuid") or None,
        model=model,
        mem_used_bytes=round(used * MIB) if used is not None else None,
        mem_total_bytes=round(total * MIB) if total is not None else None,
        power_w=v("DCGM_FI_DEV_POWER_USAGE"),
        temp_c=v("DCGM_FI_DEV_GPU_TEMP"),
        sm_active_pct=_pct(v("DCGM_FI_PROF_SM_ACTIVE")),
        tensor_active_pct=_pct(v("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")),
        healthy=not any(bad for bad, _ in problems),
        health_detail="; ".join(words for _, words in problems),
        job_id=job_of(holder) if job_of is not None else None,
        holder=holder.text,
    )


def fetch(url: str, timeout_s: float = 5.0) -> str:
    """The exporter's page, or `DcgmError` saying what went wrong."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise DcgmError(f"DCGM exporter URL must be http(s): {url!r}")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body: bytes = response.read()
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        raise DcgmError(f"DCGM exporter at {url} answered HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise DcgmError(f"DCGM exporter at {url} could not be reached: {exc.reason}") from exc
    except TimeoutError as exc:
        raise DcgmError(f"DCGM exporter at {url} did not answer within {timeout_s:g} s") from exc
    return body.decode(charset, errors="replace")


class DcgmCollector:
    """The `Collector` over one or more exporters (one per GPU node, usually :9400/metrics).

    An exporter that cannot be reached leaves its GPUs out and says so in `reason`; the
    others are still read. `job_of` maps a pod or Slurm job to gpufleet's job id."""

    name = SOURCE

    def __init__(
        self,
        urls: Iterable[str],
        *,
        job_of: JobOfHolder | None = None,
        timeout_s: float = 5.0,
        fetcher: Callable[[str, float], str] = fetch,
    ) -> None:
        self.urls = tuple(urls)
        self.job_of = job_of
        self.timeout_s = timeout_s
        self._fetch = fetcher
        self.reason = ""

    def collect(self, now_s: float) -> list[GpuSample]:
        out: list[GpuSample] = []
        notes: list[str] = []
        for url in self.urls:
            try:
                text = self._fetch(url, self.timeout_s)
                samples, note = samples_from_text(
                    text, now_s, node=urlsplit(url).hostname or "", job_of=self.job_of
                )
            except DcgmError as exc:
                notes.append(str(exc))
                continue
            out.extend(samples)
            if note:
                notes.append(note)
        self.reason = "; ".join(notes)
        return out
