"""The fault suite: runs each fault test of test/ once and prints, per fault,
the time to the error the survivors see (or, for a job killed whole, to its
resumption), the batches a resumed run lost and repeated, and what was left
behind (stray processes, files in /dev/shm, channel memfds still open
anywhere), for docs/reliability.md.

Usage: python benchmarks/fault_suite.py [--only SUBSTRING] [--gpu]   (about 6 minutes on 2 cores)

--gpu runs the worker-mode faults alone, in graph modes 'ZERO_COPY' and
'CUDA' on GPU 0 (a GPU machine), and checks the device's memory is back
after each.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from results import Results, Table, add_results_argument

ROOT = Path(__file__).resolve().parents[1]

# (fault, pytest node, regex of the time to the error in its -s output or None)
SCENARIOS = [
  (
    'worker mode: the whole job SIGKILLed mid-epoch, restarted with --resume',
    'test_resume_examples.py::test_killed_job_resumes_to_the_uninterrupted_model[CPU]',
    r'resumed after ([0-9.]+) s',
  ),
  (
    'loaders: state taken mid-epoch, loaded in a fresh job (collocated, mp, server-client)',
    'test_resume.py::test_dist_loader_resumes_in_a_fresh_job',
    None,
  ),
  (
    'worker mode: a trainer SIGKILLed mid-epoch',
    'test_dist_fault.py::test_a_killed_peer_becomes_an_error_in_the_others[CPU-trainer]',
    r'survivor raised after ([0-9.]+) s',
  ),
  (
    'worker mode: the survivor shuts its loader down',
    'test_dist_fault.py::test_a_killed_peer_becomes_an_error_in_the_others[CPU-trainer]',
    r'shutdown\(\) took ([0-9.]+) s',
  ),
  (
    'worker mode: a sampling process SIGKILLed mid-epoch',
    'test_dist_fault.py::test_a_killed_peer_becomes_an_error_in_the_others[CPU-sampler]',
    r'survivor raised after ([0-9.]+) s',
  ),
  (
    'server-client: a client SIGKILLed',
    'test_server_client_fault.py::test_killed_client_has_its_producers_destroyed',
    r'destroyed after ([0-9.]+) s',
  ),
  (
    'server-client: a server SIGKILLed',
    'test_server_client_fault.py::test_killed_server_makes_clients_raise',
    r'raised after ([0-9.]+) s',
  ),
  (
    'server-client: a client fails mid-epoch',
    'test_server_client_fault.py::test_failed_client_leaves_servers_usable',
    None,
  ),
  (
    'channel: a producer SIGKILLed mid-write',
    'test_channel_faults.py::test_sigkill_mid_write_leaves_the_channel_usable',
    None,
  ),
  (
    'channel: every producer gone (recv)',
    'test_channel_faults.py::test_consumer_sees_dead_producers',
    None,
  ),
  (
    'channel: the consumer gone (send)',
    'test_channel_faults.py::test_producer_sees_dead_owner',
    None,
  ),
  (
    'channel: larger than its memory cgroup',
    'test_channel_memory.py::test_a_channel_larger_than_the_cgroup_is_a_memory_error',
    None,
  ),
  (
    'channel: messages past the memory cgroup',
    'test_channel_memory.py::test_messages_past_the_cgroup_are_memory_errors_not_oom_kills',
    None,
  ),
  (
    'start-up: a peer never starts (rpc_timeout 5 s)',
    'test_startup_faults.py::test_a_peer_that_never_starts_is_named',
    r'failed after ([0-9.]+) s',
  ),
  (
    'start-up: no rank 0 at the port (rpc_timeout 5 s)',
    'test_startup_faults.py::test_no_rendezvous_at_the_port_is_named',
    r'failed after ([0-9.]+) s',
  ),
  (
    'start-up: a rank twice, a wrong world size',
    'test_startup_faults.py::test_a_rank_given_twice_and_a_wrong_world_size',
    r'failed after ([0-9.]+) s',
  ),
  (
    'start-up: a client without servers (timeout 5 s)',
    'test_startup_faults.py::test_a_client_without_servers_fails_in_time',
    r'failed after ([0-9.]+) s',
  ),
  (
    'start-up: servers wait for a missing client',
    'test_startup_faults.py::test_servers_waiting_for_a_client_that_never_comes',
    r'failed after ([0-9.]+) s',
  ),
  (
    'start-up: a sampling process fails',
    'test_startup_faults.py::test_a_sampling_process_failing_at_start_up_is_reported_at_once',
    r'failed after ([0-9.]+) s',
  ),
  (
    "start-up: a second run at a running job's port",
    'test_job_identity.py::test_a_second_run_cannot_join_a_running_job',
    None,
  ),
  (
    'start-up: another GLT_JOB_ID during the rendezvous',
    'test_job_identity.py::test_another_job_id_is_refused_during_the_rendezvous',
    None,
  ),
  (
    'exit: a client without shutdown_client()',
    'test_startup_faults.py::test_a_client_that_just_exits_leaves_cleanly',
    None,
  ),
  (
    'partition: values out of range',
    'test_partition_trust.py::test_out_of_range_values_name_the_file',
    None,
  ),
  (
    'partition: paths out of the directory',
    'test_partition_trust.py::test_type_names_cannot_leave_the_partition',
    None,
  ),
]


def gpu_scenarios() -> list:
  r"""The worker-mode faults on the GPU (--gpu): each in graph modes
  'ZERO_COPY' and 'CUDA', a fifth of the feature rows in GPU memory; the
  tests check the device's memory is back after each."""
  rows = []
  for mode in ('ZERO_COPY', 'CUDA'):
    rows += [
      (
        f"worker mode, '{mode}': the whole job SIGKILLed mid-epoch, restarted with --resume",
        f'test_resume_examples.py::test_killed_job_resumes_to_the_uninterrupted_model[{mode}]',
        r'resumed after ([0-9.]+) s',
      ),
      *(
        (
          f"worker mode, '{mode}': a {what} SIGKILLed mid-epoch",
          f'test_dist_fault.py::test_a_killed_peer_becomes_an_error_in_the_others[{mode}-{kill}]',
          r'survivor raised after ([0-9.]+) s',
        )
        for kill, what in (('trainer', 'trainer'), ('sampler', 'sampling process'))
      ),
    ]
  return rows


def our_processes():
  r"""Pids of python processes other than this one and its pytest child."""
  pids = set()
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      cmd = Path(f'/proc/{pid}/cmdline').read_bytes().replace(b'\0', b' ').decode()
    except OSError:
      continue
    if 'python' in cmd and int(pid) != os.getpid() and 'fault_suite' not in cmd:
      pids.add(int(pid))
  return pids


def channel_memfds() -> int:
  count = 0
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      fds = os.listdir(f'/proc/{pid}/fd')
    except OSError:
      continue
    for fd in fds:
      try:
        count += 'glt-shm-channel' in os.readlink(f'/proc/{pid}/fd/{fd}')
      except OSError:
        pass
  return count


LOST_AND_REPEATED = r'lost (\d+), repeated (\d+)'


def lost_and_repeated(output: str) -> str:
  r"""``lost / repeated`` batches, summed over what a test printed; '-'
  where it printed none."""
  found = [(int(a), int(b)) for a, b in re.findall(LOST_AND_REPEATED, output)]
  if not found:
    return '-'
  return f'{sum(a for a, _ in found)} / {sum(b for _, b in found)}'


def time_to_error(times) -> str:
  if not times:
    return 'at once'
  if min(times) == max(times):
    return f'{times[0]:.1f} s'
  return f'{min(times):.1f}-{max(times):.1f} s'


def run_scenario(fault: str, node: str, pattern) -> list:
  r"""Runs one fault's test; its row: fault, time to the error, batches
  lost / repeated, what was left behind, the test's result and wall time."""
  procs, shm, memfds = our_processes(), set(os.listdir('/dev/shm')), channel_memfds()
  started = time.monotonic()
  done = subprocess.run(
    [sys.executable, '-m', 'pytest', '-q', '-s', '-p', 'no:cacheprovider', f'test/{node}'],
    cwd=ROOT, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  wall = time.monotonic() - started
  times = [float(t) for t in re.findall(pattern, done.stdout)] if pattern else []
  left = [len(our_processes() - procs), len(set(os.listdir('/dev/shm')) - shm)]
  left.append(channel_memfds() - memfds)
  result = 'passed' if done.returncode == 0 else f'FAILED (rc {done.returncode})'
  if done.returncode == 0 and ' passed' not in done.stdout:
    result = 'skipped'  # a GPU test without a GPU, say
  return [fault, time_to_error(times), lost_and_repeated(done.stdout), *left, result, wall]


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--only', default='', help='run the faults whose name holds this')
  p.add_argument('--gpu', action='store_true', help='only the worker-mode faults, on the GPU')
  add_results_argument(p)
  args = p.parse_args()
  results = Results('fault_suite' + ('_gpu' if args.gpu else ''), args)
  rows = []
  for fault, node, pattern in gpu_scenarios() if args.gpu else SCENARIOS:
    if args.only in fault:
      rows.append(run_scenario(fault, node, pattern))
      print(f'{fault}: {rows[-1][1]}, {rows[-1][6]}', file=sys.stderr, flush=True)
  columns = ['fault', 'time to the error (or resumption)', 'batches lost / repeated']
  columns += ['processes left', '/dev/shm files left', 'channel memfds left', 'test', 'wall, s']
  title = 'What each fault does, and what it leaves behind' + (' on a GPU' if args.gpu else '')
  table = Table('faults', title, columns, rows)
  print(results.add(table).render())
  results.write()


if __name__ == '__main__':
  main()
