#!/usr/bin/env bash
# The GPU checks on a GPU machine (its python3 holding a CUDA torch), each
# stage bounded in time (docs/cuda.md):
#
#   bash tools/gpu_check.sh [STAGE ...]     (default: env build tests kernels sanitizer bench)
#
#   env        the GPU, driver, torch and CUDA versions, the tools at hand
#   build      the extension with the CUDA kernels, in place (TORCH_CUDA_ARCH_LIST,
#              default 9.0: H100/H200), then tools/check_cuda_build.py; an extension
#              already in place that loads with every CUDA kernel and was built from
#              this tree's sources (one built elsewhere against the machine's torch
#              and carried with its .sources record: make device-ext) is kept, not rebuilt
#   tests      the GPU data path, CUDA tensors sent through a channel (and through the
#              consumer's GPU mirror: test_device_mirror.py), and the examples
#              with GLT's GPU flags, graph modes 'ZERO_COPY' and 'CUDA'
#              (test_gpu_data_path.py, test_gpu_sharing.py, test_gather_checks.py, test_channel.py's CUDA
#              test, the *_gpu_flags
#              tests of test_examples_smoke.py); -rs lists
#              what was skipped (only multi-GPU tests should be)
#   syncs      test_gpu_syncs.py: the host syncs of a batch sampled on the GPU
#              (one a sampled batch, two a loader's batch with features and labels),
#              and where each one is; test_whole_batch.py and test_partitioned_batch.py:
#              its batches (over a host's partitions too) against the hop-by-hop engine's,
#              temporal and disjoint hops drawn by the inducer against the ops' answers
#   kernels    test_cuda_kernels.py: every CUDA op against the host harness (which
#              it compiles first, about a minute); test_op_inputs.py: every op on the
#              GPU given each argument wrong in turn, no kernel faulting
#   all-tests  the whole suite (long: not in the default list)
#   sanitizer  compute-sanitizer memcheck over test_cuda_kernels.py and the
#              single-process tests of test_gpu_data_path.py and test_gpu_sharing.py
#   racecheck  compute-sanitizer racecheck over the same (not in the default list)
#   bench      benchmarks/bench_gpu_sampler.py and bench_gpu_feature.py, beside GLT
#              0.2.4's CUDA build where GLT_GPU (default build/glt-gpu/pkg: make
#              glt-gpu-peer, carried) holds it
#   gather-dims  bench_gpu_feature.py at dim 128 and 64 (512- and 256-byte rows, whole
#              128-byte lines): how much of the UVA and GPU gathers' gap at dim 100 is
#              row alignment (not in the default list)
#   train      benchmarks/bench_gpu_train.py $TRAIN_ARGS (not in the default list)
#   threads    benchmarks/bench_sampler.py --threads 1 2 4 8 16 (best of 3): the CPU sampler's
#              scaling on the machine's cores; 8 and 16 again with helpers spinning 1 ms
#              (GLT_WORKER_SPIN_US=1000), in LOGS/threads_spinning (not in the default list)
#   ab         benchmarks/ab_builds.py: this tree against each source tree of AB_TREES (each
#              with its extension built for this machine's Python and torch and carried, e.g.
#              a git worktree under build/ built with WITH_CUDA=OFF: only its
#              graphlearn_torch/ is needed) at AB_THREADS (default: the machine's cores),
#              2 rounds each; the environment passes to both (not in the default list)
#   cpu-profile  tools/profile_cpu_sampler.py: the CPU sampler under perf at 1, 2, 4, 8
#              and 16 threads, the top symbols by self time of each in
#              LOGS/cpu_profile/default/perf_t<threads>.txt; again at 4, 8 and 16 with
#              each hop's nodes inserted by one thread beside the draws alone, none
#              left to every thread after them (GLT_PARALLEL_INSERT_THREADS=1024), in
#              LOGS/cpu_profile/overlapped_insert; at 8 and 16 with idle helper threads
#              spinning 1 ms before they sleep (GLT_WORKER_SPIN_US=1000: across a batch's
#              hops), in LOGS/cpu_profile/spinning (not in the default list)
#   channel    benchmarks/bench_channel.py --gpu 0 --gb 2: batch-shaped CUDA messages from a
#              producer process to the consumer on one GPU, through the consumer's GPU mirror,
#              through pinned host memory, and by torch.multiprocessing's CUDA IPC a tensor
#              (not in the default list)
#   dist       benchmarks/bench_dist_sampling.py --gpu 0 $DIST_ARGS (not in the default list; its METIS
#              partitioning needs pymetis: carry its wheel; 540 s unless TIMEOUT_dist says;
#              DIST_ARGS='--cache_ratio 0' leaves out the cache rows and their partitioning)
#   dist-mps   the dist stage with the trainers' and sampling processes' CUDA work through
#              one MPS server (nvidia-cuda-mps-control, started and stopped here), in
#              LOGS/results_mps: how much of worker mode's gap on one GPU is the GPU
#              time-slicing between processes (not in the default list)
#   sharing    tools/probe_gpu_sharing.py: a host sync's round trip in one process alone and
#              beside 1 and 3 others syncing or keeping the GPU busy, then again inside an MPS
#              server: what a sync costs where processes share the GPU (time slices); about a
#              minute (not in the default list)
#   dist-profile  bench_dist_sampling.py --gpu 0 (500,000 nodes, 30 batches a row, no cache
#              rows) with BENCH_PROFILE_DIR=LOGS/dist_profile: each trainer's ops by self CPU
#              and device time over its timed batches (a collocated trainer's include its
#              sampling: glt::sample_batch, glt::collect_features, glt::encode_batch); not in
#              the default list; pymetis as for dist
#   profile    tools/profile_gpu_sampler.py under Nsight Systems (each kernel's time and the
#              host's CUDA calls over 20 'CUDA' batches, each gathering its rows from GPU
#              memory; again without CUDA graphs, gathering through UVA) and Nsight
#              Compute (each kernel of one batch: throughput against the device's peak,
#              memory traffic, warp stall reasons, occupancy); not in the default list; 420 s
#              unless TIMEOUT_profile says
#   faults     benchmarks/fault_suite.py --gpu: the worker-mode faults (a trainer, a sampling
#              process, the whole job killed) in 'ZERO_COPY' and 'CUDA' modes, nothing left
#              behind, the GPU's memory back (not in the default list; 540 s unless
#              TIMEOUT_faults says)
#   memory     benchmarks/bench_dist_memory.py --gpu 0 $MEMORY_ARGS: host, pinned and GPU memory
#              of worker mode, 1 trainer x 1 sampling process a partition against 2 x 2, in 'CPU',
#              'ZERO_COPY' and 'CUDA' modes, one run of each job (MEMORY_ARGS='--modes ZERO_COPY'
#              for some, '--rounds 3' for the median of 3); not in
#              the default list; pymetis as for dist; 420 s unless TIMEOUT_memory says
#
# A STAGE written A+B runs stages A and B at the same time (correctness
# stages only: they share the machine, so never time anything beside another).
#
# Each stage writes LOGS/<stage>.log (LOGS defaults to OUT, OUT to
# ./gpu_check_out) and a line to LOGS/summary.txt: its exit status and
# seconds. With ARCHIVE set, LOGS is packed into that .tgz after every stage,
# so a run cut short still keeps what it finished. The benchmark stages
# write their results JSON to LOGS/results, named *_gpu.json (copy them to
# benchmarks/results and run make bench-report). Time limits, in seconds:
#   STAGE_TIMEOUT     each stage (default 240), or TIMEOUT_<stage> for one stage
#   DEADLINE          the whole run, from its start (default: none); a stage
#                     gets at most what is left of it, and none once less
#                     than MIN_STAGE_S (default 20) is left
# The build is kept between calls on a warm machine, so later calls can name
# only the stages left.
set -u
OUT=${OUT:-gpu_check_out}
LOGS=${LOGS:-$OUT}
mkdir -p "$LOGS"
PY=${PY:-python3}
STAGE_TIMEOUT=${STAGE_TIMEOUT:-240}
# the stages that start distributed jobs take longer than the others
TIMEOUT_kernels=${TIMEOUT_kernels:-420}  # the host harness's compile, then every op
TIMEOUT_dist=${TIMEOUT_dist:-540}
TIMEOUT_dist_mps=${TIMEOUT_dist_mps:-540}
TIMEOUT_memory=${TIMEOUT_memory:-420}
TIMEOUT_faults=${TIMEOUT_faults:-540}
TIMEOUT_profile=${TIMEOUT_profile:-420}
MIN_STAGE_S=${MIN_STAGE_S:-20}
RUN_START=${RUN_START:-$(date +%s)}
export RUN_START
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# The host harness (test/kernel_harness.py) compiles with $CXX: the system
# compilers, which link the C++ runtime dynamically, as the build needs.
export CC=${CC:-/usr/bin/gcc} CXX=${CXX:-/usr/bin/g++}
RESULTS=(--results "$LOGS/results" --results-suffix _gpu)
# GLT's package built with its CUDA kernels (make glt-gpu-peer), run beside ours.
GLT_GPU=${GLT_GPU:-build/glt-gpu/pkg}
PEER=()
[ -d "$GLT_GPU/graphlearn_torch" ] && PEER=(--glt-gpu "$GLT_GPU")
SANITIZED=(test/test_cuda_kernels.py test/test_gpu_data_path.py test/test_gpu_sharing.py
  test/test_gather_checks.py
  test/test_whole_batch.py::test_gpu_batches_equal_the_hop_by_hop_engine
  test/test_partitioned_batch.py::test_gpu_batches_equal_the_partitioned_hop_by_hop_driver
  test/test_launched_batches.py::test_gpu_launched_batches_are_the_sampled_batches
  test/test_launched_batches.py::test_gpu_launched_link_batches_are_the_sampled_ones
  test/test_temporal_sampler.py::test_fused_draws_equal_answered_hops
  -k 'not is_uniform and not two_partition')

stage_env() {
  nvidia-smi || true
  nproc
  lscpu || true  # cores per socket and threads per core: what 16 CPU threads are
  # whether the CPU sampler's arrays get 2 MB pages (cpu/runtime/huge_pages.h)
  grep -H . /sys/kernel/mm/transparent_hugepage/enabled \
    /sys/kernel/mm/transparent_hugepage/shmem_enabled || true
  "$PY" -c 'import torch; print("torch", torch.__version__, torch.version.git_version, "CUDA",
torch.version.cuda, "GPU", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
  "$PY" -c 'import torch_geometric; print("torch_geometric", torch_geometric.__version__)' || true
  "$PY" -c 'import pyg_lib; print("pyg_lib", pyg_lib.__version__)' || echo 'pyg_lib: not importable'
  "$PY" -c 'import pymetis; print("pymetis", pymetis.__version__)' || echo 'pymetis: not importable'
  command -v nvcc compute-sanitizer nsys ncu nvidia-cuda-mps-control "$CXX" || true
  nvcc --version | tail -n 2
}

stage_build() {
  if "$PY" tools/check_cuda_build.py --stamp check .; then
    echo "the extension in place loads with every CUDA kernel and was built from this tree's sources: kept"
    return 0
  fi
  # torch's CUDA headers include cusparse.h, which the CUDA wheels have and
  # the toolkit may not (as in the Makefile's `cuda` target).
  local wheels
  wheels=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/include
  [ -d "$wheels" ] && export CPATH=$wheels${CPATH:+:$CPATH}
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} WITH_CUDA=ON TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} \
    MAX_JOBS=$(nproc) "$PY" setup.py -q build_ext --inplace &&
    "$PY" tools/check_cuda_build.py --stamp write .
}

stage_tests() {
  "$PY" -m pytest -q -rs -p no:cacheprovider --timeout 300 test/test_gpu_data_path.py \
    test/test_gpu_sharing.py test/test_gather_checks.py \
    test/test_channel.py::test_cuda_tensors_are_copied_in_after_their_kernels \
    test/test_device_mirror.py \
    test/test_examples_smoke.py::test_train_sage_smoke_with_gpu_flags \
    test/test_examples_smoke.py::test_worker_mode_smoke_with_gpu_flags
}

stage_syncs() {
  "$PY" -m pytest -q -rs -p no:cacheprovider --timeout 300 test/test_gpu_syncs.py \
    test/test_whole_batch.py::test_gpu_batches_equal_the_hop_by_hop_engine \
    test/test_partitioned_batch.py::test_gpu_batches_equal_the_partitioned_hop_by_hop_driver \
    test/test_launched_batches.py::test_gpu_launched_batches_are_the_sampled_batches \
    test/test_launched_batches.py::test_gpu_launched_link_batches_are_the_sampled_ones \
    test/test_temporal_sampler.py::test_fused_draws_equal_answered_hops
}

stage_kernels() {
  "$PY" -m pytest -q -rs -p no:cacheprovider --timeout 300 test/test_cuda_kernels.py \
    test/test_op_inputs.py
}

stage_all_tests() {
  "$PY" -m pytest -q -rs -p no:cacheprovider --timeout 600 -n 8
}

stage_sanitizer() {
  compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
    "$PY" -m pytest -q -p no:cacheprovider "${SANITIZED[@]}"
}

stage_racecheck() {
  compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 \
    "$PY" -m pytest -q -p no:cacheprovider "${SANITIZED[@]}"
}

stage_bench() {
  "$PY" benchmarks/bench_gpu_sampler.py "${RESULTS[@]}" "${PEER[@]}" &&
    "$PY" benchmarks/bench_gpu_feature.py "${RESULTS[@]}" "${PEER[@]}"
}

stage_gather_dims() {
  "$PY" benchmarks/bench_gpu_feature.py --dim 128 "${RESULTS[@]}" "${PEER[@]}" &&
    "$PY" benchmarks/bench_gpu_feature.py --dim 64 "${RESULTS[@]}" "${PEER[@]}"
}

stage_train() {
  "$PY" benchmarks/bench_gpu_train.py ${TRAIN_ARGS:-} "${RESULTS[@]}"
}

stage_threads() {
  "$PY" benchmarks/bench_sampler.py --threads 1 2 4 8 16 --rounds 3 --batches 120 --tables threads \
    "${RESULTS[@]}" &&
    GLT_WORKER_SPIN_US=1000 "$PY" benchmarks/bench_sampler.py --threads 8 16 --rounds 3 \
      --batches 120 --tables threads --results "$LOGS/threads_spinning" --results-suffix _gpu
}

stage_ab() {
  local tree status=0
  [ -n "${AB_TREES:-}" ] || { echo 'AB_TREES names no tree'; return 2; }
  for tree in $AB_TREES; do
    echo "== $tree"
    "$PY" benchmarks/ab_builds.py . "$tree" --threads "${AB_THREADS:-$(nproc)}" --rounds 2 \
      --results '' || status=1
  done
  return $status
}

stage_cpu_profile() {
  "$PY" tools/profile_cpu_sampler.py --threads 1 2 4 8 16 --out "$LOGS/cpu_profile/default" &&
    GLT_PARALLEL_INSERT_THREADS=1024 "$PY" tools/profile_cpu_sampler.py --threads 4 8 16 \
      --out "$LOGS/cpu_profile/overlapped_insert" &&
    GLT_WORKER_SPIN_US=1000 "$PY" tools/profile_cpu_sampler.py --threads 8 16 --seconds 5 \
      --out "$LOGS/cpu_profile/spinning"
}

stage_channel() {
  "$PY" benchmarks/bench_channel.py --gpu 0 --gb 2 --results "$LOGS/results"
}

stage_dist() {
  "$PY" benchmarks/bench_dist_sampling.py --gpu 0 ${DIST_ARGS:-} --results "$LOGS/results"
}

# Starts an MPS server for the rest of the stage (its own process), stopped
# when the stage exits.
start_mps() {
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/glt-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/glt-mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || return 1
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  trap 'exit 143' TERM
}

stage_dist_mps() {
  start_mps || return 1
  "$PY" benchmarks/bench_dist_sampling.py --gpu 0 ${DIST_ARGS:-} --results "$LOGS/results_mps"
}

stage_sharing() {
  nvidia-smi compute-policy --list || true  # the time slice, where the driver says
  "$PY" tools/probe_gpu_sharing.py --results "$LOGS/results" &&
    start_mps && "$PY" tools/probe_gpu_sharing.py --label MPS --results "$LOGS/results"
}

stage_dist_profile() {
  BENCH_PROFILE_DIR="$LOGS/dist_profile" "$PY" benchmarks/bench_dist_sampling.py --gpu 0 \
    --num_nodes 500000 --batches 30 --cache_ratio 0 --results "$LOGS/dist_profile"
}

stage_profile() {
  nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop --stats=true \
    --force-overwrite=true -o /tmp/glt_sampler_profile \
    "$PY" tools/profile_gpu_sampler.py --batches 20 --features gpu &&
    nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop --stats=true \
      --force-overwrite=true -o /tmp/glt_sampler_profile_ahead \
      "$PY" tools/profile_gpu_sampler.py --batches 20 --features gpu --launch-ahead &&
    GLT_CUDA_GRAPHS=0 nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop \
      --stats=true --force-overwrite=true -o /tmp/glt_sampler_profile_nographs \
      "$PY" tools/profile_gpu_sampler.py --batches 20 --features uva &&
    ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section Occupancy --section LaunchStats \
      "$PY" tools/profile_gpu_sampler.py --batches 1 --features gpu
}

stage_faults() {
  "$PY" benchmarks/fault_suite.py --gpu --results "$LOGS/results"
}

stage_memory() {
  "$PY" benchmarks/bench_dist_memory.py --gpu 0 --rounds 1 ${MEMORY_ARGS:-} --results "$LOGS/results"
}

# One stage, run by run_stage below in a process of its own (under timeout).
if [ "${1:-}" = --stage ]; then
  "stage_${2//-/_}"
  exit $?
fi

# The seconds a stage may run: its own limit, cut to what is left of DEADLINE.
stage_limit() {
  local var="TIMEOUT_${1//-/_}" limit left
  limit=${!var:-$STAGE_TIMEOUT}
  if [ -n "${DEADLINE:-}" ]; then
    left=$((RUN_START + DEADLINE - $(date +%s)))
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  echo "$limit"
}

# Runs one stage under its limit; logs it and its summary line.
run_stage() {
  local stage=$1 limit start rc line
  if ! declare -F "stage_${stage//-/_}" >/dev/null; then
    echo "unknown stage: $stage" | tee -a "$LOGS/summary.txt"
    return 2
  fi
  limit=$(stage_limit "$stage")
  if [ "$limit" -lt "$MIN_STAGE_S" ]; then
    echo "$stage: not run ($limit s left of DEADLINE=$DEADLINE)" | tee -a "$LOGS/summary.txt"
    return 3
  fi
  start=$(date +%s)
  timeout --kill-after=10 "$limit" bash "$0" --stage "$stage" >"$LOGS/$stage.log" 2>&1
  rc=$?
  line="$stage: exit $rc in $(($(date +%s) - start)) s"
  [ $rc -eq 124 ] && line="$line (timed out after $limit s)"
  echo "$line" | tee -a "$LOGS/summary.txt"
  tail -n 5 "$LOGS/$stage.log"
  return $rc
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(env build tests kernels sanitizer bench)
status=0
for group in "${stages[@]}"; do
  pids=()
  for stage in ${group//+/ }; do
    run_stage "$stage" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || status=1
  done
  if [ -n "${ARCHIVE:-}" ]; then
    tar czf "$ARCHIVE.tmp" -C "$LOGS" . && mv "$ARCHIVE.tmp" "$ARCHIVE"
  fi
done
exit $status
