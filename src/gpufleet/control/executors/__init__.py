"""Executors: what actually runs an admitted job (local processes, an emulated cluster, Slurm)."""
