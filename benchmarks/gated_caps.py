"""Title caps in the final rerank, gated by the question's structure, scored offline.

``dump`` runs `benchmarks.planner_variants` with the final rerank's whole ranking of the pool
written per question (the returned top k unchanged); ``score`` replays those rankings with
"at most ``cap`` hits per document title" applied only to the questions a gate picks, and
prints the headline recall per gate, cap and question type (docs/evaluation.md, "MuSiQue:
title caps by the question's structure").

    python -m benchmarks.gated_caps dump musique ../shared/data/musique/musique_ans_dev_200.jsonl \\
        --name base --planner '{}' --strategy auto --out <out> --ranking <out>/rank-musique.jsonl
    python -m benchmarks.gated_caps score musique ../shared/data/musique/musique_ans_dev_200.jsonl \\
        --ranking <out>/rank-musique.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from memroute.evals.datasets import Question, load_dataset
from memroute.evals.scoring import headline_metric, score
from memroute.graph.state import from_record

# How a named thing hangs below a noun that describes it (possessives included here).
_NESTS = frozenset({"prep", "relcl", "acl", "poss"})


def nest_depth(question: str) -> int:
    """How many unnamed nouns the deepest named thing of the question is nested under
    ("Who is the spouse of the performer of Green?": 2)."""
    from memroute.nlp import QUESTION_WORDS, named_spans, parse
    doc = parse(question)
    spans = named_spans(doc)
    named = {t.i for s in spans for t in s}
    deepest = 0
    for span in spans:
        child, node, depth = span.root, span.root.head, 0
        while node.i != child.i:
            if (node.pos_ == "NOUN" and node.i not in named and node.lower_ not in QUESTION_WORDS
                    and child.dep_ in _NESTS):
                depth += 1
            child, node = node, node.head
        deepest = max(deepest, depth)
    return deepest


def record_title(record: dict) -> str | None:
    nucleus = next((e for e in record["episodes"] if e.get("uid") == record["uid"]),
                   record["episodes"][0])
    return (nucleus.get("metadata") or {}).get("title")


def capped(ranked: list[dict], k: int, cap: int | None) -> list[dict]:
    """The first ``k`` of ``ranked`` with at most ``cap`` per document title (untitled hits
    uncapped); the places left go to the capped hits, in order. ``cap=None``: no cap."""
    if cap is None:
        return ranked[:k]
    count: dict[str, int] = {}
    kept, over = [], []
    for r in ranked:
        title = record_title(r)
        if title is not None and count.get(title, 0) >= cap:
            over.append(r)
            continue
        if title is not None:
            count[title] = count.get(title, 0) + 1
        kept.append(r)
    return (kept + over)[:k]


def replay(dataset: str, rows: list[tuple[Question, dict]],
           cap_of: Callable[[Question, dict], int | None], k: int = 10) -> dict:
    """The headline recall over ``rows`` (question, dumped ranking) with each question's cap."""
    head = f"{headline_metric(dataset)}@{k}"
    by_type: dict[str, list[float]] = defaultdict(list)
    fired = 0
    for question, row in rows:
        cap = cap_of(question, row)
        fired += cap is not None
        own = row["own"][:k]
        top = own + capped(row["ranked"], k - len(own), cap)
        recall = score(question, [from_record(r) for r in top], k, dataset == "locomo")[head]
        if recall is not None:  # LoCoMo: a question whose evidence resolves to no turn
            by_type[question.type].append(recall)
    every = [s for scores in by_type.values() for s in scores]
    return {"recall": round(sum(every) / len(every), 4), "capped": fired,
            "types": {t: round(sum(s) / len(s), 4) for t, s in sorted(by_type.items())}}


def gates() -> dict[str, Callable[[Question, dict], bool]]:
    """Which questions a cap applies to: every one, by nesting depth, by the planner's parse,
    or when the top 10 holds fewer document titles than the question's things."""
    from memroute.planners.offline.parsed import compared_subjects
    from memroute.planners.offline.question_parse import read_question

    def titles_short(extra: int) -> Callable[[Question, dict], bool]:
        return lambda q, row: (len({record_title(r) for r in row["ranked"][:10]})
                               < nest_depth(q.question) + extra)
    return {
        "all": lambda q, row: True,
        "depth>=1": lambda q, row: nest_depth(q.question) >= 1,
        "depth>=2": lambda q, row: nest_depth(q.question) >= 2,
        "depth>=3": lambda q, row: nest_depth(q.question) >= 3,
        "innermost": lambda q, row: bool(read_question(q.question).innermost),
        "hidden_head": lambda q, row: read_question(q.question).hidden_head is not None,
        "not_comparison": lambda q, row: not compared_subjects(q.question),
        "titles<depth+2": titles_short(2),
        "titles<depth+3": titles_short(3),
    }


def _conversation(scope) -> str | None:
    """The eval store's conversation of a question's scope (its user id; None when pooled)."""
    user = scope.get("user_id") if isinstance(scope, dict) else getattr(scope, "user_id", None)
    return None if user in (None, "pooled") else user


def load_rows(dataset: str, data: Path, limit: int | None, ranking: Path) -> list[tuple[Question, dict]]:
    """The dumped rankings with their questions, matched by conversation and text (LoCoMo's
    conversations ask the same questions)."""
    questions = {(q.conversation, q.question): q
                 for q in load_dataset(dataset, data, limit).questions}
    rows = [json.loads(line) for line in ranking.open()]
    keys = [(r.get("conversation"), r["query"]) for r in rows]
    return [(questions[key], r) for key, r in zip(keys, rows) if key in questions]


def dump(ranking: Path) -> None:
    """Patch the final rerank so each question's whole ranking goes to ``ranking``."""
    import memroute.graph.final_rerank as final_rerank
    from memroute.graph.state import OWN_RANK, as_record
    from memroute.memory.store import Memory

    ranking.parent.mkdir(parents=True, exist_ok=True)
    ranking.unlink(missing_ok=True)
    ranked_by_queries: dict[tuple, list] = {}
    rerank, record = Memory.rerank, final_rerank.record_decision

    async def whole_rerank(self, results, queries, k, **kw):
        ranked = await rerank(self, results, queries, len(results) or k, **kw)
        ranked_by_queries[tuple(dict.fromkeys(queries))] = [as_record(r) for r in ranked]
        return ranked[:k]

    async def dumping(state, stop_reason):
        queries = tuple(dict.fromkeys([state["query"], *(state.get("queries") or [])]))
        pool = list((state.get("pool") or {}).values())
        own = sorted((r for r in pool if OWN_RANK in r["extra"]),
                     key=lambda r: r["extra"][OWN_RANK])
        ranked = ranked_by_queries.pop(queries, None)
        if ranked is None or len(queries) <= 1:
            ranked = sorted((r for r in pool if OWN_RANK not in r["extra"]),
                            key=lambda r: -r["rerank_score"])
        with ranking.open("a") as out:
            out.write(json.dumps({"query": state["query"], "queries": list(state.get("queries") or []),
                                  "conversation": _conversation(state["scope"]),
                                  "own": own, "ranked": ranked}) + "\n")
        await record(state, stop_reason)

    Memory.rerank = whole_rerank
    final_rerank.record_decision = dumping


def main() -> None:
    if sys.argv[1:2] == ["dump"]:
        at = sys.argv.index("--ranking")
        ranking = Path(sys.argv[at + 1])
        del sys.argv[at:at + 2], sys.argv[1]
        dump(ranking)
        from benchmarks.planner_variants import main as variants
        variants()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["score"])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--ranking", type=Path, required=True)
    parser.add_argument("--caps", default="3,4,5")
    args = parser.parse_args()
    rows = load_rows(args.dataset, args.data, args.limit, args.ranking)
    print(json.dumps({"gate": "none", **replay(args.dataset, rows, lambda q, row: None)}))
    for name, gate in gates().items():
        for cap in (int(c) for c in args.caps.split(",")):
            figures = replay(args.dataset, rows,
                             lambda q, row, cap=cap, gate=gate: cap if gate(q, row) else None)
            print(json.dumps({"gate": name, "cap": cap, **figures}))


if __name__ == "__main__":
    main()
