#!/usr/bin/env bash
# Build what bench/gpu carries to a GPU machine that reaches no package registry (at most 64 MiB):
#   bench/gpu/carry/site.tar.xz        the packages of requirements.txt, unpacked from their cp312 wheels, less what a
#                                      triton-attention, pytorch-sampling run never loads (FA3's 1 GB flash_ops, sm100
#                                      kernels, FlashMLA, mscclpp, flashinfer's JIT sources)
#   bench/gpu/carry/sglang.tar.xz      sglang $BENCH_SGLANG (default 0.5.13) as released (pristine)
#   bench/gpu/carry/patched.tar.xz     the files `specpatch apply dynamic-spec-disable` changes in it
# Another release: BENCH_SGLANG=0.5.12 bench/gpu/build.sh takes requirements.txt with the pins of
# requirements-0.5.12.txt in place of the same packages' (sglang and what it pins: kernel, flashinfer, ...).
# Wheels are cached in $SPECPATCH_CACHE/gpu-wheels (default ~/.cache/specpatch; gpu-wheels-<release> for another
# release). Needs the CPU environment's specpatch (scripts/cpu-env.sh .venv). Usage: bench/gpu/build.sh [VENV]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${1:-$root/.venv}
version=${BENCH_SGLANG:-0.5.13}
cache=${SPECPATCH_CACHE:-$HOME/.cache/specpatch}/gpu-wheels
carry=$here/carry
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
requirements=$stage/requirements.txt
if [ "$version" = 0.5.13 ]; then
    cp "$here/requirements.txt" "$requirements"
else
    overrides=$here/requirements-$version.txt
    [ -f "$overrides" ] || { echo "build: no $overrides (the pins of sglang $version)" >&2; exit 2; }
    cache=$cache-$version
    pinned=$(grep -vE '^\s*(#|$)' "$overrides" | sed 's/==.*//' | tr 'A-Z_' 'a-z-')
    grep -vE '^\s*(#|$)' "$here/requirements.txt" | while read -r req; do
        name=$(echo "${req%%==*}" | tr 'A-Z_' 'a-z-')
        echo "$pinned" | grep -qx "$name" || echo "$req"
    done >"$requirements"
    grep -vE '^\s*(#|$)' "$overrides" >>"$requirements"
fi
mkdir -p "$cache" "$carry"

platforms=()
for p in manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux_2_35; do
    platforms+=(--platform "${p}_x86_64")
done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)

grep -vE '^\s*(#|$)' "$requirements" | while read -r req; do
    name=${req%%==*}
    stem=$(echo "$name" | tr '-' '_' | tr 'A-Z' 'a-z')
    if [[ "$req" == *==* ]]; then pattern="${stem}-${req##*==}-*.whl"; else pattern="${stem}-[0-9]*.whl"; fi
    if ! compgen -G "$cache/$pattern" >/dev/null && ! compgen -G "$cache/$(echo "$stem" | sed 's/_/-/g')-*.whl" >/dev/null; then
        python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
            --python-version 3.12 --implementation cp "${platforms[@]}" -d "$cache" "$req" 2>&1 | grep -v '^WARNING' || true
    fi
done

site=$stage/site
stamp=$( (cat "$requirements" "$0"; ls "$cache") | sha256sum | cut -d' ' -f1)
if [ -f "$carry/site.tar.xz" ] && [ "$(cat "$carry/site.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "build: $carry/site.tar.xz is up to date" >&2
else
mkdir -p "$site"
for whl in "$cache"/*.whl; do
    case $(basename "$whl") in sglang-"$version"-*) continue ;; esac
    unzip -q -o "$whl" -d "$site"
done
# what this benchmark never loads: FA3 (1 GB), sm100 and FlashMLA kernels, mscclpp, flashinfer's JIT sources,
# xgrammar's static library, jedi's typeshed stubs, zstandard's CFFI backend (its C backend is the one imported)
(cd "$site" && rm -rf sgl_kernel/flash_ops.abi3.so sgl_kernel/sm100 sgl_kernel/flashmla_ops.abi3.so lib lib64 include \
    _mscclpp* flashinfer/data xgrammar/lib/*.a jedi/third_party/typeshed zstandard/_cffi.*.so)
# purelib / platlib folders of .data go to the top, as pip would install them
for data in "$site"/*.data; do
    [ -d "$data" ] || continue
    for lib in purelib platlib; do [ -d "$data/$lib" ] && cp -a "$data/$lib/." "$site/"; done
    rm -rf "$data"
done
find "$site" -name '__pycache__' -prune -exec rm -rf {} +
tar -C "$stage" -cJf "$carry/site.tar.xz" site
echo "$stamp" >"$carry/site.stamp"
fi

sgl=$stage/sglang
mkdir -p "$sgl/orig"
unzip -q -o "$cache"/sglang-"$version"-cp312-*.whl -d "$sgl/orig"
rm -rf "$sgl/orig"/sglang-"$version".data
cp -a "$sgl/orig" "$sgl/patched"
"$venv/bin/specpatch" --quiet apply dynamic-spec-disable --target "$sgl/patched" --assume-version "$version" --no-smoke
changed=$(cd "$sgl" && diff -rq orig patched | awk '/^Files/{print $4}' | sed 's#^patched/##' || true)
echo "$changed" >"$sgl/patched-files.txt"
# sglang.multimodal_gen (the diffusion server, 15 MB from 0.5.19) is never imported by an LLM server: left out so that
# 0.5.19's tree fits the 64 MiB carry; so are the Rust extensions of the benchmark tools and the multimodal processors
# (rust_extensions/_bench, _multimodal: 11 MB), for 0.5.23's
tar -C "$sgl/orig" --exclude=sglang/multimodal_gen --exclude='sglang/srt/rust_extensions/_bench.*' \
    --exclude='sglang/srt/rust_extensions/_multimodal.*' -cJf "$carry/sglang.tar.xz" sglang sglang-"$version".dist-info
(cd "$sgl/patched" && tar -cJf "$carry/patched.tar.xz" $changed)
ls -l "$carry"
du -cb "$carry"/*.tar.xz | tail -1 | awk '{printf "bench/gpu/carry: %.1f MiB (limit 64 MiB with the checkout)\n", $1/1048576}'
