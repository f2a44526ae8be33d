"""Mixed-domain pools: `domain_mix=math=0.5,code=0.3,science=0.2` after the band.

DemyAgent found that math-only RL data collapses entropy and that adding science and code
keeps it up, so the pool's domain shares are a setting. Selection moves *toward* the
targets: each domain gets its share of the pool (of `--size`, or else of the largest pool
that holds the shares exactly); a domain with too few problems in band gives what it lacks
to the others, in proportion to their shares. Within a domain the problems are taken in the
same cluster-and-source spread order as without a mix. Domains not named get share 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import polars as pl

from agentdata.errors import UserError
from agentdata.steps import Step


def parse_domain_mix(text: str | None, flag: str = "domain_mix") -> dict[str, float] | None:
    """'math=0.5,code=0.3' -> {'math': 0.625, 'code': 0.375} (shares are normalised to sum to 1)."""
    if not text:
        return None
    shares: dict[str, float] = {}
    for part in (piece.strip() for piece in text.split(",") if piece.strip()):
        name, _, value = part.partition("=")
        try:
            share = float(value)
        except ValueError:
            raise UserError(f"{flag}: {part!r} is not DOMAIN=SHARE (e.g. math=0.5,code=0.3,science=0.2)") from None
        if not name.strip() or share < 0 or not math.isfinite(share):
            raise UserError(f"{flag}: {part!r} needs a domain name and a share >= 0")
        shares[name.strip()] = share
    total = sum(shares.values())
    if total <= 0:
        raise UserError(f"{flag}: at least one share must be above 0")
    return {name: share / total for name, share in shares.items()}


def domain_quotas(available: dict[str, int], shares: dict[str, float], size: int | None) -> dict[str, int]:
    """How many problems of each domain to keep."""
    active = {d: s for d, s in shares.items() if s > 0 and available.get(d, 0) > 0}
    if not active:
        return {}
    weight = sum(active.values())
    if size is None:  # the largest pool that holds the shares among the domains present
        total = min(math.floor(available[d] / (s / weight) + 1e-9) for d, s in active.items())
    else:
        total = min(size, sum(available[d] for d in active))
    quotas: dict[str, int] = {}
    remaining = total
    while active:  # water-filling: a domain short of its share keeps all it has, the rest share what it lacks
        weight = sum(active.values())
        short = [d for d, s in active.items() if available[d] <= remaining * s / weight]
        if not short:
            break
        for domain in short:
            quotas[domain] = available[domain]
            remaining -= available[domain]
            del active[domain]
    if active:
        quotas.update(_largest_remainder(remaining, active, available))
    return quotas


def _largest_remainder(total: int, shares: dict[str, float], available: dict[str, int]) -> dict[str, int]:
    weight = sum(shares.values())
    wanted = {d: total * s / weight for d, s in shares.items()}
    quotas = {d: min(available[d], math.floor(w)) for d, w in wanted.items()}
    for domain in sorted(wanted, key=lambda d: wanted[d] - math.floor(wanted[d]), reverse=True):
        if sum(quotas.values()) >= total:
            break
        if quotas[domain] < available[domain]:
            quotas[domain] += 1
    return quotas


@dataclass
class DomainMix(Step):
    """Keeps the first `quota` problems of each domain in spread order (column `position`)."""

    quotas: dict[str, int] = field(default_factory=dict)
    reason = "domain_mix"

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        rank = pl.col("position").rank("ordinal").over("domain") - 1
        quota = pl.col("domain").replace_strict(self.quotas, default=0, return_dtype=pl.Int64)
        return frame.select(rank < quota).to_series()


def mix_step(frame: pl.DataFrame, shares: dict[str, float], size: int | None) -> DomainMix:
    available = dict(frame.group_by("domain").len().iter_rows())
    return DomainMix(domain_quotas(available, shares, size))


def domain_table(profiled: pl.DataFrame, pool: pl.DataFrame, shares: dict[str, float] | None) -> list[dict]:
    """Per domain: problems profiled, selected, mean pass rate, target and actual share of the pool."""
    rows = []
    for domain in sorted(set(profiled["domain"].to_list()) | set(shares or {})):
        rates = profiled.filter(pl.col("domain") == domain)["pass_rate"].drop_nulls()
        selected = pool.filter(pl.col("domain") == domain).height
        rows.append(
            {
                "domain": domain,
                "profiled": profiled.filter(pl.col("domain") == domain).height,
                "selected": selected,
                "mean_pass_rate": round(float(rates.mean()), 4) if len(rates) else None,
                "target_share": round(shares.get(domain, 0.0), 4) if shares else None,
                "share": round(selected / pool.height, 4) if pool.height else 0.0,
            }
        )
    return rows
