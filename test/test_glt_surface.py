"""GLT 0.2.4's whole public surface, checked here: every public module path,
class, function and method GLT's wheel has (listed by test/glt_surface.py in
GLT's own interpreter, ``.venv-glt``: ``make glt-peer``) exists in
graphlearn_torch, and a call written for GLT's signature binds to ours:
GLT's positional parameters in GLT's order, its keyword names, nothing
required here that GLT makes optional, and the same defaults. Deliberate
differences are in ALLOWED, each with its reason (mirrored in
docs/glt_compatibility.md). Skipped where ``.venv-glt`` is absent."""

import importlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from glt_surface import entry

ROOT = Path(__file__).resolve().parents[1]
GLT_PYTHON = ROOT / '.venv-glt' / 'bin' / 'python'

# Deliberate differences: a pattern of 'module.Name[.method]' keys, and why.
ALLOWED: List[Tuple[str, str]] = [
  (
    r'.*([Vv]ineyard|v6d|[Tt]able|_frag_|get_fid_from_gid).*',
    'Vineyard and ODPS table datasets: out of scope (docs/glt_compatibility.md)',
  ),
  (
    r'.*DistFeature\.(communicate_node_\w+|get_all2all|remote_selecting_\w+)'
    r'|.*\.(PartialFeature|communicate_node_num)',
    'the all2all feature exchange: use_all2all is refused; features are fetched by RPC',
  ),
  (
    r'.*\.(RpcSamplingCallee|RpcSubGraphCallee|PartialNeighborOutput)(\..*)?',
    "GLT's RPC callee classes: our samplers serve peers through PartitionService",
  ),
  (
    r'.*\.(MP_STATUS_CHECK_INTERVAL|SERVER_EXIT_STATUS_CHECK_INTERVAL|MAX_RETYR_TIMES'
    r'|SERVER_INIT_CHECK_INTERVAL)',
    "GLT's polling intervals and retry counts: our waits are bounded, event-driven ones",
  ),
  (
    r'.*utils(\.exit_status|\.python_exit_status)',
    'a module-wide mutable exit flag: our workers stop through explicit shutdown',
  ),
  (r'.*\.scope_lock', "a module-wide lock around GLT's lazy IPC rebuild of features"),
  (r'.*utils\.build_glt', "the build script of GLT's C++ extension, not library code"),
  (
    r'.*NeighborSampler\.(lazy_init_subgraph_op|subgraph_op|sample_pyg_v1)',
    "GLT's C++ subgraph-op handles and its PyG 1.x sampling entry point",
  ),
  (
    r'.*format_hetero_sampler_output',
    "GLT's edge_dir default is the type Literal['in', 'out'] itself (a slip); ours is 'out'",
  ),
]


def allowed(key: str) -> Optional[str]:
  r"""Why ``key`` may differ from GLT, or None."""
  return next((why for pattern, why in ALLOWED if re.fullmatch(pattern, key)), None)


POSITIONAL = ('POSITIONAL_ONLY', 'POSITIONAL_OR_KEYWORD')


@pytest.fixture(scope='module')
def glt_surface() -> dict:
  if not GLT_PYTHON.exists():
    pytest.skip('needs .venv-glt (make glt-peer): GLT 0.2.4 in its own environment')
  env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
  done = subprocess.run(
    [str(GLT_PYTHON), str(ROOT / 'test' / 'glt_surface.py')],
    capture_output=True, text=True, timeout=600, env=env, cwd='/',
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-4000:]
  return json.loads(done.stdout)


def _default(text: Optional[str]) -> Optional[str]:
  return None if text is None else re.sub(r' at 0x[0-9a-f]+', '', text)


def binding_problems(glt: Optional[List], ours: Optional[List]) -> List[str]:
  r"""Why a call written for GLT's parameter list ``glt`` would not bind to
  ``ours`` (or would bind with another default); both as glt_surface lists
  them. Nothing to say where either signature is unreadable."""
  if glt is None or ours is None:
    return []
  kinds = {kind for _, kind, _ in ours}
  by_name = {name: (kind, default) for name, kind, default in ours}
  ours_positional = [name for name, kind, _ in ours if kind in POSITIONAL]
  glt_names = {name for name, _, _ in glt}
  problems = []
  for i, name in enumerate(name for name, kind, _ in glt if kind in POSITIONAL):
    if i < len(ours_positional):
      if ours_positional[i] != name:
        problems.append(f'positional parameter {i} is {ours_positional[i]!r}, GLT: {name!r}')
    elif 'VAR_POSITIONAL' not in kinds:
      problems.append(f'no positional parameter {i} ({name!r})')
  for name, kind, default in glt:
    if kind.startswith('VAR_'):
      continue
    if name not in by_name:
      if 'VAR_KEYWORD' not in kinds:
        problems.append(f'no parameter {name!r}')
      continue
    ours_default = by_name[name][1]
    if default is not None and ours_default is None:
      problems.append(f'{name!r} is required here, optional in GLT')
    elif default is not None and _default(default) != _default(ours_default):
      problems.append(f'{name!r} defaults to {ours_default}, GLT: {default}')
  for name, kind, default in ours:
    if not kind.startswith('VAR_') and default is None and name not in glt_names:
      problems.append(f'{name!r} is required here and unknown to GLT')
  return problems


def surface_problems(surface: dict) -> Dict[str, List[str]]:
  r"""``{'module.Name[.method]': [problem, ...]}`` for every GLT name."""
  problems: Dict[str, List[str]] = {}
  for module_name, names in surface['surface'].items():
    try:
      module = importlib.import_module(module_name)
    except ImportError as e:
      problems[module_name] = [f'no such module ({e})']
      continue
    for name, glt in names.items():
      key = f'{module_name}.{name}'
      if not hasattr(module, name):
        problems[key] = ['missing']
        continue
      ours = entry(getattr(module, name))
      if glt['kind'] != ours['kind'] and 'value' not in (glt['kind'], ours['kind']):
        problems[key] = [f'a {ours["kind"]} here, a {glt["kind"]} in GLT']
        continue
      found = binding_problems(glt['params'], ours['params'])
      if found:
        problems[key] = found
      for method, glt_params in glt['methods'].items():
        method_key = f'{key}.{method}'
        if method not in ours['methods'] and not hasattr(getattr(module, name), method):
          problems[method_key] = ['missing']
        elif glt_params != 'property' and isinstance(ours['methods'].get(method), list):
          found = binding_problems(glt_params, ours['methods'][method])
          if found:
            problems[method_key] = found
  return problems


def count_names(surface: dict) -> int:
  return sum(
    1 + len(e['methods']) for names in surface['surface'].values() for e in names.values()
  ) + len(surface['surface'])


def test_every_glt_name_is_here_and_glts_calls_bind(glt_surface):
  problems = surface_problems(glt_surface)
  unexplained = {k: v for k, v in problems.items() if allowed(k) is None}
  print(
    f'GLT surface: {count_names(glt_surface)} module paths, names and methods checked; '
    f'{len(problems)} differ, {len(problems) - len(unexplained)} of them allowed'
  )
  assert not unexplained, '\n'.join(f'{k}: {"; ".join(v)}' for k, v in sorted(unexplained.items()))


def test_allowed_differences_still_differ(glt_surface):
  r"""An allowlist entry whose difference is gone is stale."""
  problems = surface_problems(glt_surface)
  stale = [p for p, _ in ALLOWED if not any(re.fullmatch(p, k) for k in problems)]
  assert not stale, f'no longer different from GLT, drop from ALLOWED: {stale}'


def test_the_binding_check_catches_what_breaks_a_glt_call():
  P = 'POSITIONAL_OR_KEYWORD'
  glt = [['a', P, None], ['b', P, "'x'"]]
  assert binding_problems(glt, [['a', P, None], ['b', P, "'x'"], ['c', P, '1']]) == []
  assert binding_problems(glt, [['b', P, "'x'"], ['a', P, None]]) == [
    "positional parameter 0 is 'b', GLT: 'a'",
    "positional parameter 1 is 'a', GLT: 'b'",
  ]
  assert binding_problems(glt, [['a', P, None], ['b', P, None]]) == [
    "'b' is required here, optional in GLT"
  ]
  assert binding_problems(glt, [['a', P, None], ['b', P, "'y'"]]) == [
    "'b' defaults to 'y', GLT: 'x'"
  ]
  assert binding_problems(glt, [['a', P, None]]) == [
    "no positional parameter 1 ('b')",
    "no parameter 'b'",
  ]
  assert binding_problems(glt, [['a', P, None], ['kw', 'VAR_KEYWORD', None]]) == [
    "no positional parameter 1 ('b')"
  ]
  assert binding_problems(glt, [['a', P, None], ['b', P, "'x'"], ['c', P, None]]) == [
    "'c' is required here and unknown to GLT"
  ]
