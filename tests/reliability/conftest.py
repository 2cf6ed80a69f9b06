"""tests/reliability: the helpers of tests/train (tiny shapes data, tiny trainer) are importable here too."""

from __future__ import annotations

import sys
from pathlib import Path

_TRAIN_TESTS = Path(__file__).resolve().parents[1] / "train"
if str(_TRAIN_TESTS) not in sys.path:
    sys.path.insert(0, str(_TRAIN_TESTS))
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
