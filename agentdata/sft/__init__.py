"""SFT on TRL's SFTTrainer: only the assistant's own tokens are trained, for any chat template.

The trainer (torch, TRL) is imported when first asked for, so reading the settings stays light.
"""

from agentdata.sft.config import SFTStageConfig

__all__ = ["SFTResult", "SFTStageConfig", "TokenizedConversation", "run_sft", "tokenize_conversation"]


def __getattr__(name: str):
    if name in ("SFTResult", "run_sft"):
        from agentdata.sft import run

        return getattr(run, name)
    if name in ("TokenizedConversation", "tokenize_conversation"):
        from agentdata.training import masking

        return getattr(masking, name)
    raise AttributeError(name)
