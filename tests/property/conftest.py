"""Make the shared strategies module importable from the property tests.

``tests/property`` is not a package (no ``__init__.py``), so its helper module is imported by
its plain name, ``progress_strategies``, from this directory.
"""

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
