"""Utilities of graphlearn_torch (GLT 0.2.x's ``graphlearn_torch.utils`` names)."""

from .checkpoint import load_ckpt, save_ckpt
from .common import (
  append_tensor_to_file,
  count_dict,
  default_id_filter,
  default_id_select,
  ensure_dir,
  ephemeral_ports,
  format_hetero_sampler_output,
  get_free_port,
  index_select,
  load_and_concatenate_tensors,
  merge_dict,
  merge_hetero_sampler_output,
  seed_everything,
)
from .device import assign_device, ensure_device, get_available_device, resolve_device
from .mixin import CastMixin
from .network import default_socket_ifname, interface_for
from .singleton import singleton
from .spawn import SpawnedProcessError, spawn, trainer_process_context
from .tensor import (
  apply_to_all_tensor,
  convert_to_tensor,
  id2idx,
  share_memory,
  squeeze,
  tensor_equal_with_device,
)
from .threads import kernel_thread_cap, kernel_threads, set_kernel_threads
from .topo import coo_to_csc, coo_to_csr, ptr2ind
from .units import UNITS, parse_size

__all__ = [
  'append_tensor_to_file',
  'apply_to_all_tensor',
  'assign_device',
  'CastMixin',
  'convert_to_tensor',
  'coo_to_csc',
  'coo_to_csr',
  'count_dict',
  'default_id_filter',
  'default_id_select',
  'default_socket_ifname',
  'ensure_device',
  'ensure_dir',
  'ephemeral_ports',
  'format_hetero_sampler_output',
  'get_available_device',
  'get_free_port',
  'id2idx',
  'index_select',
  'interface_for',
  'kernel_thread_cap',
  'kernel_threads',
  'load_and_concatenate_tensors',
  'load_ckpt',
  'merge_dict',
  'merge_hetero_sampler_output',
  'parse_size',
  'ptr2ind',
  'resolve_device',
  'save_ckpt',
  'seed_everything',
  'set_kernel_threads',
  'share_memory',
  'singleton',
  'spawn',
  'trainer_process_context',
  'SpawnedProcessError',
  'squeeze',
  'tensor_equal_with_device',
  'UNITS',
]
