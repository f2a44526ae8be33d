"""`agentdata train`: SFT, then (optionally) the closed loop's profile of the SFT model, then GRPO.

    from agentdata.train import TrainRequest, train
    results = train(TrainRequest(stage="all", sft_data=Path("sft.parquet"), rl_pool=Path("pool.parquet")))

`run.py` puts the stages in order; `closed_loop.py` profiles the model GRPO starts from and keeps its
pass-rate band. The stages themselves are `agentdata.sft` and `agentdata.rl`.
"""

from agentdata.train.run import TrainRequest, train

__all__ = ["TrainRequest", "train"]
