"""Which bridge chains could stop after their first rewrite, and whether what the judge sees
there tells them apart (docs/evaluation.md, "Telling a right first bridge from a wrong one").

Inputs: a capture run of the defaults (``benchmarks.stop_capture`` or ``benchmarks.bridge_rank
capture``: ``judge.jsonl`` holds every judgment's inputs, with ``stop_capture`` each evidence
item's pool scores too) and a run of the same questions stopped after the first rewrite
(``planner_variants --planner '{"bridges": 1, "pack": 1}'``). A **candidate** is a question
whose chain went on to a third search (the runner-up bridges) in the capture run and
stopped after two in the stopped run; its label is "stopping loses nothing" (recall in the
stopped run >= the default's). Features come from the second judgment's inputs only (no
gold). Stopping the candidates a rule picks is simulated per question: their stopped row
replaces the default's (exact: a chain stopped there searched the same two queries).

    python -m benchmarks.stop_features <capture>/hotpotqa <variants>/hotpotqa-stop1 \\
        --rows rows.jsonl --skip-first 300      # the first 300 questions left out
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from memroute.memory.titles import split_title
from memroute.nlp import Entity, entity_key
from memroute.planners.offline.bridging import ChainHeuristics, bridge_candidates
from memroute.planners.offline.entities import mentioned
from memroute.planners.offline.parsed import _item_entities, _overlap, _stems, rank_bridges
from memroute.planners.offline.question_parse import read_question

# Stop rules simulated on the candidates (docs/evaluation.md has each one's meaning).
RULES: dict[str, Callable[[dict], bool]] = {
    "stop every chain": lambda x: True,
    "oracle (no loss)": lambda x: x["stop"] >= x["base"] - 1e-9,
    "page: the bridge's page came up": lambda x: x["bridge_page"],
    "named3: top 3 new hits name the bridge": lambda x: x["fresh_names_bridge"] >= 3,
    "named2": lambda x: x["fresh_names_bridge"] >= 2,
    "typed: bridge label fits the slot": lambda x: x["bridge_typed"],
    "page & typed": lambda x: x["bridge_page"] and x["bridge_typed"],
    "named2 & page": lambda x: x["fresh_names_bridge"] >= 2 and x["bridge_page"],
    "named2 & typed": lambda x: x["fresh_names_bridge"] >= 2 and x["bridge_typed"],
    "score: d_rerank > -0.2": lambda x: x.get("d_rerank", -9) > -0.2,
    "named2 & d_rerank > -0.25": lambda x: (x["fresh_names_bridge"] >= 2
                                             and x.get("d_rerank", -9) > -0.25),
    "margin >= 2": lambda x: x["margin"] >= 2,
    "pred: a new hit states 3+ predicate words": lambda x: x["fresh_predicate"] >= 3,
}


def _entities(raw: list | None) -> list[list[Entity] | None] | None:
    if raw is None:
        return None
    return [None if ents is None else [Entity(**e) for e in ents] for ents in raw]


def _rows(run: Path) -> dict[str, dict]:
    head = json.loads((run / "summary.json").read_text())["headline_metric"]
    rows = {}
    for line in (run / "results.jsonl").open():
        row = json.loads(line)
        if row["strategy"] == "auto":
            row["recall"] = row["metrics"][head] or 0.0
            rows[row["id"]] = row
    return rows


def _titles(items: list[str]) -> list[str | None]:
    return [split_title(t)[0] for t in items]


def features(first: dict, second: dict, h: ChainHeuristics = ChainHeuristics()) -> dict:
    """What the judge sees after the first rewrite (the ``second`` judgment's inputs), with
    the first hop's (``first``) for the bridge it searched:

    ``bridge`` (the first hop's best ranked candidate), ``margin`` (its score over the
    runner-up's), ``bridge_label`` / ``bridge_typed`` (its stored entity label; whether it
    fits the question's hidden slot), ``bridge_page`` (a new hit is filed under a title the
    rewrite names and the question does not), ``fresh_names_bridge`` (of the 3 best new hits,
    those naming the bridge), ``fresh_predicate`` / ``kept_predicate`` (most of the
    question's predicate and description words one of the 3 best new / kept hits states),
    ``typed_new`` (entities of the expected type among the 5 best new hits' that neither the
    question nor the rewrite names), ``back_link`` (a new hit names the question's named
    things), ``kept_cover`` (named things the kept items mention), ``runners_paged``
    (runner-up bridges whose page is already in the evidence), ``named``, ``hidden``, and
    with recorded scores ``d_vector`` / ``d_rerank`` (best score of the 3 best new hits minus
    the 3 best kept ones')."""
    q = second["question"]
    qp = read_question(q)
    tried = second["previous"]
    evidence = second["evidence"]
    keep = min(h.keep, len(evidence))
    kept, fresh = evidence[:keep], evidence[keep:]
    stored = _entities(second["entities"])
    ents = _item_entities(evidence, stored if stored and len(stored) == len(evidence) else None)
    ranked = rank_bridges(q, first["evidence"], first["previous"], h,
                          _entities(first["entities"]))
    bridge = ranked[0].entity if ranked else ""
    margin = (ranked[0].score / ranked[1].score if len(ranked) > 1 and ranked[1].score
              else 9.0)
    stems = _stems([*qp.predicate, *qp.description])
    slot = qp.hidden_labels or qp.answer_labels
    key = entity_key(bridge)
    labels = [e.label for es in ents[:keep] for e in es if e.key == key]
    label = next((lb for lb in labels if lb != "TITLE"), labels[0] if labels else "")
    runners = bridge_candidates(q, evidence, tried, fresh_from=keep,
                                fresh_weight=h.fresh_weight)[:h.pack]
    all_titles = {t for t in _titles(evidence) if t}
    out = {
        "bridge": bridge, "rewrite": tried[1], "margin": round(margin, 3),
        "bridge_label": label, "bridge_typed": bool(qp.hidden_labels) and label in qp.hidden_labels,
        "bridge_page": any(t and mentioned(t, tried[1]) and not mentioned(t, q)
                           for t in _titles(fresh)),
        "fresh_names_bridge": sum(1 for t in fresh[:3] if bridge and mentioned(bridge, t)),
        "fresh_predicate": max((_overlap(t, stems) for t in fresh[:3]), default=0),
        "kept_predicate": max((_overlap(t, stems) for t in kept[:3]), default=0),
        "typed_new": sum(1 for es in ents[keep:keep + 5] for e in es if e.label in slot
                         and not mentioned(e.text, q) and not mentioned(e.text, tried[1])),
        "back_link": any(mentioned(n, t) for t in fresh[:5] for n in qp.named),
        "kept_cover": sum(1 for n in qp.named if any(mentioned(n, t) for t in kept)),
        "runners_paged": sum(1 for c in runners if any(
            mentioned(c.entity, t) or mentioned(t, c.entity) for t in all_titles)),
        "named": len(qp.named), "hidden": bool(qp.hidden_head),
    }
    scores = second.get("scores")
    if scores:
        best = lambda xs: max(xs, default=0.0)  # noqa: E731
        vec = [s[0] if s else 0.0 for s in scores]
        rer = [s[1] if s else 0.0 for s in scores]
        out["d_vector"] = round(best(vec[keep:keep + 3]) - best(vec[:3]), 4)
        out["d_rerank"] = round(best(rer[keep:keep + 3]) - best(rer[:3]), 4)
    return out


def candidate_rows(capture: Path, stopped: Path, h: ChainHeuristics) -> list[dict]:
    """One row per question of the capture run (recall and searches in both runs), with the
    features of each candidate."""
    base, stop = _rows(capture), _rows(stopped)
    records: dict[str, list[dict]] = {}
    for line in (capture / "judge.jsonl").open():
        r = json.loads(line)
        records.setdefault(r["question"], []).append(r)
    out = []
    for qid, row in base.items():
        recs = records.get(row["question"], [])
        first = next((r for r in recs if len(r["previous"]) == 1), None)
        second = next((r for r in recs if len(r["previous"]) == 2
                       and r["previous"][1] == (row["queries"] + [""])[1]), None)
        other = stop.get(qid)
        item = {"id": qid, "type": row.get("type"), "base": row["recall"],
                "searches": len(row["queries"]),
                "stop": None if other is None else other["recall"]}
        if (first and second and second["sufficient"] is False and len(row["queries"]) == 3
                and other is not None and len(other["queries"]) == 2):
            item["candidate"] = True
            item.update(features(first, second, h))
        out.append(item)
    return out


def question_range(rows: list[dict], dataset: str, data: Path | None, skip_first: int = 0,
                   first: int = 0) -> list[dict]:
    """The rows of the data set's questions ``skip_first`` to ``first`` (file order; all
    when both are 0): held-out checks leave out the questions a rule was fit on."""
    if not (skip_first or first):
        return rows
    from memroute.evals.datasets import load_dataset

    order = [q.id for q in load_dataset(dataset, data, None).questions]
    keep = set(order[skip_first:first or None])
    return [x for x in rows if x["id"] in keep]


def write_rows(rows: list[dict], path: Path | None) -> None:
    """One JSON line per question row, when ``path`` is given."""
    if path:
        with path.open("w") as sink:
            for item in rows:
                sink.write(json.dumps(item, ensure_ascii=False) + "\n")


def simulate(rows: list[dict], rule: Callable[[dict], bool],
             saved: Callable[[dict], int] = lambda x: 1) -> dict:
    """Recall and searches per question when the candidates ``rule`` picks stop: each takes
    its ``stop`` recall in place of its ``base`` one and makes ``saved(row)`` fewer searches
    (one, the third, after the first rewrite)."""
    n = len(rows)
    picked = [x for x in rows if x.get("candidate") and rule(x)]
    delta = sum(x["stop"] - x["base"] for x in picked)
    return {"stopped": len(picked), "lost": sum(x["stop"] < x["base"] - 1e-9 for x in picked),
            "recall": round((sum(x["base"] for x in rows) + delta) / n, 4),
            "points": round(delta / n * 100, 2),
            "searches": round((sum(x["searches"] for x in rows)
                               - sum(saved(x) for x in picked)) / n, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path, help="capture dir (results + judge.jsonl)")
    parser.add_argument("stopped", type=Path, help="the run stopped after the first rewrite")
    parser.add_argument("--rows", type=Path, default=None, help="write per-question rows here")
    parser.add_argument("--skip-first", type=int, default=0,
                        help="leave out the data set's first N questions (held-out checks)")
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--data", type=Path, default=None,
                        help="the data file, for the question order of --skip-first")
    parser.add_argument("--planner", default="{}")
    args = parser.parse_args()
    h = replace(ChainHeuristics(), **json.loads(args.planner))
    rows = question_range(candidate_rows(args.capture, args.stopped, h), args.dataset,
                          args.data, args.skip_first)
    write_rows(rows, args.rows)
    cands = [x for x in rows if x.get("candidate")]
    print(json.dumps({"questions": len(rows), "candidates": len(cands),
                      "no_loss": sum(x["stop"] >= x["base"] - 1e-9 for x in cands),
                      **simulate(rows, lambda x: False)}))
    for name, rule in RULES.items():
        print(json.dumps({"rule": name, **simulate(rows, rule)}))


if __name__ == "__main__":
    main()
