"""`gpufleet serve`'s top: the web app (API and portal together) and its worker process.

This package sits above both `api` and `portal` (design 0015, layers): the API does not know
the portal, and the supervisor in `control.service` starts the worker by name.
"""
