"""One of each: a formula, a default, a pool, a client is written once, and the rest use that one.

Read from the source with `ast` (as test_architecture.py does), so a second copy planted anywhere fails here.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agentdata"


def sources() -> dict[str, ast.Module]:
    return {
        path.relative_to(PACKAGE.parent).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def is_call_to(node: ast.AST, *names: str) -> bool:
    """`node` calls `name(...)` or `something.name(...)`."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id in names) or (isinstance(func, ast.Attribute) and func.attr in names)


def modules_where(found) -> list[str]:
    return sorted(name for name, tree in sources().items() if any(found(node) for node in ast.walk(tree)))


def wilson_term(node: ast.AST) -> bool:
    """The Wilson interval's z²/(4n²) term: `4 * n * n` (whatever the names)."""
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mult)
        and isinstance(node.left, ast.BinOp)
        and isinstance(node.left.left, ast.Constant)
        and node.left.left.value == 4
    )


def test_one_module_computes_a_wilson_interval():
    assert modules_where(wilson_term) == ["agentdata/evaluation/stats.py"]


def test_the_wilson_interval_is_the_same_for_a_number_and_a_column():
    from agentdata.evaluation.stats import wilson_interval
    from agentdata.filter.confidence import with_intervals

    rates = pl.DataFrame({"pass_rate": [0.5, 0.0, 1.0], "n_rollouts": [4, 8, 3]})
    columns = with_intervals(rates)
    for (rate, n), low, high in zip(rates.rows(), columns["pass_rate_low"], columns["pass_rate_high"]):
        assert (low, high) == pytest.approx(wilson_interval(round(rate * n), n))


def band_literals(node: ast.AST) -> tuple | None:
    """The ends of `Band(LO, HI)` written with numbers in the code, or of a bare `(LO, HI)` named *BAND*."""
    if is_call_to(node, "Band") and all(isinstance(arg, ast.Constant) for arg in node.args):
        return tuple(arg.value for arg in node.args)
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and "BAND" in t.id for t in node.targets):
        value = node.value
        if isinstance(value, ast.Tuple) and all(isinstance(e, ast.Constant) for e in value.elts):
            return tuple(e.value for e in value.elts)
    return None


def test_each_pass_rate_band_default_is_written_once():
    written = Counter(band for tree in sources().values() for node in ast.walk(tree) if (band := band_literals(node)))
    assert written == {(0.0, 1.0): 1, (0.05, 0.8): 1}


def test_each_use_of_a_band_takes_its_default_from_where_it_belongs():
    from agentdata.experiment.plan import ArmPlan
    from agentdata.filter import config as filter_config
    from agentdata.filter.config import PoolConfig
    from agentdata.filter.steps import PassRateBand
    from agentdata.settings import Band
    from agentdata.train import closed_loop
    from agentdata.view.config import ViewConfig

    assert PoolConfig().band is PassRateBand().band is ViewConfig().band is filter_config.DEFAULT_BAND
    from agentdata.experiment.choices import ArmRL

    assert closed_loop.ClosedLoopConfig().band is ArmRL().band is closed_loop.DEFAULT_BAND
    assert ArmPlan.__annotations__["band"] in ("Band", Band)  # the one band type, not a bare tuple


def test_the_experiment_validates_no_value_by_hand():
    """An arm's own keys are settings dataclasses (experiment/choices.py), checked by the settings machinery: no
    `_choice`, `_flag`, `_count` or `_band` of its own any more."""
    checks = ("must be one of", "must be true or false", "whole number of at least", "needs LO")
    raises = modules_where(lambda node: isinstance(node, ast.Raise) and any(c in ast.unparse(node) for c in checks))
    assert [name for name in raises if name.startswith("agentdata/experiment/")] == []


def test_one_pool_of_worker_processes():
    def starts_a_piped_worker(node: ast.AST) -> bool:
        return is_call_to(node, "Popen", "popen") and any(
            keyword.arg == "stdout" and ast.unparse(keyword.value) == "subprocess.PIPE" for keyword in node.keywords
        )

    assert modules_where(starts_a_piped_worker) == ["agentdata/worker_pool.py"]


# Code that runs outside agentdata's own process: inside the sandbox's template (which agentdata starts through
# processes.popen, and whose executors die with it) or as a sandboxed program's harness.
RUNS_IN_THE_SANDBOX = {
    "agentdata/sandbox/worker.py",
    "agentdata/sandbox/worker_killer.py",
    "agentdata/sandbox/worker_executor.py",
    "agentdata/verify/bench_harness.py",
    "agentdata/verify/bench_environments.py",
}


def test_one_place_starts_child_processes():
    """Every process agentdata starts goes through agentdata/processes.py (its own session, the watcher), and
    none is started with a preexec_fn (unsafe while threads run)."""

    def starts_a_process(node: ast.AST) -> bool:
        return is_call_to(node, "Popen", "create_subprocess_exec", "create_subprocess_shell", "fork", "setsid")

    def preexec(node: ast.AST) -> bool:
        return isinstance(node, ast.keyword) and node.arg == "preexec_fn"

    starting = set(modules_where(starts_a_process)) - RUNS_IN_THE_SANDBOX
    assert starting == {"agentdata/processes.py"}
    assert set(modules_where(preexec)) - RUNS_IN_THE_SANDBOX == set()


def test_one_http_client_of_sandbox_services():
    def makes_a_client(node: ast.AST) -> bool:
        return is_call_to(node, "Client", "AsyncClient", "ClientSession")

    in_sandbox = [name for name in modules_where(makes_a_client) if name.startswith("agentdata/sandbox/")]
    assert in_sandbox == ["agentdata/sandbox/http_client.py"]


def test_one_backoff_formula():
    """Retries wait `pacing.backoff_delay`: no second exponential backoff of its own anywhere."""

    def doubles_per_attempt(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Pow)
            and ast.unparse(node.left) == "2"
            and any(name in ast.unparse(node.right) for name in ("attempt", "retry", "try"))
        )

    assert modules_where(doubles_per_attempt) == ["agentdata/pacing.py"]


@pytest.mark.parametrize("retry", range(8))
def test_the_backoff_doubles_up_to_its_cap_with_jitter(retry):
    from agentdata.pacing import backoff_delay

    full = min(5.0, 0.1 * 2**retry)
    delays = [backoff_delay(retry, 0.1, 5.0) for _ in range(200)]
    assert all(full / 2 <= delay <= full for delay in delays)
    assert len(set(delays)) > 1  # jittered: clients that failed together do not retry together
