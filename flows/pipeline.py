"""The Prefect flow that runs the DVC pipeline: one task per stage, retries, artifacts.

    python -m flows.pipeline                                 # every stage, the params as they are
    python -m flows.pipeline --stages train evaluate         # only these (in DAG order)
    python -m flows.pipeline --profile baseline --input-dir /data/lichess
    python -m flows.serve                                    # the same on a cron schedule (flows/serve.py)

Each task runs `dvc repro --single-item <stage>` and streams its output into the Prefect log.
A failure that another attempt may fix (the stage was killed, ran out of memory, or another DVC
run held the lock) is retried with exponential backoff and jitter; any other failure (bad input,
a refused checkpoint identity, a bug) fails the run at once with the stage's own message. The
exit-code convention is in chesscore/failures.py; such a failure's message is shown once (the
task's log and the run's state), without a traceback. After each stage a table artifact lists
its outputs and their hashes from dvc.lock and says whether the stage ran, was up to date, or
was restored from DVC's run-cache; at the end a Markdown artifact holds the key metrics, and
another the evaluation report itself. Without PREFECT_API_URL the flow runs against a
temporary local server that Prefect starts by itself.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed, State
from prefect.tasks import exponential_backoff

from chesscore.cli.params import read_params
from chesscore.config import from_mapping
from chesscore.pipeline import profile as profiles
from chesscore.pipeline import summary
from flows import dvc_stages

PROJECT = Path(__file__).resolve().parents[1]
JITTER = 0.5  # each delay is drawn from about [0.5, 1.5] x its nominal value
INPUT_PARAM = "validate.raw"  # the params.yaml key that names the raw PGN inputs


class StageFailed(RuntimeError):
    """A stage's `dvc repro` failed; `failure.retryable` says whether another attempt may pass."""

    def __init__(self, stage: str, failure: dvc_stages.Failure):
        code = "" if failure.exit_code is None else f", exit {failure.exit_code}"
        super().__init__(f"stage {stage} failed ({failure.kind}{code}): {failure.message}")
        self.stage, self.failure = stage, failure


def retry_if_retryable(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's retry_condition_fn: retry a StageFailed only when its failure is retryable."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, StageFailed) and error.failure.retryable


def artifact_key(stage: str, suffix: str) -> str:
    """Artifact keys allow lowercase letters, digits and dashes only."""
    return "".join(c if c.isalnum() else "-" for c in f"{stage}-{suffix}".lower())


def how_it_went(result: dvc_stages.StageResult) -> str:
    if result.restored:
        return "restored from DVC's run-cache"
    return "up to date, skipped" if result.skipped else f"ran in {result.seconds:.1f} s"


@task(name="dvc-stage", task_run_name="{stage}", cache_policy=NO_CACHE, persist_result=False)
def run_stage(root: str, stage: str) -> dict[str, Any] | State:
    """`dvc repro --single-item <stage>`, its output in the log; then the outputs table artifact.
    A retryable failure raises (Prefect retries it); any other ends the task in a Failed state
    carrying the stage's message, so that it is shown once and not as two tracebacks."""
    logger = get_run_logger()
    result = dvc_stages.repro(root, stage, on_line=logger.info)
    if result.failure is not None:
        failed = StageFailed(stage, result.failure)
        if not result.failure.retryable:  # Prefect logs the state with its message, once
            return Failed(message=str(failed))
        logger.error("%s: %s (will retry if attempts remain)", stage, result.failure.message)
        raise failed
    rows = dvc_stages.locked_outputs(root, stage)
    state = how_it_went(result)
    create_table_artifact(
        table=rows or [{"path": "(no outputs)", "md5": "", "bytes": 0, "files": 0}],
        key=artifact_key(stage, "outputs"),
        description=f"Stage `{stage}` ({state}): outputs and their hashes from dvc.lock",
    )
    logger.info("%s: %s; %d output(s) recorded in dvc.lock", stage, state, len(rows))
    return {
        "stage": stage,
        "skipped": result.skipped,
        "restored": result.restored,
        "seconds": round(result.seconds, 2),
        "outputs": rows,
    }


@flow(name="chess-pipeline", log_prints=True)
def pipeline(
    profile: str | None = None,
    stages: list[str] | None = None,
    input_dir: str | None = None,
    repo: str = str(PROJECT),
    retries: int = 3,
    retry_delay_seconds: float = 30.0,
) -> list[dict[str, Any]]:
    """Run the DVC pipeline stage by stage.

    Args:
        profile: a params.yaml profile (demo, baseline) written into params.yaml before the run,
            as `python -m chesscore.pipeline.profile NAME --apply` does; None keeps params.yaml as it is.
        stages: the stages to run (in DAG order); None runs them all.
        input_dir: a folder of raw .pgn/.pgn.zst dumps, written into params.yaml as validate's
            input (new dumps dropped there make the next run rerun validate and what follows).
        repo: the project checkout that holds dvc.yaml.
        retries: attempts after the first for a retryable failure.
        retry_delay_seconds: the first retry's delay; it doubles each attempt, with jitter.
    """
    logger = get_run_logger()
    params_path = Path(repo) / "params.yaml"
    values = profiles.profile_values(profile, params_path) if profile else {}
    if input_dir is not None:  # relative to the checkout when inside it, as DVC records paths
        folder = Path(input_dir).resolve()
        inside = folder.is_relative_to(Path(repo).resolve())
        values[INPUT_PARAM] = os.path.relpath(folder, Path(repo).resolve()) if inside else str(folder)
    if values:
        changed = profiles.apply(values, params_path)
        logger.info("params.yaml: %d value(s) changed: %s", len(changed), ", ".join(changed) or "none")
    order = dvc_stages.stage_order(repo)
    unknown = sorted(set(stages or ()) - set(order))
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; dvc.yaml has {', '.join(order)}")
    chosen = [stage for stage in order if stages is None or stage in stages]
    check_params(params_path, chosen)
    logger.info("stages in order: %s; their params.yaml sections are as the stages read them", " -> ".join(chosen))
    attempt = run_stage.with_options(
        retries=retries,
        retry_delay_seconds=exponential_backoff(retry_delay_seconds),
        retry_jitter_factor=JITTER,
        retry_condition_fn=retry_if_retryable,
    )
    results = []
    for stage in chosen:
        state = attempt(repo, stage, return_state=True)
        if not state.is_completed():  # its message is in the task's log already: no traceback here
            return Failed(message=state.message or f"stage {stage} failed")
        results.append(state.result())
    publish_summary(Path(repo), results)
    return results


def check_params(params_path: Path, stages: list[str]) -> None:
    """Every chosen stage's params.yaml section checked against its settings before the first
    stage runs: a typo in `train:` fails the run now, not after validate and convert."""
    for stage in stages:
        if ":" in stage or importlib.util.find_spec(f"stages.{stage}") is None:
            continue  # a stage of another dvc.yaml, or one without a CLI of ours
        settings = importlib.import_module(f"stages.{stage}").Settings
        from_mapping(settings, read_params(params_path, stage), where=f"{params_path}: {stage}")


def publish_summary(root: Path, results: list[dict[str, Any]]) -> None:
    """The final Markdown artifact: what ran, the key metrics, and where the report is."""
    facts = summary.collect(root)
    timing = "\n".join(f"| {r['stage']} | {_state(r)} | {r['seconds']:.1f} |" for r in results)
    report = facts.get("report")
    where = f"the `evaluation-report` artifact (`{report}` in the checkout)" if report else "no evaluation report yet"
    markdown = (
        f"# Chess pipeline run\n\n| stage | state | seconds |\n|---|---|---|\n{timing}\n\n"
        f"{summary.render_markdown(facts)}\n\nEvaluation report: {where}\n"
    )
    create_markdown_artifact(
        markdown=markdown, key="pipeline-summary", description="Key metrics of the pipeline after this run"
    )
    if report:  # the report itself: the UI renders it (a file:// link would not open from a browser)
        create_markdown_artifact(
            markdown=(root / report).read_text(encoding="utf-8"),
            key="evaluation-report",
            description=f"The evaluation report of the current checkpoint ({report})",
        )


def _state(result: dict[str, Any]) -> str:
    if result.get("restored"):
        return "restored (DVC run-cache)"
    return "skipped (up to date)" if result["skipped"] else "ran"


def add_flow_arguments(parser: argparse.ArgumentParser, retry_delay_seconds: float) -> None:
    """The flow's parameters as command-line options (for a run now and for a deployment)."""
    parser.add_argument("--profile", default=None, help="params.yaml profile to apply first (demo, baseline)")
    parser.add_argument("--stages", nargs="+", default=None, help="stages to run (default: all, in DAG order)")
    parser.add_argument("--input-dir", default=None, help="folder of raw .pgn/.pgn.zst dumps for validate")
    parser.add_argument("--repo", default=str(PROJECT), help="the project checkout (holds dvc.yaml)")
    parser.add_argument("--retries", type=int, default=3, help="attempts after the first, retryable failures only")
    parser.add_argument(
        "--retry-delay-seconds", type=float, default=retry_delay_seconds, help="first retry delay (doubles)"
    )


def flow_parameters(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "profile": args.profile,
        "stages": args.stages,
        "input_dir": args.input_dir,
        "repo": args.repo,
        "retries": args.retries,
        "retry_delay_seconds": args.retry_delay_seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.pipeline", description=__doc__.split("\n\n")[0])
    add_flow_arguments(parser, retry_delay_seconds=30.0)
    args = parser.parse_args(argv)
    state = pipeline(**flow_parameters(args), return_state=True)
    print(f"flow run {state.state_details.flow_run_id}: {state.name}", flush=True)
    return 0 if state.is_completed() else 1


if __name__ == "__main__":
    raise SystemExit(main())
