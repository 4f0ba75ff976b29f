"""How processes that share one GPU wait on it (tools/gpu_check.sh sharing).

  python tools/probe_gpu_sharing.py [--gpu 0] [--seconds 2]

A host sync's round trip (a one-element kernel, then a wait for it: what a
sampler pays each time it reads a size) timed in one process alone, beside
other processes doing the same, and beside processes that keep the GPU busy
(back-to-back 1 ms kernels of one thread block). Without MPS the GPU runs
one process's context at a time, in time slices, so a sync queued behind
another context's work waits for its slice; under MPS (the stage runs this
again inside an MPS server) kernels of several processes run at once. The
table says how long a sync takes in each case: what a batch with a few
syncs pays when the trainers and sampling processes of worker mode share
a GPU.
"""

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))
from processes import all_reports  # noqa: E402

# (name, roles): each role a process; the first's syncs are the ones timed
SCENARIOS = [
  ('alone', ['sync']),
  ('beside 1 syncing', ['sync', 'sync']),
  ('beside 3 syncing', ['sync', 'sync', 'sync', 'sync']),
  ('beside 1 busy', ['sync', 'busy']),
  ('beside 3 busy', ['sync', 'busy', 'busy', 'busy']),
]
BUSY_KERNEL_MS = 1.0
START_TIMEOUT_S = 120  # CUDA start-up of every process


def run_role(role: str, gpu: int, seconds: float, ready, results) -> None:
  r"""One process of a scenario: after every process is ready, syncs (or
  keeps the GPU busy) for ``seconds``; puts its sync times (us) on
  ``results``."""
  torch.cuda.set_device(gpu)
  x = torch.zeros(1, device='cuda')
  cycles = int(BUSY_KERNEL_MS * cycles_per_ms())
  ready.wait(START_TIMEOUT_S)
  times = []
  end = time.perf_counter() + seconds
  while time.perf_counter() < end:
    if role == 'busy':
      for _ in range(8):  # keeps a few kernels queued
        torch.cuda._sleep(cycles)
      torch.cuda.synchronize()
      continue
    start = time.perf_counter()
    x.add_(1)
    torch.cuda.synchronize()
    times.append((time.perf_counter() - start) * 1e6)
  results.put((os.getpid(), times))


def cycles_per_ms() -> float:
  r"""The GPU cycles of a millisecond, timed (torch.cuda._sleep spins for a
  count of cycles)."""
  torch.cuda._sleep(1000)  # warm-up
  begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
  begin.record()
  torch.cuda._sleep(1_000_000)
  end.record()
  end.synchronize()
  return 1_000_000 / begin.elapsed_time(end)


def run_scenario(roles, gpu: int, seconds: float) -> dict:
  r"""The timed (first) process's sync round trips in us: median, p90, p99,
  and syncs per second."""
  ctx = multiprocessing.get_context('spawn')
  ready, results = ctx.Barrier(len(roles)), ctx.Queue()
  procs = [ctx.Process(target=run_role, args=(r, gpu, seconds, ready, results)) for r in roles]
  for p in procs:
    p.start()
  try:
    timeout = START_TIMEOUT_S + seconds + 60
    reports = {pid: times for pid, times in all_reports(results, procs, timeout, 'a probe')}
  except BaseException:
    for p in procs:  # (the others would wait for it at the barrier)
      p.kill()
    raise
  finally:
    for p in procs:
      p.join(timeout=30)
      if p.is_alive():
        p.kill()
        p.join(timeout=10)
  times = sorted(reports[procs[0].pid])
  quantile = lambda q: times[min(len(times) - 1, int(q * len(times)))]  # noqa: E731
  return {
    'median_us': statistics.median(times),
    'p90_us': quantile(0.9),
    'p99_us': quantile(0.99),
    'syncs_per_s': len(times) / seconds,
  }


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--gpu', type=int, default=0)
  p.add_argument('--seconds', type=float, default=2.0, help='timed seconds a scenario')
  p.add_argument('--label', default='', help="what runs the GPU's processes (e.g. 'MPS')")
  p.add_argument('--results', type=Path, help='writes the table as JSON into this folder')
  args = p.parse_args()
  if not torch.cuda.is_available():
    raise SystemExit('needs a GPU')
  rows = []
  for name, roles in SCENARIOS:
    timed = run_scenario(roles, args.gpu, args.seconds)
    rows.append(dict(scenario=name, processes=len(roles), **timed))
  title = f'Host sync round trip on GPU {args.gpu}{f" ({args.label})" if args.label else ""}'
  print(f'**{title}**\n')
  print('| scenario | processes | median, us | p90, us | p99, us | syncs/s |')
  print('|---|--:|--:|--:|--:|--:|')
  for r in rows:
    print(
      f'| {r["scenario"]} | {r["processes"]} | {r["median_us"]:.1f} | {r["p90_us"]:.1f} '
      f'| {r["p99_us"]:.1f} | {r["syncs_per_s"]:.0f} |'
    )
  if args.results:
    args.results.mkdir(parents=True, exist_ok=True)
    name = f'probe_gpu_sharing{"_" + args.label.lower() if args.label else ""}.json'
    (args.results / name).write_text(json.dumps({'title': title, 'rows': rows}, indent=1))


if __name__ == '__main__':
  main()
