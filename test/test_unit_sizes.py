"""Units a reader takes in one pass: no file of the tree over 500 lines
(docs/ aside) and no function over 80, in Python (the package, tests,
benchmarks, examples, tools) and in C++/CUDA (csrc/). GLT's own example
scripts (test/glt_scripts/), which run as GLT wrote them, are not ours to
cut. C++/CUDA lines keep to .clang-format's column limit."""

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_CXX_COLUMNS = 100  # .clang-format's ColumnLimit

SKIPPED_DIRS = {'docs', 'build', '__pycache__', 'glt_scripts'}
TEXT_SUFFIXES = {
  '.py', '.cpp', '.h', '.cu', '.cuh', '.sh', '.md', '.toml', '.yml', '.yaml', '.json', '.in',
  '.cfg', 'Makefile',
}  # fmt: skip


def tree_files(suffixes) -> list:
  r"""The tree's files with one of ``suffixes`` (or named one), outside
  hidden directories (venvs, .git), build outputs, docs/ and GLT's scripts."""
  found = []
  for dirpath, dirnames, filenames in os.walk(ROOT):
    dirnames[:] = [
      d
      for d in dirnames
      if not d.startswith('.') and d not in SKIPPED_DIRS and not d.endswith('.egg-info')
    ]
    for name in filenames:
      path = Path(dirpath) / name
      if path.suffix in suffixes or name in suffixes:
        found.append(path)
  return sorted(found)


def test_no_file_is_over_500_lines():
  long = {
    str(p.relative_to(ROOT)): n
    for p in tree_files(TEXT_SUFFIXES)
    if (n := len(p.read_text(errors='replace').splitlines())) > MAX_FILE_LINES
  }
  assert long == {}, f'split these files by concern: {long}'


def python_functions(source: str) -> list:
  r"""``(name, first line, lines)`` of every function of a Python source,
  its docstring included."""
  return [
    (node.name, node.lineno, node.end_lineno - node.lineno + 1)
    for node in ast.walk(ast.parse(source))
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
  ]


def cxx_code(text: str) -> str:
  r"""C++ without comments, string and character literals (lines kept)."""
  text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
  text = re.sub(r'//[^\n]*', '', text)
  text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
  return re.sub(r"'(\\.|[^'\\\n])'", "''", text)


SCOPE = re.compile(r'\b(namespace|class|struct|union|enum)\b[^;()]*$|extern\s*""\s*$')
FUNCTION_HEAD = re.compile(r'\)\s*(const|override|noexcept|final|mutable|->[^{]*|\s)*$')


def cxx_functions(source: str) -> list:
  r"""``(head, first line, lines)`` of every function body of a C++/CUDA
  source: a brace block after a parameter list, outside another function
  (lambdas count in the function that holds them); namespaces, classes
  and other blocks are looked into."""
  found, stack, head, line = [], [], '', 1
  for ch in cxx_code(source):
    if ch == '\n':
      line += 1
    if ch == '{':
      text = head.strip()
      inside = any(kind == 'function' for kind, _, _ in stack)
      function = not inside and not SCOPE.search(text) and FUNCTION_HEAD.search(text)
      stack.append(('function' if function else 'block', line, text[-60:]))
      head = ''
    elif ch == '}':
      if stack:
        kind, first, text = stack.pop()
        if kind == 'function':
          found.append((' '.join(text.split()), first, line - first + 1))
      head = ''
    elif ch == ';':
      head = ''
    else:
      head += ch
  return found


def test_no_function_is_over_80_lines():
  long = []
  for path in tree_files({'.py'}):
    for name, first, n in python_functions(path.read_text()):
      if n > MAX_FUNCTION_LINES:
        long.append(f'{path.relative_to(ROOT)}:{first} {name} ({n} lines)')
  for path in tree_files({'.cpp', '.h', '.cu', '.cuh'}):
    for head, first, n in cxx_functions(path.read_text()):
      if n > MAX_FUNCTION_LINES:
        long.append(f'{path.relative_to(ROOT)}:{first} {head} ({n} lines)')
  assert long == [], 'split these functions:\n' + '\n'.join(long)


def test_no_cxx_line_is_over_the_column_limit():
  wide = [
    f'{path.relative_to(ROOT)}:{number} ({len(line)} characters)'
    for path in tree_files({'.cpp', '.h', '.cu', '.cuh'})
    for number, line in enumerate(path.read_text().splitlines(), 1)
    if len(line) > MAX_CXX_COLUMNS
  ]
  assert wide == [], f'wrap these lines at {MAX_CXX_COLUMNS} columns:\n' + '\n'.join(wide)


@pytest.mark.parametrize(
  'source, expected',
  [
    ('int f(int a) {\n  return a;\n}\n', [('int f(int a)', 1, 3)]),
    ('namespace x {\nstruct S {\n  void g() const {\n  }\n};\n}\n', [('void g() const', 3, 2)]),
    ('void f() {\n  auto l = [](int) {\n    if (1) {\n    }\n  };\n}\n', [('void f()', 1, 6)]),
    ('// void h() {\nconst char* s = "{";\n', []),
  ],
)
def test_the_cxx_scan_finds_function_bodies(source, expected):
  assert cxx_functions(source) == expected
