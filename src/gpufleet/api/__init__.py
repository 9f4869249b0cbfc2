"""The HTTP face of the control plane: a FastAPI app under /api/v1 (and the portal, later)."""
