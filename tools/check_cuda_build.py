"""Checks a CUDA build of the extension without a GPU: it loads, and every
dispatcher op of graphlearn_torch has a CUDA kernel.

  python tools/check_cuda_build.py [--stamp write|check] [LIB_DIR]

LIB_DIR (default build/cuda/lib) holds graphlearn_torch/_C<this Python's
suffix>. ``--stamp write`` records beside it (``_C...so.sources``) a digest
of the sources it was built from (setup.py, pyproject.toml, csrc/); ``--stamp
check`` also fails unless that record matches this tree's sources, so that
an extension built elsewhere and carried to a GPU machine (make device-ext)
is never run stale.
"""

import argparse
import glob
import hashlib
import importlib.util
import os
import sys
import sysconfig
from pathlib import Path
from typing import Optional

import torch

OPS = ('coo_to_csr', 'sample_neighbors', 'sample_neighbors_temporal', 'sample_negative',
       'has_edge', 'induced_subgraph', 'gather_rows', 'unified_gather', 'unified_gather_by_book',
       'disjoint_keys', 'sample_neighbors_partitioned', 'bucket_by_partition', 'group_by_partition',
       'stitch_neighbors', 'scatter_rows_', 'concat')  # fmt: skip
BINDINGS = ('CudaInducer', 'uva_view', 'registered_view', 'enable_peer_access')
# The inducers' whole-batch methods (both share one BatchPlan class).
INDUCER_METHODS = {
  'Inducer': ('sample_induce_next', 'sample_batch', 'BatchPlan'),
  'CudaInducer': (
    'sample_induce_next',
    'sample_batch',
    'launch_batch',
    'finish_batch',
    'BatchPlan',
  ),
}


ROOT = Path(__file__).resolve().parent.parent
SOURCE_PATTERNS = ('setup.py', 'pyproject.toml', 'csrc/**/*.h', 'csrc/**/*.cpp', 'csrc/**/*.cu',
                   'csrc/**/*.cuh')  # fmt: skip


def sources_digest(root: Path = ROOT) -> str:
  r"""SHA-256 over the extension's sources under ``root``: each file's path
  and contents, in path order."""
  digest = hashlib.sha256()
  files = sorted({f for pattern in SOURCE_PATTERNS for f in root.glob(pattern) if f.is_file()})
  for f in files:
    digest.update(f.relative_to(root).as_posix().encode() + b'\0')
    digest.update(f.read_bytes())
  return digest.hexdigest()


def stamp_path(ext_path: str) -> Path:
  r"""Where the record of ``ext_path``'s sources lies."""
  return Path(ext_path + '.sources')


def stamp_matches(ext_path: str, root: Path = ROOT) -> bool:
  r"""Whether ``ext_path`` was built from the sources under ``root``, by its
  record; says why not."""
  record = stamp_path(ext_path)
  built_from = record.read_text().strip() if record.exists() else None
  if built_from == sources_digest(root):
    return True
  if built_from is None:
    print(f'{ext_path} has no record of the sources it was built from: rebuild it')
  else:
    print(f"{ext_path} was built from other sources than this tree's (setup.py, pyproject.toml, "
          'csrc/): rebuild it')  # fmt: skip
  return False


def main(lib_dir: str, stamp: Optional[str] = None) -> int:
  # This interpreter's build (a tree may hold others: an editable install's,
  # one built for the GPU machine's Python).
  suffix = sysconfig.get_config_var('EXT_SUFFIX')
  paths = glob.glob(os.path.join(lib_dir, 'graphlearn_torch', f'_C{suffix}'))
  if len(paths) != 1:
    print(f'expected graphlearn_torch/_C{suffix} under {lib_dir}, found {paths}')
    return 1
  if stamp == 'check' and not stamp_matches(paths[0]):
    return 1
  spec = importlib.util.spec_from_file_location('graphlearn_torch._C', paths[0])
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)  # registers torch.ops.glt
  missing = [
    op for op in OPS if not torch._C._dispatch_has_kernel_for_dispatch_key(f'glt::{op}', 'CUDA')
  ]
  missing += [name for name in BINDINGS if not hasattr(module, name)]
  missing += [
    f'{cls}.{name}'
    for cls, names in INDUCER_METHODS.items()
    for name in names
    if not hasattr(getattr(module, cls, None), name)
  ]
  if not missing and module.CudaInducer.BatchPlan is not module.Inducer.BatchPlan:
    missing.append('one BatchPlan class for both inducers')
  if missing:
    print(f'{paths[0]}: no CUDA kernel or binding for {", ".join(missing)}')
    return 1
  print(
    f'{paths[0]}: loads (torch {torch.__version__}, CUDA {torch.version.cuda}, GPU available: '
    f'{torch.cuda.is_available()}); CUDA kernels for {", ".join(OPS)}; {", ".join(BINDINGS)}; '
    "the inducers' whole-batch methods"
  )
  if stamp == 'write':
    stamp_path(paths[0]).write_text(sources_digest() + '\n')
  return 0


if __name__ == '__main__':
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('lib_dir', nargs='?', default='build/cuda/lib')
  parser.add_argument('--stamp', choices=('write', 'check'), default=None)
  args = parser.parse_args()
  sys.exit(main(args.lib_dir, args.stamp))
