"""Checks a CUDA build of the extension without a GPU: it loads, and every
dispatcher op of graphlearn_torch has a CUDA kernel.

  python tools/check_cuda_build.py build/cuda/lib
"""

import glob
import importlib.util
import os
import sys
import sysconfig

import torch

OPS = ('coo_to_csr', 'sample_neighbors', 'sample_neighbors_temporal', 'sample_negative',
       'has_edge', 'induced_subgraph', 'gather_rows', 'unified_gather', 'disjoint_keys',
       'sample_neighbors_partitioned', 'bucket_by_partition', 'group_by_partition',
       'stitch_neighbors', 'scatter_rows_', 'concat')  # fmt: skip
BINDINGS = ('CudaInducer', 'uva_view', 'registered_view', 'enable_peer_access')


def main(lib_dir: str) -> int:
  # This interpreter's build (a tree may hold others: an editable install's,
  # one built for the GPU machine's Python).
  suffix = sysconfig.get_config_var('EXT_SUFFIX')
  paths = glob.glob(os.path.join(lib_dir, 'graphlearn_torch', f'_C{suffix}'))
  if len(paths) != 1:
    print(f'expected graphlearn_torch/_C{suffix} under {lib_dir}, found {paths}')
    return 1
  spec = importlib.util.spec_from_file_location('graphlearn_torch._C', paths[0])
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)  # registers torch.ops.glt
  missing = [
    op for op in OPS if not torch._C._dispatch_has_kernel_for_dispatch_key(f'glt::{op}', 'CUDA')
  ]
  missing += [name for name in BINDINGS if not hasattr(module, name)]
  if missing:
    print(f'{paths[0]}: no CUDA kernel or binding for {", ".join(missing)}')
    return 1
  print(
    f'{paths[0]}: loads (torch {torch.__version__}, CUDA {torch.version.cuda}, GPU available: '
    f'{torch.cuda.is_available()}); CUDA kernels for {", ".join(OPS)}; {", ".join(BINDINGS)}'
  )
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else 'build/cuda/lib'))
