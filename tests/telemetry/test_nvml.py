"""The NVML collector against a fake `pynvml` (CI has no GPU and no NVML)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.telemetry.fake_nvml import NOT_SUPPORTED, FakeGpu, FakeNvml

from gpufleet.telemetry.nvml import NvmlCollector, job_by_ancestry, main
from gpufleet.telemetry.nvml_api import NvmlUnavailable
from gpufleet.telemetry.samples import GpuSample

SRC = Path(__file__).resolve().parents[2] / "src"


def collector(nvml: FakeNvml, **kw: object) -> NvmlCollector:
    return NvmlCollector("n1", nvml_module=nvml, **kw)  # type: ignore[arg-type]


def test_reads_every_gpu_in_gpufleets_units() -> None:
    nvml = FakeNvml([FakeGpu(uuid="GPU-a", util=97), FakeGpu(uuid="GPU-b", util=0)])
    with collector(nvml) as c:
        samples = c.collect(1000.0)
    assert [(s.gpu_index, s.uuid, s.sm_util_pct) for s in samples] == [
        (0, "GPU-a", 97.0),
        (1, "GPU-b", 0.0),
    ]
    s = samples[0]
    assert (s.time_s, s.node, s.source, s.model) == (1000.0, "n1", "nvml", "NVIDIA H100 80GB HBM3")
    assert (s.mem_used_bytes, s.mem_total_bytes) == (10 * 2**30, 80 * 2**30)
    assert s.power_w == 350.0  # NVML says milliwatts
    assert s.temp_c == 60.0
    assert s.healthy
    assert s.health_detail == ""
    assert s.sm_active_pct is None  # NVML's plain API has no profiling counters
    assert c.reason == ""
    assert nvml.inits == 0  # closed


def test_unsupported_readings_are_none_not_zero() -> None:
    gpu = FakeGpu(power_mw=NOT_SUPPORTED, temp=NOT_SUPPORTED, remapped=NOT_SUPPORTED)
    gpu.ecc_uncorrected = NOT_SUPPORTED
    [s] = collector(FakeNvml([gpu])).collect(1.0)
    assert (s.power_w, s.temp_c) == (None, None)
    assert s.healthy


def test_a_gpu_without_utilisation_is_left_out_with_a_reason() -> None:
    c = collector(FakeNvml([FakeGpu(util=NOT_SUPPORTED), FakeGpu(util=12)]))
    samples = c.collect(1.0)
    assert [s.gpu_index for s in samples] == [1]
    assert c.reason.startswith("GPU 0: no utilisation")


@pytest.mark.parametrize(
    ("gpu", "healthy", "detail"),
    [
        (FakeGpu(ecc_uncorrected=2), False, "2 uncorrected ECC errors since the driver loaded"),
        (FakeGpu(remapped=(3, 1, 1, 0)), False, "row remap pending: reset the GPU"),
        (FakeGpu(remapped=(3, 1, 0, 1)), False, "row remapping failed"),
        (FakeGpu(remapped=(3, 2, 0, 0)), True, "2 rows remapped after uncorrected errors"),
        (
            FakeGpu(remapped=NOT_SUPPORTED, retired=[1, 2], retired_pending=0),
            True,
            "2 pages retired after double-bit errors",
        ),
        (
            FakeGpu(remapped=NOT_SUPPORTED, retired=[1], retired_pending=1),
            False,
            "page retirement pending: reset the GPU",
        ),
    ],
)
def test_health_from_ecc_remapped_rows_and_retired_pages(
    gpu: FakeGpu, healthy: bool, detail: str
) -> None:
    [s] = collector(FakeNvml([gpu])).collect(1.0)
    assert (s.healthy, s.health_detail) == (healthy, detail)


def test_xids_are_reported_once_on_their_gpu() -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu()])
    c = collector(nvml, xid_events=True)
    assert nvml.registered == [0, 1]
    nvml.xids = [(1, 79), (1, 13)]
    first = c.collect(1.0)
    assert [(s.healthy, s.health_detail) for s in first] == [(True, ""), (False, "Xid 79; Xid 13")]
    assert all(s.healthy for s in c.collect(2.0))


def test_an_application_xid_leaves_the_gpu_healthy() -> None:
    nvml = FakeNvml([FakeGpu()])
    c = collector(nvml, xid_events=True)
    nvml.xids = [(0, 13)]  # graphics engine exception: the program's fault
    [s] = c.collect(1.0)
    assert (s.healthy, s.health_detail) == (True, "Xid 13")


def test_jobs_by_index_win_over_pids() -> None:
    nvml = FakeNvml([FakeGpu(pids=[11]), FakeGpu(pids=[12, 13]), FakeGpu()])
    c = collector(nvml, jobs_by_index=lambda: {0: "7"}, job_of_pid={12: "8", 11: "9"}.get)
    samples = c.collect(1.0)
    assert [(s.job_id, s.holder) for s in samples] == [
        ("7", "pids 11"),  # allocated to 7: a stray pid of 9 does not change the holder
        ("8", "pids 12,13"),
        (None, ""),
    ]


def test_job_by_ancestry_follows_parent_pids(tmp_path: Path) -> None:
    for pid, ppid in [(100, 1), (200, 100), (300, 200), (400, 1)]:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "status").write_text(f"Name:\tx\nPid:\t{pid}\nPPid:\t{ppid}\n")
    lookup = job_by_ancestry({100: "job-5"}, proc=tmp_path)
    assert [lookup(p) for p in (100, 300, 400, 999)] == ["job-5", "job-5", None, None]


def test_no_bindings_raise_a_typed_error_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(NvmlUnavailable, match="pip install nvidia-ml-py"):
        NvmlCollector("n1")


def test_no_driver_raises_a_typed_error() -> None:
    with pytest.raises(NvmlUnavailable, match="driver"):
        collector(FakeNvml([], driver=False))


def test_samples_round_trip_through_json() -> None:
    [s] = collector(FakeNvml([FakeGpu(pids=[5])]), job_of_pid=lambda _: "3").collect(9.5)
    assert GpuSample.from_dict(json.loads(s.to_json())) == s


def test_main_prints_json_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNvml([FakeGpu(util=40), FakeGpu(util=60)])
    monkeypatch.setattr("gpufleet.telemetry.nvml.load", lambda: fake)
    assert main(["--samples", "2", "--interval-s", "0", "--json", "--node", "h"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["node"], r["gpu_index"], r["sm_util_pct"]) for r in rows] == [
        ("h", 0, 40.0),
        ("h", 1, 60.0),
        ("h", 0, 40.0),
        ("h", 1, 60.0),
    ]


def test_main_without_nvml_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert main(["--samples", "1"]) == 2
    assert "pip install nvidia-ml-py" in capsys.readouterr().err


BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pydantic", "numpy", "sqlalchemy", "yaml", "prometheus_client"}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
sys.modules["pynvml"] = __import__("tests.telemetry.fake_nvml", fromlist=["x"]).FakeNvml(
    [__import__("tests.telemetry.fake_nvml", fromlist=["x"]).FakeGpu(util=33)]
)
import runpy
sys.argv = ["nvml", "--samples", "1", "--json", "--node", "h200"]
runpy.run_module("gpufleet.telemetry.nvml", run_name="__main__")
ours = {"gpufleet", "tests", "pynvml", "__main__"}
others = sorted(
    m for m in sys.modules if m.split(".")[0] not in sys.stdlib_module_names | ours
)
sys.exit(f"imported beyond the standard library: {others}" if others else 0)
"""


def test_the_entry_point_needs_only_the_standard_library() -> None:
    """The lead runs it on a GPU host whose Python has no pydantic or numpy."""
    root = SRC.parent
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{root}"}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in done.stdout.splitlines()]
    assert (row["node"], row["sm_util_pct"]) == ("h200", 33.0)
