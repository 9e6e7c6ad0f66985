"""The Prefect flow that runs the DVC pipeline: one task per stage, retries, artifacts.

    python -m flows.pipeline                                 # every stage, the params as they are
    python -m flows.pipeline --stages train evaluate         # only these (in DAG order)
    python -m flows.pipeline --profile baseline --input-dir /data/lichess
    python -m flows.serve                                    # the same on a cron schedule (flows/serve.py)
    python -m flows.pipeline --months-dir /data/lichess --parts-remote /shared/dvc --parts-backend ray

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

With --months-dir, each dump in the folder is a part of scale/dvc.yaml (validated alone, then
merged: docs/scaling.md); with --parts-remote the parts run concurrently, one task each, in
scratch clones here or on the Ray cluster of RAY_ADDRESS (--parts-backend ray), and come back
through that DVC remote (flows/parts.py).
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
from flows import dvc_stages, parts

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


@task(name="dvc-part", task_run_name="{job[3]}", cache_policy=NO_CACHE, persist_result=False)
def run_part(job: tuple, backend: str) -> dict[str, Any] | State:
    """One part job (flows/parts.py) here or on Ray; a retryable failure raises for a retry."""
    result = parts.run_job(backend, job)
    if result["failure"] is not None:
        failed = StageFailed(job[3], dvc_stages.Failure(**result["failure"]))
        if not failed.failure.retryable:
            return Failed(message=str(failed))
        raise failed
    get_run_logger().info("%s: ran on %s in %.1f s", job[3], result["node"], result["seconds"])
    return result


def months_values(folder: str, repo: str) -> dict[str, Any]:
    """params.yaml values that make every dump in `folder` a part, in name order, and convert
    read the merge."""
    from stages.merge import Settings

    params = Path(repo) / "params.yaml"
    merge = from_mapping(Settings, read_params(params, "merge"), f"{params}: merge")  # the stage's own reading
    suffix = merge.suffix
    names = sorted(path.name[: -len(suffix)] for path in Path(folder).iterdir() if path.name.endswith(suffix))
    if not names:
        raise ValueError(f"{folder}: no *{suffix} file in it")
    merged = str(merge.into[0]) if merge.into else "data/merged"
    return {
        "merge.raw": str(Path(folder).resolve()),
        "merge.months": names,
        "merge.into": [merged],
        "convert.validated": merged,
    }


def run_parts(repo: str, stages: list[str], remote: str, backend: str, attempt_options: dict) -> list | State:
    """The part stages at once (one task each), then restored here from the remote."""
    logger = get_run_logger()
    commit, params_text = parts.checkout_state(repo)
    attempt = run_part.with_options(**attempt_options)
    futures = [attempt.submit((repo, commit, params_text, stage, remote), backend) for stage in stages]
    for future in futures:
        future.wait()
        if not future.state.is_completed():
            return Failed(message=future.state.message or "a part failed")
    results = []
    for result in parts.restore(repo, stages, remote, on_line=logger.info):
        if result.failure is not None:
            return Failed(message=str(StageFailed(result.stage, result.failure)))
        results.append(
            {
                "stage": result.stage,
                "skipped": result.skipped,
                "restored": result.restored,
                "seconds": round(result.seconds, 2),
                "outputs": dvc_stages.locked_outputs(repo, result.stage),
            }
        )
    logger.info(
        "parts: %d ran on %s, %d restored here from the run-cache",
        len(stages),
        backend,
        sum(r["restored"] for r in results),
    )
    return results


@flow(name="chess-pipeline", log_prints=True)
def pipeline(
    profile: str | None = None,
    stages: list[str] | None = None,
    input_dir: str | None = None,
    repo: str = str(PROJECT),
    retries: int = 3,
    retry_delay_seconds: float = 30.0,
    months_dir: str | None = None,
    parts_remote: str | None = None,
    parts_backend: str = "process",
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
        months_dir: a folder of monthly dumps (merge.suffix, .pgn.zst), each made a part of scale/dvc.yaml
            (merge.months, merge.raw) and convert set to read the merge.
        parts_remote: a DVC remote every node reaches: the parts then run at once, in scratch
            clones, and come back through it; None runs them one by one in the checkout.
        parts_backend: process (here) or ray (the cluster of RAY_ADDRESS).
    """
    logger = get_run_logger()
    params_path = Path(repo) / "params.yaml"
    values = profiles.profile_values(profile, params_path) if profile else {}
    if input_dir is not None:  # relative to the checkout when inside it, as DVC records paths
        folder = Path(input_dir).resolve()
        inside = folder.is_relative_to(Path(repo).resolve())
        values[INPUT_PARAM] = os.path.relpath(folder, Path(repo).resolve()) if inside else str(folder)
    if months_dir is not None:
        values.update(months_values(months_dir, repo))
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
    options = {
        "retries": retries,
        "retry_delay_seconds": exponential_backoff(retry_delay_seconds),
        "retry_jitter_factor": JITTER,
        "retry_condition_fn": retry_if_retryable,
    }
    attempt = run_stage.with_options(**options)
    results = []
    part_stages = [stage for stage in chosen if stage.startswith(parts.PART_PREFIX)]
    if part_stages and parts_remote:
        done = run_parts(repo, part_stages, parts_remote, parts_backend, options)
        if isinstance(done, State):
            return done
        results += done
        chosen = [stage for stage in chosen if stage not in part_stages]
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
    parser.add_argument("--months-dir", default=None, help="folder of monthly .pgn.zst dumps: one part each")
    parser.add_argument("--parts-remote", default=None, help="DVC remote that carries the parts (run at once)")
    parser.add_argument("--parts-backend", choices=parts.BACKENDS, default="process", help="parts here or on Ray")
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
        "months_dir": args.months_dir,
        "parts_remote": args.parts_remote,
        "parts_backend": args.parts_backend,
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
