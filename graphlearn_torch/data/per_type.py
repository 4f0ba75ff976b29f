"""Dataset arguments given per node or edge type: a dict by type for a
heterogeneous dataset, one value (under the key ``HOMO``) for a homogeneous
one."""

from typing import Dict

HOMO = None  # the key of the single type of a homogeneous dataset


def by_type(value, hetero: bool, what: str) -> Dict:
  """Views a per-type argument as a dict; a homogeneous one has the key None."""
  if hetero:
    if value is None:
      return {}
    if not isinstance(value, dict):
      raise TypeError(f'{what} must be a dict keyed by type for a heterogeneous dataset')
    return value
  if isinstance(value, dict):
    raise TypeError(f'{what} is a dict but the dataset is homogeneous')
  return {} if value is None else {HOMO: value}


def per_type(value, keys) -> Dict:
  """Broadcasts a scalar setting to every key, or passes a dict through."""
  if isinstance(value, dict):
    return value
  return {k: value for k in keys}


def unwrap(d: Dict, hetero: bool):
  """The dict of a heterogeneous argument, or the one value of a homogeneous one."""
  if hetero:
    return d
  return d.get(HOMO)
