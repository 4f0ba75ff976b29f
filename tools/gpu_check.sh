#!/usr/bin/env bash
# Issue 20's checks on a GPU machine (a lent one, through the `device` tool,
# whose python3 holds a CUDA torch), each stage bounded in time:
#
#   bash tools/gpu_check.sh [STAGE ...]     (default: env build tests sanitizer bench)
#
#   env        the GPU, driver, torch and CUDA versions, the tools at hand
#   build      the extension with the CUDA kernels, in place (TORCH_CUDA_ARCH_LIST,
#              default 9.0: H100/H200), then tools/check_cuda_build.py
#   tests      the GPU tests: test_cuda_kernels.py, test_gpu_data_path.py and
#              test_examples_smoke.py (whose runs with GLT's GPU flags are among them);
#              -rs lists what was skipped (only multi-GPU tests should be)
#   all-tests  the whole suite (long: not in the default list)
#   sanitizer  compute-sanitizer memcheck over test_cuda_kernels.py
#   racecheck  compute-sanitizer racecheck over the same (not in the default list)
#   bench      benchmarks/bench_gpu_sampler.py and bench_gpu_feature.py
#   train      benchmarks/bench_gpu_train.py (not in the default list)
#   threads    benchmarks/bench_sampler.py --threads 1 2 4 8 16: issue 23's CPU sampler
#              scaling on the machine's cores (not in the default list)
#   dist       benchmarks/bench_dist_sampling.py --gpu 0 (not in the default list; its METIS
#              partitioning needs pymetis: carry its wheel)
#
# Each stage writes $OUT/<stage>.log (OUT defaults to ./gpu_check_out) and a
# line to $OUT/summary.txt: its exit status and seconds. STAGE_TIMEOUT (s,
# default 240) bounds each stage; the build is kept between calls on a warm
# machine, so later calls can name only the stages left.
set -u
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
PY=${PY:-python3}
STAGE_TIMEOUT=${STAGE_TIMEOUT:-240}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
GPU_TESTS=(test/test_cuda_kernels.py test/test_gpu_data_path.py test/test_examples_smoke.py)

stage_env() {
  nvidia-smi || true
  nproc
  "$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda,
"GPU", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
  "$PY" -c 'import torch_geometric; print("torch_geometric", torch_geometric.__version__)' || true
  "$PY" -c 'import pyg_lib; print("pyg_lib", pyg_lib.__version__)' || echo 'pyg_lib: not importable'
  command -v nvcc compute-sanitizer nsys ncu || true
}

stage_build() {
  # torch's CUDA headers include cusparse.h, which the CUDA wheels have and
  # the toolkit may not (as in the Makefile's `cuda` target).
  local wheels
  wheels=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/include
  [ -d "$wheels" ] && export CPATH=$wheels${CPATH:+:$CPATH}
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} CC=/usr/bin/gcc CXX=/usr/bin/g++ WITH_CUDA=ON TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} \
    MAX_JOBS=$(nproc) "$PY" setup.py -q build_ext --inplace &&
    "$PY" tools/check_cuda_build.py .
}

stage_tests() {
  "$PY" -m pytest -q -rs -p no:cacheprovider --timeout 300 "${GPU_TESTS[@]}"
}

stage_all_tests() {
  "$PY" -m pytest -q -rs -p no:cacheprovider --timeout 600 -n 8
}

stage_sanitizer() {
  compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
    "$PY" -m pytest -q -p no:cacheprovider test/test_cuda_kernels.py
}

stage_racecheck() {
  compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 \
    "$PY" -m pytest -q -p no:cacheprovider test/test_cuda_kernels.py
}

stage_bench() {
  "$PY" benchmarks/bench_gpu_sampler.py && "$PY" benchmarks/bench_gpu_feature.py
}

stage_train() {
  "$PY" benchmarks/bench_gpu_train.py
}

stage_threads() {
  "$PY" benchmarks/bench_sampler.py --threads 1 2 4 8 16
}

stage_dist() {
  "$PY" benchmarks/bench_dist_sampling.py --gpu 0
}

# One stage, run by the loop below in a process of its own (under timeout).
if [ "${1:-}" = --stage ]; then
  "stage_${2//-/_}"
  exit $?
fi

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(env build tests sanitizer bench)
status=0
for stage in "${stages[@]}"; do
  if ! declare -F "stage_${stage//-/_}" >/dev/null; then
    echo "unknown stage: $stage" | tee -a "$OUT/summary.txt"
    status=2
    continue
  fi
  start=$(date +%s)
  timeout --kill-after=10 "$STAGE_TIMEOUT" bash "$0" --stage "$stage" >"$OUT/$stage.log" 2>&1
  rc=$?
  line="$stage: exit $rc in $(($(date +%s) - start)) s"
  [ $rc -eq 124 ] && line="$line (timed out after $STAGE_TIMEOUT s)"
  echo "$line" | tee -a "$OUT/summary.txt"
  tail -n 5 "$OUT/$stage.log"
  [ $rc -ne 0 ] && status=1
done
exit $status
