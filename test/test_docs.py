"""The documentation (docs/: MyST pages and the autodoc API reference)
builds with Sphinx without a single warning."""

import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / 'docs'


@pytest.mark.slow  # a whole Sphinx build
def test_docs_build_without_warnings(tmp_path):
  pytest.importorskip('sphinx')
  pytest.importorskip('myst_parser')
  done = subprocess.run(
    [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-E', '-q', '-b', 'html',
     str(DOCS), str(tmp_path / 'html')],
    capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-6000:]
  assert done.stderr.strip() == '', done.stderr[-6000:]
  api = (tmp_path / 'html' / 'api.html').read_text()
  for name in ('NeighborLoader', 'DistNeighborLoader', 'MetisPartitioner', 'ShmChannel'):
    assert name in api, f'{name} is missing from the API reference'


def test_the_benchmarks_page_is_the_one_its_results_render():
  r"""docs/benchmarks.md is generated (make bench-report): it is what
  benchmarks/report.py renders from the committed results, never edited by
  hand."""
  done = subprocess.run(
    [sys.executable, str(DOCS.parent / 'benchmarks' / 'report.py'), '--check'],
    capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert done.returncode == 0, done.stderr + done.stdout
