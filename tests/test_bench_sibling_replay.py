"""The sibling replay's merges: a neighbour only takes the place of a hit whose document keeps
another place (`swap_in`), and a document the neighbours pushed out comes back
(`keep_titles`)."""

from __future__ import annotations

from benchmarks.sibling_replay import keep_titles, swap_in


def record(uid: str, content: str) -> dict:
    return {"uid": uid, "episodes": [[uid, content, None]]}


RECORDS = [record("a1", "A: one."), record("a2", "A: two."), record("b1", "B: one."),
           record("a3", "A: three (neighbour)."), record("c1", "C: one (neighbour).")]
FIRST = 3  # records 3 and 4 are neighbours


def test_a_neighbour_replaces_the_weakest_duplicate_of_a_document_never_a_lone_one() -> None:
    base = [(0, 0.9), (1, 0.5), (2, 0.4)]
    score = {0: 0.9, 1: 0.5, 2: 0.4, 3: 0.6, 4: 0.8}
    kept = dict(swap_in(score, base, RECORDS, FIRST))
    # best neighbour first: c1 (0.8) takes the place of a2 (0.5, A keeps a1); then a3 (0.6)
    # finds no duplicate left to beat, and b1, B's only hit, is never replaced
    assert set(kept) == {0, 2, 4}
    assert set(dict(swap_in({**score, 4: 0.1}, base, RECORDS, FIRST))) == {0, 2, 3}
    # below every duplicate: nothing changes
    assert dict(swap_in({**score, 3: 0.45, 4: 0.3}, base, RECORDS, FIRST)) == dict(base)


def test_a_document_pushed_out_by_neighbours_comes_back_in_place_of_the_last_one() -> None:
    base = [(0, 0.9), (2, 0.4)]
    order = [(0, 0.9), (3, 0.6)]  # with the neighbours, B's only hit fell out
    assert keep_titles(order, base, RECORDS, FIRST) == [(0, 0.9), (2, 0.4)]
    assert keep_titles(base, base, RECORDS, FIRST) == base
