"""The app `gpufleet serve` runs: the JSON API with the browser portal mounted at /portal."""

from __future__ import annotations

from fastapi import FastAPI

from gpufleet.api.app import create_api
from gpufleet.api.context import AppContext
from gpufleet.portal.app import install_portal


def create_app(ctx: AppContext) -> FastAPI:
    """The API and the portal (issue 9) on one app: what a server or a test needs."""
    app = create_api(ctx)
    install_portal(app, ctx)
    return app
