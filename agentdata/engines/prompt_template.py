"""How a conversation becomes prompt text: the model's chat template, or a plain-text one.

A base model (no chat template: `tokenizer.chat_template is None`) is what ZeroTIR trains
with RL from scratch ("zero RL"). It gets a plain-text template in ZeroTIR's style:

    A conversation between User and Assistant. The User asks a question, and the Assistant solves it.
    {system prompt: the protocol's instructions}

    User: {question}
    Assistant: {answer, with the protocol's tool results inline, e.g. codeblock's ```output blocks}<eos>

The template is installed as the tokenizer's chat template, so every path that renders
conversations (the hf and vllm engines, GRPO rollouts, SFT masking, the saved model) uses the
same text without knowing about it. An assistant turn ends with the tokenizer's end-of-sequence
token: that is what the model learns to stop at. Tool results that come back as a new turn
(hermes) are `User:` turns, as for chat templates (formats.base.results_as_user_turns).

Nothing but that end-of-sequence token ends the assistant's turn, and a base model that has not
learned it yet writes the next `User:` line itself and goes on with a conversation of its own.
So an engine rendering with the plain template also stops at a new `User:` line
(`turn_end_stops`, which the agent loop adds to the protocol's stop strings): the turn ends
there, and what the model wrote after it is dropped.

`prompt_template` chooses: `auto` (the model's chat template, the plain one when it has none),
`chat` (the chat template, refused when there is none), `plain` (always the plain one, e.g.
for a base model that ships a chat template it was never trained on), or a path to a Jinja
chat-template file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.events import Event, emit
from agentdata.inputs import read_text

PROMPT_TEMPLATES = ("auto", "chat", "plain")
MAX_TEMPLATE_BYTES = 2**20  # a chat template is a page of Jinja
PROMPT_TEMPLATE_HELP = (
    "How conversations become prompt text: auto (the model's chat template; a base model without "
    "one gets the plain ZeroTIR-style 'User: ... Assistant:' template), chat (refuse a model "
    "without a chat template), plain (always the plain template), or a Jinja template file."
)

PLAIN_TURN_STOP = "\nUser:"  # the plain template's next user turn: where a base model's own turn must end
PLAIN_PREAMBLE = "A conversation between User and Assistant. The User asks a question, and the Assistant solves it."

# The assistant's text follows "Assistant:" after one space (none when it starts with whitespace
# itself), so a generated " 42" and a stored "42" render alike.
PLAIN_TEMPLATE = (
    "{{- '" + PLAIN_PREAMBLE + "' -}}"
    "{%- if messages and messages[0]['role'] == 'system' -%}{{- '\\n' + messages[0]['content'] -}}{%- endif -%}"
    "{{- '\\n\\n' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{- 'User: ' + message['content'] + '\\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{%- set content = message['content'] or '' -%}"
    "{{- 'Assistant:' + ('' if content[:1] in [' ', '\\n'] else ' ') + content + (eos_token or '') + '\\n' -}}"
    "{%- elif message['role'] != 'system' -%}{{- message['role'] | capitalize + ': ' + message['content'] + '\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}"
)


def check_prompt_template(choice: str) -> str:
    """`choice` if it is one of PROMPT_TEMPLATES or an existing file; a UserError otherwise."""
    choice = (choice or "auto").strip()
    if choice in PROMPT_TEMPLATES or Path(choice).expanduser().is_file():
        return choice
    raise UserError(f"prompt_template={choice!r}: use auto, chat, plain or the path of a Jinja template file")


def apply_prompt_template(tokenizer: Any, choice: str = "auto", model: str = "the model") -> str:
    """Give `tokenizer` the chat template `choice` asks for; returns what it uses: chat, plain or the file.

    Announces (one `log` event) when the plain template replaces a missing or overridden one.
    """
    choice = check_prompt_template(choice)
    has_chat = tokenizer.chat_template is not None
    if choice == "chat" or (choice == "auto" and has_chat):
        if not has_chat:
            raise UserError(
                f"{model}: the tokenizer has no chat template (prompt_template=chat); use an "
                "instruct/chat model, or prompt_template plain for a base model"
            )
        return "chat"
    if choice == "plain" or choice == "auto":
        tokenizer.chat_template = PLAIN_TEMPLATE
        why = "has no chat template" if not has_chat else "is set to prompt_template=plain"
        emit(
            Event(
                "log",
                "model",
                message=f"{model} {why}: prompts use the plain-text template "
                "('User: ... Assistant:', ZeroTIR's base-model setting)",
            )
        )
        return "plain"
    path = Path(choice).expanduser()
    try:  # UTF-8, within a bound, never waiting on a path swapped for a FIFO
        tokenizer.chat_template = read_text(path, MAX_TEMPLATE_BYTES)
    except UserError as exc:
        raise UserError(f"prompt_template={choice}: cannot read the template file ({exc})") from None
    return str(path)


def uses_plain_template(tokenizer: Any) -> bool:
    return getattr(tokenizer, "chat_template", None) == PLAIN_TEMPLATE


def turn_end_stops(tokenizer: Any) -> tuple[str, ...]:
    """Stop strings that end an assistant turn in the prompt text `tokenizer` renders, beside its EOS
    token: the plain template's next `User:` line; none for a chat template (its own end-of-turn token)."""
    return (PLAIN_TURN_STOP,) if uses_plain_template(tokenizer) else ()
