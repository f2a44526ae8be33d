"""`agentdata filter [PROBLEMS] --out POOL.parquet`: an RL pool chosen by the student's pass rate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from agentdata.cli.common import (
    AnswerField,
    Concurrency,
    EngineOption,
    Limit,
    MaxNewTokens,
    MaxTurns,
    ModelName,
    ProtocolName,
    QuestionField,
    SandboxSpec,
    Seed,
    Temperature,
    ToolOutputChars,
    ExtraSteps,
    ToolSpecs,
    console,
    engine_options,
    loop_tools,
    output_dir,
    output_file,
)
from agentdata.cli.curate import parse_pair


def command(
    problems_file: Annotated[
        Optional[Path], typer.Argument(help="Problems (JSONL, JSON, Parquet, CSV, dataset dir). Default: built-in.")
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="RL pool to write (Parquet).")] = Path("pool.parquet"),
    student: Annotated[str, typer.Option(help="Engine spec of the student: smollm2, hf:PATH, vllm:PATH, openai:URL.")] = "smollm2",
    model: ModelName = None,
    engine_option: EngineOption = None,
    k: Annotated[int, typer.Option("--k", help="Student rollouts per problem.")] = 4,
    k_adaptive: Annotated[Optional[int], typer.Option(
        help="Profile again, up to N rollouts, only problems whose pass-rate interval (Wilson 95%) straddles a band edge.")
    ] = None,
    band: Annotated[str, typer.Option(help="Keep LO < pass rate < HI (ends exclusive).")] = "0,1",
    size: Annotated[Optional[int], typer.Option(help="Problems to select evenly across clusters and sources.")] = None,
    clusters: Annotated[Optional[int], typer.Option(help="K-means clusters (default about sqrt(problems)).")] = None,
    embedding: Annotated[str, typer.Option(help="auto | sentence-transformers | tfidf.")] = "auto",
    near_dup_threshold: Annotated[float, typer.Option(help="MinHash Jaccard threshold; 0 turns it off.")] = 0.8,
    decontam: Annotated[
        Optional[list[Path]], typer.Option("--decontam", help="Benchmark file to decontaminate against (repeatable).")
    ] = None,
    decontam_ngram: Annotated[int, typer.Option(help="Word n-gram size for decontamination.")] = 13,
    domain_mix: Annotated[
        Optional[str], typer.Option(help="Target domain shares after the band, e.g. math=0.5,code=0.3,science=0.2 "
                                         "(a short domain gives what it lacks to the others).")
    ] = None,
    format: Annotated[str, typer.Option("--format", help="agentdata or verl output columns.")] = "agentdata",
    step: ExtraSteps = None,
    profile_dir: Annotated[
        Optional[Path], typer.Option(help="Profile run dir (the cache); default <out folder>/profile/<student>-<settings digest>.")
    ] = None,
    limit: Limit = None,
    protocol: ProtocolName = "hermes",
    max_tool_calls: Annotated[int, typer.Option(help="Tool calls run per rollout.")] = 4,
    max_turns: MaxTurns = 8,
    max_new_tokens: MaxNewTokens = 512,
    tool_output_chars: ToolOutputChars = 256,
    temperature: Temperature = 0.7,
    concurrency: Concurrency = 16,
    sandbox: SandboxSpec = "local",
    tool: ToolSpecs = None,
    seed: Seed = 0,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
) -> None:
    """Profile the student's pass rate on each problem (cached), keep a band, dedup, decontaminate, diversify."""
    from agentdata.pool.run import FilterRun, run_filter
    from agentdata.pool.build import PoolConfig
    from agentdata.pool.mix import parse_domain_mix
    from agentdata.cli.views import drop_table, rows_table
    from agentdata.agent.resume import unique_problems
    from agentdata.problems import load_problems
    from agentdata.synth.builtin import builtin_problems

    if profile_dir is not None:
        output_dir(profile_dir, "--profile-dir")
    output_file(out, "--out", (".parquet",), "the RL pool")
    problems = load_problems(problems_file, question_field, answer_field) if problems_file else builtin_problems()
    problems = unique_problems(problems, problems_file)  # counted once each; one id with two contents is refused
    problems = problems[:limit] if limit else problems
    options = engine_options(engine_option, model)
    try:
        config = PoolConfig(
            band=parse_pair(band, "--band"), size=size, clusters=clusters, embedding=embedding,
            near_dup_threshold=near_dup_threshold or None, decontam_files=[str(p) for p in decontam or []],
            decontam_ngram=decontam_ngram, format=format, seed=seed, extra_steps=list(step or []),
            domain_mix=parse_domain_mix(domain_mix), k_adaptive=k_adaptive,
        )
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    loop = dict(protocol=protocol, max_tool_calls=max_tool_calls, max_turns=max_turns, max_new_tokens=max_new_tokens,
                tool_output_chars=tool_output_chars,
                temperature=temperature, concurrency=concurrency, sandbox=sandbox, seed=seed, engine_options=options,
                tools=loop_tools(tool))
    console.print(f"[bold]filter[/] {len(problems)} problems · student {student} · k={k} · band {config.band} → {out}")
    run: FilterRun = run_filter(problems, out, config, student=student, k=k, loop_settings=loop,
                               profile_dir=profile_dir)
    console.print(f"profile: {run.profile_dir} ({run.generated:,} rollouts generated now, "
                  f"{'cache hit' if not run.generated else 'cache filled'})")
    if k_adaptive:
        console.print(f"k-adaptive: {run.reprofiled} problem(s) straddled a band edge at k={k} and were profiled "
                      f"up to k={k_adaptive}; {run.still_straddling} still do")
    result = run.result
    console.print(drop_table(len(problems), result.counts, result.pool.height, title="filter: problems per drop reason"))
    console.print(rows_table(run.per_source, title="per source"))
    if len(run.per_domain) > 1:
        console.print(rows_table(run.per_domain, title="per domain"))
    if run.empty:
        from agentdata.errors import UserError

        raise UserError(f"{run.empty} (report: {run.report})")
    console.print(f"RL pool: [cyan]{run.output}[/] ({config.format}) · report: {run.report} · plot: {run.plot}")
