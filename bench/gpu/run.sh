#!/usr/bin/env bash
# Run the GPU benchmark on a machine with one NVIDIA GPU, from what bench/gpu/build.sh put in bench/gpu/carry/:
# unpack the packages and the two sglang trees (pristine, patched), start one server per configuration in turn
# (never two at once), then print the table (report.py). Logs and per-server JSON go to $OUT (default
# bench/results/gpu). Usage: bench/gpu/run.sh [CONFIG ...]   (default: nospec spec fallback fallback-skip)
# Environment: BENCH_CONCURRENCY (1,16,64,128), BENCH_THRESHOLD (16), BENCH_TIMEOUT per server (s, 240).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
final=${OUT:-$here/../results/gpu}
out=$final/run

work=${BENCH_WORK:-/tmp/specpatch-gpu}
mkdir -p "$out" "$work"
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(nospec spec fallback fallback-skip)

if [ ! -d "$work/site" ]; then
    tar -C "$work" -xJf "$here/carry/site.tar.xz"
    mkdir -p "$work/orig" "$work/patched"
    tar -C "$work/orig" -xJf "$here/carry/sglang.tar.xz"
    tar -C "$work/patched" -xJf "$here/carry/sglang.tar.xz"
    tar -C "$work/patched" -xJf "$here/carry/patched.tar.xz"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)' | tee -a "$out/gpu.txt"

for config in "${configs[@]}"; do
    tree=patched
    case $config in nospec|spec|adaptive-skip) tree=${BENCH_BASELINE_TREE:-orig} ;; esac
    echo "== $config (sglang tree: $tree)"
    SPECPATCH_BENCH_HIDE_FLASHINFER_NORM=1 SPECPATCH_BENCH_STUB_DSA_BACKEND=1 PYTHONPATH=$here:$work/$tree:$work/site PYTHONUNBUFFERED=1 timeout "${BENCH_TIMEOUT:-240}" \
        python3 "$here/serve_bench.py" --config "$config" --tree "$tree" --out "$out/$config.json" \
        --concurrency "${BENCH_CONCURRENCY:-1,16,64,128}" --threshold "${BENCH_THRESHOLD:-16}" ${BENCH_NO_CROSSING:+--no-crossing} \
        >"$out/$config.log" 2>&1
    echo "   exit $? ($(grep -c . "$out/$config.log") log lines)"; grep -E '^\[' "$out/$config.log" | sed 's/^/   /'
    grep -E 'Error|error|Traceback' "$out/$config.log" | head -5 | sed 's/^/   ! /'
    pkill -f 'sglang::' 2>/dev/null; pkill -f serve_bench.py 2>/dev/null; sleep 2
done
python3 "$here/report.py" "$out" | tee "$out/table.md"
cp "$out/table.md" "$final/table.md"
# everything in one file (a lent machine returns at most 8 files)
tar -C "$final" -czf "$final/gpu-results.tar.gz" run
