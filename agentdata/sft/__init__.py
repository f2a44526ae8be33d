"""SFT on TRL's SFTTrainer: only the assistant's own tokens are trained, for any chat template."""

from agentdata.sft.config import SFTStageConfig
from agentdata.training.masking import TokenizedConversation, tokenize_conversation
from agentdata.sft.trainer import SFTResult, run_sft

__all__ = ["SFTResult", "SFTStageConfig", "TokenizedConversation", "run_sft", "tokenize_conversation"]
