"""`grouplab ui` and `grouplab run --ui`: a live dashboard of the group in the browser (docs/ui.md).

- model.py: the pure fold over event-log and trace lines the page shows (state, ownership, costs)
- timeline.py: the message timeline, one sentence per trace line (the narrator is swappable)
- hub.py: listens to the cluster, streams snapshots and timeline entries to the pages
- controls.py: the buttons, checked and carried out on the LocalCluster
- web.py: Starlette routes, served by uvicorn as a task in the cluster's own loop
- static/: the page, its script and style (no CDN: the page works offline)
"""
