"""The part@NAME stages of scale/dvc.yaml on many machines: each in a scratch clone of the
checkout, on this machine or as a Ray task, its outputs carried back by a DVC remote.

    python -m flows.parts --remote /shared/dvc-store                   # local processes, 4 at once
    ray start --head; ray start --address HEAD:6379                    # on the other machines
    RAY_ADDRESS=auto python -m flows.parts --remote s3://bucket/chess --backend ray

A part job clones the checkout's git repository at its commit (committed code only: a worker
cannot see uncommitted changes, so a dirty tree is refused), writes the caller's params.yaml,
runs `dvc repro --single-item scale/dvc.yaml:part@NAME` and pushes the outputs and the run-cache
entry to the remote (`dvc push --run-cache`). Back here, `dvc repro --pull` of each part finds
its run-cache entry and outputs there and checks them out without running it, so dvc.lock records
them as if they had run here, and merge and convert follow as usual (`--pull` reads only the
default remote: the remote becomes this checkout's default in .dvc/config.local). Every step is
idempotent: a job run twice, or a part already on the remote, gives the same bytes. The raw files
must be where the params say on every node: a shared path (an absolute merge.raw, as the test
uses), or tracked by DVC and pushed to the remote (`--pull` fetches them; not tested here).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from chesscore import failures
from chesscore.cli.params import read_params
from chesscore.runtime.locks import scratch_dir
from flows import dvc_stages

PART_PREFIX = "scale/dvc.yaml:part@"
BACKENDS = ("process", "ray")
REMOTE = "carry"  # the DVC remote's name in each checkout's local config (.dvc/config.local)


class DirtyCheckout(failures.Refused):
    """Code changes that are not committed: the part jobs check out the commit and would miss them."""


def part_stages(repo: str | os.PathLike) -> list[str]:
    """The part stages of params.yaml's merge.months, in its order."""
    return [PART_PREFIX + name for name in read_params(Path(repo) / "params.yaml", "merge").get("months", [])]


def _git(repo: str | os.PathLike, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def checkout_state(repo: str | os.PathLike) -> tuple[str, str]:
    """(commit, params.yaml's text) for the part jobs; DirtyCheckout if other tracked files changed."""
    changed = [line[3:] for line in _git(repo, "status", "--porcelain", "--untracked-files=no").splitlines()]
    others = [path for path in changed if path not in ("params.yaml", "dvc.lock", "scale/dvc.lock")]
    if others:
        raise DirtyCheckout(f"{repo}: commit these first (the part jobs check out HEAD): {', '.join(others)}")
    return _git(repo, "rev-parse", "HEAD").strip(), (Path(repo) / "params.yaml").read_text(encoding="utf-8")


def _dvc(folder: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "dvc", *args]
    done = subprocess.run(command, cwd=folder, env=dvc_stages.stage_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} in {folder} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def run_part(source: str, commit: str, params_text: str, stage: str, remote: str) -> dict[str, Any]:
    """One part job, anywhere `source` (a path or URL of the git repository) and `remote` reach:
    clone, repro the stage, push its outputs and run-cache entry; a failure of the stage itself
    is returned (its kind says whether a retry may pass), any other raises."""
    started = time.monotonic()
    with scratch_dir("chesscore-part-") as scratch:  # a killed job's clone: swept by the next job
        work = scratch / "repo"
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", source, str(work)], check=True, capture_output=True)
        _git(work, "checkout", "--quiet", commit)
        (work / "params.yaml").write_text(params_text, encoding="utf-8")
        _dvc(work, "remote", "add", "--local", "--force", "--default", REMOTE, remote)
        _dvc(work, "config", "--local", "core.analytics", "false")
        lines: list[str] = []
        result = dvc_stages.repro(work, stage, on_line=lines.append, pull=True)  # raw files DVC tracks, too
        if result.failure is None:
            _dvc(work, "push", "--run-cache", "--remote", REMOTE, stage)
        return {
            "stage": stage,
            "node": socket.gethostname(),
            "pid": os.getpid(),
            "ray_node": _ray_node(),
            "seconds": round(time.monotonic() - started, 2),
            "failure": None if result.failure is None else result.failure.__dict__,
            "tail": lines[-dvc_stages.TAIL_LINES :] if result.failure else [],
        }


def _ray_node() -> str | None:
    if "ray" not in sys.modules:
        return None
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None


_RAY_LOCK = threading.Lock()


def run_job(backend: str, job: tuple) -> dict[str, Any]:
    """One part job here (process) or as a Ray task of one CPU on the cluster of RAY_ADDRESS;
    safe to call from many threads at once (the Prefect flow's tasks do)."""
    if backend != "ray":
        return run_part(*job)
    import ray

    with _RAY_LOCK:
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False)
    return ray.get(ray.remote(num_cpus=1, max_retries=2)(run_part).remote(*job))


def submit(backend: str, jobs: list[tuple], concurrency: int) -> list[dict[str, Any]]:
    """run_part over the jobs: `concurrency` local threads (each job is its own processes), or
    one Ray task of one CPU each on the cluster of RAY_ADDRESS (any node may take any part)."""
    if backend == "ray":
        import ray

        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False)
        remote = ray.remote(num_cpus=1, max_retries=2)(run_part)
        return ray.get([remote.remote(*job) for job in jobs])
    with ThreadPoolExecutor(max(1, concurrency)) as pool:
        return list(pool.map(lambda job: run_part(*job), jobs))


def restore(repo: str | os.PathLike, stages: list[str], remote: str, on_line=print) -> list[dvc_stages.StageResult]:
    """Repro each part here with --pull: DVC finds the job's run-cache entry and outputs on the
    remote and checks them out without running (or runs the part, if no job left them there).
    `dvc repro --pull` reads the default remote: the checkout's local config (.dvc/config.local)
    makes `carry` (this remote) its default."""
    _dvc(Path(repo), "remote", "add", "--local", "--force", REMOTE, remote)
    _dvc(Path(repo), "remote", "default", "--local", REMOTE)
    _dvc(Path(repo), "fetch", "--run-cache", "--remote", REMOTE)
    return [dvc_stages.repro(repo, stage, on_line=on_line, pull=True) for stage in stages]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.parts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--remote", required=True, help="DVC remote (URL or path) every node can reach")
    parser.add_argument("--repo", default=".", help="the project checkout (its git repository is cloned)")
    parser.add_argument("--source", default=None, help="git URL or path the nodes clone (default: --repo)")
    parser.add_argument("--backend", choices=BACKENDS, default="process", help="local processes or Ray tasks")
    parser.add_argument("--concurrency", type=int, default=4, help="parts at once (process backend)")
    args = parser.parse_args(argv)
    repo = Path(args.repo).resolve()
    commit, params_text = checkout_state(repo)
    stages = part_stages(repo)
    jobs = [(args.source or str(repo), commit, params_text, stage, args.remote) for stage in stages]
    results = submit(args.backend, jobs, args.concurrency)
    for result in results:
        state = "ok" if result["failure"] is None else f"FAILED ({result['failure']['message']})"
        where = result["node"] + (f", ray node {result['ray_node']}" if result["ray_node"] else "")
        print(f"{result['stage']}: {state} on {where} in {result['seconds']:.1f} s")
    failed = [r for r in results if r["failure"] is not None]
    if failed:
        return 1
    restored = restore(repo, stages, args.remote, on_line=lambda line: None)
    print(f"restored here from the run-cache: {sum(r.restored for r in restored)} of {len(stages)} part(s)")
    return 0 if all(r.failure is None for r in restored) else 1


if __name__ == "__main__":
    raise SystemExit(main())
