#!/usr/bin/env bash
# Runs the default test suite (`pytest -q`, the pyproject's marker filter) of each given commit in its own git
# worktree, one after the other (never two at once on 2 cores), with this checkout's virtualenv; each run writes
# <out>/<label>.xml (junit, per-test times), <label>.time (/usr/bin/time -v) and <label>.out.
# LABEL=COMMIT runs `pytest -q` in one process (make test before 0a00768); LABEL=COMMIT:W runs make test's command since
# then, `OMP_NUM_THREADS=1 pytest -q -n W --dist loadgroup` (W pytest-xdist workers).
# Usage: research/speed/test_suite/run_suites.sh OUT LABEL=COMMIT[:W] [LABEL=COMMIT[:W] ...]
set -euo pipefail
root=$(git rev-parse --show-toplevel)
out=$(realpath "$1"); shift
mkdir -p "$out"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
for spec in "$@"; do
    label=${spec%%=*}; commit=${spec#*=}; workers=(); threads=()
    if [[ $commit == *:* ]]; then
        workers=(-n "${commit#*:}" --dist loadgroup); threads=(OMP_NUM_THREADS=1); commit=${commit%%:*}; fi
    tree=$(mktemp -d)/$label
    git -C "$root" worktree add -q --detach "$tree" "$commit"
    # 6bb7686's tests/test_spaces.py imports gradio unguarded; the spaces tests need the spaces extra, not installed here
    ignore=(); if [ -f "$tree/tests/test_spaces.py" ] && ! "$root/.venv/bin/python" -c "import gradio" 2>/dev/null; then
        ignore=(--ignore=tests/test_spaces.py); fi
    echo "== $label ($commit) start $(date -u +%T)"
    (cd "$tree" && env "${threads[@]}" PYTHONPATH="$tree" /usr/bin/time -v -o "$out/$label.time" "$root/.venv/bin/python" -m pytest -q \
        -p no:cacheprovider "${ignore[@]}" "${workers[@]}" --junitxml="$out/$label.xml" > "$out/$label.out" 2>&1) || true
    echo "== $label end $(date -u +%T): $(tail -1 "$out/$label.out")"
    git -C "$root" worktree remove --force "$tree"
done
