"""Sphinx configuration: the Markdown pages (MyST) and the API reference
(autodoc, Google-style docstrings). Build: ``make docs``."""

import os
import sys

sys.path.insert(0, os.path.abspath('..'))

project = 'graphlearn-torch'
author = 'the graphlearn-torch developers'
extensions = [
  'myst_parser',
  'sphinx.ext.autodoc',
  'sphinx.ext.napoleon',
  'sphinx.ext.viewcode',
]
source_suffix = {'.md': 'markdown', '.rst': 'restructuredtext'}
exclude_patterns = ['_build']
myst_heading_anchors = 4
myst_enable_extensions = ['colon_fence']
autodoc_default_options = {'members': True, 'show-inheritance': True}
autodoc_member_order = 'bysource'
autodoc_typehints = 'description'
napoleon_google_docstring = True
napoleon_numpy_docstring = False
html_theme = 'alabaster'
html_title = 'graphlearn-torch'
