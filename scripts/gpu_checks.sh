#!/usr/bin/env bash
# The accelerator checks in one command: the `pytest -m cuda` group, then the speed benchmarks with a
# random-weight model of a real shape (speed does not depend on weights; nothing is downloaded).
#
#   bash scripts/gpu_checks.sh tests      # the cuda group
#   bash scripts/gpu_checks.sh monitor    # benchmarks.monitor_overhead (with FOD), random llama3-8b, bfloat16
#   bash scripts/gpu_checks.sh offline    # benchmarks.offline_throughput, same model
#   bash scripts/gpu_checks.sh serve      # benchmarks.serve_load --device cuda, same model saved to a folder
#   bash scripts/gpu_checks.sh preset     # benchmarks.preset_cost --random-weights: the quality preset's cost
#   bash scripts/gpu_checks.sh replicas   # serve_load on Ray Serve: 1, 2 and 4 CPU replicas of SmolLM2 (4 CPUs
#                                         # each), then one GPU replica of the random model beside the plain server
#   bash scripts/gpu_checks.sh packed     # benchmarks.packed_forward: a packed forward against the padded step
#                                         # and a forward per flush, random model; then serve_load with the
#                                         # server's rounds packed (decides the pool's GPU default)
#   bash scripts/gpu_checks.sh all        # the first five, in that order (several names run in the order given)
#
# Settings (environment): PYTHON (default .venv/bin/python, else python3), DEVICE (cuda), SHAPE (llama3-8b),
# DTYPE (bfloat16), TOKENIZER (a saved tokenizer's folder; default SmolLM2's, embedded), LOGS (folder for the
# logs; default $OUT where set, else benchmarks/runs/gpu), SERVE_ARGS (extra serve_load arguments).
# `CHECK=1` shrinks every step to seconds (the tiny shape on CPU) to check the script itself.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
DEVICE=${DEVICE:-cuda}
SHAPE=${SHAPE:-llama3-8b}
DTYPE=${DTYPE:-bfloat16}
LOGS=${LOGS:-${OUT:-benchmarks/runs/gpu}}
TOK=()
[ -n "${TOKENIZER:-}" ] && TOK=(--tokenizer "$TOKENIZER")
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
mkdir -p "$LOGS"

if [ -n "${CHECK:-}" ]; then
    SHAPE=tiny DEVICE=cpu DTYPE=float32
    MON=(--tokens 8 --rounds 1 --prompts 1) OFF=(--limit 2 --rounds 1 --batch-size 2)
    SRV=(--tokens 8 --requests 2 --concurrency 1,2 --rounds 1) PRE=(--presets default --limit 1 --tokens 4 --rounds 1)
    REP=(--tokens 8 --requests 4 --concurrency 2 --rounds 1 --doc-sets 2) REPLICAS=${REPLICAS:-1} CPUS=1 GPUS=0
    CPU_MODEL=${CPU_MODEL:-/tmp/random-tiny}
    PCK=(--rows 2 --cache 8 --flush-cache 4 --width 3 --flushes 0,1 --rounds 1 --repeats 1)
    export SYNCHECK_TEST_DEVICE=cpu
else
    MON=(--tokens 128 --rounds 3 --prompts 2) OFF=(--limit 32 --rounds 3 --batch-size 16)
    SRV=(--tokens 64 --requests 8 --concurrency 1,4,8 --rounds 3 --with-fod) PRE=(--limit 8 --tokens 128 --rounds 3)
    REP=(--tokens 64 --requests 32 --concurrency 8 --rounds 1 --doc-sets 4) REPLICAS=${REPLICAS:-1 2 4} CPUS=4 GPUS=1
    CPU_MODEL=${CPU_MODEL:-smollm2-135m}
    PCK=(--rounds 5)
fi

step() {  # name, command...: run it, keep its log, say how it ended
    local name=$1; shift
    echo "== $name: $*" | tee "$LOGS/$name.log"
    local t0=$SECONDS
    "$@" 2>&1 | tee -a "$LOGS/$name.log"
    local rc=$?
    echo "== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOGS/$name.log"
}

env_info() {
    { command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
      "$PYTHON" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__,
'cuda', torch.cuda.is_available() and torch.cuda.get_device_name(0))"; } 2>&1 | tee "$LOGS/env.log"
}

run_tests() { step cuda_tests "$PYTHON" -m pytest -m cuda tests/test_cuda.py -q -p no:cacheprovider -rs; }
run_monitor() {
    step monitor_overhead "$PYTHON" -m benchmarks.monitor_overhead --shape "$SHAPE" "${TOK[@]}" --device "$DEVICE" \
        --dtype "$DTYPE" --fod "${MON[@]}"
}
run_offline() {
    step offline_throughput "$PYTHON" -m benchmarks.offline_throughput --shape "$SHAPE" "${TOK[@]}" --device "$DEVICE" \
        --dtype "$DTYPE" "${OFF[@]}"
}
run_serve() {  # [log name]
    local dir=${MODEL_DIR:-/tmp/random-$SHAPE} name=${1:-serve_load}
    [ -f "$dir/config.json" ] || step save_model "$PYTHON" -m benchmarks.random_shape "$SHAPE" "$dir" "${TOK[@]}" \
        --device "$DEVICE" --dtype "$DTYPE"
    # shellcheck disable=SC2086
    step "$name" "$PYTHON" -m benchmarks.serve_load --model "$dir" --device "$DEVICE" --dtype "$DTYPE" "${SRV[@]}" \
        ${SERVE_ARGS:-}
}

run_replicas() {  # Ray Serve replica scaling on the CPUs, then one GPU replica beside the plain GPU server
    local dir=${MODEL_DIR:-/tmp/random-$SHAPE}
    if [ -n "${CHECK:-}" ] && [ ! -f "$CPU_MODEL/config.json" ]; then
        step save_tiny "$PYTHON" -m benchmarks.random_shape tiny "$CPU_MODEL" "${TOK[@]}" --device cpu --dtype float32
    fi
    for n in $REPLICAS; do
        step "replicas_cpu_$n" "$PYTHON" -m benchmarks.serve_load --model "$CPU_MODEL" --device cpu "${REP[@]}" \
            --ray-replicas "$n" --replica-cpus "$CPUS" --replica-threads "$CPUS"
    done
    [ -f "$dir/config.json" ] || step save_model "$PYTHON" -m benchmarks.random_shape "$SHAPE" "$dir" "${TOK[@]}" \
        --device "$DEVICE" --dtype "$DTYPE"
    step replicas_gpu "$PYTHON" -m benchmarks.serve_load --model "$dir" --device "$DEVICE" --dtype "$DTYPE" "${REP[@]}" \
        --ray-replicas 1 --replica-cpus "$CPUS" --replica-gpus "$GPUS"
}

run_packed() {
    step packed_forward "$PYTHON" -m benchmarks.packed_forward --shape "$SHAPE" "${TOK[@]}" --device "$DEVICE" \
        --dtype "$DTYPE" "${PCK[@]}"
    SERVE_ARGS="${SERVE_ARGS:-} --packing on" run_serve serve_load_packed
}

run_preset() {
    step preset_cost "$PYTHON" -m benchmarks.preset_cost --random-weights "${TOK[@]}" --device "$DEVICE" "${PRE[@]}"
}

env_info
for what in "${@:-all}"; do
    case "$what" in
        tests) run_tests ;;
        monitor) run_monitor ;;
        offline) run_offline ;;
        serve) run_serve ;;
        preset) run_preset ;;
        replicas) run_replicas ;;
        packed) run_packed ;;
        all) run_tests; run_monitor; run_offline; run_serve; run_preset ;;
        *) echo "usage: $0 [tests|monitor|offline|serve|preset|replicas|packed|all]..." >&2; exit 2 ;;
    esac
done
