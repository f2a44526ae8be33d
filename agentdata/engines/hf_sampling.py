"""Sampling as `generate` does it, with one generator per seeded row.

Greedy at temperature 0; otherwise the request's temperature and top_p only (transformers' own
warpers), as an OpenAI-compatible server samples. A row with a seed draws from a generator of its
own: its text then depends on its seed and not on which other requests happened to share its
batch (which depends on timing), so a sampled re-run repeats. Rows without a seed share torch's
global generator.
"""

from __future__ import annotations

import torch
from transformers.generation import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper


def warpers_for(do_sample: bool, temperature: float, top_p: float) -> LogitsProcessorList | None:
    """transformers' temperature and nucleus warpers for sampling; None for greedy decoding."""
    if not do_sample:
        return None
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    return warpers


def row_generator(seed: int | None, do_sample: bool, device) -> torch.Generator | None:
    """A seeded sampling row's own generator (None: greedy, or torch's global one)."""
    if seed is None or not do_sample:
        return None
    return torch.Generator(device=device).manual_seed(seed)


def sample_rows(
    logits: torch.Tensor, warpers: LogitsProcessorList | None, generators: list[torch.Generator | None]
) -> list[int]:
    """One token per row of `logits`: the argmax (no warpers), or drawn with each row's generator."""
    if warpers is None:
        return logits.argmax(dim=-1).tolist()
    probabilities = torch.softmax(warpers(None, logits.float()), dim=-1)
    return [
        int(torch.multinomial(probabilities[index], 1, generator=generator))
        for index, generator in enumerate(generators)
    ]
