"""Every failing input `make fuzz` kept (tests/data/fuzz/<target>/), replayed through its target's
check: a regression case once the fault it found is fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzing import KEPT, replay

CASES = sorted(KEPT.glob("*/*.json"))


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_a_kept_input_passes_its_check(path: Path):
    replay(path)
