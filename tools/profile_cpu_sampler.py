"""Where the CPU sampler's time goes at each thread count, under perf
(tools/gpu_check.sh cpu-profile, on the 16-core GPU machine).

  python tools/profile_cpu_sampler.py [--threads 1 4 16] [--seconds 8] [--out DIR]

bench_sampler.py's workload (the ogbn-products-size power-law graph, fanout
[15, 10, 5], batches of 1024 random seeds). For each thread count, after a
few warm-up batches, batches run for ``--seconds`` while ``perf record -g``
samples this process (only that window: perf attaches to the running
process after the graph is built); the top symbols by self time go to
``DIR/perf_t<threads>.txt``, and to stdout, for each window (perf attached):
batches/s, and per batch its wall time, this thread's CPU time, the busiest
other thread's, and this thread's excess over it: the work no helper runs
beside, which bounds what more threads can gain. Without perf on the
machine, the windows are timed alone.
"""

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))
from workloads import build_graph, make_seed_batches  # noqa: E402

import graphlearn_torch as glt  # noqa: E402

FANOUT = [15, 10, 5]
WARMUP = 5
PERF_STOP_S = 120.0  # for perf to write its data once stopped

logger = logging.getLogger('profile_cpu_sampler')


@dataclass
class Window:
  r"""A window of batches, per batch: its wall time, this (the calling)
  thread's CPU time, and the busiest other thread's. The calling thread's
  excess over that helper is the batch's work no helper runs beside: what
  stops more threads from making the batch faster."""

  batches_per_s: float
  wall_ms: float
  main_ms: float
  busiest_helper_ms: float

  @property
  def main_excess_ms(self) -> float:
    return self.main_ms - self.busiest_helper_ms


def thread_cpu_seconds() -> Dict[int, float]:
  r"""Each thread of this process: its CPU seconds (user and system), by
  thread id (Linux: /proc/self/task)."""
  ticks = os.sysconf('SC_CLK_TCK')
  seconds = {}
  for tid in os.listdir('/proc/self/task'):
    try:
      with open(f'/proc/self/task/{tid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    except FileNotFoundError:
      continue  # the thread ended as the list was read
    seconds[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks
  return seconds


def run_window(sampler, inputs, seconds: float) -> Window:
  r"""Batches for ``seconds``, with each thread's CPU time over them."""
  before = thread_cpu_seconds()
  count, started = 0, time.perf_counter()
  while time.perf_counter() - started < seconds:
    sampler.sample_from_nodes(inputs[count % len(inputs)])
    count += 1
  wall = time.perf_counter() - started
  used = {tid: cpu - before.get(tid, 0.0) for tid, cpu in thread_cpu_seconds().items()}
  main = used.pop(threading.get_native_id())
  per_batch_ms = 1e3 / count
  return Window(
    count / wall,
    wall * per_batch_ms,
    main * per_batch_ms,
    max(used.values(), default=0.0) * per_batch_ms,
  )


def start_perf(data: Path) -> subprocess.Popen:
  r"""``perf record -g`` of this process into ``data`` (it attaches in
  milliseconds: a negligible part of a window)."""
  return subprocess.Popen(
    ['perf', 'record', '-F', '999', '-g', '-p', str(os.getpid()), '-o', str(data)],
    stderr=subprocess.PIPE,
    text=True,
  )


def stop_perf(perf: subprocess.Popen, data: Path, report: Path) -> None:
  r"""Stops ``perf`` and writes its top symbols by self time to ``report``."""
  if perf.poll() is not None:
    raise RuntimeError(f'perf record failed: {perf.stderr.read()}')
  perf.send_signal(signal.SIGINT)
  try:
    perf.wait(PERF_STOP_S)
  except subprocess.TimeoutExpired:
    perf.kill()
    perf.wait()
    raise
  top = subprocess.run(
    ['perf', 'report', '-i', str(data), '--no-children', '--sort', 'symbol', '--stdio',
     '--percent-limit', '0.5', '-g', 'none'],
    capture_output=True, text=True, timeout=PERF_STOP_S, check=True,
  )  # fmt: skip
  report.write_text(top.stdout)
  data.unlink()


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, nargs='+', default=[1, 4, 16])
  p.add_argument('--seconds', type=float, default=8.0, help='of each profiled window')
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument('--out', default='.', help='where the perf reports go')
  args = p.parse_args()
  logging.basicConfig(level=logging.INFO, format='%(message)s')
  with_perf = shutil.which('perf') is not None
  if not with_perf:
    logger.info('no perf on this machine: the windows are timed alone')
  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  ds, num_edges, _, _ = build_graph(args.scale, 0)
  sampler = glt.sampler.NeighborSampler(ds.graph, FANOUT, device='cpu', edge_dir='in', seed=0)
  inputs = [glt.sampler.NodeSamplerInput(s) for s in make_seed_batches(ds.num_nodes(), 8, 1024, 0)]
  for threads in args.threads:
    torch.set_num_threads(threads)
    for i in range(WARMUP):
      sampler.sample_from_nodes(inputs[i % len(inputs)])
    data = out / f'perf_t{threads}.data'
    perf = start_perf(data) if with_perf else None
    window = run_window(sampler, inputs, args.seconds)
    if perf is not None:
      stop_perf(perf, data, out / f'perf_t{threads}.txt')
    logger.info(
      '%d threads: %.1f batches/s (%s edges); a batch: %.2f ms, this thread %.2f ms CPU, the '
      'busiest helper %.2f ms, this thread alone %.2f ms', threads, window.batches_per_s,
      f'{num_edges:,}', window.wall_ms, window.main_ms, window.busiest_helper_ms,
      window.main_excess_ms,
    )  # fmt: skip


if __name__ == '__main__':
  main()
