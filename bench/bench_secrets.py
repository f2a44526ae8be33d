"""Benchmark: what the secret scan costs `curate` (publish/secrets.py), against the same curate with it off.

Arms, alternating in one run on the same synthetic run dir (bench_curate's, cached under /tmp):
  keep:   curate --secrets keep (no scan);
  redact: curate's default, the candidate pass over every kept row's text (polars, the detectors' patterns
          less their look-arounds), then detect-secrets' own patterns on the rows that matched.
Reported: each arm's median wall time, the ratio redact / keep, the rows kept (both arms must keep the same)
and the load. The synthetic rows hold no secrets, so this is the cost of the scan a clean set pays.
Run: python bench/bench_secrets.py [--rows 100000] [--rounds 3]   (--smoke: tiny, for CI)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arms import same_work  # noqa: E402
from bench_curate import CACHE, synthetic_run  # noqa: E402

from agentdata.curate import curate  # noqa: E402
from agentdata.curate.config import CurateConfig  # noqa: E402
from agentdata.publish.config import PublishConfig  # noqa: E402


def one_curate(run: Path, mode: str) -> tuple[float, int, dict]:
    config = CurateConfig(publish=PublishConfig(secrets=mode))
    started = time.perf_counter()
    result = curate([run], CACHE / f"sft-secrets-{mode}.parquet", config)
    return time.perf_counter() - started, result.kept_rows, result.secrets


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI: both arms run, in seconds")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.rounds = 2000, 1
    run = synthetic_run(args.rows)
    times: dict[str, list[float]] = {"keep": [], "redact": []}
    kept: dict[str, list[int]] = {"keep": [], "redact": []}
    found = {}
    load_before = os.getloadavg()
    for round_ in range(args.rounds):
        for mode in ("keep", "redact") if round_ % 2 == 0 else ("redact", "keep"):
            seconds, rows, secrets = one_curate(run, mode)
            times[mode].append(seconds)
            kept[mode].append(rows)
            found[mode] = secrets
            print(f"round {round_}: {mode} {seconds:.1f}s, kept {rows:,}", flush=True)
    load_after = os.getloadavg()
    same_work("bench_secrets", "rows kept", kept["keep"], kept["redact"])  # the same set in both arms
    keep, redact = statistics.median(times["keep"]), statistics.median(times["redact"])
    print(
        f"curate over {args.rows:,} rows, median of {args.rounds}: keep {keep:.1f}s, redact {redact:.1f}s, "
        f"ratio {redact / keep:.2f}x (every time: keep {times['keep']}, redact {times['redact']}); "
        f"secrets found {found['redact']}; load {load_before[0]:.1f} -> {load_after[0]:.1f}"
    )


if __name__ == "__main__":
    main()
