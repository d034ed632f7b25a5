"""Which chains could stop after their FIRST search, and whether what the judge sees at its
first judgment tells them apart (docs/evaluation.md, "Stopping after the first search").

Inputs: a capture run of the defaults (``benchmarks.stop_capture``: ``judge.jsonl`` holds
every judgment's inputs with each evidence item's pool scores) and a run of direct search on
the same questions and store (``memroute eval --strategies direct``, k = 10). A
**candidate** is a question the defaults sent to a chain that searched more than once and
whose first judgment was recorded; a chain stopped at that judgment returns what its first
search returned, which is direct's row (the first judgment's evidence is direct's returned
list, item for item), so its label "stopping loses nothing" is direct's recall >= the
defaults'. Features come from the first judgment's inputs only (no gold). Stopping the
candidates a rule picks is simulated per question: direct's row replaces the default's, and
its searches become one.

    python -m benchmarks.stop_first <capture>/hotpotqa <direct-run>/results.jsonl \\
        --rows rows.jsonl [--skip-first 300 --data $H] [--first 300]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from benchmarks import stop_features
from benchmarks.stop_features import _entities, _rows, question_range, write_rows
from memroute.memory.titles import split_title, without_disambiguation
from memroute.nlp import entity_key
from memroute.planners.offline.bridging import ChainHeuristics
from memroute.planners.offline.entities import key_terms, mentioned
from memroute.planners.offline.parsed import (
    _answers,
    _item_entities,
    _overlap,
    _stems,
    bridge_in_sight,
    rank_bridges,
)
from memroute.planners.offline.question_parse import read_question


def features(first: dict, h: ChainHeuristics = ChainHeuristics()) -> dict:
    """What the judge sees at its first judgment (the question's own search):

    ``bridge`` / ``margin`` (its best ranked bridge candidate, its score over the runner-up's)
    / ``n_cands``; ``bridge_typed`` (the bridge's stored label fits the hidden slot);
    ``bridge_paged`` / ``bridge_items`` (items filed under the bridge's title: its page is in
    the top 10); ``in_sight`` (`parsed.bridge_in_sight`); ``named`` / ``named_paged`` (the
    question's named things, and those with facts filed under them); ``titles`` (distinct
    titles of the top 10); ``linked`` (titles the question does not name that an item filed
    under a named title mentions) and ``linked_items`` (items filed under those);
    ``typed_linked`` (entities of the hidden slot's / answer's type, new to the question, in
    items that also name a named thing); ``answers`` (`parsed._answers` on the top 3 with the
    named things as anchors: the first-hop "filled" test); ``pred_linked`` (most predicate
    words an item filed under a linked title states); ``hidden``; ``attribute``; and from the
    pool scores ``top_rerank``, ``rerank10`` (the 10th), ``gap_rerank``, ``top_vector``,
    ``linked_rerank`` (best rerank score of an item filed under a linked title); ``bridge_pred``
(most predicate words an item filed under the bridge's title states) and ``bridge_answer``
(such an item holds a new entity of the answer's type); ``cands_paged`` (of the 3 best
bridge candidates, the searches the chain plans, those whose page is in the top 10)."""
    q = first["question"]
    qp = read_question(q)
    evidence = first["evidence"]
    stored = _entities(first["entities"])
    stored = stored if stored and len(stored) == len(evidence) else None
    ents = _item_entities(evidence, stored)
    ranked = rank_bridges(q, evidence, first["previous"], h, stored)
    bridge = ranked[0].entity if ranked else ""
    margin = (ranked[0].score / ranked[1].score if len(ranked) > 1 and ranked[1].score
              else 9.0)
    key = entity_key(bridge)
    labels = [e.label for es in ents for e in es if e.key == key]
    label = next((lb for lb in labels if lb != "TITLE"), labels[0] if labels else "")
    titles = [split_title(t)[0] for t in evidence]
    named_titles = {t for t in titles if t and mentioned(t, q)}
    others = {t for t in titles if t and t not in named_titles}
    linked = {o for o in others if any(
        mentioned(without_disambiguation(o), split_title(evidence[i])[1])
        for i, t in enumerate(titles) if t in named_titles)}
    stems = _stems([*qp.predicate, *qp.description])
    slot = qp.hidden_labels or qp.answer_labels
    named_keys = qp.named_keys
    typed_linked = sum(
        1 for es, text in zip(ents, evidence) if any(
            e.key in named_keys or mentioned(n, text) for e in es for n in qp.named[:1])
        for e in es if e.label in slot and e.key not in named_keys
        and not mentioned(e.text, q))
    attribute = bool(qp.named) and not qp.hidden_head
    stems_ans = _stems(qp.predicate or key_terms(q, drop=qp.named))
    answers = bool(qp.named) and any(_answers(evidence[i], ents[i], qp.named, qp, stems_ans)
                                     for i in range(min(3, len(evidence))))
    out = {
        "bridge": bridge, "margin": round(margin, 3), "n_cands": len(ranked),
        "bridge_typed": bool(qp.hidden_labels) and label in qp.hidden_labels,
        "bridge_items": sum(1 for t in titles if t and entity_key(without_disambiguation(t)) == key),
        "in_sight": bridge_in_sight(q, evidence),
        "named": len(qp.named),
        "named_paged": sum(1 for n in qp.named if any(t and mentioned(t, n) or t and mentioned(n, t)
                                                      for t in titles)),
        "titles": len({t for t in titles if t}),
        "linked": len(linked),
        "linked_items": sum(1 for t in titles if t in linked),
        "typed_linked": typed_linked,
        "answers": answers,
        "pred_linked": max((_overlap(evidence[i], stems) for i, t in enumerate(titles)
                            if t in linked), default=0),
        "hidden": bool(qp.hidden_head), "attribute": attribute,
    }
    out["bridge_paged"] = out["bridge_items"] > 0
    paged = {entity_key(without_disambiguation(t)) for t in titles if t}
    out["cands_paged"] = sum(entity_key(c.entity) in paged for c in ranked[:3])
    on_bridge = [i for i, t in enumerate(titles) if t and entity_key(without_disambiguation(t)) == key]
    out["bridge_pred"] = max((_overlap(evidence[i], stems) for i in on_bridge), default=0)
    out["bridge_answer"] = any(e.label in qp.answer_labels and e.key not in named_keys
                               and e.key != key for i in on_bridge for e in ents[i])
    scores = first.get("scores")
    if scores:
        vec = [s[0] if s else 0.0 for s in scores]
        rer = [s[1] if s else 0.0 for s in scores]
        out["top_rerank"] = round(max(rer, default=0.0), 4)
        out["rerank10"] = round(rer[-1] if rer else 0.0, 4)
        out["gap_rerank"] = round(out["top_rerank"] - out["rerank10"], 4)
        out["top_vector"] = round(max(vec, default=0.0), 4)
        out["linked_rerank"] = round(max((rer[i] for i, t in enumerate(titles) if t in linked),
                                         default=-9.0), 4)
    return out


def _direct(path: Path, metric: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in path.open():
        row = json.loads(line)
        if row["strategy"] == "direct" and row.get("k", 10) == 10 and row["id"] not in out:
            out[row["id"]] = row["metrics"][metric] or 0.0
    return out


def candidate_rows(capture: Path, direct: Path, h: ChainHeuristics) -> list[dict]:
    """One row per question of the capture run (recall and searches, direct's recall), with
    the features of each candidate."""
    head = json.loads((capture / "summary.json").read_text())["headline_metric"]
    base, stop = _rows(capture), _direct(direct, head)
    firsts: dict[str, dict] = {}
    for line in (capture / "judge.jsonl").open():
        r = json.loads(line)
        if len(r["previous"]) == 1:
            firsts.setdefault(r["question"], r)
    out = []
    for qid, row in base.items():
        first = firsts.get(row["question"])
        item = {"id": qid, "type": row.get("type"), "route": row.get("route"),
                "base": row["recall"], "searches": len(row["queries"]), "stop": stop.get(qid)}
        if (first and first["sufficient"] is False and row.get("route") == "chain"
                and len(row["queries"]) > 1 and item["stop"] is not None
                and first["evidence"] and row["queries"][0] == first["previous"][0]):
            item["candidate"] = True
            item.update(features(first, h))
        out.append(item)
    return out


def simulate(rows: list[dict], rule: Callable[[dict], bool]) -> dict:
    """Recall and searches per question when the candidates ``rule`` picks stop at their
    first judgment (direct's row in place of the default's, one search)."""
    return stop_features.simulate(rows, rule, saved=lambda x: x["searches"] - 1)


RULES: dict[str, Callable[[dict], bool]] = {
    "stop every chain": lambda x: True,
    "oracle (no loss)": lambda x: x["stop"] >= x["base"] - 1e-9,
    "in sight (parsed.bridge_in_sight)": lambda x: x["in_sight"],
    "bridge paged: the best bridge's page is in the top 10": lambda x: x["bridge_paged"],
    "bridge paged 2+ (two of its facts)": lambda x: x["bridge_items"] >= 2,
    "bridge paged & typed": lambda x: x["bridge_paged"] and x["bridge_typed"],
    "bridge paged 2+ & in sight": lambda x: x["bridge_items"] >= 2 and x["in_sight"],
    "margin >= 3 & bridge paged": lambda x: x["margin"] >= 3 and x["bridge_paged"],
    "bridge page states 2+ predicate words": lambda x: x["bridge_pred"] >= 2,
    "bridge page holds an answer-typed entity": lambda x: x["bridge_answer"],
    "typed_linked >= 2 & bridge paged": lambda x: x["typed_linked"] >= 2 and x["bridge_paged"],
    "linked items 2+": lambda x: x["linked_items"] >= 2,
    "linked items 3+": lambda x: x["linked_items"] >= 3,
    "bridge paged 2+ & pred_linked >= 2": lambda x: x["bridge_items"] >= 2
    and x["pred_linked"] >= 2,
    "n_cands < 24 & bridge paged 3+": lambda x: x["n_cands"] < 24 and x["bridge_items"] >= 3,
    "2 of the 3 best bridges paged": lambda x: x["cands_paged"] >= 2,
    "2 of the 3 best bridges paged & bridge paged 2+": lambda x: x["cands_paged"] >= 2
    and x["bridge_items"] >= 2,
    "answers (the first-hop filled test)": lambda x: x["answers"],
    "attribute & answers": lambda x: x["attribute"] and x["answers"],
    "top rerank >= 0.84": lambda x: x.get("top_rerank", 0.0) >= 0.84,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path, help="capture dir (results + judge.jsonl)")
    parser.add_argument("direct", type=Path, help="results.jsonl holding direct rows, k = 10")
    parser.add_argument("--rows", type=Path, default=None, help="write per-question rows here")
    parser.add_argument("--skip-first", type=int, default=0,
                        help="leave out the data set's first N questions (held-out checks)")
    parser.add_argument("--first", type=int, default=0,
                        help="keep only the data set's first N questions")
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--data", type=Path, default=None,
                        help="the data file, for the question order of --skip-first / --first")
    parser.add_argument("--planner", default="{}")
    args = parser.parse_args()
    h = replace(ChainHeuristics(), **json.loads(args.planner))
    rows = question_range(candidate_rows(args.capture, args.direct, h), args.dataset,
                          args.data, args.skip_first, args.first)
    write_rows(rows, args.rows)
    cands = [x for x in rows if x.get("candidate")]
    n = len(rows)
    total = sum(x["searches"] for x in rows)
    print(json.dumps({"questions": n, "candidates": len(cands),
                      "no_loss": sum(x["stop"] >= x["base"] - 1e-9 for x in cands),
                      "searches_to_save_for_2.2": round(max(0.0, total - 2.2 * n), 1),
                      **simulate(rows, lambda x: False)}))
    for name, rule in RULES.items():
        print(json.dumps({"rule": name, **simulate(rows, rule)}))


if __name__ == "__main__":
    main()
