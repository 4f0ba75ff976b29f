"""The loaders' shared options, declared once (``loader.options``): a loader
decorated with ``loader_options`` shows GLT's signature, binds positional and
keyword calls to its own parameters and one ``LoaderOptions``, refuses what it
does not take by name, and documents every option it takes."""

import dataclasses
import inspect

import pytest

import graphlearn_torch as glt
from graphlearn_torch.loader.options import LoaderOptions, loader_options, option_docs


@loader_options('data', 'batch_size', 'mode', 'random_seed', keyword=('time_attr',))
class Probe:
  """A loader that keeps what it got.

  Args:
    data: anything.
    mode: its own parameter.
  """

  def __init__(self, data, mode='a', *, options: LoaderOptions):
    self.data, self.mode, self.options = data, mode, options


class SubProbe(Probe):
  def __init__(self, data, *, options: LoaderOptions):
    super().__init__(data, 'sub', options=options)


def test_the_signature_is_the_declared_order_with_the_options_defaults():
  params = inspect.signature(Probe).parameters
  assert list(params) == ['data', 'batch_size', 'mode', 'random_seed', 'time_attr']
  assert params['batch_size'].default == 1 and params['random_seed'].default is None
  assert params['time_attr'].kind == inspect.Parameter.KEYWORD_ONLY


def test_a_call_binds_to_its_own_parameters_and_the_options():
  p = Probe('d', 8, 'b', 3, time_attr='node_time')
  assert (p.data, p.mode) == ('d', 'b')
  assert p.options == LoaderOptions(batch_size=8, seed=3, time_attr='node_time')
  q = Probe('d')
  assert q.mode == 'a' and q.options == LoaderOptions()


def test_what_a_loader_does_not_take_is_refused_by_name():
  with pytest.raises(TypeError, match=r"Probe got unexpected arguments \['shuffle'\]"):
    Probe('d', shuffle=True)
  with pytest.raises(TypeError):
    Probe('d', 1, 'a', 0, 'extra')


def test_a_subclass_hands_its_options_on():
  options = LoaderOptions(batch_size=4)
  assert SubProbe('d', options=options).options is options
  assert SubProbe('d', options=options).mode == 'sub'


def test_every_option_is_documented_once_and_in_each_loader():
  docs = option_docs()
  assert set(docs) == {f.name for f in dataclasses.fields(LoaderOptions)}
  assert '    random_seed: seeds both the shuffling' in Probe.__doc__
  assert 'time_attr: temporal sampling' in Probe.__doc__
  for cls in (
    glt.loader.NeighborLoader,
    glt.loader.LinkNeighborLoader,
    glt.loader.SubGraphLoader,
    glt.distributed.DistNeighborLoader,
    glt.distributed.DistLinkNeighborLoader,
    glt.distributed.DistSubGraphLoader,
  ):
    for name in inspect.signature(cls).parameters:
      assert f'    {name}: ' in cls.__doc__, f'{cls.__name__}.{name} has no doc'


def test_every_loader_runs_on_one_lifecycle():
  for cls in (glt.loader.NodeLoader, glt.loader.LinkLoader, glt.distributed.DistLoader):
    assert issubclass(cls, glt.loader.BaseLoader)
    for name in ('__iter__', '__next__', '__len__', 'state_dict', 'load_state_dict'):
      assert getattr(cls, name) is getattr(glt.loader.BaseLoader, name), (cls, name)
