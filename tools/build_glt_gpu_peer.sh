#!/usr/bin/env bash
# Builds GLT 0.2.4's extension with its CUDA kernels for the GPU machine
# (Python 3.12, torch 2.11.0+cu130), on a machine without a GPU, as
# `make device-ext` builds ours: GLT is then a peer the GPU benchmarks run
# beside ours (benchmarks/glt_gpu_peer.py).
#
#   tools/build_glt_gpu_peer.sh   (make glt-gpu-peer)
#
# The source is ../shared/peers/graphlearn-for-pytorch-0.2.4.tar.gz, patched
# only where CUDA 13 and torch 2.11 refuse it (benchmarks/peers/glt_cuda/,
# each patch says why). The result is build/glt-gpu/pkg/graphlearn_torch: GLT's
# Python package with its compiled module, importable with
# PYTHONPATH=build/glt-gpu/pkg (it imports as graphlearn_torch, like ours, so
# the two never share a process).
#
# Environment: DEVICE_PY (the Python 3.12 with torch 2.11.0+cu130; default
# .venv-device/bin/python), CUDA_HOME (/usr/local/cuda), CUDA_ARCHS (9.0),
# GLT_ARCHIVE (the source archive), MAX_JOBS (the cores).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
archive=${GLT_ARCHIVE:-$root/../shared/peers/graphlearn-for-pytorch-0.2.4.tar.gz}
py=${DEVICE_PY:-$root/.venv-device/bin/python}
py=$(realpath -s "$py")  # the build runs in the source folder: an absolute path
cuda_home=${CUDA_HOME:-/usr/local/cuda}
archs=${CUDA_ARCHS:-9.0}
out=$root/build/glt-gpu

test -f "$archive" || { echo "GLT's source is not at $archive" >&2; exit 1; }
test -x "$py" || { echo "no Python for the GPU machine at $py (make .venv-device/.installed)" >&2; exit 1; }

rm -rf "$out/src" "$out/pkg"
mkdir -p "$out"
tar -xzf "$archive" -C "$out"
mv "$out/graphlearn-for-pytorch-0.2.4" "$out/src"
for patch in "$root"/benchmarks/peers/glt_cuda/*.patch; do
  [ -e "$patch" ] || continue
  echo "applying $(basename "$patch")"
  patch -s -d "$out/src" -p1 < "$patch"
done

purelib=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
(
  cd "$out/src"
  # GLT's CMake asks the first python on the PATH for torch's paths.
  PATH=$(dirname "$py"):$PATH CUDA_HOME=$cuda_home CC=/usr/bin/gcc CXX=/usr/bin/g++ WITH_CUDA=ON TORCH_CUDA_ARCH_LIST=$archs \
    CPATH="$purelib/nvidia/cu13/include${CPATH:+:$CPATH}" MAX_JOBS=${MAX_JOBS:-$(nproc)} \
    "$py" setup.py -q build_ext --inplace
)

# GLT's package is graphlearn_torch/python in its tree; setup.py maps it.
mkdir -p "$out/pkg"
cp -r "$out/src/graphlearn_torch/python" "$out/pkg/graphlearn_torch"
sed -n "s/^_VERSION = '\(.*\)'/\1/p" "$out/src/setup.py" > "$out/pkg/graphlearn_torch/version.txt"
so=$(ls "$out"/pkg/graphlearn_torch/py_graphlearn_torch*.so)
strip --strip-debug "$so"
"$py" - "$so" <<'PY'
import importlib.util, sys
import torch
spec = importlib.util.spec_from_file_location('py_graphlearn_torch', sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
names = ('CUDARandomSampler', 'CUDAInducer', 'UnifiedTensor')
missing = [n for n in names if not hasattr(module, n)]
if missing:
  sys.exit(f'{sys.argv[1]} has no {", ".join(missing)}: not a CUDA build')
print(f'{sys.argv[1]}: loads (torch {torch.__version__}); {", ".join(names)}')
PY
du -sh "$out/pkg"
