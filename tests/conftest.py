"""Generic fixtures shared by every test directory (keep this file small)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: ``../shared`` next to the repository: papers and benchmark data (read-only).
SHARED_DIR = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def SHARED() -> Path:  # noqa: N802 - the name the project uses for this directory
    """Path of the read-only ``shared/`` directory (papers, benchmark data)."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared data directory not found: {SHARED_DIR}")
    return SHARED_DIR
