"""The trace-driven cluster simulator (issue 7): workloads, the event engine, metrics, reports.

It drives the same `sched.decide()` as the control plane; nothing here re-implements policy.
"""
