"""Small class helpers (GLT's ``utils.mixin`` and ``utils.singleton``)."""

from typing import Callable, Dict, Type


class CastMixin:
  """Lets a dataclass be built from an instance, a tuple or a dict of its fields."""

  @classmethod
  def cast(cls, *args, **kwargs):
    if len(args) == 1 and not kwargs:
      elem = args[0]
      if elem is None or isinstance(elem, cls):
        return elem
      if isinstance(elem, (tuple, list)):
        return cls(*elem)
      if isinstance(elem, dict):
        return cls(**elem)
    return cls(*args, **kwargs)


def singleton(cls: Type) -> Callable[[], object]:
  """Class decorator: every call returns the one instance, made on first use."""
  instances: Dict[Type, object] = {}

  def get_instance():
    if cls not in instances:
      instances[cls] = cls()
    return instances[cls]

  return get_instance
