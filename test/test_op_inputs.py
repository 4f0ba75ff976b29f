"""The C++ entry points given bad arguments, one changed at a time
(op_inputs.py, in a process of its own): every call returns or raises a
Python exception; none crashes or hangs, and on a GPU no kernel faults.
make sanitize runs this under AddressSanitizer and UndefinedBehaviorSanitizer,
which also catch a read or write outside the inputs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphlearn_torch._ext import cuda_kernels_available

# A process of its own: left out of make test-fast.
pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name('op_inputs.py')
TIMEOUT_S = 600.0  # a few seconds here; some minutes under the sanitizers
# Under AddressSanitizer: an allocation past this fails (returns null) rather than being made.
SANITIZED_ALLOCATION_MB = 2048


@pytest.mark.parametrize(
  'device',
  [
    'cpu',
    pytest.param(
      'cuda',
      marks=pytest.mark.skipif(
        not cuda_kernels_available(), reason='needs a GPU and our CUDA kernels'
      ),
    ),
  ],
)
def test_every_entry_point_returns_or_raises_on_bad_arguments(device):
  env = dict(os.environ)
  if 'libasan' in env.get('LD_PRELOAD', ''):
    extra = f'allocator_may_return_null=1:max_allocation_size_mb={SANITIZED_ALLOCATION_MB}'
    env['ASAN_OPTIONS'] = ':'.join(o for o in (env.get('ASAN_OPTIONS'), extra) if o)
  proc = subprocess.run(
    [sys.executable, str(SCRIPT), device],
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
    env=env,
  )
  last_call = (proc.stderr.strip().splitlines() or ['none'])[-1]
  assert proc.returncode == 0, (
    f'exited {proc.returncode} at call "{last_call}"\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}'
  )
  done = [line.split() for line in proc.stdout.splitlines() if line.startswith('DONE ')]
  assert done, proc.stdout[-3000:]
  calls, returned = int(done[0][1]), int(done[0][2])
  # Every op's every argument was changed; many changes are still valid calls.
  assert calls > (4000 if device == 'cpu' else 3000) and 0 < returned < calls
