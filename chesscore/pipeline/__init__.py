"""The pipeline as a whole: switching params.yaml between profiles, and the summary of a run.

    python -m chesscore.pipeline.summary              # the one-screen summary `make demo` prints
    python -m chesscore.pipeline.profile baseline     # run the GPU profile as a DVC experiment

Modules: `summary` (reads every stage's report; the Prefect flow publishes the same facts),
`profile` (named sets of params.yaml values, applied so that DVC sees and records them). No
stage imports this package: a change here reruns nothing.
"""
