"""Differential fuzzing of the compiled modules (tests/*/test_fuzz_*.py): each target is a `check`
of one input against an oracle (libbz2, expat, zlib, the Python code a C pass replaced, or
"a Python exception, never a crash" where the sanitizers are the oracle), driven by hypothesis.

In the suite a target tries a few dozen inputs, derandomized, so CI is deterministic; under
`make fuzz` (FUZZ_SECONDS set) it draws fresh random inputs for that many seconds. An input that
fails under `make fuzz` is kept as tests/data/fuzz/<target>/<digest>.json, which
test_fuzz_kept.py replays in every run from then on; in the suite the failure names the input.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as with_seed
from hypothesis import strategies as st

KEPT = Path(__file__).parent / "data" / "fuzz"
SECONDS = float(os.environ.get("FUZZ_SECONDS") or 0)


def encode(value: Any) -> Any:
    """`value` as JSON: bytes as {"bytes": base64}, tuples as lists."""
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value


def decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"bytes"}:
        return base64.b64decode(value["bytes"])
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    return value


def keep(target: str, check: Callable, value: Any) -> Path:
    """A failing input, as the regression case test_fuzz_kept.py replays."""
    text = json.dumps({"check": f"{check.__module__}:{check.__name__}", "input": encode(value)}, sort_keys=True)
    path = KEPT / target / f"{hashlib.sha1(text.encode()).hexdigest()[:16]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return path


def replay(path: Path) -> None:
    case = json.loads(path.read_text())
    module, name = case["check"].split(":")
    getattr(importlib.import_module(module), name)(decode(case["input"]))


def fuzz(target: str, strategy: st.SearchStrategy, check: Callable[[Any], None], examples: int = 40) -> None:
    """`check` on `examples` inputs drawn from `strategy` (derandomized), or under `make fuzz` on
    as many fresh ones as FUZZ_SECONDS allows; a failure is raised with the input that shrank
    from it (and under `make fuzz` kept)."""
    failing: list = []
    tried = [0]

    def guarded(value: Any) -> None:
        tried[0] += 1
        try:
            check(value)
        except BaseException:
            failing[:] = [value]  # the last one raised is the one hypothesis shrank to and replays
            raise

    def run(n: int, seed: int | None) -> None:
        @settings(max_examples=n, derandomize=seed is None, database=None, deadline=None, print_blob=False,
                  phases=[Phase.explicit, Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
        @given(strategy)
        def inner(value: Any) -> None:
            guarded(value)

        (inner if seed is None else with_seed(seed)(inner))()

    try:
        if not SECONDS:
            run(examples, None)
            return
        start, rng = time.monotonic(), random.Random()
        while time.monotonic() < start + SECONDS:
            run(examples, rng.getrandbits(64))  # a few dozen a seed: the time is checked between seeds
        # To the terminal itself: pytest holds what a passing test writes to sys.stderr.
        print(f"fuzz {target}: {tried[0]} inputs in {time.monotonic() - start:.0f} s", file=sys.__stderr__)
    except BaseException as err:
        if not failing:
            raise
        if SECONDS:
            path = keep(target, check, failing[0])
            raise AssertionError(f"{target}: failing input kept as {path}: {err!r}") from err
        raise AssertionError(f"{target}: fails on {json.dumps(encode(failing[0]))[:2000]}: {err!r}") from err
