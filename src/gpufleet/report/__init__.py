"""The capacity plan as documents: plan.json, plan.md, plan.html (with charts), plan.pdf."""

from gpufleet.report.render import (
    render_html,
    render_json,
    render_markdown,
    render_pdf,
    write_reports,
)

__all__ = ["render_html", "render_json", "render_markdown", "render_pdf", "write_reports"]
