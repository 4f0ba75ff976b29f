"""The package's layering, read from its source: its floors (a module imports
only its own floor and those below), no import circle between its modules or
its subpackages, a batch's walk from sampler to trainer through modules that
import only downwards, and no module reaching into the private members of
objects it did not create. docs/architecture.md describes the floors."""

import ast
import collections
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = 'graphlearn_torch'


def _modules():
  mods = {}
  for path in (ROOT / PACKAGE).rglob('*.py'):
    name = '.'.join(path.relative_to(ROOT).with_suffix('').parts)
    if name.endswith('.__init__'):
      name = name[: -len('.__init__')]
    mods[name] = path
  return mods


MODULES = _modules()


def _imported(module: str, node) -> list:
  r"""The package's modules an import statement of ``module`` names."""
  if isinstance(node, ast.Import):
    return [a.name for a in node.names if a.name in MODULES]
  base = module.split('.')
  if not MODULES[module].name == '__init__.py':
    base = base[:-1]
  if node.level:
    target = '.'.join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
  else:
    target = node.module or ''
  out = []
  for alias in node.names:
    submodule = f'{target}.{alias.name}'
    if _is_extension(target, alias.name):
      continue  # a compiled module (graphlearn_torch._C), not a Python one
    out.append(submodule if submodule in MODULES else target)
  return [m for m in out if m in MODULES]


def _is_extension(package: str, name: str) -> bool:
  directory = ROOT.joinpath(*package.split('.'))
  return any(directory.glob(f'{name}.*.so'))


def _import_graph():
  edges = collections.defaultdict(set)
  for module, path in MODULES.items():
    for node in ast.walk(ast.parse(path.read_text())):  # lazy imports in functions too
      if isinstance(node, (ast.Import, ast.ImportFrom)):
        edges[module].update(m for m in _imported(module, node) if m != module)
  return edges


def _cycle(graph) -> list:
  state, stack = {}, []

  def visit(u):
    state[u] = 'open'
    stack.append(u)
    for v in sorted(graph.get(u, ())):
      if state.get(v) == 'open':
        return stack[stack.index(v) :] + [v]
      if v not in state:
        found = visit(v)
        if found:
          return found
    stack.pop()
    state[u] = 'done'
    return None

  for u in sorted(graph):
    if u not in state:
      found = visit(u)
      if found:
        return found
  return []


def _subpackage(module: str):
  parts = module.split('.')
  return parts[1] if len(parts) > 1 else None  # the root package re-exports everything


def test_modules_import_no_circle():
  graph = {
    m: {t for t in targets if _subpackage(t)}
    for m, targets in _import_graph().items()
    if _subpackage(m)
  }
  assert _cycle(graph) == []


def test_subpackages_import_no_circle():
  graph = collections.defaultdict(set)
  for module, targets in _import_graph().items():
    for target in targets:
      a, b = _subpackage(module), _subpackage(target)
      if a and b and a != b:
        graph[a].add(b)
  assert _cycle(graph) == [], dict(graph)


# The floors, lowest first. A module belongs to the floor of the longest
# prefix that names it, and imports only modules of its own floor or below.
FLOORS = [
  ('foundations', ['typing', 'utils', '_ext']),
  ('one machine\'s data', ['data', 'partition', 'datasets']),
  ('sampling engine and samplers', ['sampler']),
  ('transport', ['channel']),
  ('the sampled batch', ['batch']),
  ('loaders', ['loader']),
  ('distributed runtime', ['distributed.runtime']),
  ('distributed data', ['distributed.data']),
  ('distributed sampling', ['distributed.sampling']),
  ('batch sources', ['distributed.sources']),
  ('server-client mode', ['distributed.server']),
  ('distributed loaders', ['distributed.loaders']),
  ('the distributed package', ['distributed']),
  ('GLT\'s paths and the package', ['compat', '']),
]  # fmt: skip


def floor_of(module: str) -> int:
  best, length = None, -1
  for index, (_, prefixes) in enumerate(FLOORS):
    for prefix in prefixes:
      name = f'{PACKAGE}.{prefix}' if prefix else PACKAGE
      if (module == name or module.startswith(name + '.')) and len(name) > length:
        best, length = index, len(name)
  return best


def test_every_module_is_on_a_floor():
  assert [m for m in MODULES if floor_of(m) is None] == []


def test_distributed_holds_no_loose_module():
  r"""Every module of ``distributed`` sits in one of its floors' folders;
  the package itself only re-exports."""
  top = f'{PACKAGE}.distributed'
  loose = [m for m in MODULES if m.startswith(top + '.') and m.count('.') == top.count('.') + 1]
  assert [m for m in loose if MODULES[m].name != '__init__.py'] == []


def test_modules_import_only_their_floor_or_below():
  upward = [
    f'{m} ({FLOORS[floor_of(m)][0]}) imports {t} ({FLOORS[floor_of(t)][0]})'
    for m, targets in _import_graph().items()
    for t in sorted(targets)
    if floor_of(t) > floor_of(m)
  ]
  assert upward == []


# The modules a batch passes through in multiprocess mode, from the sampler to
# the trainer: drawn by the engine for the distributed sampler, made a
# message by its batch source's message sampler (held by
# type, given its features, encoded), sent through the channel by its batch
# source; received by the loader, decoded, made PyG data and labelled.
BATCH_WALK = [
  'sampler.multihop',
  'distributed.sampling.neighbor_sampler',
  'distributed.sources.messages',
  'batch.sampled',
  'batch.features',
  'batch.codec',
  'channel.shm_channel',
  'distributed.sources.multiprocess',
  'distributed.loaders.loader',
  'batch.pyg',
  'batch.labels',
]


def _reached(graph, module: str) -> set:
  seen, todo = set(), [module]
  while todo:
    for target in graph.get(todo.pop(), ()):
      if target not in seen:
        seen.add(target)
        todo.append(target)
  return seen


def test_a_batch_walks_through_modules_that_import_only_downwards():
  graph = _import_graph()
  walk = [f'{PACKAGE}.{m}' for m in BATCH_WALK]
  assert all(m in MODULES for m in walk)
  for module in walk:
    above = sorted(t for t in _reached(graph, module) if floor_of(t) > floor_of(module))
    assert above == [], f'{module} reaches {above}'
  # the batch's own format lives in one package, whatever mode carries it
  handled = {m for m in walk if floor_of(m) == floor_of(f'{PACKAGE}.batch')}
  assert handled == {m for m in walk if m.startswith(f'{PACKAGE}.batch.')}


def test_the_floor_check_catches_an_upward_import():
  assert floor_of(f'{PACKAGE}.batch.codec') < floor_of(f'{PACKAGE}.distributed.sources.remote')
  assert floor_of(f'{PACKAGE}.distributed.loaders.loader') > floor_of(
    f'{PACKAGE}.distributed.sampling.host_peers'
  )
  assert floor_of(PACKAGE) == len(FLOORS) - 1


def test_cycle_finder_finds_a_cycle():
  assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
  assert _cycle({'a': {'b'}, 'b': {'c'}}) == []


def _private_accesses(tree) -> list:
  r"""``obj._name`` where ``obj`` is neither self, cls, ``super()``, the
  enclosing class, nor a name the same function bound to an object it made
  (a call's result)."""
  found = []

  def own(value, made) -> bool:
    if isinstance(value, ast.Name):
      return value.id in made
    return isinstance(value, ast.Call) and ast.unparse(value.func) == 'super'

  def walk(node, made):
    if isinstance(node, ast.ClassDef):
      made = made | {node.name}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      made = made | {'self', 'cls'}
      for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
          made = made | {t.id for t in sub.targets if isinstance(t, ast.Name)}
    if (
      isinstance(node, ast.Attribute)
      and node.attr.startswith('_')
      and not node.attr.startswith('__')
      and not own(node.value, made)
    ):
      found.append((node.lineno, ast.unparse(node)))
    for child in ast.iter_child_nodes(node):
      walk(child, made)

  walk(tree, set())
  return found


def test_no_module_reaches_into_private_members():
  bad = []
  for path in sorted(MODULES.values()):
    for line, text in _private_accesses(ast.parse(path.read_text())):
      bad.append(f'{path.relative_to(ROOT)}:{line}: {text}')
  assert bad == []


@pytest.mark.parametrize(
  'source, expected',
  [
    ('def f(x):\n  return x._y\n', ['x._y']),
    ('def f(self):\n  return self._y\n', []),
    ('def f(cls):\n  c = cls.__new__(cls)\n  c._y = 1\n', []),
    ('def f(a):\n  return a.b._c\n', ['a.b._c']),
    ('class A:\n  def f(self):\n    return A._g, super()._h\n', []),
    ('class A:\n  pass\ndef f():\n  return A._g\n', ['A._g']),
  ],
)
def test_private_access_finder(source, expected):
  assert [text for _, text in _private_accesses(ast.parse(source))] == expected


def test_importing_the_package_leaves_pyg_out():
  # Every spawned sampling process imports the package; PyG would add seconds
  # to each. PyG is imported where a batch or a PyG interface is first built.
  code = (
    'import sys, graphlearn_torch as glt\n'
    "assert 'torch_geometric' not in sys.modules, 'PyG was imported'\n"
    'glt.sampler.PyGNeighborSampler, glt.distributed.remote_stores\n'
    "assert 'torch_geometric' in sys.modules\n"
  )
  subprocess.run([sys.executable, '-c', code], check=True, timeout=120, cwd=ROOT)
