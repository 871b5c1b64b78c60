"""The live cluster dashboard (`actorflow dashboard`, `actorflow cluster up --dashboard`).

`collector.py` polls the tasks' /metrics and /status; `graph_picture.py` draws the placed graph with
Graphviz; `app.py` serves the page (static/) and pushes snapshots over a websocket.
"""
from actorflow.dashboard.app import Dashboard

__all__ = ["Dashboard"]
