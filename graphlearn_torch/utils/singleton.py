"""A singleton class decorator: GLT's ``utils.singleton``."""

from typing import Callable, Dict, Type


def singleton(cls: Type) -> Callable[[], object]:
  """Class decorator: every call returns the one instance, made on first use."""
  instances: Dict[Type, object] = {}

  def get_instance():
    if cls not in instances:
      instances[cls] = cls()
    return instances[cls]

  return get_instance
