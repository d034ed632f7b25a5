"""Aggregate per-question rows into ``summary.json`` (the protocol's layout) and ``summary.md``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from memroute.evals.scoring import headline_metric, headline_name, metric_names, retrieval_ks

COST_FIELDS = ("llm_calls", "input_tokens", "output_tokens")


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(float(np.mean(present)), 4) if present else None


def _costs(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means per question of the total calls/tokens and of each node's tokens."""
    totals = {f: [] for f in COST_FIELDS}
    by_node: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"input": [], "output": [],
                                                                       "llm_calls": []})
    estimated = False
    for row in rows:
        costs = row.get("costs") or {}
        nodes = {n: c for n, c in costs.items() if n != "total"}
        total = costs.get("total") or {f: sum(c.get(f, 0.0) for c in nodes.values())
                                        for f in COST_FIELDS}
        for f in COST_FIELDS:
            totals[f].append(float(total.get(f, 0.0)))
        for node, c in nodes.items():
            by_node[node]["input"].append(float(c.get("input_tokens", 0.0)))
            by_node[node]["output"].append(float(c.get("output_tokens", 0.0)))
            by_node[node]["llm_calls"].append(float(c.get("llm_calls", 0.0)))
            estimated = estimated or bool(c.get("estimated"))
    n = max(len(rows), 1)
    out: dict[str, Any] = {f: round(sum(v) / n, 2) for f, v in totals.items()}
    out["tokens_by_node"] = {
        node: {"input": round(sum(v["input"]) / n, 2), "output": round(sum(v["output"]) / n, 2),
               "llm_calls": round(sum(v["llm_calls"]) / n, 3)}
        for node, v in sorted(by_node.items())
    }
    out["tokens_estimated"] = estimated
    return out


def _decisions(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A cascade's decisions per question by planner, and the LLM's share of them (only when
    the rows record who decided)."""
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        for who, n in (row.get("decisions") or {}).items():
            counts[who] += n
    total = sum(counts.values())
    if not total:
        return {}
    n = max(len(rows), 1)
    return {"decisions": {who: round(c / n, 3) for who, c in sorted(counts.items())},
            "llm_decision_share": round(counts["llm"] / total, 4)}


def _metric_mean(rows: list[dict[str, Any]], name: str) -> float | None:
    """The mean of ``name`` over the rows that carry it (``sf_recall@10``: the k=10 rows)."""
    return _mean([r["metrics"][name] for r in rows if name in r["metrics"]])


def summarize_strategy(rows: list[dict[str, Any]], dataset: str, ks: list[int],
                       unit: str = "sentence") -> dict[str, Any]:
    """Every aggregate of one strategy. Costs, latency and routes are taken at the first
    retrieval k (passage unit: the one ranked list, scored at every cut in ``ks``)."""
    names = metric_names(dataset, ks, unit)
    head = [r for r in rows if r["k"] == retrieval_ks(ks, unit)[0]]
    out: dict[str, Any] = {"n": len(head)}
    for name in names:
        out[name] = _metric_mean(rows, name)
    out.update(_costs(head))
    latency = [r["latency_ms"] for r in head]
    out["latency_ms_mean"] = round(float(np.mean(latency)), 1) if latency else None
    out["latency_ms_p50"] = round(float(np.percentile(latency, 50)), 1) if latency else None
    out["latency_ms_p95"] = round(float(np.percentile(latency, 95)), 1) if latency else None
    headline = headline_name(dataset, ks, unit)
    routes: dict[str, dict[str, Any]] = {}
    for route in sorted({r["route"] for r in head}):
        taken = [r for r in head if r["route"] == route]
        routes[route] = {"n": len(taken), headline: _mean([r["metrics"].get(headline)
                                                           for r in taken])}
    out["routes"] = routes
    types: dict[str, dict[str, Any]] = {}
    for qtype in sorted({r["type"] for r in head}):
        entry: dict[str, Any] = {"n": sum(1 for r in head if r["type"] == qtype)}
        for name in names:
            entry[name] = _metric_mean([r for r in rows if r["type"] == qtype], name)
        types[qtype] = entry
    out["types"] = types
    stops: dict[str, int] = defaultdict(int)
    for r in head:
        stops[r.get("stop_reason") or "none"] += 1
    out["stop_reasons"] = dict(stops)
    # what a question cost by how it ended (the stop reason's code; "done" with its route,
    # "done (split)") and by its type
    ended: dict[str, list[int]] = defaultdict(list)
    for r in head:
        code = (r.get("stop_reason") or "none").split(":")[0]
        ended[f"{code} ({r['route']})" if code == "done" else code].append(len(r["queries"]))
    out["searches_by_stop"] = {stop: {"n": len(v), "searches": round(float(np.mean(v)), 2)}
                               for stop, v in sorted(ended.items(), key=lambda kv: -len(kv[1]))}
    for qtype, entry in types.items():
        entry["searches"] = round(float(np.mean([len(r["queries"]) for r in head
                                                 if r["type"] == qtype])), 2)
    out["queries_mean"] = round(float(np.mean([len(r["queries"]) for r in head])), 2) if head \
        else None
    rounds = [r["search_rounds"] for r in head if r.get("search_rounds")]
    out["search_rounds_mean"] = round(float(np.mean(rounds)), 2) if rounds else None
    out.update(_decisions(head))
    for name in ("em", "f1", "judge"):
        values = [r.get(name) for r in head]
        out[name] = _mean(values) if any(v is not None for v in values) else None
    if any(r.get("answer") is not None for r in head):
        out["judge_unreadable"] = sum(1 for r in head if r.get("answer") is not None
                                      and r.get("judge") is None and "judge" in r)
    return out


def below_direct(rows: list[dict[str, Any]], dataset: str, ks: list[int],
                 unit: str = "sentence") -> dict[str, dict[str, int]]:
    """Per strategy and cut, how many questions it recalls less of than direct does (the
    headline metric at each k, question by question); {} without a direct run."""
    base = headline_metric(dataset, unit)
    out: dict[str, dict[str, int]] = {}
    for cut in ks:
        name = f"{base}@{cut}"
        scored = defaultdict(dict)
        for r in rows:
            if r["metrics"].get(name) is not None:
                scored[r["strategy"]][r["id"]] = r["metrics"][name]
        direct = scored.pop("direct", None)
        if direct is None:
            return {}
        for strategy, values in scored.items():
            out.setdefault(strategy, {})[name] = sum(
                1 for q, v in values.items() if q in direct and v < direct[q] - 1e-9)
    return out


def summarize(rows: list[dict[str, Any]], *, dataset: str, strategies: list[str], ks: list[int],
              meta: dict[str, Any]) -> dict[str, Any]:
    summary = dict(meta)
    unit = meta.get("unit", "sentence")
    summary["strategies"] = {
        s: summarize_strategy([r for r in rows if r["strategy"] == s], dataset, ks, unit)
        for s in strategies if any(r["strategy"] == s for r in rows)
    }
    summary["below_direct"] = below_direct(rows, dataset, ks, unit)
    return summary


# -- markdown ---------------------------------------------------------------------------------

def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}" if value <= 1.0 else f"{value:,.1f}"
    return str(value)


def _num(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(summary: dict[str, Any]) -> str:
    dataset, ks = summary["dataset"], summary["ks"]
    strategies = summary["strategies"]
    unit = summary.get("unit", "sentence")
    names = metric_names(dataset, ks, unit)
    cfg = summary["config"]
    parts = [
        f"# memroute eval: {dataset}",
        "",
        f"{summary['n_questions']} questions, seed {summary['seed']}, "
        f"data sha256 `{summary['data_sha256'][:16]}…`"
        + (" — **partial run (interrupted)**" if summary.get("partial") else ""),
        "",
        f"embedder `{cfg['embedder']}`"
        + (f" (queries `{cfg['query_embedder']}`)"
           if cfg.get("query_embedder", cfg["embedder"]) != cfg["embedder"] else "")
        + f", reranker `{cfg['reranker']}`, planner "
        f"`{cfg['planner']}`, lexical {cfg.get('lexical')}, final rerank "
        f"`{cfg.get('rerank_mode')}`, context {cfg.get('context')}",
        "",
        f"unit {unit}, store of {summary['store']['episodes']:,} episodes"
        + (f" (passages of {', '.join(summary['store']['pool'])})"
           if summary["store"].get("pool") else ""),
        "",
        "## Recall by strategy",
        "",
        _table(["strategy", "n", *names],
               [[s, v["n"], *[v.get(m) for m in names]] for s, v in strategies.items()]),
        "",
        "## Cost and latency per question (first k)",
        "",
        _table(["strategy", "LLM calls", "input tokens", "output tokens", "queries",
                "p50 ms", "p95 ms"],
               [[s, _num(v["llm_calls"], 2), _num(v["input_tokens"]), _num(v["output_tokens"]),
                 _num(v["queries_mean"], 2), _num(v["latency_ms_p50"]),
                 _num(v["latency_ms_p95"])] for s, v in strategies.items()]),
        "",
    ]
    headline = summary.get("headline_metric") or names[0]
    parts += ["## By route taken (Table-4 style)", ""]
    parts.append(_table(["strategy", "route", "n", headline],
                        [[s, r, d["n"], d.get(headline)] for s, v in strategies.items()
                         for r, d in v["routes"].items()]))
    parts += ["", "## By question type", ""]
    type_metrics = [m for m in names if m.split("@")[0] in (
        "sf_recall", "para_recall", "evidence_recall", "passage_recall")]
    parts.append(_table(["strategy", "type", "n", *type_metrics, "searches"],
                        [[s, t, d["n"], *[d.get(m) for m in type_metrics],
                          _num(d.get("searches"), 2)]
                         for s, v in strategies.items() for t, d in v["types"].items()]))
    parts += ["", "## Searches by how a question ended (first k)", ""]
    parts.append(_table(["strategy", "stop", "n", "searches"],
                        [[s, stop, d["n"], _num(d["searches"], 2)] for s, v in strategies.items()
                         for stop, d in v.get("searches_by_stop", {}).items()]))
    if summary.get("below_direct"):
        parts += ["", "## Questions recalled less than by direct", ""]
        cuts = sorted({c for v in summary["below_direct"].values() for c in v},
                      key=lambda c: int(c.rsplit("@", 1)[1]))
        parts.append(_table(["strategy", *cuts],
                            [[s, *[v.get(c, "–") for c in cuts]]
                             for s, v in summary["below_direct"].items()]))
    nodes = sorted({n for v in strategies.values() for n in v["tokens_by_node"]})
    if nodes:
        parts += ["", "## Tokens per node (Table-5 style, mean per question)", ""]
        parts.append(_table(["strategy", *[f"{n} in/out" for n in nodes]],
                            [[s, *[(f"{v['tokens_by_node'][n]['input']:.0f}/"
                                    f"{v['tokens_by_node'][n]['output']:.0f}")
                                   if n in v["tokens_by_node"] else "–" for n in nodes]]
                             for s, v in strategies.items()]))
    decided = {s: v for s, v in strategies.items() if v.get("decisions")}
    if decided:
        parts += ["", "## Planner decisions (cascade, mean per question)", ""]
        parts.append(_table(["strategy", "offline", "LLM", "LLM share"],
                            [[s, _num(v["decisions"].get("offline", 0.0), 2),
                              _num(v["decisions"].get("llm", 0.0), 2),
                              f"{100 * v['llm_decision_share']:.1f} %"]
                             for s, v in decided.items()]))
    if any(v.get("em") is not None or v.get("judge") is not None for v in strategies.values()):
        parts += ["", "## Answer accuracy", ""]
        parts.append(_table(["strategy", "EM", "F1", "judge"],
                            [[s, v.get("em"), v.get("f1"), v.get("judge")]
                             for s, v in strategies.items()]))
    return "\n".join(parts) + "\n"
