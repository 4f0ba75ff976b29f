"""Reports from a benchmark's processes, each wait bounded: what every
benchmark that starts trainers (or probes) in processes of their own reads
their results with."""

import queue
import time


def next_report(reports, procs, deadline: float, what: str):
  r"""The next item on the queue ``reports``, which ``procs`` fill; raises
  naming ``what`` as soon as one of them failed (a non-zero exit), all have
  exited with nothing left to read, or ``deadline`` (``time.monotonic``)
  passed."""
  while True:
    try:
      return reports.get(timeout=1.0)
    except queue.Empty:
      failed = [f'{p.name} exited with {p.exitcode}' for p in procs if p.exitcode not in (None, 0)]
      gone = all(p.exitcode is not None for p in procs)
      late = time.monotonic() > deadline
    if failed or gone or late:
      why = failed[0] if failed else 'every process exited' if gone else 'timed out'
      raise RuntimeError(f'{what}: {why}')


def all_reports(reports, procs, timeout: float, what: str) -> list:
  r"""One report of each of ``procs`` from ``reports`` (``next_report``),
  within ``timeout`` seconds."""
  deadline = time.monotonic() + timeout
  return [next_report(reports, procs, deadline, what) for _ in procs]
