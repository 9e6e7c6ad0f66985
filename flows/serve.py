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

from flows.pipeline import PROJECT, pipeline

NIGHTLY = "0 2 * * *"  # 02:00 every day, in the timezone given below


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m flows.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="nightly", help="deployment name (shown as chess-pipeline/<name>)")
    parser.add_argument("--cron", default=NIGHTLY, help="cron schedule of the runs")
    parser.add_argument("--timezone", default="UTC", help="timezone of the cron schedule (IANA name)")
    parser.add_argument("--profile", default=None, help="params.yaml profile each run applies first")
    parser.add_argument("--stages", nargs="+", default=None, help="stages each run runs (default: all)")
    parser.add_argument("--input-dir", default=None, help="folder of raw dumps each run validates")
    parser.add_argument("--repo", default=str(PROJECT), help="the project checkout (holds dvc.yaml)")
    parser.add_argument("--retries", type=int, default=3, help="attempts after the first, retryable failures only")
    parser.add_argument("--retry-delay-seconds", type=float, default=60.0, help="first retry delay (doubles)")
    args = parser.parse_args(argv)
    from prefect.schedules import Cron

    pipeline.serve(
        name=args.name,
        schedules=[Cron(args.cron, timezone=args.timezone)],
        parameters={"profile": args.profile, "stages": args.stages, "input_dir": args.input_dir,
                    "repo": args.repo, "retries": args.retries, "retry_delay_seconds": args.retry_delay_seconds},
        description="The DVC pipeline (validate, convert, train, evaluate, selfplay, arena), "
                    "one task per stage, retried when a retry can help.",
        tags=["chesscore", "dvc"],
        limit=1,  # one run at a time: two would only wait on each other's DVC lock
    )


if __name__ == "__main__":
    main()
