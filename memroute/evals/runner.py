"""Run one evaluation: load a slice, build or reuse its store, retrieve with every strategy
at every k side by side, score, and write ``results.jsonl``, ``summary.json``, ``summary.md``
and the plots. An interrupted run (Ctrl-C) still writes a valid, partial summary."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memroute._log import get_logger

from memroute.evals import answering, metrics
from memroute.evals.datasets import (
    DATASETS,
    WIKI_DATASETS,
    Dataset,
    Question,
    load_dataset,
    parse_pool_entry,
)
from memroute.evals.plots import write_plots
from memroute.evals.retrieval import Retrieval, Retrieved
from memroute.evals.scoring import UNITS, headline_name, retrieval_ks, score, score_passages
from memroute.evals.store import EvalStore, open_store
from memroute.evals.summary import render_markdown, summarize
from memroute.memory.connect import settings_embedder
from memroute.errors import InvalidInputError
from memroute.planners.llm.backends import openai_client_from_settings
from memroute.settings import MemrouteSettings, get_settings
from memroute.memory.limits import MAX_K
from memroute.strategies.base import STRATEGIES

log = get_logger(__name__)

PLANNERS = ("offline", "llm", "cascade")
RERANK_MODES = ("fused", "concat")


class EvalConfigError(InvalidInputError):
    """The evaluation was asked for something it cannot do (e.g. answers without an LLM)."""


@dataclass
class EvalConfig:
    dataset: str
    data: Path
    limit: int | None = None
    seed: int = 0
    strategies: list[str] = field(default_factory=lambda: ["direct", "auto"])
    ks: list[int] = field(default_factory=lambda: [10, 20])
    out: Path | None = None
    concurrency: int = 4
    embedder: str | None = None
    reranker: str | None = None
    planner: str = "offline"
    answer: bool = False
    judge: bool = False
    lexical: bool | None = None
    rerank_mode: str = "fused"
    context: bool | None = None  # None: the protocol's default (off for Wikipedia, on for LoCoMo)
    unit: str = "sentence"  # sentence | passage (the published multi-hop retrieval protocol)
    pool: list[str] = field(default_factory=list)  # passage unit: NAME=FILE distractor sets
    # the planner's model is `memroute.evals.scripted_llm` (cost figures without a model)
    scripted_llm: bool = False

    def validate(self, llm: Any) -> None:
        """Fail fast, before anything is loaded, with a message that says what to do."""
        if self.dataset not in DATASETS:
            raise EvalConfigError(f"unknown data set {self.dataset!r}: use {', '.join(DATASETS)}")
        bad = [s for s in self.strategies if s not in STRATEGIES]
        if bad or not self.strategies:
            raise EvalConfigError(f"unknown strategy {bad}: use {','.join(STRATEGIES)}")
        if not self.ks or any(k < 1 or k > MAX_K for k in self.ks):
            raise EvalConfigError(f"--k takes positive integers up to {MAX_K}, e.g. 10,20")
        if self.planner not in PLANNERS:
            raise EvalConfigError(f"--planner must be one of {', '.join(PLANNERS)}, "
                                  f"not {self.planner!r}")
        if self.scripted_llm and self.planner == "offline":
            raise EvalConfigError("--scripted-llm stands in for the planner's model: use it "
                                  "with --planner llm or --planner cascade")
        if self.rerank_mode not in RERANK_MODES:
            raise EvalConfigError("--rerank-mode must be fused or concat")
        if self.unit not in UNITS:
            raise EvalConfigError(f"--unit must be sentence or passage, not {self.unit!r}")
        if self.unit == "passage" and self.dataset not in WIKI_DATASETS:
            raise EvalConfigError(f"--unit passage needs a Wikipedia set "
                                  f"({', '.join(WIKI_DATASETS)}), not {self.dataset!r}")
        if self.pool and self.unit != "passage":
            raise EvalConfigError("--pool pools passages: use it with --unit passage")
        for entry in self.pool:
            parse_pool_entry(entry)
        if self.concurrency < 1:
            raise EvalConfigError("--concurrency must be at least 1")
        needs = [flag for flag, on in (
            ("--answer", self.answer), ("--judge", self.judge),
            (f"--planner {self.planner}", self.planner != "offline" and not self.scripted_llm))
            if on]
        if needs and llm is None:
            raise EvalConfigError(
                f"{', '.join(needs)} need(s) an LLM, and none is configured: set "
                "MEMROUTE_LLM_BASE_URL and MEMROUTE_LLM_MODEL (and MEMROUTE_LLM_API_KEY), or run "
                "without them (retrieval metrics need no LLM)")

    def context_window(self) -> tuple[int, int]:
        on = self.dataset == "locomo" if self.context is None else self.context
        return (1, 2) if on else (0, 0)


def configured_llm(settings: MemrouteSettings) -> Any:
    """An ``AsyncOpenAI`` client for the configured endpoint, or ``None``."""
    if not settings.llm_model or not (settings.llm_base_url or settings.llm_api_key):
        return None
    return openai_client_from_settings(settings)


class Reporter:
    """Progress callbacks; the CLI plugs a rich progress bar in, tests use the default."""

    def ingest(self, done: int, total: int) -> None: ...

    def questions(self, done: int, total: int) -> None: ...

    def message(self, text: str) -> None: ...


@dataclass
class Job:
    question: Question
    strategy: str
    k: int


def _row(job: Job, got: Retrieved, dataset: Dataset, cfg: EvalConfig) -> dict[str, Any]:
    q = job.question
    returned = [{"uid": r.uid, "content": r.nucleus.content, "score": round(r.rerank_score, 5),
                 **({"dia_ids": [e.metadata.get("dia_id") for e in r.episodes]}
                    if dataset.is_conversational else {})}
                for r in got.results[:job.k]]
    return {
        "id": q.id, "type": q.type, "strategy": job.strategy, "k": job.k,
        "question": q.question, "route": got.route, "queries": got.queries,
        "search_rounds": got.search_rounds,
        "stop_reason": got.stop_reason, "returned": returned, "costs": got.costs,
        **({"decisions": got.decisions} if got.decisions else {}),
        "latency_ms": round(got.wall_ms, 2),
        "metrics": (score_passages(q, got.results[:job.k], cfg.ks) if cfg.unit == "passage"
                    else score(q, got.results, job.k, dataset.is_conversational)),
    }


async def _answer(row: dict[str, Any], job: Job, got: Retrieved, chat: Any, judge: bool) -> None:
    q = job.question
    memories = [r.text for r in got.results[:job.k]]
    answer, usage = await answering.answer_question(chat, q.question, memories)
    golds = [q.answer, *q.answer_aliases]
    row["answer"] = answer
    row["gold_answer"] = q.answer
    row["em"] = metrics.exact_match(answer, golds)
    row["f1"] = metrics.token_f1(answer, golds)
    row["costs"]["answer"] = _usage(usage)
    if judge:
        label, usage = await answering.judge_answer(chat, q.question, q.answer, answer)
        row["judge"] = None if label is None else float(label)
        row["costs"]["judge"] = _usage(usage)
    _retotal(row["costs"])


def _usage(u: Any) -> dict[str, float]:
    return {"llm_calls": float(u.llm_calls), "input_tokens": float(u.input_tokens),
            "output_tokens": float(u.output_tokens), "wall_ms": round(u.wall_ms, 2),
            "estimated": float(u.estimated)}


def _retotal(costs: dict[str, dict[str, float]]) -> None:
    nodes = {n: c for n, c in costs.items() if n != "total"}
    costs["total"] = {f: sum(c.get(f, 0.0) for c in nodes.values())
                      for f in ("llm_calls", "input_tokens", "output_tokens", "wall_ms")}


def _jobs(questions: list[Question], strategies: list[str], ks: list[int]) -> list[Job]:
    """Strategies interleaved per question, so a partial run stays a fair comparison."""
    return [Job(q, s, k) for k in ks for q in questions for s in strategies]


async def run_eval(cfg: EvalConfig, *, settings: MemrouteSettings | None = None, llm: Any = None,
                   reporter: Reporter | None = None, planner: Any = None) -> dict[str, Any]:
    """Run the evaluation and write its outputs; returns the summary (``partial`` if cut)."""
    settings = settings or get_settings()
    llm = llm if llm is not None else configured_llm(settings)
    cfg.validate(llm)
    reporter = reporter or Reporter()
    started = time.perf_counter()
    overrides: dict[str, Any] = {}
    if cfg.lexical is not None:
        overrides["lexical"] = cfg.lexical
    settings = settings.model_copy(update=overrides) if overrides else settings
    dataset = load_dataset(cfg.dataset, cfg.data, cfg.limit)
    pool = ([load_dataset(*parse_pool_entry(e)) for e in cfg.pool] if cfg.unit == "passage"
            else None)
    out = cfg.out or Path("eval-out") / f"{cfg.dataset}-{datetime.now():%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    embedder = settings_embedder(cfg.embedder, settings)
    reporter.message(f"store: {dataset.name}, {len(dataset.questions)} questions, "
                     f"unit {cfg.unit}, embedder {embedder.name}"
                     + (f", queries {embedder.query_name}"
                        if getattr(embedder, "query_name", embedder.name) != embedder.name
                        else "")
                     + (f", pooled with {', '.join(cfg.pool)}" if cfg.pool else ""))
    store: EvalStore = await open_store(dataset, seed=cfg.seed, embedder=embedder,
                                        reranker=cfg.reranker or settings.reranker,
                                        settings=settings, progress=reporter.ingest, pool=pool)
    chat = answering.answer_backend(llm, settings) if (cfg.answer or cfg.judge) else None
    if planner is None and cfg.planner == "offline":
        from memroute.planners.offline.planner import OfflinePlanner

        # explicitly: a configured LLM would otherwise plan
        planner = OfflinePlanner(use_nlp=settings.offline_parse)
    planner_llm = None
    if planner is None:  # llm or cascade, by the agent's own `make_planner`
        planner = cfg.planner
        if cfg.scripted_llm:
            from memroute.evals.scripted_llm import ScriptedPlannerChat

            planner_llm = ScriptedPlannerChat()
        else:
            planner_llm = llm
    retrieval = Retrieval(store.memory, planner=planner, llm=planner_llm,
                          rerank_mode=cfg.rerank_mode, context=cfg.context_window())
    jobs = _jobs(dataset.questions, cfg.strategies, retrieval_ks(cfg.ks, cfg.unit))
    rows: list[dict[str, Any]] = []
    prompt_versions: dict[str, str] = {}
    partial = False
    search_started = time.perf_counter()
    queue: asyncio.Queue[Job] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    answer_k = retrieval_ks(cfg.ks, cfg.unit)[0]
    with (out / "results.jsonl").open("w", encoding="utf-8") as sink:

        async def worker() -> None:
            while not queue.empty():
                job = queue.get_nowait()
                got = await retrieval.retrieve(job.question.question,
                                               store.scope_for(job.question), job.strategy, job.k,
                                               as_of=job.question.as_of)
                row = _row(job, got, dataset, cfg)
                prompt_versions.update(got.prompt_versions)
                if chat is not None and job.k == answer_k:
                    await _answer(row, job, got, chat, cfg.judge)
                rows.append(row)
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                sink.flush()
                reporter.questions(len(rows), len(jobs))

        try:
            await asyncio.gather(*(worker() for _ in range(min(cfg.concurrency, len(jobs)))))
        except (asyncio.CancelledError, KeyboardInterrupt):
            partial = True
            log.warning("eval.interrupted", done=len(rows), total=len(jobs))
    meta = _meta(cfg, dataset, store, retrieval, chat, settings, embedder.name, prompt_versions,
                 pool or [])
    meta["config"]["query_embedder"] = getattr(embedder, "query_name", embedder.name)
    meta["partial"] = partial
    meta["n_rows"] = len(rows)
    meta["timing"] = {"total_s": round(time.perf_counter() - started, 1),
                      "ingest_s": round(store.ingest_s, 1),
                      "retrieval_s": round(time.perf_counter() - search_started, 1)}
    summary = summarize(rows, dataset=dataset.name, strategies=cfg.strategies, ks=cfg.ks,
                        meta=meta)
    write_outputs(summary, rows, out)
    await store.memory.close()
    return summary


def _meta(cfg: EvalConfig, dataset: Dataset, store: EvalStore, retrieval: Retrieval, chat: Any,
          settings: MemrouteSettings, embedder_name: str,
          prompt_versions: dict[str, str], pool: list[Dataset]) -> dict[str, Any]:
    prompts: dict[str, str] = dict(prompt_versions)
    if chat is not None:
        prompts.update(answering.prompt_hashes())
    no_evidence = sum(1 for q in dataset.questions
                      if dataset.is_conversational and not (q.gold_ids or q.unresolved))
    return {
        "dataset": dataset.name,
        "data_sha256": dataset.file_sha256,
        "n_questions": len(dataset.questions),
        "seed": cfg.seed,
        "ks": cfg.ks,
        "unit": cfg.unit,
        "headline_metric": headline_name(dataset.name, cfg.ks, cfg.unit),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": {
            "embedder": embedder_name,
            "reranker": store.memory.reranker_name,
            "planner": retrieval.planner_name if cfg.planner == "offline" or cfg.scripted_llm
            else f"{cfg.planner}:{settings.llm_model or retrieval.planner_name}",
            "answer_model": chat.model if chat is not None else None,
            "judge_model": chat.model if chat is not None and cfg.judge else None,
            "prompts": prompts,
            "lexical": settings.lexical,
            "rerank_mode": cfg.rerank_mode,
            "fusion": settings.rerank_fusion,
            "candidates": settings.candidates,
            "context": list(cfg.context_window()),
            "concurrency": cfg.concurrency,
            "limit": cfg.limit,
        },
        "store": {"schema": store.schema, "episodes": store.episodes,
                  "reused": store.reused, "store_key": dataset.store_key[:16],
                  **({"pool": [f"{d.name} ({len(d.questions)} questions, sha256 "
                               f"{d.file_sha256[:12]})" for d in [dataset, *pool]]}
                     if cfg.unit == "passage" else {})},
        "evidence": {"skipped_questions": dataset.skipped,
                     "unresolved_ids": sum(len(q.unresolved) for q in dataset.questions),
                     "questions_without_evidence": no_evidence},
    }


def write_outputs(summary: dict[str, Any], rows: list[dict[str, Any]], out: Path) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(render_markdown(summary), encoding="utf-8")
    if rows:
        write_plots(summary, rows, out)


Progress = Callable[[int, int], None]
