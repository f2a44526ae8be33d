"""Training speed against plain TRL, in one process, runs interleaved so both see the same load.

SFT (SmolLM2-135M, the embedded model): plain TRL `SFTTrainer` on the same conversations as a
`messages` dataset, tokenized by TRL with the chat template (all tokens trained: SmolLM2's
template has no generation markers), against agentdata's SFT (`build_sft_trainer`: our
prefix-rendering tokenization with assistant masks). Same model, rows, batch, length and
steps. Reported: tokens/s of training alone and end to end (data preparation included).

GRPO (a tiny random 2-layer Llama with SmolLM2's tokenizer and TRL's Qwen2.5 chat template,
first taught to emit one fixed tool call so that both sides really run the tool): plain TRL
`GRPOTrainer(tools=[code_interpreter])`, TRL's own tool-calling loop with a function that runs
the code in agentdata's sandbox, against agentdata's `AgentGRPOTrainer` with the agent loop as
`rollout_func`. Same model, prompts, group size, completion budget, loss and steps. Reported:
seconds per step, and for ours where a step goes (generation, sandbox + loop, scoring +
optimisation).

Both arms state their protocol (`--protocol`, default hermes, for the SFT conversations; GRPO runs
hermes because TRL's tool loop parses its template's `<tool_call>` JSON), so the bench does not hang on
a default that may change. Before a ratio is reported each comparison checks that the arms did the
same work, and stops with one line when they did not: SFT, the same conversations (a conversation
longer than the max length is left out on both sides, as ours does by default, so the two seeded
samplers draw the same batches) and the same tokens trained on; GRPO, both
sides calling the tool, about as often (within 0.25 calls per response) and on about as many tokens
(within 10%).

    python bench/bench_train.py                    # both, 2 rounds
    python bench/bench_train.py --only grpo --grpo-steps 4
    python bench/bench_train.py --smoke            # CI: a tiny random model for SFT too, 1-2 steps
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arms import same_grpo_work, same_work, tiny_model  # noqa: E402

from agentdata.records import CODE_TOOL  # noqa: E402

QUESTION = "What is 2 + 3? Put the final answer in \\boxed{}."
# TRL's tool loop parses the `<tool_call>` JSON of its Qwen2.5 template: agentdata's hermes protocol,
# so ours runs hermes too and the tiny model is taught those calls for both sides.
GRPO_PROTOCOL = "hermes"
TOOL_CODE = "print(2 + 3)"


def load() -> float:
    return os.getloadavg()[0]


class StepClock(TrainerCallback):
    def __init__(self):
        self.seconds: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self.started)


# --------------------------------------------------------------------------- SFT


def sft_args(out: Path, steps: int, batch: int, max_length: int) -> dict[str, Any]:
    return dict(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=batch,
        max_length=max_length,
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
        dataset_num_proc=None,
        bf16=False,
        gradient_checkpointing=False,
    )


def trained_tokens(trainer: Any) -> float:
    return max((entry.get("num_tokens", 0) for entry in trainer.state.log_history), default=0)


def run_plain_sft(
    sft_set: Path, model_dir: Path, out: Path, steps: int, batch: int, max_length: int, protocol: str
) -> dict[str, float]:
    import datasets
    import pyarrow.parquet as pq
    from trl import SFTConfig, SFTTrainer

    from agentdata.sft.data import cleaned_messages, plain_conversation, row_tools
    from agentdata.training.model import load_model, load_tokenizer

    started = time.perf_counter()
    rows = pq.read_table(sft_set).to_pylist()
    conversations = [
        [
            {"role": m["role"], "content": m["content"]}
            for m in plain_conversation(
                cleaned_messages(r["messages"], sft_set, i), row_tools(r.get("tools"), sft_set, i), protocol
            )
        ]
        for i, r in enumerate(rows)
    ]
    tokenizer = load_tokenizer(model_dir)
    # Ours leaves out a conversation longer than max_length (long_rows drop, its default) where TRL would cut
    # it: the same rule here, so both sides hold the same rows and their seeded samplers draw the same batches.
    lengths = [
        len(tokenizer.apply_chat_template(c, tokenize=True, return_dict=True)["input_ids"]) for c in conversations
    ]
    fitting = [c for c, length in zip(conversations, lengths) if length <= max_length]
    trainer = SFTTrainer(
        model=load_model(model_dir),
        args=SFTConfig(**sft_args(out, steps, batch, max_length)),
        train_dataset=datasets.Dataset.from_list([{"messages": c} for c in fitting]),
        processing_class=tokenizer,
    )
    prepared = time.perf_counter()
    trainer.train()
    return timing(trainer, started, prepared)


def run_our_sft(
    sft_set: Path, model_dir: Path, out: Path, steps: int, batch: int, max_length: int, protocol: str
) -> dict[str, float]:
    from agentdata.settings import build
    from agentdata.sft.config import SFTStageConfig
    from agentdata.sft.run import build_sft_trainer

    started = time.perf_counter()
    values = dict(sft_data=str(sft_set), out=str(out), max_steps=steps, batch_size=batch, max_length=max_length)
    values |= {"model": f"hf:{model_dir}", "learning_rate": 1e-5, "save_steps": 10**6, "protocol": protocol}
    config = build(SFTStageConfig, values)
    trainer = build_sft_trainer(config).trainer
    trainer.args.save_strategy = "no"
    prepared = time.perf_counter()
    trainer.train()
    return timing(trainer, started, prepared)


def timing(trainer: Any, started: float, prepared: float) -> dict[str, float]:
    finished = time.perf_counter()
    tokens = trained_tokens(trainer)
    return {
        "rows": len(trainer.train_dataset),
        "tokens": tokens,
        "prepare_s": prepared - started,
        "train_s": finished - prepared,
        "train_tokens_per_s": tokens / (finished - prepared),
        "end_to_end_tokens_per_s": tokens / (finished - started),
        "load": load(),
    }


def bench_sft(
    work: Path, rounds: int, steps: int, batch: int, max_length: int, conversations: int, protocol: str, smoke: bool
) -> dict[str, Any]:
    from agentdata.engines import smollm2_model_dir
    from agentdata.sft.demo import build_demo_sft_set

    sft_set = build_demo_sft_set(work / "sft.parquet", conversations, protocol=protocol)
    model_dir = tiny_model(work / "tiny-model") if smoke else smollm2_model_dir()
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "ours": []}
    for round_index in range(rounds):
        for name, run in (("plain", run_plain_sft), ("ours", run_our_sft)):
            result = run(sft_set, model_dir, work / f"sft-{name}-{round_index}", steps, batch, max_length, protocol)
            runs[name].append(result)
            print(f"sft {name} round {round_index}: {json.dumps(result)}", flush=True)
        # the same conversations (so the same batches), tokenized by TRL with the template and by our prefix rendering
        same_work("bench_train sft", "conversations trained on", runs["ours"][-1]["rows"], runs["plain"][-1]["rows"])
        same_work("bench_train sft", "tokens trained on", runs["ours"][-1]["tokens"], runs["plain"][-1]["tokens"])
    return summarise(runs, ("train_tokens_per_s", "end_to_end_tokens_per_s"))


# --------------------------------------------------------------------------- GRPO


def tool_chat_tokenizer() -> Any:
    """SmolLM2's tokenizer (ChatML tokens) with TRL's Qwen2.5 template, which TRL's tool loop can parse."""
    import trl
    from transformers import AutoTokenizer

    from agentdata.engines import smollm2_model_dir

    tokenizer = AutoTokenizer.from_pretrained(smollm2_model_dir())
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    return tokenizer


def tool_calling_tiny_model(tokenizer: Any, out: Path, teach_steps: int) -> Path:
    """A random 2-layer Llama taught (by plain next-token training) to answer with one fixed tool call,
    then a boxed answer after the tool response, under both sides' prompts."""
    from transformers import AutoModelForCausalLM

    from agentdata.formats import get_protocol

    model = AutoModelForCausalLM.from_pretrained(tiny_model(out.with_name(out.name + "-untaught"), tokenizer))
    call = {"name": "code_interpreter", "arguments": {"code": TOOL_CODE}}
    turn = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]},
        {"role": "tool", "name": "code_interpreter", "content": "5\n"},
        {"role": "assistant", "content": "The answer is \\boxed{5}."},
    ]
    ours = get_protocol("hermes").to_plain_messages(
        [
            {"role": "system", "content": get_protocol("hermes").system_prompt([CODE_TOOL])},
            {"role": "user", "content": QUESTION},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "code_interpreter", "arguments": json.dumps(call["arguments"])},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": "5"},
            {"role": "assistant", "content": "The answer is \\boxed{5}."},
        ]
    )
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": QUESTION}, *turn], tools=[code_interpreter], tokenize=False
        ),
        tokenizer.apply_chat_template([{"role": m["role"], "content": m["content"]} for m in ours], tokenize=False),
    ]
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": QUESTION}],
            tools=[code_interpreter],
            tokenize=False,
            add_generation_prompt=True,
        ),
        tokenizer.apply_chat_template(
            [{"role": m["role"], "content": m["content"]} for m in ours[:2]], tokenize=False, add_generation_prompt=True
        ),
    ]
    batch = []
    for text, prompt in zip(texts, prompts):
        ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
        labels = ids.clone()
        labels[0, : len(tokenizer(prompt, add_special_tokens=False)["input_ids"])] = -100  # learn the answer only
        batch.append((ids, labels))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for step in range(teach_steps):
        ids, labels = batch[step % len(batch)]
        # the loss model(input_ids, labels=labels) computes, with the 49k-word head applied only where a label
        # is learned (the answer, ~40 of ~350 positions): that head was most of the teaching's time
        targets = labels[0, 1:]
        learned = (targets != -100).nonzero().squeeze(-1)
        hidden = model.model(input_ids=ids).last_hidden_state[0, learned]
        torch.nn.functional.cross_entropy(model.lm_head(hidden), targets[learned]).backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}],
        tools=[code_interpreter],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    sample = model.generate(**prompt, max_new_tokens=40, do_sample=False)[0, prompt["input_ids"].shape[1] :]
    print(f"taught tiny model, greedy: {tokenizer.decode(sample)!r}", flush=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


_SANDBOX = None


def plain_tool_system_prompt() -> str:
    """The system message TRL's Qwen2.5 template writes when given the tool (tools + how to call them)."""
    rendered = tool_chat_tokenizer().apply_chat_template(
        [{"role": "user", "content": "x"}], tools=[code_interpreter], tokenize=False
    )
    return rendered.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]


def code_interpreter(code: str) -> str:
    """Run Python code in a stateful interpreter and return what it prints.

    Args:
        code: The Python code to run.
    """
    result = _SANDBOX.run(code, timeout=10)
    return (result.stdout + result.stderr)[-512:] or f"[{result.status}]"


def boxed_reward(prompts, completions, answer, **kwargs) -> list[float]:
    from agentdata.verify import correctness_score, is_correct

    texts = [
        c if isinstance(c, str) else "".join(str(m.get("content") or "") for m in c if m["role"] == "assistant")
        for c in completions
    ]
    return [correctness_score(is_correct(text, gold)) for text, gold in zip(texts, answer)]


def grpo_args(out: Path, steps: int, generations: int, max_new_tokens: int) -> dict[str, Any]:
    return dict(
        output_dir=str(out),
        max_steps=steps,
        learning_rate=1e-6,
        per_device_train_batch_size=generations,
        gradient_accumulation_steps=1,
        num_generations=generations,
        max_completion_length=max_new_tokens,
        temperature=1.0,
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
        loss_type="dapo",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
        bf16=False,
        gradient_checkpointing=False,
    )


def run_plain_grpo(model_dir: Path, out: Path, steps: int, generations: int, max_new_tokens: int) -> dict[str, Any]:
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    dataset = datasets.Dataset.from_list([{"prompt": [{"role": "user", "content": QUESTION}], "answer": "5"}] * 8)
    clock = StepClock()
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=[boxed_reward],
        args=GRPOConfig(**grpo_args(out, steps, generations, max_new_tokens), max_tool_calling_iterations=4),
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        tools=[code_interpreter],
        callbacks=[clock],
    )
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    return {
        "step_s": clock.seconds,
        "num_tokens": [entry.get("num_tokens") for entry in logs],
        "tool_calls_per_response": [entry.get("tools/call_frequency") for entry in logs],
        "reward": [entry.get("reward") for entry in logs],
        "load": load(),
    }


def run_our_grpo(
    model_dir: Path, pool: Path, out: Path, steps: int, generations: int, max_new_tokens: int
) -> dict[str, Any]:
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.rl.run import build_grpo_trainer
    from agentdata.settings import build

    # The same system text the plain side's template renders for its tool, so both sides train on
    # token-identical prompts and only the machinery differs.
    config = build(
        GRPOStageConfig,
        dict(
            model=f"hf:{model_dir}",
            rl_pool=str(pool),
            out=str(out),
            max_steps=steps,
            system_prompt=plain_tool_system_prompt(),
            protocol=GRPO_PROTOCOL,  # stated, not the default: the model was taught these calls
            prompts_per_step=1,
            num_generations=generations,
            max_new_tokens=max_new_tokens,
            max_tool_calls=4,
            max_turns=5,
            overlong_buffer=0,
            learning_rate=1e-6,
            use_vllm="no",
            save_steps=10**6,
            plots=False,
        ),
    )
    trainer, _, step_times = build_grpo_trainer(config, _SANDBOX)
    trainer.args.save_strategy = "no"
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    return {
        "step_s": [s["step_s"] for s in step_times.steps],
        "breakdown": step_times.steps,
        "num_tokens": [entry.get("num_tokens") for entry in logs],
        "tool_calls_per_response": [entry.get("tools/call_frequency") for entry in logs],
        "reward": [entry.get("reward") for entry in logs],
        "load": load(),
    }


def bench_grpo(
    work: Path, rounds: int, steps: int, generations: int, max_new_tokens: int, teach_steps: int
) -> dict[str, Any]:
    global _SANDBOX
    from agentdata.sandbox import Sandbox

    model_dir = tool_calling_tiny_model(tool_chat_tokenizer(), work / "tiny-tool-model", teach_steps)
    pool = work / "pool.jsonl"
    pool.write_text(
        "".join(json.dumps({"prompt": [{"role": "user", "content": QUESTION}], "answer": "5"}) + "\n" for _ in range(8))
    )
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "ours": []}
    with Sandbox() as sandbox:
        _SANDBOX = sandbox
        for round_index in range(rounds):
            runs["plain"].append(
                run_plain_grpo(model_dir, work / f"grpo-plain-{round_index}", steps, generations, max_new_tokens)
            )
            print(f"grpo plain round {round_index}: {json.dumps(runs['plain'][-1])}", flush=True)
            runs["ours"].append(
                run_our_grpo(model_dir, pool, work / f"grpo-ours-{round_index}", steps, generations, max_new_tokens)
            )
            print(f"grpo ours round {round_index}: {json.dumps(runs['ours'][-1])}", flush=True)
    same_grpo_work(runs)
    # The first step of a run also warms up the sandbox and the trainer; it is left out of the mean.
    per_step = {name: [s for run in results for s in run["step_s"][1:]] for name, results in runs.items()}
    summary = {
        name: {"mean_step_s": statistics.mean(values), "steps_timed": len(values)} for name, values in per_step.items()
    }
    summary["ratio_plain_over_ours"] = summary["plain"]["mean_step_s"] / summary["ours"]["mean_step_s"]
    breakdown = [b for run in runs["ours"] for b in run["breakdown"][1:]]
    summary["ours_breakdown_mean_s"] = {
        key: statistics.mean(b[key] for b in breakdown)
        for key in ("step_s", "generation_s", "sandbox_and_loop_s", "scoring_and_optimisation_s")
    }
    summary["runs"] = runs
    return summary


def summarise(runs: dict[str, list[dict[str, float]]], keys: tuple[str, ...]) -> dict[str, Any]:
    summary: dict[str, Any] = {"runs": runs}
    for key in keys:
        plain = statistics.mean(run[key] for run in runs["plain"])
        ours = statistics.mean(run[key] for run in runs["ours"])
        summary[key] = {"plain": plain, "ours": ours, "ratio_ours_over_plain": ours / plain}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("sft", "grpo"))
    parser.add_argument("--rounds", type=int, default=2, help="interleaved plain/ours pairs")
    parser.add_argument("--sft-steps", type=int, default=3)
    parser.add_argument("--sft-batch", type=int, default=4)
    parser.add_argument("--sft-max-length", type=int, default=512)
    parser.add_argument("--sft-conversations", type=int, default=16)
    parser.add_argument("--grpo-steps", type=int, default=4)
    parser.add_argument("--grpo-generations", type=int, default=4)
    parser.add_argument("--grpo-max-new-tokens", type=int, default=96)
    parser.add_argument("--teach-steps", type=int, default=200)
    parser.add_argument("--protocol", default="hermes", help="SFT: the protocol the conversations are stitched in")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI: every arm and check runs")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.sft_steps, args.sft_batch, args.sft_max_length, args.sft_conversations = 1, 1, 2, 512, 2
        args.grpo_steps, args.grpo_generations, args.grpo_max_new_tokens = 2, 2, 48
    print(f"torch threads {torch.get_num_threads()}, load average {load():.2f}", flush=True)
    results: dict[str, Any] = {"threads": torch.get_num_threads(), "load_at_start": load()}
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        work = Path(tmp)
        if args.only in (None, "grpo"):
            results["grpo"] = bench_grpo(
                work, args.rounds, args.grpo_steps, args.grpo_generations, args.grpo_max_new_tokens, args.teach_steps
            )
        if args.only in (None, "sft"):
            results["sft"] = bench_sft(
                work,
                args.rounds,
                args.sft_steps,
                args.sft_batch,
                args.sft_max_length,
                args.sft_conversations,
                args.protocol,
                args.smoke,
            )
    results["load_at_end"] = load()
    brief = {
        section: {k: v for k, v in values.items() if k != "runs"}
        for section, values in results.items()
        if isinstance(values, dict)
    }
    print(json.dumps(brief, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
