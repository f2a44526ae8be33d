"""The 0.3 name of `agentdata.steps`, kept so that filter-step plug-ins written for 0.3 still import.

New code imports `agentdata.steps`; importing this module says so once.
"""

import warnings

from agentdata.steps import *  # noqa: F403
from agentdata.steps import __all__  # noqa: F401

warnings.warn("agentdata.filters is now agentdata.steps; import from there", DeprecationWarning, stacklevel=2)
