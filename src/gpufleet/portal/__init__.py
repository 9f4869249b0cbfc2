"""The self-service portal (issue 9): server-rendered pages on the control plane's app.

`gpufleet.portal.app.install_portal(app, ctx)` mounts it at /portal; `server.app.create_app`
does so for `gpufleet serve`. The cookie sessions it signs people in with live in
`control.sessions`, below the API, whose request dependencies accept them too.
"""
