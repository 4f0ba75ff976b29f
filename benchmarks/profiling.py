"""An optional torch.profiler over a benchmark's timed batches.

With ``BENCH_PROFILE_DIR`` set, every process that times batches
(``peer_protocol.timed``) profiles them (CPU, and CUDA where torch sees a
GPU; on every thread, with the host's waits on the GPU) and writes the
ops' table, by self CPU time and by self device time, to
``<dir>/<process name>-<pid>.txt``, headed by the command line and the
rate it measured (which the profiler slows: run it apart from the timed
rows). ``tools/gpu_check.sh dist-profile`` runs bench_dist_sampling so.
"""

import contextlib
import multiprocessing
import os
import sys
from typing import Dict, Iterator, Optional

import torch

PROFILE_DIR_ENV = 'BENCH_PROFILE_DIR'
ROWS = 40


@contextlib.contextmanager
def profiled_batches() -> Iterator[Optional[Dict[str, str]]]:
  r"""Profiles its block where ``$BENCH_PROFILE_DIR`` is set; yields a dict
  whose ``'summary'`` (what the block measured) heads the written table,
  else None."""
  out = os.environ.get(PROFILE_DIR_ENV)
  if not out:
    yield None
    return
  activities = [torch.profiler.ProfilerActivity.CPU]
  if torch.cuda.is_available():
    activities.append(torch.profiler.ProfilerActivity.CUDA)
  notes: Dict[str, str] = {}
  # every thread: a collocated loader samples on its event loop's threads
  config = torch.profiler._ExperimentalConfig(
    profile_all_threads=True, enable_cuda_sync_events=len(activities) > 1
  )
  with torch.profiler.profile(activities=activities, experimental_config=config) as prof:
    yield notes
  os.makedirs(out, exist_ok=True)
  name = f'{multiprocessing.current_process().name}-{os.getpid()}.txt'
  events = prof.key_averages()
  with open(os.path.join(out, name), 'w') as f:
    f.write(f'{" ".join(sys.argv)}\n{notes.get("summary", "")}\n\nby self CPU time\n')
    f.write(events.table(sort_by='self_cpu_time_total', row_limit=ROWS))
    if len(activities) > 1:
      f.write('\n\nby self device time\n')
      f.write(events.table(sort_by='self_device_time_total', row_limit=ROWS))
