"""Training: the dataset's train split -> checkpoints, identity, events and results.

    config = TrainConfig(model="demo", micro=16, epochs=3)
    data = open_dataset(Path("data/dataset"), None, distributed.setup("auto"))
    results = train(config, data, Path("data/train"), env)

Modules: `config` (every knob, and the run identity that decides a resume), `run` (a run's spec and
the last.pt it resumes from; a finished run's no-op), `trainer` (the loop), `checkpoints` (last.pt
and best.pt), `validation` (validating during training), `runlog` (what the loop reports),
`state` (checkpoint payloads, resume rules), `data` (the verified dataset for this rank),
`batching` (length-bucketed microbatches), `loader` (microbatches assembled ahead, by worker
processes where asked), `optim` (AdamW, warmup + cosine), `metrics`
(teacher-forced NLL, accuracy, legality), `deadline` (time budgets, job deadlines), `distributed`
(torch.distributed set-up), `report` (events, results, metrics and plots), `probe` (step time
and memory per microbatch size).
"""

from chesscore.resume import ResumeRefused
from chesscore.train.config import TrainConfig, identity
from chesscore.train.data import TrainData, open_dataset
from chesscore.train.trainer import train

__all__ = ["ResumeRefused", "TrainConfig", "TrainData", "identity", "open_dataset", "train"]
