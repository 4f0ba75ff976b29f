"""What a request between the job's processes carries: tensors that view
part of a larger buffer copied out, so that RPC sends their own bytes."""

import copy
from typing import Any

import torch


def sent_alone(value: Any) -> Any:
  r"""``value`` as RPC should send it: a host tensor that views part of a
  larger buffer copied out (into a buffer of its own), in tuples, lists
  and dicts too (a container is new only where something in it is);
  anything else as it is. TensorPipe sends a tensor's whole buffer where
  the tensor spans more than half of it (torch copies smaller views
  itself): a piece of a hop's seeds split from the others', sent alone,
  would carry the rest of them along.

  Args:
    value: an argument or a result of a request.
  """
  if isinstance(value, torch.Tensor):
    if value.device.type != 'cpu' or value.layout != torch.strided:
      return value
    if value.untyped_storage().nbytes() > value.numel() * value.element_size():
      return value.clone(memory_format=torch.contiguous_format)
    return value
  if isinstance(value, (tuple, list)):
    items = [sent_alone(v) for v in value]
    if all(new is old for new, old in zip(items, value)):
      return value
    if isinstance(value, list):
      return items
    return type(value)(*items) if hasattr(value, '_fields') else tuple(items)
  if isinstance(value, dict):
    changed = {k: new for k, v in value.items() if (new := sent_alone(v)) is not v}
    if not changed:
      return value
    out = copy.copy(value)
    out.update(changed)
    return out
  return value
