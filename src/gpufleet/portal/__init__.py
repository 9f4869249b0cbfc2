"""The self-service portal (issue 9): server-rendered pages on the control plane's app.

`gpufleet.portal.app.install_portal(app, ctx)` mounts it at /portal. This package imports
nothing at import time, so the API's request dependencies can use `portal.sessions`
(the cookie path) without importing the portal's pages.
"""
