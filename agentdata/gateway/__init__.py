"""The recording gateway: an OpenAI-compatible endpoint in front of any engine that records every
session exactly (docs/harnesses.md). `collect --harness` runs a harness per problem against it."""

from agentdata.gateway.recorder import Exchange, Recorder, Session
from agentdata.gateway.server import Gateway

__all__ = ["Exchange", "Gateway", "Recorder", "Session"]
