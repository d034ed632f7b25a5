"""Where an auto question's searches go, and what a routing or stop rule would save, from
runs of the same questions (docs/evaluation.md, "Where the searches go").

``base`` is one run with ``--strategy direct,auto`` (the defaults); ``--packed`` optionally a
run of ``--planner '{"bridges": 1}'`` (one packed rewrite: two searches per bridge chain).
A rule sends a question either to its direct row (one search; a chain stopped after its first
search searches the same query with the same k, so its direct row stands for it) or to its
packed row; every other question keeps its auto row. Printed per rule: recall, searches per
question, questions moved, and precision (moved questions that lost no recall).

    python -m benchmarks.search_budget bench-out/variants/hotpotqa-base \\
        --packed bench-out/variants/hotpotqa-packed
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from memroute.memory.titles import split_title
from memroute.planners.offline.entities import capitalized_phrases, mentioned
from memroute.planners.offline.parsed import (
    bridge_in_sight,
    compared_subjects,
    route_by_parse,
    subjects_missed,
)
from memroute.planners.offline.question_parse import read_question


def rows_by_strategy(run: Path) -> tuple[str, dict[str, dict[str, dict]]]:
    """The run's headline metric and ``{strategy: {question id: row}}``."""
    headline = json.loads((run / "summary.json").read_text())["headline_metric"]
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for line in (run / "results.jsonl").open():
        row = json.loads(line)
        row["recall"] = row["metrics"][headline] or 0.0
        out[row["strategy"]][row["id"]] = row
    return headline, out


def evidence_features(question: str, contents: list[str]) -> dict:
    """What the first search's top items say about the question's subjects (titled items
    only): the titles the question names, and the other titles that a named title's own
    sentences mention (the bridge, its own facts already found)."""
    titled = [(t, s) for t, s in map(split_title, contents) if t is not None]
    named = {t for t, _ in titled if mentioned(t, question)}
    others = {t for t, _ in titled if t not in named}
    named_text = " \n ".join(s for t, s in titled if t in named)
    linked = {t for t in others if mentioned(t, named_text)}
    # per named title: does one of its sentences mention a title found in the top items?
    each_linked = {n for n in named
                   if any(mentioned(t, " \n ".join(s for tt, s in titled if tt == n))
                          for t in others)}
    phrases = {p for t, s in titled if t in named for p in capitalized_phrases(s)
               if not mentioned(p, question)}
    return {"titled": len(titled), "named_titles": len(named), "linked_titles": len(linked),
            "each_named_linked": len(named) > 0 and each_linked == named,
            "distinct_titles": len({t for t, _ in titled}), "named_phrases": len(phrases)}


def planner_features(question: str, contents: list[str]) -> dict:
    """The planner's own tests on the first search's top items: the compared subjects whose
    facts it missed (`subjects_missed`; None when the question compares no two subjects)
    and whether the bridge is in sight (`bridge_in_sight`)."""
    subs = compared_subjects(question)
    return {"subjects_missed": len(subjects_missed(question, contents, subs, [question]))
            if subs else None, "in_sight": bridge_in_sight(question, contents)}


def question_features(question: str) -> dict:
    qp = read_question(question)
    route, reason, confidence = route_by_parse(question, "chain")
    return {"route_reason": reason.split(":")[0], "hidden": bool(qp.hidden_head),
            "named": len(qp.named), "wh": qp.wh or ""}


Rule = Callable[[dict], str]  # a question's features -> "auto", "direct" or "packed"
# searches of a split that searches the question first, then each subject it missed (its
# recall is the split's, or direct's when no subject was missed: an estimate)
SUBJECTS_ROW = "subjects"


def simulate(rows: list[dict], rule: Rule) -> dict:
    """Recall and searches when each question takes the row its rule picks."""
    recall, searches, moved, kept, by_type = 0.0, 0, 0, 0, defaultdict(list)
    for q in rows:
        pick = rule(q)
        if pick == SUBJECTS_ROW:
            missed = q["ev"]["subjects_missed"]
            row = q["rows"]["direct" if missed == 0 else "auto"]
            n_searches = 1 + missed
        else:
            row = q["rows"][pick if pick in q["rows"] else "auto"]
            n_searches = len(row["queries"])
        recall += row["recall"]
        searches += n_searches
        by_type[q["type"]].append(row["recall"])
        if pick != "auto":
            moved += 1
            kept += row["recall"] >= q["rows"]["auto"]["recall"] - 1e-9
    n = len(rows)
    return {"recall": round(recall / n, 4), "searches": round(searches / n, 3), "moved": moved,
            "precision": round(kept / moved, 3) if moved else None,
            "types": {t: round(sum(v) / len(v), 4) for t, v in sorted(by_type.items())}}


def breakdown(rows: list[dict]) -> list[dict]:
    """Per auto route and question type: questions, searches, auto and direct recall."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for q in rows:
        auto = q["rows"]["auto"]
        groups[(auto["route"], len(auto["queries"]), q["type"])].append(q)
    total = sum(len(q["rows"]["auto"]["queries"]) for q in rows)
    out = []
    for (route, searches, qtype), qs in sorted(groups.items()):
        out.append({"route": route, "searches": searches, "type": qtype, "n": len(qs),
                    "search_share": round(searches * len(qs) / total, 3),
                    "auto": round(sum(q["rows"]["auto"]["recall"] for q in qs) / len(qs), 4),
                    "direct": round(sum(q["rows"]["direct"]["recall"] for q in qs) / len(qs), 4),
                    "stops": dict(Counter(q["rows"]["auto"]["stop_reason"].split(":")[0]
                                          for q in qs))})
    return out


def _chain(q: dict) -> bool:
    return q["rows"]["auto"]["route"] == "chain"


RULES: dict[str, Rule] = {
    "baseline": lambda q: "auto",
    "split -> direct": lambda q: "direct" if q["rows"]["auto"]["route"] == "split" else "auto",
    "chain, 1st hop links a named title to another title -> stop": lambda q: (
        "direct" if _chain(q) and q["ev"]["named_titles"] and q["ev"]["linked_titles"]
        else "auto"),
    "chain, every named title links to another -> stop": lambda q: (
        "direct" if _chain(q) and q["ev"]["each_named_linked"] else "auto"),
    "chain, no hidden head, every named title links -> stop": lambda q: (
        "direct" if _chain(q) and not q["q"]["hidden"] and q["ev"]["each_named_linked"]
        else "auto"),
    "chain of 3 -> packed": lambda q: (
        "packed" if _chain(q) and len(q["rows"]["auto"]["queries"]) >= 3 else "auto"),
    "chain of 3, hidden head -> packed": lambda q: (
        "packed" if _chain(q) and len(q["rows"]["auto"]["queries"]) >= 3 and q["q"]["hidden"]
        else "auto"),
    "chain of 3, no hidden head -> packed": lambda q: (
        "packed" if _chain(q) and len(q["rows"]["auto"]["queries"]) >= 3
        and not q["q"]["hidden"] else "auto"),
    "chain of 3, linked -> stop, else packed": lambda q: (
        ("direct" if q["ev"]["each_named_linked"] else "packed")
        if _chain(q) and len(q["rows"]["auto"]["queries"]) >= 3 else "auto"),
    "chain of 3, linked -> packed": lambda q: (
        "packed" if _chain(q) and len(q["rows"]["auto"]["queries"]) >= 3
        and q["ev"]["each_named_linked"] else "auto"),
    "compared subjects: question, then the missed ones (subjects_after_search)": lambda q: (
        SUBJECTS_ROW if q["ev"]["subjects_missed"] is not None else "auto"),
    "chain of 3, bridge in sight -> packed (one_rewrite_in_sight)": lambda q: (
        "packed" if _chain(q) and len(q["rows"]["auto"]["queries"]) >= 3
        and q["ev"]["in_sight"] else "auto"),
    "both": lambda q: (
        SUBJECTS_ROW if q["ev"]["subjects_missed"] is not None else
        "packed" if _chain(q) and len(q["rows"]["auto"]["queries"]) >= 3
        and q["ev"]["in_sight"] else "auto"),
    "both, every other chain of 3 -> packed": lambda q: (
        SUBJECTS_ROW if q["ev"]["subjects_missed"] is not None else
        "packed" if _chain(q) and len(q["rows"]["auto"]["queries"]) >= 3 else "auto"),
}


def load(base: Path, packed: Path | None) -> tuple[str, list[dict]]:
    headline, runs = rows_by_strategy(base)
    extra = rows_by_strategy(packed)[1]["auto"] if packed else {}
    rows = []
    for qid, auto in runs["auto"].items():
        direct = runs["direct"][qid]
        q = {"id": qid, "type": auto["type"], "rows": {"auto": auto, "direct": direct}}
        if qid in extra:
            q["rows"]["packed"] = extra[qid]
        q["q"] = question_features(auto["question"])
        contents = [r["content"] for r in direct["returned"]]
        q["ev"] = {**evidence_features(auto["question"], contents),
                   **planner_features(auto["question"], contents)}
        rows.append(q)
    return headline, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="a run with --strategy direct,auto")
    parser.add_argument("--packed", type=Path, help='a run of --planner \'{"bridges": 1}\'')
    parser.add_argument("--features", type=Path, help="write per-question features (JSONL)")
    args = parser.parse_args()
    headline, rows = load(args.base, args.packed)
    print(json.dumps({"headline": headline, "questions": len(rows)}))
    for group in breakdown(rows):
        print(json.dumps(group))
    for name, rule in RULES.items():
        print(json.dumps({"rule": name, **simulate(rows, rule)}))
    if args.features:
        with args.features.open("w") as out:
            for q in rows:
                out.write(json.dumps({
                    "id": q["id"], "type": q["type"], **q["q"], **q["ev"],
                    "route": q["rows"]["auto"]["route"],
                    "searches": len(q["rows"]["auto"]["queries"]),
                    **{f"recall_{k}": r["recall"] for k, r in q["rows"].items()}}) + "\n")


if __name__ == "__main__":
    main()
