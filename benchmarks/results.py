"""Benchmark results as JSON: what every script in benchmarks/ measured, with
the command that reproduces it and the machine it ran on.

A script collects its tables (``Table``: a title, columns, rows, and the
columns a chart plots) in a ``Results`` and writes them to
``benchmarks/results/<name>.json`` (``--results DIR`` elsewhere,
``--results ''`` nowhere; ``--results-suffix _gpu`` names the file
``<name>_gpu.json``, for another machine's run of the same script).
``benchmarks/report.py`` (``make bench-report``) renders docs/benchmarks.md
and its charts from those files.
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / 'benchmarks' / 'results'


@dataclasses.dataclass
class Table:
  r"""One table of a benchmark.

  Args:
    key: its name among the script's tables (the report picks tables by it).
    title: what it shows.
    columns: the column names.
    rows: the rows (numbers as numbers: the report formats them).
    chart: the columns a chart plots: ``{'label': column, 'value': column}``
      (a bar per row), or None for no chart.
    note: what a reader needs to read the table (the workload, the peers'
      settings).
  """

  key: str
  title: str
  columns: List[str]
  rows: List[List[Any]]
  chart: Optional[Dict[str, str]] = None
  note: str = ''

  def render(self) -> str:
    r"""The table in Markdown, its title above and its note below."""
    return render_table(self.title, self.columns, self.rows, self.note)


def format_cell(column: str, value: Any) -> str:
  r"""A cell as the page shows it: ratios (columns that say 'vs') as
  ``1.23x``, millions as ``12.34 M``, other numbers with separators."""
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return '-' if value is None else str(value)
  if 'vs' in column.split():
    return f'{value:.2f}x'
  if abs(value) >= 1e6:
    return f'{value / 1e6:,.2f} M'
  if isinstance(value, int) or abs(value) >= 1000:
    return f'{value:,.0f}'
  return f'{value:,.2f}' if abs(value) < 100 else f'{value:,.1f}'


def render_table(title: str, columns: List[str], rows: List[List[Any]], note: str = '') -> str:
  r"""A Markdown table (numbers right-aligned), with its title and note."""
  numeric = [
    all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) for i in range(len(columns))
  ]
  lines = [f'**{title}**', '', '| ' + ' | '.join(columns) + ' |']
  lines.append('|' + '|'.join('--:' if n else '---' for n in numeric) + '|')
  for row in rows:
    lines.append('| ' + ' | '.join(format_cell(c, v) for c, v in zip(columns, row)) + ' |')
  if note:
    lines += ['', note]
  return '\n'.join(lines) + '\n'


def _cpu_model() -> str:
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def _physical_cores() -> Optional[int]:
  r"""Cores, not counting their hardware threads: distinct (physical id, core
  id) pairs of /proc/cpuinfo (None where it does not say)."""
  cores, physical = set(), None
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        key, _, value = line.partition(':')
        if key.strip() == 'physical id':
          physical = value.strip()
        elif key.strip() == 'core id':
          cores.add((physical, value.strip()))
  except OSError:
    return None
  return len(cores) or None


def _memory_gib() -> Optional[float]:
  try:
    with open('/proc/meminfo') as f:
      for line in f:
        if line.startswith('MemTotal:'):
          return round(int(line.split()[1]) / 2**20, 1)
  except OSError:
    pass
  return None


def _gpu() -> Optional[str]:
  try:
    import torch

    if torch.cuda.is_available():
      return torch.cuda.get_device_name(0)
  except ImportError:
    pass
  return None


def machine() -> Dict[str, Any]:
  r"""What the figures depend on: CPU, cores, memory, GPU, Python and torch."""
  import torch

  return {
    'cpu': _cpu_model(),
    'cores': os.cpu_count(),
    'physical_cores': _physical_cores(),
    'memory_gib': _memory_gib(),
    'gpu': _gpu(),
    'python': platform.python_version(),
    'torch': torch.__version__,
    'load_average': round(os.getloadavg()[0], 2),
  }


def commit() -> Optional[str]:
  r"""The source tree's commit (``+`` when it has uncommitted changes)."""
  try:
    head = subprocess.run(
      ['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, cwd=ROOT, timeout=10
    ).stdout.strip()
    dirty = subprocess.run(
      ['git', 'status', '--porcelain', '--untracked-files=no'],
      capture_output=True,
      text=True,
      cwd=ROOT,
      timeout=10,
    ).stdout.strip()
  except (OSError, subprocess.TimeoutExpired):
    return None
  return (head + ('+' if dirty else '')) or None


class Results:
  r"""The tables of one benchmark run, written as one JSON file.

  Args:
    name: the file's name (the script's, without ``.py``).
    args: the script's arguments: ``results`` (where to write; '' writes
      nothing) and ``results_suffix`` (added to ``name``), as
      ``add_results_argument`` declares them.
    argv: the command line that reproduces the run (default: this one).
  """

  def __init__(self, name: str, args: argparse.Namespace, argv: Optional[List[str]] = None):
    self.name = name + (getattr(args, 'results_suffix', '') or '')
    self.directory = args.results
    argv = list(sys.argv if argv is None else argv)
    script = os.path.relpath(os.path.abspath(argv[0]), ROOT) if argv else f'{name}.py'
    self.command = ' '.join(shlex.quote(a) for a in ['python', script, *argv[1:]])
    self.machine = machine()  # the load before the run, not after it
    self.started = datetime.datetime.now(datetime.timezone.utc)
    self.tables: List[Table] = []

  def add(self, table: Table) -> Table:
    self.tables.append(table)
    return table

  def write(self) -> Optional[Path]:
    r"""Writes the file (if there is a directory); returns its path."""
    if not self.directory:
      return None
    path = Path(self.directory) / f'{self.name}.json'
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
      'benchmark': self.name,
      'command': self.command,
      'commit': commit(),
      'date': self.started.strftime('%Y-%m-%d %H:%M UTC'),
      'seconds': round(
        (datetime.datetime.now(datetime.timezone.utc) - self.started).total_seconds()
      ),
      'machine': self.machine,
      'tables': [dataclasses.asdict(t) for t in self.tables],
    }
    path.write_text(dumps(doc))
    return path


def dumps(doc: Dict[str, Any]) -> str:
  r"""``doc`` as JSON with one table row per line (short files, readable
  diffs)."""
  tables = doc.get('tables', [])
  head = {k: v for k, v in doc.items() if k != 'tables'}
  lines = ['{']
  for key, value in head.items():
    lines.append(f'  {json.dumps(key)}: {json.dumps(value)},')
  lines.append('  "tables": [')
  for i, table in enumerate(tables):
    rows = table['rows']
    fields = {k: v for k, v in table.items() if k != 'rows'}
    items = ', '.join(f'{json.dumps(k)}: {json.dumps(v)}' for k, v in fields.items())
    lines.append('    {' + items + ',')
    lines.append('     "rows": [')
    lines += [
      f'       {json.dumps(r)}' + (',' if j < len(rows) - 1 else '') for j, r in enumerate(rows)
    ]
    lines.append('     ]}' + (',' if i < len(tables) - 1 else ''))
  lines.append('  ]')
  lines.append('}')
  text = '\n'.join(lines) + '\n'
  assert json.loads(text) == json.loads(json.dumps(doc))
  return text


def add_results_argument(parser: argparse.ArgumentParser) -> None:
  r"""``--results DIR``: where the run's JSON goes ('' for nowhere);
  ``--results-suffix``: added to its file name."""
  parser.add_argument(
    '--results',
    default=str(DEFAULT_DIR),
    help="directory of the results JSON (make bench-report renders them); '' writes none",
  )
  parser.add_argument(
    '--results-suffix',
    default='',
    help="added to the results file's name (e.g. _gpu for a GPU machine's run)",
  )
