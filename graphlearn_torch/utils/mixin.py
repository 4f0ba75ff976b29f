"""``CastMixin``: GLT's ``utils.mixin``."""


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
