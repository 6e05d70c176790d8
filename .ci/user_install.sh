#!/usr/bin/env bash
# The user's install: a non-editable `pip install .` of this checkout into a fresh virtual
# environment, used from a folder outside the checkout. The core install must pull neither torch
# nor transformers, and everything a verb needs (the bundled model, CRUXEval) ships inside it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3.11 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "$root"
cd "$work"
cp "$root/samples/swaps.py" samples-copy.py
bin="$work/venv/bin"
"$bin/python" - <<'PY'
import importlib.util
heavy = [name for name in ("torch", "transformers", "accelerate", "matplotlib") if importlib.util.find_spec(name)]
assert not heavy, f"the core install pulled {heavy}"
PY
"$bin/cwmtui" --version
"$bin/python" -m cwmtui --help > /dev/null
code=0
"$bin/cwmtui" diff samples-copy.py > diff.txt || code=$?
[ "$code" -le 1 ] || { echo "cwmtui diff exited $code"; cat diff.txt; exit 1; }  # 0 agree, 1 diverge
grep -q "first divergence\|agrees" diff.txt
"$bin/cwmtui" eval cruxeval --count 3 --json > eval.json
"$bin/python" -c "import json; r = json.load(open('eval.json')); assert r['suite'] == 'cruxeval' and r['count'] == 3, r"
# a --model directory beyond the bundled kind needs the hf extra: one line that says so
bundled=$("$bin/python" -c "from cwmtui.model.opening import BUNDLED_DIR; print(BUNDLED_DIR)")
cp -r "$bundled" big-model
"$bin/python" -c "
import json; c = json.load(open('big-model/config.json')); c['hidden_size'] = 4096; c['num_hidden_layers'] = 64
json.dump(c, open('big-model/config.json', 'w'))"
if "$bin/cwmtui" diff samples-copy.py --model big-model 2> err.txt; then echo "--model without torch ran"; exit 1; fi
cat err.txt
grep -q "^cwmtui: error: .*pip install 'cwmtui\[hf\]'$" err.txt
echo "user install: ok (core install without torch or transformers; --version, -m, diff, eval cruxeval from $work)"
