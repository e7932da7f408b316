#!/usr/bin/env bash
# Build hf-jepa's wheel and use it the way a user would: a fresh virtualenv (no --system-site-packages; pip's cache is
# reused), the CPU build of torch first, then the wheel and its dependencies; then, from a folder outside the source
# tree: `hf-jepa --version`, `hf-jepa configs path`, a 30-step BRo-JEPA training on the embedded digits and the
# `modular-arithmetic` pipeline on the trained folder, checking that `hf_jepa` is imported from the virtualenv.
# Fails (non-zero, with the failing step named) on any error or build warning. `make wheel-check` runs it.
#
#   utils/check_wheel.sh            PYTHON=python3.11 utils/check_wheel.sh            KEEP=1 utils/check_wheel.sh
#
# PYTHON: the interpreter that builds the wheel and the virtualenv (default: .venv/bin/python, else python3).
# KEEP=1 keeps the temporary folder (it is kept anyway when a step fails).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
TORCH_SPEC="torch==2.13.0"  # the CPU wheel (a bare `torch` requirement would pull a multi-GB CUDA build)
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hf-jepa-wheel-check.XXXXXX")"
STEP="setup"
START=$SECONDS

finish() {
    local status=$?
    if [[ $status -ne 0 ]]; then
        echo "wheel check FAILED at step '$STEP' (status $status); files kept in $WORK" >&2
    elif [[ "${KEEP:-0}" == 1 ]]; then
        echo "files kept in $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap finish EXIT

step() {  # step NAME: announce a step (and remember it for the failure message)
    STEP="$1"
    echo "== [$((SECONDS - START))s] $STEP"
}

timed() {  # timed LABEL LOG COMMAND...: run COMMAND (output to LOG, its tail shown on failure), print how long it took
    local label="$1" log="$2" begin=$SECONDS
    shift 2
    "$@" >>"$log" 2>&1 || { tail -n 40 "$log" >&2; return 1; }
    echo "   $label: $((SECONDS - begin)) s"
}

step "copy the source tree (tracked and untracked, not ignored files) to $WORK/src"
# A copy, so the build's build/ and *.egg-info stay out of the checkout and no stale build/lib file reaches the wheel.
mkdir -p "$WORK/src"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$WORK/src"
test -f "$WORK/src/pyproject.toml"

step "build the wheel"
timed "build" "$WORK/build.log" "$PYTHON" -m pip wheel "$WORK/src" --no-deps -w "$WORK/dist"
WHEELS=("$WORK"/dist/hf_jepa-*.whl)
[[ ${#WHEELS[@]} -eq 1 && -f "${WHEELS[0]}" ]] || { echo "expected one wheel in $WORK/dist" >&2; exit 1; }
WHEEL="${WHEELS[0]}"
echo "   $(basename "$WHEEL"): $(du -k "$WHEEL" | cut -f1) KiB"
# Any warning of the build backend fails the check (pip's notes about its own index configuration are not the build's).
if grep -i "warn" "$WORK/build.log" | grep -v -E "WARNING: Location '.*' is ignored|new release of pip" >&2; then
    echo "the build log has warnings (above); full log: $WORK/build.log" >&2
    exit 1
fi

step "create a fresh virtualenv"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
timed "pip upgrade" "$WORK/install.log" "$VPY" -m pip install --quiet --upgrade pip

step "install $TORCH_SPEC, then the wheel"
INSTALL_BEGIN=$SECONDS
timed "$TORCH_SPEC" "$WORK/install.log" "$VPY" -m pip install --quiet "$TORCH_SPEC"
timed "wheel + dependencies" "$WORK/install.log" "$VPY" -m pip install --quiet "$WHEEL"
echo "   install total: $((SECONDS - INSTALL_BEGIN)) s"
"$VPY" -m pip check

# Everything below runs outside the source tree, with the virtualenv's scripts first on PATH.
mkdir -p "$WORK/run"
cd "$WORK/run"
export PATH="$WORK/venv/bin:$PATH" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
unset PYTHONPATH
SITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

step "hf-jepa --version"
VERSION="$(hf-jepa --version)"
echo "   $VERSION"
WHEEL_VERSION="$(basename "$WHEEL" | cut -d- -f2)"
[[ "$VERSION" == "hf-jepa $WHEEL_VERSION" ]] || { echo "expected 'hf-jepa $WHEEL_VERSION'" >&2; exit 1; }

step "hf-jepa configs path accelerate/cpu_2proc.yaml"
CONFIG="$(hf-jepa configs path accelerate/cpu_2proc.yaml)"
echo "   $CONFIG"
[[ -f "$CONFIG" && "$CONFIG" == "$SITE"/hf_jepa/configs/* ]] || { echo "not a file under $SITE/hf_jepa/configs" >&2; exit 1; }
[[ "$(hf-jepa configs | wc -l)" -eq "$(cd "$ROOT/configs" && find . -name '*.yaml' | wc -l)" ]] ||
    { echo "hf-jepa configs does not list every file of configs/" >&2; exit 1; }

step "hf-jepa train bro-jepa (30 steps, embedded digits)"
timed "train" "$WORK/train.log" hf-jepa train bro-jepa --set data=embedded max_steps=30 --output-dir "$WORK/run/out"
tail -n 3 "$WORK/train.log"
for file in config.json model.safetensors README.md; do
    [[ -f "$WORK/run/out/$file" ]] || { echo "the trained folder has no $file" >&2; exit 1; }
done

step "pipeline('modular-arithmetic') on the trained folder"
"$VPY" - "$WORK/run/out" "$SITE" "$ROOT" <<'EOF'
import sys
from pathlib import Path

import hf_jepa
from transformers import pipeline

from hf_jepa.data import embedded_digits

model_dir, site, source = (Path(arg).resolve() for arg in sys.argv[1:])
module = Path(hf_jepa.__file__).resolve()
assert module.is_relative_to(site), f"hf_jepa imported from {module}, not from the virtualenv's {site}"
assert not module.is_relative_to(source), f"hf_jepa imported from the source tree ({module})"
example = embedded_digits()["test"][0]
classify = pipeline("modular-arithmetic", model=str(model_dir))  # hf_jepa installed: no trust_remote_code
assert type(classify.model).__module__.startswith("hf_jepa."), type(classify.model).__module__
result = classify(example["image"], operation=3)
assert {"digit", "score", "source_digit"} <= result.keys(), result
assert 0 <= result["digit"] < 10, result
print(f"   hf_jepa from {module.parent}; digit {example['label']} + 3 -> {result['digit']} (score {result['score']:.2f})")
EOF

step "done"
echo "wheel check passed in $((SECONDS - START)) s"
