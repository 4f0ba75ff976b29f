"""tools/check_cuda_build.py's record of the sources an extension was built
from: a module carried to the GPU machine runs only if it matches the tree."""

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / 'tools' / 'check_cuda_build.py'


@pytest.fixture(scope='module')
def tool():
  spec = importlib.util.spec_from_file_location('check_cuda_build', TOOL)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def make_tree(root: Path) -> None:
  (root / 'csrc' / 'cuda').mkdir(parents=True)
  (root / 'setup.py').write_text('setup()\n')
  (root / 'pyproject.toml').write_text('[project]\n')
  (root / 'csrc' / 'cuda' / 'op.cu').write_text('// kernel\n')
  (root / 'csrc' / 'op.h').write_text('// header\n')
  (root / 'README.md').write_text('not a source\n')


def test_the_record_matches_only_the_sources_it_was_written_from(tool, tmp_path, capsys):
  make_tree(tmp_path)
  ext = str(tmp_path / '_C.so')
  assert not tool.stamp_matches(ext, tmp_path)
  assert 'no record' in capsys.readouterr().out
  tool.stamp_path(ext).write_text(tool.sources_digest(tmp_path) + '\n')
  assert tool.stamp_matches(ext, tmp_path)
  (tmp_path / 'README.md').write_text('edited, not a source\n')
  assert tool.stamp_matches(ext, tmp_path)
  (tmp_path / 'csrc' / 'cuda' / 'op.cu').write_text('// kernel, edited\n')
  assert not tool.stamp_matches(ext, tmp_path)
  assert 'built from other sources' in capsys.readouterr().out


def test_the_digest_covers_names_and_contents(tool, tmp_path):
  make_tree(tmp_path)
  before = tool.sources_digest(tmp_path)
  (tmp_path / 'csrc' / 'op.h').rename(tmp_path / 'csrc' / 'other.h')
  renamed = tool.sources_digest(tmp_path)
  (tmp_path / 'csrc' / 'cuda' / 'new.cuh').write_text('')
  added = tool.sources_digest(tmp_path)
  assert len({before, renamed, added}) == 3
