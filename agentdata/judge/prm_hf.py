"""`hf:PATH` process reward models: a transformers checkpoint read at the step separators.

The public math PRMs come in three shapes, all read the same way (the steps joined by a
separator token, one probability read at the last token of each separator):

- `token-classification` (`*ForTokenClassification`: TRL's PRMTrainer, PURE-PRM): a 2-label head;
  the score is the probability of the positive label; prompt: the question as plain text, as
  TRL trains them; separator "\\n" unless `step_token` says otherwise;
- `reward` (`*ForProcessRewardModel`, Qwen2.5-Math-PRM, custom code: `trust_remote_code=true`):
  the same 2-label reading of the model's first output, the conversation in the chat template
  with the steps in the assistant turn, separator `<extra_0>`;
- `lm` (a causal LM, Math-Shepherd style): the probability of `good_token` against `bad_token`
  (default "+" / "-") as the next token after the step tag (default "ки" when the vocabulary has it).

Options (`prm_options='{"KEY": VALUE}'`): head, step_token, positive_label (an index or a label name),
good_token, bad_token, prompt (plain | chat), system, trust_remote_code, device, dtype, max_tokens.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentdata.engines.hf_model import check_model_dir, context_length, default_device, torch_dtype
from agentdata.errors import UserError
from agentdata.judge.prm import DEFAULT_SYSTEM, ProcessRewardModel, ScoreFailure, StepsInput

HEADS = ("auto", "token-classification", "reward", "lm")
PROMPTS = ("auto", "plain", "chat")
QWEN_STEP_TOKEN = "<extra_0>"
SHEPHERD_STEP_TOKEN = "ки"
POSITIVE_NAMES = ("positive", "correct", "good", "true", "yes", "+", "1", "label_1")
_PLACEHOLDER = "\u2063STEPS\u2063"  # stands for the assistant's steps when the chat template is rendered


class HFProcessRewardModel(ProcessRewardModel):
    def __init__(
        self,
        target: str,
        *,
        spec: str,
        head: str = "auto",
        step_token: str | None = None,
        positive_label: int | str | None = None,
        good_token: str = "+",
        bad_token: str = "-",
        prompt: str = "auto",
        system: str = DEFAULT_SYSTEM,
        trust_remote_code: bool = False,
        device: str | None = None,
        dtype: str = "float32",
        max_tokens: int | None = None,
        batch_size: int = 8,
    ):
        from transformers import AutoConfig, AutoTokenizer

        if head not in HEADS or prompt not in PROMPTS:
            raise UserError(f"{spec}: head must be one of {', '.join(HEADS)} and prompt one of {', '.join(PROMPTS)}")
        self.spec, self.path = spec, check_model_dir(target)
        config = AutoConfig.from_pretrained(self.path, trust_remote_code=trust_remote_code)
        self.head = head if head != "auto" else _head_of(config, spec)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path, trust_remote_code=trust_remote_code)
        self.model = _load(self.path, self.head, trust_remote_code, torch_dtype(dtype), spec)
        self.model.to(device or default_device()).eval()
        self.step_token = step_token or self._default_step_token()
        self.separator_ids = self.tokenizer.encode(self.step_token, add_special_tokens=False)
        if not self.separator_ids:
            raise UserError(f"{spec}: step_token {self.step_token!r} is no token at all")
        self.prompt = prompt if prompt != "auto" else ("chat" if self.head == "reward" else "plain")
        if self.prompt == "chat" and not self.tokenizer.chat_template:
            raise UserError(f"{spec}: prompt=chat, but the tokenizer has no chat template; use prompt=plain")
        self.system = system
        self.reading = self._reading(config, positive_label, good_token, bad_token)
        self.max_tokens = max_tokens or context_length(self.model) or 1_000_000
        self.batch_rows = batch_size
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)

    def identity(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "head": self.head,
            "step_token": self.step_token,
            "prompt": self.prompt,
            "system": self.system if self.prompt == "chat" else None,
            "reading": self.reading,
        }

    async def score(self, inputs: list[StepsInput]) -> list[list[float] | ScoreFailure]:
        return await asyncio.to_thread(self._score, inputs)

    # ------------------------------------------------------------------ reading the model

    def _score(self, inputs: list[StepsInput]) -> list[list[float] | ScoreFailure]:
        encoded = [self.encode(item) for item in inputs]
        results: list[list[float] | ScoreFailure] = []
        fitting = [index for index, (ids, _) in enumerate(encoded) if len(ids) <= self.max_tokens]
        scores = self._forward([encoded[index] for index in fitting]) if fitting else []
        by_index = dict(zip(fitting, scores))
        for index, (ids, _) in enumerate(encoded):
            if index in by_index:
                results.append(by_index[index])
            else:
                results.append(ScoreFailure(f"{len(ids)} tokens, more than the PRM reads ({self.max_tokens})"))
        return results

    def encode(self, item: StepsInput) -> tuple[list[int], list[int]]:
        """(token ids, the position of each step's score): the prompt, then each step and its separator."""
        ids = list(self._prompt_ids(item.question))
        positions = []
        for step in item.steps:
            ids += self.tokenizer.encode(step, add_special_tokens=False) + self.separator_ids
            positions.append(len(ids) - 1)
        return ids, positions

    def _prompt_ids(self, question: str) -> list[int]:
        if self.prompt == "chat":
            conversation = [{"role": "user", "content": question}, {"role": "assistant", "content": _PLACEHOLDER}]
            if self.system:
                conversation.insert(0, {"role": "system", "content": self.system})
            text = self.tokenizer.apply_chat_template(conversation, tokenize=False)
            return self.tokenizer.encode(text.split(_PLACEHOLDER)[0], add_special_tokens=False)
        bos = [self.tokenizer.bos_token_id] if self.tokenizer.bos_token_id is not None else []
        return bos + self.tokenizer.encode(question + "\n", add_special_tokens=False)

    def _forward(self, encoded: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        import torch

        longest = max(len(ids) for ids, _ in encoded)
        device = next(self.model.parameters()).device
        input_ids = torch.full((len(encoded), longest), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(encoded), longest), dtype=torch.long)
        for row, (ids, _) in enumerate(encoded):  # right padding: a causal model's real positions are unchanged
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
        with torch.no_grad():
            output = self.model(input_ids=input_ids.to(device), attention_mask=attention.to(device))
        logits = (output.logits if hasattr(output, "logits") else output[0]).float().cpu()
        return [self._step_probabilities(logits[row, positions]) for row, (_, positions) in enumerate(encoded)]

    def _step_probabilities(self, logits: Any) -> list[float]:
        kind, first, second = self.reading
        if kind == "pair":  # the good token against the bad one, as the next token after the step tag
            return logits[:, [first, second]].softmax(dim=-1)[:, 0].tolist()
        if kind == "sigmoid":  # a one-label head
            return logits[:, 0].sigmoid().tolist()
        return logits.softmax(dim=-1)[:, first].tolist()

    # ------------------------------------------------------------------ setup

    def _default_step_token(self) -> str:
        vocabulary = self.tokenizer.get_vocab()
        if QWEN_STEP_TOKEN in vocabulary:
            return QWEN_STEP_TOKEN
        if self.head == "lm" and SHEPHERD_STEP_TOKEN in vocabulary:
            return SHEPHERD_STEP_TOKEN
        return "\n"

    def _reading(self, config: Any, positive_label: int | str | None, good: str, bad: str) -> tuple[str, int, int]:
        """How a step's probability is read: ("pair", good id, bad id), ("softmax", label, 0) or ("sigmoid", 0, 0)."""
        if self.head == "lm":
            return ("pair", self._single_token(good, "good_token"), self._single_token(bad, "bad_token"))
        labels = int(getattr(config, "num_labels", 2) or 2)
        if labels == 1:
            return ("sigmoid", 0, 0)
        return ("softmax", _positive_index(config, positive_label, labels, self.spec), 0)

    def _single_token(self, text: str, option: str) -> int:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise UserError(f"{self.spec}: {option} {text!r} is {len(ids)} tokens; it must be one token")
        return ids[0]


def _head_of(config: Any, spec: str) -> str:
    architectures = list(getattr(config, "architectures", None) or [])
    for name in architectures:
        if name.endswith("ForTokenClassification"):
            return "token-classification"
        if "RewardModel" in name or "ProcessReward" in name:
            return "reward"
        if name.endswith(("ForCausalLM", "LMHeadModel")):
            return "lm"
    raise UserError(
        f"{spec}: cannot tell how to read a PRM of architecture {architectures or 'unknown'}; "
        'set prm_options=\'{"head": "token-classification|reward|lm"}\''
    )


def _load(path: Path, head: str, trust_remote_code: bool, dtype: Any, spec: str) -> Any:
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForTokenClassification

    if head == "reward" and not trust_remote_code:
        raise UserError(
            f"{spec}: this PRM's architecture is custom code in {path}; "
            "pass prm_options='{\"trust_remote_code\": true}' to run it"
        )
    loader = {"token-classification": AutoModelForTokenClassification, "reward": AutoModel, "lm": AutoModelForCausalLM}
    return loader[head].from_pretrained(path, dtype=dtype, trust_remote_code=trust_remote_code)


def _positive_index(config: Any, positive_label: int | str | None, labels: int, spec: str) -> int:
    names = {int(index): str(name).lower() for index, name in (getattr(config, "id2label", None) or {}).items()}
    if positive_label is not None:
        if isinstance(positive_label, int) and 0 <= positive_label < labels:
            return positive_label
        matches = [index for index, name in names.items() if name == str(positive_label).lower()]
        if matches:
            return matches[0]
        raise UserError(f"{spec}: positive_label {positive_label!r} is not one of the labels {names or labels}")
    for index, name in sorted(names.items()):
        if name in POSITIVE_NAMES:
            return index
    return 1  # two labels with no telling names: [wrong, right], as TRL and Qwen train them
