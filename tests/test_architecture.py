"""The import rules of docs/ARCHITECTURE.md, read from the source with `ast` (nothing is imported).

Every import counts, also one inside a function (a lazy import is still a dependency) and
one under `if TYPE_CHECKING:`. A rule names parts: a part is a top-level module
(`records`, `errors`) or a subpackage (`agent`, `engines`, ...) of `agentdata`.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agentdata"
MAX_LINES = 450

# The stages in layers, lowest first: a stage imports only stages of a lower layer. `synth` (problem
# generators, worked solutions, the stitched baseline) serves every stage; `evaluation` is what the
# training stages validate with; the commands' own stages never import each other (`traces` is
# `agentdata import`'s: `import` is a Python keyword); `train` runs
# sft, filter and rl in one command; `experiment` runs whole recipes of the commands below it.
STAGE_LAYERS = (
    ("synth",),
    ("evaluation",),
    ("curate", "filter", "sft", "rl", "regrade", "validate", "traces"),
    ("train",),
    ("experiment",),
)
STAGES = tuple(stage for layer in STAGE_LAYERS for stage in layer)
LEAVES = ("engines", "formats", "tools", "verify", "sandbox", "gateway")
# The data contract and the registry machinery: every part may import them, they import (almost) nothing.
# `problems` reads files into `records.Problem`, so it may import `records` and `errors`, and its own
# layout modules (code and multiple-choice problems), which import no more than that.
FOUNDATION_IMPORTS = {
    "errors": set(),
    "records": {"errors"},  # a refused write (disk full) is named as the user's to fix
    "problems": {"records", "errors", "inputs", "code_problems", "choice_problems"},
    "inputs": {"errors"},  # the one reader of input files (problems, benchmarks, solutions, trajectories, SFT sets)
    "outputs": {"errors"},  # the one check of output paths
    "code_problems": {"records", "errors", "code_tests", "code_benchmarks"},
    "code_benchmarks": {"records", "errors", "code_tests"},
    "choice_problems": {"records", "errors", "inputs"},
    "code_tests": set(),
    "registry": {"errors"},
    # the settings machinery every stage's dataclasses use; a field's parse function is a registry plug-in path
    "settings": {"errors", "inputs", "registry"},
    "events": set(),  # progress events: how library code reports without drawing
    "versions": {"agentdata"},  # the versions a run, card or record cites (its own: the package's __version__)
    "pacing": {"errors", "settings"},  # the per-endpoint requests/s cap and the one backoff, engines' and sandbox's
    "worker_pool": {"processes"},  # the one pool of killable worker processes (verify's checks, user tools)
    "processes": {"process_watcher"},  # every child process agentdata starts, supervised
    "process_watcher": set(),  # the watcher's script: stdlib only, it runs apart from agentdata
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str | None:
    """`agentdata.agent.loop` -> `agent`; `agentdata` itself -> `agentdata`; other packages -> None."""
    pieces = module.split(".")
    if pieces[0] != "agentdata":
        return None
    return pieces[1] if len(pieces) > 1 else "agentdata"


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, absolute (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            # `from agentdata.formats import prompts` imports the module `agentdata.formats.prompts`;
            # `from agentdata.formats import get_protocol` imports `agentdata.formats` itself
            submodules = {f"{module}.{alias.name}" for alias in node.names} & package_modules()
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(module)
    return found


@lru_cache(maxsize=1)
def package_modules() -> frozenset[str]:
    return frozenset(module_name(path) for path in source_files())


def source_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@lru_cache(maxsize=1)
def import_graph() -> dict[Path, set[str]]:
    return {path: imported_modules(path) for path in source_files()}


def clear_caches() -> None:
    import_graph.cache_clear()
    package_modules.cache_clear()


def owning_module(name: str, modules: frozenset[str]) -> str | None:
    """The package module an imported name lives in: `agentdata.formats.get_protocol` -> `agentdata.formats`."""
    while name not in modules:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def module_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package modules it imports."""
    modules = package_modules()
    graph = {}
    for path, imported in import_graph().items():
        me = module_name(path)
        graph[me] = {owner for name in imported if (owner := owning_module(name, modules)) and owner != me}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of nodes that import one another through some chain (a strongly connected component
    of more than one node), sorted; found with Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph.get(target, ())))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return sorted(found)


def parts_imported_by(part: str) -> dict[str, list[str]]:
    """For one part: each other part it imports -> the files that import it."""
    found: dict[str, list[str]] = {}
    for path, modules in import_graph().items():
        if part_of(module_name(path)) != part:
            continue
        for module in modules:
            target = part_of(module)
            if target and target != part:
                found.setdefault(target, []).append(str(path.relative_to(PACKAGE.parent)))
    return found


def violations(part: str, forbidden: tuple[str, ...] | set[str]) -> dict[str, list[str]]:
    return {target: files for target, files in parts_imported_by(part).items() if target in forbidden}


ALL_PARTS = sorted({part_of(module_name(path)) for path in source_files()} - {None})


# --------------------------------------------------------------------------- the rules


def test_the_rules_see_the_parts():
    # A renamed part would silently satisfy every rule below: check they look at the real tree.
    assert {"agent", "cli", "engines", "sandbox", "records", "rl", "sft"} <= set(ALL_PARTS)
    assert "sandbox" in parts_imported_by("agent")  # and that they see lazy imports inside functions


@pytest.mark.parametrize("part", [p for p in ALL_PARTS if p != "cli"])
def test_nothing_imports_the_cli(part):
    assert not violations(part, {"cli"})


def test_agent_knows_no_stage():
    assert not violations("agent", STAGES)


@pytest.mark.parametrize("layer", range(len(STAGE_LAYERS)))
def test_a_stage_imports_only_stages_below_it(layer):
    # sft and rl never each other, curate and filter neither; synth reaches into no stage (it writes
    # its stitched set through formats/sft_set/writer.py, the writer curate uses too)
    above_or_beside = {stage for upper in STAGE_LAYERS[layer:] for stage in upper}
    for stage in STAGE_LAYERS[layer]:
        assert not violations(stage, above_or_beside - {stage}), stage


@pytest.mark.parametrize("part", sorted(FOUNDATION_IMPORTS))
def test_the_data_contract_imports_no_other_part(part):
    allowed = FOUNDATION_IMPORTS[part]
    assert not violations(part, set(ALL_PARTS) - allowed - {part})


@pytest.mark.parametrize("part", LEAVES)
def test_leaves_import_no_runtime_stage_or_shared_layer(part):
    assert not violations(part, {*STAGES, "agent", "training", "steps", "cli"})


def test_engines_run_no_code_and_the_sandbox_knows_no_model():
    assert not violations("engines", {"sandbox", "tools", "gateway"})
    assert not violations("sandbox", {"engines", "formats", "tools", "gateway"})
    # the gateway stands in front of a model: it runs no tool (a harness runs its own)
    assert not violations("gateway", {"sandbox", "tools", "verify"})


def test_steps_need_no_engine():
    assert not violations("steps", {"engines", "agent", "sandbox"})


def test_judges_know_no_stage_and_run_no_code():
    # PRMs and LLM judges score what is on disk: a model, never the sandbox, the agent loop or a stage.
    assert not violations("judge", {*STAGES, "agent", "sandbox", "tools", "training"})


@pytest.mark.parametrize("part", [p for p in ALL_PARTS if p not in ("cli", "view")])
def test_nothing_but_the_cli_imports_the_viewer(part):
    # The viewer reads every stage's artifacts (so it may import them); no stage may depend on it.
    assert not violations(part, {"view"})


def test_the_viewer_sees_the_stages_it_reads():
    assert {"filter", "sft", "agent"} <= set(parts_imported_by("view"))  # the rule above looks at the real part


def test_publishing_knows_no_stage_and_runs_nothing():
    # Cards, provenance, redaction and the Hub push take what a stage hands them: no model, loop or sandbox.
    assert not violations("publish", {*STAGES, *LEAVES, "agent", "training", "judge", "steps"})


def test_the_filters_name_of_0_3_imports_nothing():
    assert not violations("filters", set(ALL_PARTS) - {"filters"})


def test_training_knows_no_stage():
    assert not violations("training", STAGES)


def test_no_import_cycles_between_parts():
    graph = {part: set(parts_imported_by(part)) - {"agentdata"} for part in ALL_PARTS}
    assert not cycles(graph)


def test_no_import_cycles_between_modules():
    # also inside a part: cli/common <-> cli/options would make either unreadable without the other
    assert not cycles(module_graph())


def test_rich_only_under_cli():
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for path, modules in import_graph().items()
        if part_of(module_name(path)) != "cli" and any(m == "rich" or m.startswith("rich.") for m in modules)
    ]
    assert not offenders


def test_no_file_over_the_line_limit():
    long_files = {
        str(path.relative_to(PACKAGE.parent)): count
        for path in source_files()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long_files


def test_the_rule_checker_catches_a_violation(tmp_path, monkeypatch):
    # The checker itself: a file that breaks a rule is reported.
    fake = tmp_path / "agentdata"
    (fake / "agent").mkdir(parents=True)
    (fake / "agent" / "__init__.py").write_text("")
    (fake / "agent" / "bad.py").write_text(
        "def f():\n    from agentdata.curate import sft\n    from ..cli import app\n"
    )
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    clear_caches()
    try:
        assert set(violations("agent", {*STAGES, "cli"})) == {"curate", "cli"}
    finally:
        clear_caches()


def test_the_cycle_checker_catches_a_cycle_inside_a_part(tmp_path, monkeypatch):
    # a -> b lazily, b -> c through `from package import module`, c -> a: one cycle of three; d only imports a
    fake = tmp_path / "agentdata"
    (fake / "sandbox").mkdir(parents=True)
    (fake / "sandbox" / "__init__.py").write_text("")
    (fake / "sandbox" / "a.py").write_text("def f():\n    from agentdata.sandbox.b import x\n")
    (fake / "sandbox" / "b.py").write_text("from agentdata.sandbox import c\nx = 1\n")
    (fake / "sandbox" / "c.py").write_text("from .a import f\n")
    (fake / "sandbox" / "d.py").write_text("from agentdata.sandbox.a import f\n")
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    clear_caches()
    try:
        assert cycles(module_graph()) == [["agentdata.sandbox.a", "agentdata.sandbox.b", "agentdata.sandbox.c"]]
    finally:
        clear_caches()


# --------------------------------------------------------------------------- docs/ARCHITECTURE.md says the same
ARCHITECTURE = PACKAGE.parent / "docs" / "ARCHITECTURE.md"


def parts_section() -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    return text.split("## The parts", 1)[1].split("\n## ", 1)[0]


def test_the_architecture_page_names_every_part_and_no_other():
    table_rows = [line for line in parts_section().splitlines() if line.startswith("| `")]
    named = {re.match(r"\| `([a-z_]+)/?`", row).group(1) for row in table_rows}
    assert named == set(ALL_PARTS) - {"agentdata"}  # the package's own __init__ holds only the version


def test_the_architecture_page_layers_the_stages_as_the_rule_does():
    diagram = parts_section().split("```", 2)[1]
    stage_lines = diagram.split("\nstages", 1)[1].split("\nshared", 1)[0].splitlines()
    layers = [tuple(re.findall(r"(?<![\w/])([a-z]+)/ ", line.split("(")[0] + " ")) for line in stage_lines]
    assert tuple(reversed([layer for layer in layers if layer])) == STAGE_LAYERS
