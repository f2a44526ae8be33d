"""`agentdata import`: trace files of other tools (Harbor's ATIF, Inspect AI's eval logs, the Hub's STS
sessions) read into ordinary run dirs; `atif.atif_document` writes agentdata's trajectories as ATIF."""

from agentdata.traces.config import ImportConfig
from agentdata.traces.run import FORMATS, ImportResult, import_traces

__all__ = ["FORMATS", "ImportConfig", "ImportResult", "import_traces"]
