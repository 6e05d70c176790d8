#!/usr/bin/env bash
# cwmtui[hf] installed into an environment that holds vLLM's pinned transformers (vLLM 0.33
# accepts transformers <5.21): the install keeps that version, and the transformers backend's
# KV cache gives the logits of a full forward pass there too (the KV-cache tests, re-run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pinned=5.20.2
python3.11 -m venv --system-site-packages "$work/venv"  # torch (CPU) from the system's site
"$work/venv/bin/python" -m pip install --quiet "transformers==$pinned"
"$work/venv/bin/python" -m pip install --quiet "$root[hf]"
"$work/venv/bin/python" -c "import transformers; v = transformers.__version__; assert v == '$pinned', v; print('transformers', v, 'kept')"
cd "$root"
"$work/venv/bin/python" -m pytest -p no:cacheprovider tests/test_model_dirs.py tests/test_llama_decoder.py tests/test_tokenizers.py
