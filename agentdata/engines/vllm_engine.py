"""The `vllm:PATH` engine: vLLM in this process when it is installed here, else vLLM's server from its own
environment, started and stopped by agentdata.

- In this process (`VLLMEngine`): vLLM's async engine, continuous batching, tensor / data parallel by its
  own options. This is what a GPU install with `pip install agentdata[vllm]` gets.
- A managed server (`ManagedVLLMEngine`): vLLM pins its own transformers (the CPU build wants one older
  than agentdata's), so it usually lives in an environment of its own (`.venv-vllm`, made by
  scripts/install_vllm.sh; engines/vllm_server.py finds it). agentdata starts its OpenAI server on a
  loopback port and talks to it as to any OpenAI-compatible server (engines/openai_compat.py: retries,
  refusals, context overflow), then stops it.

`server=true` picks the managed server even where vLLM imports here. PATH `smollm2` is the embedded model.
vLLM is optional and imported only when a `vllm:` spec is loaded.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from pathlib import Path

from agentdata.engines.base import Engine, Generation, GenerationRequest, error_generation
from agentdata.engines.hf_generate import render_prompt
from agentdata.engines.openai_compat import OpenAIEngine
from agentdata.engines.prompt_template import apply_prompt_template
from agentdata.engines.tool_prompt import CHATML_TOOLS_TEMPLATE
from agentdata.engines.vllm_mapping import completion_generation, failed_generation, sampling_params
from agentdata.engines.vllm_server import ServerSettings, VLLMServer, in_process_vllm
from agentdata.errors import MissingDependencyError, UserError

# Options of the managed server (engines.vllm_server.ServerSettings) and of its client (OpenAIEngine).
SERVER_OPTIONS = (
    "dtype", "max_model_len", "kv_cache_gib", "enforce_eager", "threads", "tool_call_parser",
    "reasoning_parser", "dev_mode", "seed", "startup_timeout_s", "chunked_prefill", "max_num_batched_tokens",
    "chat_template",
)  # fmt: skip
CLIENT_OPTIONS = ("concurrency", "timeout_s", "max_retries", "extra_body", "continue_final_message")


def model_path_of(target: str) -> str:
    """The model dir a `vllm:` target names: `smollm2` is the embedded model's converted dir."""
    if target == "smollm2":
        from agentdata.engines.smollm2 import smollm2_model_dir

        return str(smollm2_model_dir())
    path = Path(target).expanduser()
    return str(path) if path.exists() else target


def vllm_engine(target: str, *, spec: str | None = None, server: bool | None = None, **options) -> Engine:
    """The `vllm:` engine: in this process where vLLM imports, else a managed server (`server=True` forces it)."""
    model = model_path_of(target)
    if server is None:
        server = not in_process_vllm()
    if not server:
        return VLLMEngine(model, spec=spec, **options)
    return ManagedVLLMEngine(model, spec=spec, **options)


def vllm_check_target(target: str) -> None:
    """A `vllm:` target that looks like a path must be a model dir (checked before any work)."""
    if target != "smollm2" and ("/" in target or target.startswith(".")):
        path = Path(target).expanduser()
        if not (path / "config.json").is_file():
            raise UserError(f"vllm:{target}: not a model dir (no config.json)")


vllm_engine.check_target = vllm_check_target


class ManagedVLLMEngine(OpenAIEngine):
    """vLLM's OpenAI server from its own environment, started on first need and stopped by `aclose`.

    Options: the server's (SERVER_OPTIONS: `tool_call_parser=hermes`, `reasoning_parser=deepseek_r1`,
    `max_model_len`, `kv_cache_gib`, ...), the client's (CLIENT_OPTIONS), `python` (vLLM's python), and any
    other `name=value` passed to vLLM's server as `--name value`.

    Tools: unless `tool_call_parser` is given (`none`: no tool calling), the server is started so that a
    request with `tools` works (`tool_serving`): auto tool choice with the parser the model's chat template
    writes calls for, and for a ChatML template that ignores tools (SmolLM2's) agentdata's
    `chatml_tools.jinja` with the hermes parser. Every response carries the prompt vLLM rendered
    (`return_prompt_text`), which the recording gateway keeps.
    """

    label = "vllm (managed server)"

    def __init__(self, model: str, *, spec: str | None = None, python: str | None = None, **options):
        server_options = {name: options.pop(name) for name in SERVER_OPTIONS if name in options}
        if "tool_call_parser" not in server_options:
            parser, template = tool_serving(model)
            server_options["tool_call_parser"] = parser
            server_options.setdefault("chat_template", template)
        elif str(server_options["tool_call_parser"]).lower() == "none":
            server_options["tool_call_parser"] = None
        client_options = {name: options.pop(name) for name in CLIENT_OPTIONS if name in options}
        if options.pop("prompt_template", "auto") != "auto":
            raise UserError("vllm: a managed server uses the model's own chat template (prompt_template=auto)")
        extra = [part for name, value in options.items() for part in (f"--{name.replace('_', '-')}", str(value))]
        self.server = VLLMServer(ServerSettings(model=model, extra_args=extra, **server_options), python=python)
        self._started = False
        self._start_lock = threading.Lock()  # the first requests arrive together, each wanting the server
        super().__init__("http://127.0.0.1:1/v1", model=model, spec=spec or f"vllm:{model}", **client_options)
        self.extra_body = {"return_prompt_text": True, **self.extra_body}  # the record keeps what the model read

    def tools_refusal(self) -> str | None:
        if self.server.settings.tool_call_parser:
            return None
        return (
            f"{self.spec}: its vLLM server was started without tool calling (no tool_call_parser for this model's "
            "chat template); give the engine option tool_call_parser=NAME (vLLM's parser for the model)"
        )

    def start(self) -> ManagedVLLMEngine:
        """Start the server once and point the client at it; callers that come meanwhile wait for it."""
        with self._start_lock:
            if not self._started:
                self.server.start()
                self.fleet.replicas[0].url = f"{self.server.base_url}/v1/chat/completions"
                self._started = True
        return self

    async def ready(self) -> None:
        await asyncio.to_thread(self.start)
        await super().ready()

    async def generate(self, request: GenerationRequest) -> Generation:
        if not self._started:  # a caller that did not call ready(); a server that died later is not restarted
            await asyncio.to_thread(self.start)
        return await super().generate(request)

    async def aclose(self) -> None:
        await super().aclose()
        self.server.stop()


def tool_serving(model: str) -> tuple[str | None, str | None]:
    """(vLLM's tool-call parser, a chat template file or None) for the model dir's own chat template: hermes
    where it writes `<tool_call>` JSON (Qwen2.5/3, Hermes), qwen3_coder for `<function=...>`, hermes with
    agentdata's template for a ChatML template that ignores tools (SmolLM2); (None, None) where none fits."""
    template = _chat_template_text(Path(model))
    if "<function=" in template:
        return "qwen3_coder", None
    if "<tool_call>" in template:
        return "hermes", None
    if "<|im_start|>" in template and "tools" not in template:
        return "hermes", str(CHATML_TOOLS_TEMPLATE)
    return None, None


def _chat_template_text(model_dir: Path) -> str:
    """The model dir's chat template (chat_template.jinja, else tokenizer_config.json's); "" when none is found."""
    try:
        if (model_dir / "chat_template.jinja").is_file():
            return (model_dir / "chat_template.jinja").read_text(errors="replace")
        config = json.loads((model_dir / "tokenizer_config.json").read_text(errors="replace"))
    except (OSError, ValueError):
        return ""
    template = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):  # named templates: the default one
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), "")
    return template if isinstance(template, str) else ""


def import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError("vLLM (the vllm: engine)", "agentdata[vllm]") from exc
    return vllm


class VLLMEngine(Engine):
    """Each request goes straight into vLLM's scheduler, which batches continuously.

    Every option (tensor_parallel_size, data_parallel_size, gpu_memory_utilization,
    max_model_len, dtype, enforce_eager, ...) is passed to `vllm.AsyncEngineArgs`, except
    `prompt_template` (engines.prompt_template: a base model gets the plain template).
    The engine is started on first use, inside the running event loop.
    """

    label = "vllm (in process)"

    def __init__(
        self, model_path: str | Path, *, spec: str | None = None, prompt_template: str = "auto", **engine_options
    ):
        self._vllm = import_vllm()
        from transformers import AutoTokenizer

        self.model_path = (
            str(Path(model_path).expanduser()) if Path(model_path).expanduser().exists() else str(model_path)
        )
        self.spec = spec or f"vllm:{model_path}"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        except OSError as exc:
            raise UserError(f"{model_path}: cannot load a tokenizer ({exc})") from exc
        apply_prompt_template(self.tokenizer, prompt_template, model=str(model_path))
        self.engine_options = engine_options
        self._engine = None
        self._request_ids = itertools.count()

    def _started_engine(self):
        if self._engine is None:
            vllm = self._vllm
            args = vllm.AsyncEngineArgs(model=self.model_path, **self.engine_options)
            self._engine = vllm.AsyncLLMEngine.from_engine_args(args)
        return self._engine

    async def generate(self, request: GenerationRequest) -> Generation:
        prompt_ids: list[int] = []
        try:
            prompt = render_prompt(self.tokenizer, request)
            prompt_ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
            engine = self._started_engine()
            final = None
            request_id = f"agentdata-{next(self._request_ids)}"
            params = sampling_params(self._vllm.SamplingParams, request)
            async for output in engine.generate({"prompt_token_ids": prompt_ids}, params, request_id):
                final = output
            if final is None or not final.outputs:
                return error_generation("vLLM returned no output", prompt_tokens=len(prompt_ids))
            generation = completion_generation(final.outputs[0], request, len(prompt_ids))
            generation.prompt = prompt
            return generation
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never raise for one request; a prompt that fills the context is `context`
            return failed_generation(exc, prompt_tokens=len(prompt_ids))

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is None:
            return
        for name in ("shutdown", "shutdown_background_loop"):
            stop = getattr(engine, name, None)
            if callable(stop):
                result = stop()
                if asyncio.iscoroutine(result):
                    await result
                return
