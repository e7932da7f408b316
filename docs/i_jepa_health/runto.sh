#!/bin/bash
# runto.sh NAME UNTIL_STEP args... : run ref.py, stop once the diag line for UNTIL_STEP is printed
name=$1; until=${UNTIL:-300}; shift 2
OMP_NUM_THREADS=1 nice -n 10 /work/main/.venv/bin/python -W ignore ref.py "$@" > $name.log 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
  if grep -q "\"step\": $until," $name.log; then kill $pid; break; fi
  sleep 3
done
