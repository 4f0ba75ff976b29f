"""Lists GLT's public surface: run by GLT's interpreter (``.venv-glt``, where
``graphlearn_torch`` is GLT 0.2.4), it prints one JSON object
``{module: {name: entry}}`` for every public module of the package, where an
entry is ``{"kind": "function"|"class"|"value", "params": [...] | null,
"methods": {name: [...] | null}}`` and a parameter list holds ``[name, kind,
default repr or null]`` in order (``self`` and ``cls`` left out).

A module's public names are the ones its source defines at the top level
(``def``, ``class``, assignments) and, for a package, re-exports from its
modules, less ``_``-names; what a module merely imports (``torch``,
``typing``, a helper of another GLT module) is not GLT's surface.

  .venv-glt/bin/python test/glt_surface.py > surface.json
"""

import ast
import importlib
import inspect
import json
import os
import pkgutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'benchmarks'))
from glt_peer import import_glt  # noqa: E402


def params(fn):
  r"""``[[name, kind, default repr or None], ...]`` of ``fn``; None when it
  has no readable signature (a builtin)."""
  try:
    sig = inspect.signature(fn)
  except (TypeError, ValueError):
    return None
  out = []
  for p in sig.parameters.values():
    if p.name in ('self', 'cls') and not out:
      continue
    default = None if p.default is inspect.Parameter.empty else repr(p.default)
    out.append([p.name, p.kind.name, default])
  return out


def public_names(module) -> list:
  r"""The names ``module``'s source defines at the top level and, for a
  package (``__init__``), the ones it re-exports from its modules: explicit
  relative imports, and ``*`` imports as the public names of their source.
  A plain module's own imports (``from ..typing import EdgeType``) are not
  its surface."""
  try:
    tree = ast.parse(inspect.getsource(module))
  except (OSError, TypeError):
    return []
  package = module.__name__ if hasattr(module, '__path__') else None
  names = []
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      names.append(node.name)
    elif isinstance(node, ast.Assign):
      names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
      names.append(node.target.id)
    elif isinstance(node, ast.ImportFrom) and node.level > 0 and package is not None:
      for alias in node.names:
        if alias.name == '*':
          source = importlib.import_module('.' * node.level + (node.module or ''), package)
          names += getattr(source, '__all__', None) or public_names(source)
        else:
          names.append(alias.asname or alias.name)
  return sorted({n for n in names if not n.startswith('_') and hasattr(module, n)})


def entry(obj) -> dict:
  if inspect.isclass(obj):
    methods = {}
    for name, member in vars(obj).items():
      if name.startswith('_') and name != '__init__':
        continue
      if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
      if inspect.isfunction(member):
        methods[name] = params(member)
      elif isinstance(member, property):
        methods[name] = 'property'
    return {'kind': 'class', 'params': params(obj), 'methods': methods}
  if callable(obj) and not isinstance(obj, type):
    return {'kind': 'function', 'params': params(obj), 'methods': {}}
  return {'kind': 'value', 'params': None, 'methods': {}}


def main():
  glt = import_glt()
  surface, unimportable = {}, {}
  modules = [glt.__name__] + [
    m.name for m in pkgutil.walk_packages(glt.__path__, glt.__name__ + '.')
  ]
  for name in modules:
    if any(part.startswith('_') for part in name.split('.')) or 'py_graphlearn_torch' in name:
      continue
    try:
      module = importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 (recorded: such a module is no surface here)
      unimportable[name] = f'{type(e).__name__}: {e}'
      continue
    surface[name] = {n: entry(getattr(module, n)) for n in public_names(module)}
  json.dump({'surface': surface, 'unimportable': unimportable}, sys.stdout, sort_keys=True)


if __name__ == '__main__':
  main()
