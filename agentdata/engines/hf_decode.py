"""A decode loop that drops each row from the batch as soon as it is done.

`model.generate` keeps every row until the longest one ends and pads the finished ones. On the
embedded model a turn averages 34-39 tokens against a budget of 160, and in a batch of 64 some row
nearly always runs to 160, so about three quarters of a batch's decode work was padding
(bench/RESULTS_findings.md, session 5). This loop makes the same forward passes on the rows still
going: when rows finish, their entries leave the key/value cache (`DynamicCache.batch_select_indices`)
and the next step runs on fewer rows (bench/bench_decode.py measures it).

It samples as an OpenAI-compatible server does, with the request's temperature and top_p only
(transformers' own warpers), each seeded row from its own generator, or greedily at temperature 0.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import DynamicCache
from transformers.generation import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

NextTokens = Callable[[torch.Tensor, list[int]], torch.Tensor]  # (logits rows x vocab, their rows) -> ids
RowDone = Callable[[int, list[int]], bool]  # (row, its tokens so far) -> whether the row is done


def next_token_picker(do_sample: bool, temperature: float, top_p: float, seeds: list[int | None]) -> NextTokens:
    """Greedy argmax, or sampling after temperature and nucleus (top_p) warping, as `generate` does.

    A row with a seed samples from a generator of its own: its text then depends on its seed and not
    on which other requests happened to share its batch, so a sampled re-run repeats (the rows
    without one share torch's global generator).
    """
    if not do_sample:
        return lambda logits, rows: logits.argmax(dim=-1)
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    generators: dict[int, torch.Generator] = {}

    def generator(row: int, device) -> torch.Generator | None:
        if seeds[row] is None:
            return None
        if row not in generators:
            generators[row] = torch.Generator(device=device).manual_seed(seeds[row])
        return generators[row]

    def sample(logits: torch.Tensor, rows: list[int]) -> torch.Tensor:
        probabilities = torch.softmax(warpers(None, logits.float()), dim=-1)
        picked = [
            torch.multinomial(probabilities[index], 1, generator=generator(row, logits.device))
            for index, row in enumerate(rows)
        ]
        return torch.cat(picked)

    return sample


def decode(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    pick_next: NextTokens,
    row_done: RowDone,
    *,
    cache: DynamicCache | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[list[int]]:
    """Each row's new tokens, through the token after which `row_done` said it was done.

    `cache` may already hold the batch's first tokens (a shared prompt prefix); those are not run
    again. Positions come from the attention mask, as in `generate`, so padding changes nothing.
    `should_stop` is checked before every step; when it says stop, every row ends where it is.
    """
    cache = cache if cache is not None else DynamicCache(config=model.config)
    cached = cache.get_seq_length()
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    step_ids, step_positions = input_ids[:, cached:], positions[:, cached:]
    rows = list(range(input_ids.shape[0]))  # the batch's rows still going, by their original index
    tokens: list[list[int]] = [[] for _ in rows]
    while rows and not (should_stop is not None and should_stop()):
        output = model(
            input_ids=step_ids,
            attention_mask=attention_mask,
            position_ids=step_positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        next_ids = pick_next(output.logits[:, -1, :], rows).tolist()
        going = []
        for index, (row, token) in enumerate(zip(rows, next_ids)):
            tokens[row].append(token)
            if not row_done(row, tokens[row]):
                going.append(index)
        if len(going) < len(rows):  # drop the finished rows from everything the next step reads
            keep = torch.tensor(going, dtype=torch.long, device=attention_mask.device)
            if going:
                cache.batch_select_indices(keep)
            attention_mask = attention_mask[keep]
            rows, next_ids = [rows[i] for i in going], [next_ids[i] for i in going]
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(rows), 1))], dim=1)
        step_ids = torch.tensor(next_ids, dtype=torch.long, device=attention_mask.device).unsqueeze(1)
        step_positions = attention_mask.long().sum(dim=-1, keepdim=True) - 1
    return tokens
