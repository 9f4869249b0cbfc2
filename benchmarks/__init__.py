"""gpufleet benchmarks: `make bench` (python -m benchmarks). Kept out of `make test`."""
