"""Fetch a pinned `uv` from PyPI into .tools/bin without needing pip or venv.

A fresh Debian machine has python3 but often neither pip nor the venv module
(they are separate packages there), so the Makefile cannot assume either. The
uv wheel carries a static binary; we download the wheel that matches this
machine from the package index's simple API (PEP 691 JSON, which mirrors and
proxies serve too), check its sha256 and unpack the binary. Set
UV_BOOTSTRAP_INDEX to use another index.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import stat
import sys
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

UV_VERSION = "0.13.9"
INDEX = os.environ.get("UV_BOOTSTRAP_INDEX", "https://pypi.org/simple").rstrip("/")
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


def _platform_tags() -> list[str]:
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if sys.platform.startswith("linux"):
        return [f"manylinux_2_17_{arch}", f"manylinux2014_{arch}", f"musllinux_1_1_{arch}"]
    if sys.platform == "darwin":
        return ["macosx_11_0_arm64" if arch == "aarch64" else "macosx_10_12_x86_64"]
    raise SystemExit(f"bootstrap_uv: unsupported platform {sys.platform}; install uv by hand")


def _pick_wheel(files: list[dict[str, object]]) -> dict[str, object]:
    prefix = f"uv-{UV_VERSION}-"
    for tag in _platform_tags():
        for entry in files:
            name = str(entry["filename"])
            if name.startswith(prefix) and name.endswith(".whl") and tag in name:
                return entry
    raise SystemExit("bootstrap_uv: no uv wheel for this platform on PyPI; install uv by hand")


def main() -> None:
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else ".tools/bin")
    target = dest / "uv"
    if target.exists():
        return
    request = urllib.request.Request(f"{INDEX}/uv/", headers={"Accept": SIMPLE_JSON})
    with urllib.request.urlopen(request, timeout=120) as response:
        meta = json.load(response)
    entry = _pick_wheel(meta["files"])
    url = urllib.parse.urljoin(f"{INDEX}/uv/", str(entry["url"]))
    with urllib.request.urlopen(url, timeout=600) as response:
        blob = response.read()
    digest = hashlib.sha256(blob).hexdigest()
    expected = entry["hashes"]["sha256"]  # type: ignore[index]
    if digest != expected:
        raise SystemExit(f"bootstrap_uv: sha256 mismatch for {entry['filename']}")
    with zipfile.ZipFile(io.BytesIO(blob)) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith("/scripts/uv"))
        dest.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_bytes(wheel.read(member))
    partial.chmod(partial.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    partial.replace(target)
    print(f"bootstrap_uv: installed uv {UV_VERSION} at {target}")


if __name__ == "__main__":
    main()
