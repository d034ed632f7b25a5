"""The vendored suites are LangGraph's files as released: below each note, the text hashes to
the sha256 the note records (the upstream file's)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent
END_OF_NOTE = "# ---- end of the vendoring note ----\n"
VENDORED = ["checkpoint_postgres/test_store.py", "checkpoint_postgres/test_async_store.py",
            "checkpoint/test_store.py", "embed_test_utils.py"]


@pytest.mark.parametrize("name", VENDORED)
def test_vendored_file_is_verbatim(name: str) -> None:
    note, upstream = (HERE / name).read_text(encoding="utf-8").split(END_OF_NOTE, 1)
    (recorded,) = re.findall(r"sha256 ([0-9a-f]{64})", note)
    assert hashlib.sha256(upstream.encode("utf-8")).hexdigest() == recorded
