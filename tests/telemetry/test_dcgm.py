"""The DCGM exporter collector: a payload in the exporter's documented format, label
variants, every scrape kept in `data/`, and a real HTTP server.

The payloads here are written by hand (data/README.md): no exporter could be recorded from
this project's machines. A scrape from a real site dropped into `data/` as
`dcgm_recorded_<where>.txt` is checked by `test_every_scrape_in_data_reads_sanely`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from gpufleet.telemetry.dcgm import (
    DcgmCollector,
    DcgmError,
    DcgmHolder,
    fetch,
    samples_from_text,
)

PAYLOAD = (Path(__file__).parent / "data" / "dcgm_exporter.txt").read_text()


def test_the_payload_gives_eight_gpus_in_gpufleets_units() -> None:
    samples, reason = samples_from_text(PAYLOAD, 100.0)
    assert reason == ""
    assert [(s.node, s.gpu_index) for s in samples] == [("dgx-h100-07", i) for i in range(8)]
    s = samples[0]
    assert s.source == "dcgm"
    assert s.time_s == 100.0
    assert s.uuid == "GPU-6513270e-269e-0d37-f2a7-4de452e6b438"
    assert s.model == "NVIDIA H100 80GB HBM3"
    assert s.sm_util_pct == 98.0
    assert s.sm_active_pct == pytest.approx(91.2344)  # ratio 0.912344 -> %
    assert s.tensor_active_pct == pytest.approx(58.3011)
    assert s.mem_used_bytes == 71234 * 2**20  # MiB -> bytes
    assert s.mem_total_bytes == 81559 * 2**20  # used + free + reserved
    assert s.power_w == pytest.approx(652.317)
    assert s.temp_c == 61.0
    assert s.holder == "pod ml-research/llama-pretrain-worker-0 (pytorch)"
    assert s.job_id is None  # no mapping given


@pytest.mark.parametrize(
    "scrape", sorted((Path(__file__).parent / "data").glob("dcgm_*.txt")), ids=lambda p: p.name
)
def test_every_scrape_in_data_reads_sanely(scrape: Path) -> None:
    """Any exporter text kept in data/ gives GPUs whose readings are in range (busy % is
    checked within 0-100 by `GpuSample` itself): a node and a device index on each, memory
    used within the total."""
    samples, _ = samples_from_text(scrape.read_text(), 0.0)  # series it skips, it names
    assert samples
    for s in samples:
        assert s.node
        assert s.gpu_index is not None
        assert s.gpu_index >= 0
        if s.mem_used_bytes is not None and s.mem_total_bytes is not None:
            assert 0 <= s.mem_used_bytes <= s.mem_total_bytes


def test_idle_busy_and_health_per_gpu() -> None:
    samples, _ = samples_from_text(PAYLOAD, 0.0)
    assert [s.sm_util_pct for s in samples] == [98, 97, 99, 96, 63, 0, 0, 0]
    assert [s.holder.split(" (")[0] for s in samples[4:]] == [
        "pod inference/vllm-serve-7d9f8c6b5-x2kq4",
        "pod notebooks/jupyter-alice",
        "",
        "",
    ]
    assert [(s.healthy, s.health_detail) for s in samples[5:]] == [
        (True, ""),
        (True, "Xid 13"),  # the application's fault
        (False, "Xid 94; 1 rows remapped after uncorrected errors"),
    ]


def test_pods_map_to_jobs_through_the_callable() -> None:
    jobs = {"llama-pretrain-worker-0": "41", "jupyter-alice": "42"}

    def job_of(holder: DcgmHolder) -> str | None:
        return jobs.get(holder.pod)

    samples, _ = samples_from_text(PAYLOAD, 0.0, job_of=job_of)
    assert [s.job_id for s in samples] == ["41"] * 4 + [None, "42", None, None]


SLURM_MIG = (Path(__file__).parent / "data" / "dcgm_slurm_mig.txt").read_text()


def test_slurm_jobs_mig_instances_and_relabelled_pods() -> None:
    samples, reason = samples_from_text(SLURM_MIG, 0.0, job_of=lambda h: h.hpc_job or None)
    assert [(s.node, s.gpu_index, s.sm_util_pct, s.job_id, s.holder) for s in samples] == [
        ("n7", 0, 88.0, "12345", "job 12345"),  # GPU_UTIL wins over the engine ratio
        ("n7", 1, 25.0, None, "pod ns/p"),  # MIG: no GPU_UTIL, the engine-active ratio
        ("n7", 1, 0.0, None, ""),
    ]
    assert samples[1].model == "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    assert samples[0].mem_used_bytes is None  # not exported: unknown, not 0
    assert reason == "n7 GPU 2: no utilisation field"


def test_text_that_is_not_prometheus_is_a_clear_error() -> None:
    with pytest.raises(DcgmError, match="not Prometheus text"):
        samples_from_text('DCGM_FI_DEV_GPU_UTIL{gpu="0" 5\n', 0.0)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/metrics":
            body = PAYLOAD.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404, "Not Found")

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def exporter() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_collector_reads_an_exporter_over_http(exporter: str) -> None:
    collector = DcgmCollector([f"{exporter}/metrics"])
    samples = collector.collect(5.0)
    assert len(samples) == 8
    assert collector.reason == ""
    assert samples == samples_from_text(PAYLOAD, 5.0)[0]


def test_one_unreachable_exporter_leaves_the_others(exporter: str) -> None:
    collector = DcgmCollector([f"{exporter}/nope", f"{exporter}/metrics"], timeout_s=2)
    assert len(collector.collect(0.0)) == 8
    assert "answered HTTP 404" in collector.reason


def test_fetch_errors_say_what_went_wrong() -> None:
    with pytest.raises(DcgmError, match="must be http"):
        fetch("file:///etc/passwd")
    with pytest.raises(DcgmError, match="could not be reached"):
        fetch("http://127.0.0.1:1/metrics", timeout_s=2)
