"""Serve the pipeline flow as a scheduled deployment, so it runs nightly and shows in the Prefect UI.

    prefect server start                                     # terminal 1: the API and UI (http://127.0.0.1:4200)
    prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api
    python -m flows.serve                                    # terminal 2: deployment chess-pipeline/nightly
    python -m flows.serve --cron "0 3 * * *" --input-dir /data/lichess/incoming --profile baseline
    prefect deployment run chess-pipeline/nightly            # a run now, besides the schedule

The process stays up and executes the deployment's runs (scheduled or started from the UI or
the API) until stopped with Ctrl-C, which pauses the schedule. Each nightly run repeats
`dvc repro` stage by stage: with new dumps in the input folder validate reruns and everything
downstream follows; with nothing new every stage is skipped in seconds.
"""

from __future__ import annotations

import argparse

from flows.pipeline import add_flow_arguments, flow_parameters, pipeline

NIGHTLY = "0 2 * * *"  # 02:00 every day, in the timezone given below


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m flows.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="nightly", help="deployment name (shown as chess-pipeline/<name>)")
    parser.add_argument("--cron", default=NIGHTLY, help="cron schedule of the runs")
    parser.add_argument("--timezone", default="UTC", help="timezone of the cron schedule (IANA name)")
    add_flow_arguments(parser, retry_delay_seconds=60.0)  # each run's parameters
    args = parser.parse_args(argv)
    from prefect.schedules import Cron

    pipeline.serve(
        name=args.name,
        schedules=[Cron(args.cron, timezone=args.timezone)],
        parameters=flow_parameters(args),
        description="The DVC pipeline (validate, convert, train, evaluate, selfplay, arena), "
        "one task per stage, retried when a retry can help.",
        tags=["chesscore", "dvc"],
        limit=1,  # one run at a time: two would only wait on each other's DVC lock
    )


if __name__ == "__main__":
    main()
