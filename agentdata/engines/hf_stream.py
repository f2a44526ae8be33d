"""A batch that rows join between decode steps and leave as soon as they are done.

`model.generate` keeps every row of a batch until the longest one ends and pads the finished ones;
on the embedded model a turn averages 34-39 tokens against a budget of 160 and in a batch of 64
some row nearly always runs to 160, so about three quarters of the decode work was padding
(bench/RESULTS_findings.md, session 5). Here a done row leaves at once: its entries leave the
key/value cache (`DynamicCache.batch_select_indices`) and the next step runs on fewer rows.

New rows join between two steps (`admit`): their prompts are prefilled together (sharing their
common prefix), their cache is padded on the left to the batch's length and stacked onto it, and
they decode with the others. Each row's generation is handed back the moment it is done.

Every row keeps exactly one pending token: the newest one, not yet in the cache. Positions come
from the attention mask (as in `generate`), so left padding changes nothing; columns that are
padding in every row are cut off as rows leave, so the cache stays as long as its longest row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from agentdata.engines.base import Generation, GenerationRequest
from agentdata.engines.hf_generate import (
    RowStop,
    SamplingKey,
    has_plain_cache,
    padded_batch,
    prefix_cache,
    row_generation,
    shared_prefix_length,
)
from agentdata.engines.hf_sampling import row_generator, sample_rows, warpers_for


@dataclass
class Row:
    """One request being generated for: what it asked, when it is done, and where its result goes."""

    request: GenerationRequest
    prompt_ids: list[int]
    stop: RowStop
    deliver: Callable[[Generation], None]
    cancelled: Callable[[], bool]  # its caller went away: drop the row, deliver nothing
    generator: torch.Generator | None = None  # a seeded row samples from its own (hf_sampling)
    tokens: list[int] = field(default_factory=list)

    def generation(self, tokenizer) -> Generation:
        """What the row generated so far, cut where it stopped."""
        return row_generation(tokenizer, self.tokens, self.request, self.stop, self.prompt_ids)


def can_stream(model) -> bool:
    """Whether rows of other lengths can join the model's cache: only plain layers (no sliding window,
    no recurrent state) are padded and stacked here."""
    if not has_plain_cache(model):
        return False
    layers = DynamicCache(config=model.config).layers
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


class RunningBatch:
    """Rows of one sampling setting decoding together (`admit`, `step`); done rows are delivered and leave."""

    def __init__(self, model, tokenizer, key: SamplingKey, pad_token_id: int):
        self.model, self.tokenizer, self.key, self.pad_token_id = model, tokenizer, key, pad_token_id
        self.warpers = warpers_for(key.do_sample, key.temperature, key.top_p)
        self.rows: list[Row] = []
        self.pending: list[int] = []  # each row's newest token, not yet in the cache
        self.cache: DynamicCache | None = None
        self.mask: torch.Tensor | None = None  # [rows, cache length]: 0 where a row is padded

    def __len__(self) -> int:
        return len(self.rows)

    def admit(self, rows: list[Row]) -> None:
        """Prefill `rows` (their prompts already tokenized) and add them to the batch with their first token."""
        device = self.model.device
        prompts = [row.prompt_ids for row in rows]
        prefix = shared_prefix_length(prompts)
        input_ids, mask = padded_batch(prompts, self.pad_token_id, device, prefix)
        cache = prefix_cache(self.model, prompts[0][:prefix], len(rows)) if prefix else None
        cache = cache if cache is not None else DynamicCache(config=self.model.config)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        output = self.model(
            input_ids=input_ids[:, prefix:],
            attention_mask=mask,
            position_ids=positions[:, prefix:],
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        for row in rows:
            row.generator = row_generator(row.request.seed, self.key.do_sample, device)
        first = sample_rows(output.logits[:, -1, :], self.warpers, [row.generator for row in rows])
        self._stack(cache, mask)
        self.rows += rows
        self.pending += first
        self._settle(range(len(self.rows) - len(rows), len(self.rows)))

    def step(self) -> None:
        """One token for every row (its pending one goes into the cache; the next is drawn)."""
        mask = torch.cat([self.mask, self.mask.new_ones((len(self.rows), 1))], dim=1)
        output = self.model(
            input_ids=torch.tensor(self.pending, dtype=torch.long, device=mask.device).unsqueeze(1),
            attention_mask=mask,
            position_ids=mask.sum(dim=-1, keepdim=True) - 1,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.mask = mask
        self.pending = sample_rows(output.logits[:, -1, :], self.warpers, [row.generator for row in self.rows])
        self._settle(range(len(self.rows)))

    def fail_all(self, generation: Generation) -> None:
        """Deliver `generation` (an error) to every row still waiting, and empty the batch."""
        for row in self.rows:
            if not row.cancelled():
                row.deliver(generation)
        self._keep([])

    def all_cancelled(self) -> bool:
        return bool(self.rows) and all(row.cancelled() for row in self.rows)

    def _settle(self, indices) -> None:
        """The rows at `indices` just drew their pending token: record it, deliver the rows now done."""
        keep = []
        for index, row in enumerate(self.rows):
            if index in indices:
                row.tokens.append(self.pending[index])
                if row.stop.observe(row.tokens):
                    row.deliver(row.generation(self.tokenizer))
                    continue
            if not row.cancelled():
                keep.append(index)
        if len(keep) < len(self.rows):
            self._keep(keep)

    def _keep(self, keep: list[int]) -> None:
        """Only the rows at `keep` stay: in the cache, the mask and the pending tokens."""
        self.rows = [self.rows[i] for i in keep]
        self.pending = [self.pending[i] for i in keep]
        if not keep:
            self.cache = self.mask = None
            return
        index = torch.tensor(keep, dtype=torch.long, device=self.mask.device)
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        used = self.mask.any(dim=0).nonzero()
        start = int(used[0]) if len(used) else 0
        if start:  # columns that are padding in every row left with the rows that needed them
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, start:], layer.values[:, :, start:]
            self.mask = self.mask[:, start:]

    def _stack(self, cache: DynamicCache, mask: torch.Tensor) -> None:
        """The new rows' cache and mask below the batch's, the shorter one padded on the left."""
        if self.cache is None:
            self.cache, self.mask = cache, mask
            return
        length = max(self.mask.shape[1], mask.shape[1])
        for ours, theirs in zip(self.cache.layers, cache.layers):
            ours.keys = torch.cat([_pad_left(ours.keys, length, 2), _pad_left(theirs.keys, length, 2)])
            ours.values = torch.cat([_pad_left(ours.values, length, 2), _pad_left(theirs.values, length, 2)])
        self.mask = torch.cat([_pad_left(self.mask, length, 1), _pad_left(mask, length, 1)])


def _pad_left(tensor: torch.Tensor, length: int, dim: int) -> torch.Tensor:
    """`tensor` with zeros before it along `dim`, up to `length`."""
    missing = length - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)
