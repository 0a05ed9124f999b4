"""Generic fixtures shared by every test directory (keep this file small)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run, so CI is repeatable; set
# HYPOTHESIS_PROFILE=explore to draw new ones (and fix what they find).
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

#: ``../shared`` next to the repository: papers and benchmark data (read-only).
SHARED_DIR = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def SHARED() -> Path:  # noqa: N802 - the name the project uses for this directory
    """Path of the read-only ``shared/`` directory (papers, benchmark data)."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared data directory not found: {SHARED_DIR}")
    return SHARED_DIR
