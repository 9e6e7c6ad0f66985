"""Prefect flows that run the DVC pipeline (flows/pipeline.py) and serve it on a schedule
(flows/serve.py). Telemetry is off wherever they run: pyproject.toml says so for a process
started in the checkout, and these defaults cover one started elsewhere (the temporary server
Prefect starts for a run without PREFECT_API_URL inherits them)."""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "true")
