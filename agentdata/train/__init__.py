"""`agentdata train`: SFT, then (optionally) the closed loop's profile of the SFT model, then GRPO.

    from agentdata.train import TrainRequest, train
    results = train(TrainRequest(out=Path("runs/train"), settings={"sft_data": "sft.parquet", "rl": {"max_steps": 3}}))

`settings.py` is train's settings path (the `sft:` and `rl:` sections), `run.py` plans and puts the
stages in order, `prompt.py` keeps one protocol through the run, `closed_loop.py` profiles the model
GRPO starts from and keeps its pass-rate band. The stages themselves are `agentdata.sft` and `agentdata.rl`.
"""

from agentdata.train.run import TrainPlan, TrainRequest, TrainResult, plan_train, train
from agentdata.train.settings import TRAIN_SETTINGS

__all__ = ["TRAIN_SETTINGS", "TrainPlan", "TrainRequest", "TrainResult", "plan_train", "train"]
