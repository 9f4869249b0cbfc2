"""Configuration export: the cluster and teams the scheduler reads, as the engines' own config.

A team that outgrows one machine already runs Kueue, Volcano, KAI-Scheduler or
Slurm. These modules turn the one gpufleet model (`specs.cluster`,
`specs.teams`, a `sched.registry` profile) into each engine's objects, so a
plan that was simulated is the configuration that gets applied, and
`import_kueue` reads an existing Kueue setup back so it can be simulated.
Mapping decisions: docs/design/0011-config-export.md; user guide:
docs/guide/export.md.
"""
