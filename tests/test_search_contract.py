"""The search contract on the real store: results per nucleus, k results when the scope holds
k matching episodes, each episode once in `flatten`, no text twice in one response."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memroute import MemrouteRetriever
from memroute.errors import InvalidInputError
from memroute.retriever import render_turn
from memroute.memory import Episode, Memory, Scope, SyncMemory, flatten
from memroute.memory.models import disjoint_windows
from memroute.tools import MemorySearch

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
WORDS = ["parrot", "Kiwi", "sister", "Trondheim", "dentist", "laptop", "rain", "garden",
         "piano", "bakery", "ferry", "invoice"]

FIFTEEN_TURNS = [
    "Hi! I'm planning a trip to Norway next month.",
    "That sounds exciting. Which cities are you visiting?",
    "Oslo first, then Bergen for the fjords.",
    "Bergen is lovely; bring a raincoat.",
    "My sister lives in Trondheim, so I'll visit her too.",
    "Great, Trondheim has a beautiful cathedral.",
    "I still need to book the night train.",
    "The night train from Oslo to Trondheim is scenic.",
    "What should I pack for October?",
    "Layers, a warm sweater and waterproof shoes.",
    "Do I need cash in Norway?",
    "Cards are accepted almost everywhere.",
    "I'm also bringing my camera for the northern lights.",
    "October can be a good month for them up north.",
    "Thanks, that helps a lot!",
]


def conversation(scope_id: str, texts: list[str], session: str = "s") -> list[Episode]:
    return [Episode(content=t, session_id=session, producer="user" if i % 2 == 0 else "assistant",
                    produced_at=T0 + timedelta(minutes=i), uid=f"{scope_id}-{session}-{i}",
                    metadata={"turn": i}) for i, t in enumerate(texts)]


def new_scope() -> Scope:
    return Scope(org_id=f"contract-{uuid.uuid4().hex[:8]}")


async def test_every_matching_turn_of_a_short_conversation_is_returned(memory: Memory) -> None:
    """The issue's case: 15 turns, k=30 returned 6 results and lost the key fact."""
    scope = new_scope()
    await memory.add(scope, conversation(scope.org_id, FIFTEEN_TURNS))
    hits = await memory.search_scored(scope, "Where does my sister live?", k=30, context=(1, 2))
    assert len(hits) == 15
    assert len({h.uid for h in hits}) == 15
    sister = next(h for h in hits if "sister lives in Trondheim" in h.nucleus.content)
    assert [e.content for e in sister.episodes] == FIFTEEN_TURNS[3:7]
    assert hits.index(sister) < 3
    assert len(flatten(hits)) == 15


async def test_a_filter_matching_five_consecutive_turns_gives_five_results(
        memory: Memory) -> None:
    scope = new_scope()
    await memory.add(scope, conversation(scope.org_id, FIFTEEN_TURNS))
    window = {"$and": [{"turn": {"$gte": 4}}, {"turn": {"$lte": 8}}]}
    hits = await memory.search_scored(scope, "Trondheim", k=5, filters=window, context=(1, 2))
    assert sorted(h.nucleus.metadata["turn"] for h in hits) == [4, 5, 6, 7, 8]


async def test_a_short_sentence_probe_is_widened_until_k_episodes(memory: Memory) -> None:
    """Two long episodes fill the first probe's sentence hits; the probe goes on for k."""
    scope = new_scope()
    long_turns = [" ".join(f"Kiwi the parrot sings song number {n}." for n in range(12))
                  for _ in range(2)]
    others = ["The ferry leaves at noon.", "My invoice is overdue.", "The garden needs rain.",
              "The bakery opens early.", "I practise piano daily."]
    await memory.add(scope, conversation(scope.org_id, long_turns + others))
    hits = await memory.search_scored(scope, "Kiwi the parrot sings", k=5, candidates=5,
                                      context=(0, 0))
    assert len(hits) == 5
    assert {h.uid for h in hits} >= {f"{scope.org_id}-s-0", f"{scope.org_id}-s-1"}


async def test_a_selective_filter_that_stops_the_index_scan_early_still_gives_k(
        settings, embedder, monkeypatch) -> None:
    """600 turns in a scope with its own indexes (the bound lowered to 100 sentences), a
    filter matching 6 of them and a scan bound of 100 index tuples (pgvector's
    ``hnsw.max_scan_tuples``, lowered as a big scope would reach its default): the index scan
    stops before 5 rows pass, which is no proof of an exhausted scope. The exact scan of the
    filtered sentences settles it. Explicit sorts are off for this store's connections, so
    that the planner probes 600 rows through the HNSW index as it would a big scope's."""
    from memroute.memory import sql, tiers

    sep = "&" if "?" in settings.database_url else "?"
    memory = await Memory.open(settings.database_url + f"{sep}options=-c%20enable_sort%3Doff",
                               settings=settings.model_copy(
                                   update={"scope_index_min_sentences": 100}),
                               embedder=embedder, schema=f"scan_{uuid.uuid4().hex[:10]}")
    try:
        scope = new_scope()
        topics = ["parrot Kiwi sings", "sister in Trondheim", "dentist on Monday",
                  "laptop repair", "garden after rain", "piano lessons"]
        episodes = [Episode(content=f"Note {i}: {topics[i % 6]}, then {topics[i * 7 % 5]}.",
                            session_id=f"s{i // 50}", producer="user",
                            produced_at=T0 + timedelta(minutes=i), uid=f"n{i}",
                            metadata={"rare": i % 100 == 3}) for i in range(600)]
        for at in range(0, 600, 200):
            await memory.add(scope, episodes[at:at + 200])
        query = "parrot Kiwi sings"
        assert await memory.index_scopes() == 1
        async with memory._pool.connection() as conn:
            await conn.execute(f"ANALYZE {memory.schema}.sentences")
            cur = await conn.execute(
                f"EXPLAIN SELECT episode_uid FROM {memory.schema}.sentences s "
                "WHERE s.scope_key = %s ORDER BY s.embedding <=> %s LIMIT 60",
                [scope.key, (await memory.embed_queries([query]))[0]])
            plan = " ".join(r[0] for r in await cur.fetchall())
        assert f"using {tiers.index_name(scope.key)} " in plan  # a scan bound to reach

        monkeypatch.setattr(sql, "MAX_SCAN_TUPLES", 100)
        exact_scans = []
        exact_lane = sql.exact_lane

        async def counted(*args, **kwargs):
            exact_scans.append(args)
            return await exact_lane(*args, **kwargs)

        monkeypatch.setattr(sql, "exact_lane", counted)
        rare = {"rare": True}
        hits = await memory.search_scored(scope, query, k=5, filters=rare, context=(0, 0))
        assert len(hits) == 5 and all(h.nucleus.metadata["rare"] for h in hits)
        assert exact_scans  # the index scan did stop short
        every = await memory.search_scored(scope, query, k=10, filters=rare, context=(0, 0))
        assert sorted(h.uid for h in every) == sorted(f"n{i}" for i in range(3, 600, 100))
    finally:
        await memory.close()


async def test_k_beyond_the_hnsw_ef_search_range_works(memory: Memory) -> None:
    """k = 400 asks for 1200 candidates; ef_search is clamped to pgvector's 1000."""
    scope = new_scope()
    await memory.add(scope, conversation(scope.org_id, FIFTEEN_TURNS))
    hits = await memory.search_scored(scope, "Norway", k=400, context=(0, 0))
    assert len(hits) == 15


def windows_in_session_order(episodes: list[Episode], nucleus: Episode, before: int,
                             after: int) -> list[str]:
    """The uids of a nucleus's window among ``episodes`` (those the search may return: its
    filters bound the context too)."""
    session = sorted((e for e in episodes if e.session_id == nucleus.session_id),
                     key=lambda e: e.produced_at)
    at = [e.uid for e in session].index(nucleus.uid)
    return [e.uid for e in session[max(0, at - before):at + after + 1]]


@st.composite
def stores(draw):
    """Sessions of turns made of words from a small vocabulary (every text distinct)."""
    sessions = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    episodes, n = [], 0
    for s, length in enumerate(sessions):
        for i in range(length):
            words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
            episodes.append(Episode(
                content=f"Turn {n}: " + " ".join(words) + ".", session_id=f"s{s}",
                producer=draw(st.sampled_from(["user", "assistant"])),
                produced_at=T0 + timedelta(minutes=draw(st.integers(0, 5)) + 10 * i),
                uid=f"e{n}", metadata={"turn": n}))
            n += 1
    return episodes


FILTERS = st.one_of(
    st.none(),
    st.sampled_from(["s0", "s1"]).map(lambda s: {"session_id": s}),
    st.just({"producer": "user"}),
    st.integers(0, 12).map(lambda t: {"turn": {"$gte": t}}),
)


def matches(episode: Episode, filters: dict | None) -> bool:
    if filters is None:
        return True
    if "session_id" in filters:
        return episode.session_id == filters["session_id"]
    if "producer" in filters:
        return episode.producer == filters["producer"]
    return episode.metadata["turn"] >= filters["turn"]["$gte"]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(episodes=stores(), query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
       k=st.integers(1, 20), before=st.integers(0, 3), after=st.integers(0, 3),
       filters=FILTERS)
def test_search_contract_holds_on_random_stores(sync_memory: SyncMemory, episodes, query, k,
                                                before, after, filters) -> None:
    scope = new_scope()
    episodes = [e.model_copy(update={"uid": f"{scope.org_id}-{e.uid}"}) for e in episodes]
    sync_memory.add(scope, episodes)
    text = " ".join(query)
    matching = [e for e in episodes if matches(e, filters)]
    by_uid = {e.uid: e for e in episodes}

    hits = sync_memory.search_scored(scope, text, k=k, filters=filters, context=(before, after))
    # k results whenever the scope, after filters, holds k matching episodes
    assert len(hits) == min(k, len(matching))
    assert len({h.uid for h in hits}) == len(hits)
    assert {h.uid for h in hits} <= {e.uid for e in matching}
    for hit in hits:  # each result keeps its own window, contiguous in session order
        assert [e.uid for e in hit.episodes] == windows_in_session_order(
            matching, by_uid[hit.uid], before, after)
    flat = flatten(hits)
    assert len({e.uid for e in flat}) == len(flat)
    assert {e.uid for e in flat} == {e.uid for h in hits for e in h.episodes}

    # every nucleus that reaches the top k is there (ranking by vector score, exact oracle)
    plain = sync_memory.search_scored(scope, text, k=k, filters=filters, context=(0, 0),
                                      rerank=False)
    query_vector = sync_memory.embed_queries([text])[0]
    returned = {h.uid for h in plain}
    worst = min((h.vector_score for h in plain), default=1.0)
    for episode in matching:
        if episode.uid not in returned:
            alone = sync_memory.search_scored(scope, text, k=1, context=(0, 0), rerank=False,
                                              filters={"turn": episode.metadata["turn"]})
            best = float(np.max(alone[0].sentence_embeddings @ query_vector))
            assert best <= worst + 1e-4, f"{episode.uid} ({best:.4f}) beats a returned result"

    # one response never shows an episode twice: windows, retriever documents, a tool page
    windows = disjoint_windows(hits)
    uids = [e.uid for w in windows for e in w.episodes]
    assert len(uids) == len(set(uids))
    for hit, window in zip(hits, windows):
        assert hit.nucleus in window.episodes
        assert sorted([e.uid for e in window.episodes] + window.shown_elsewhere) == \
            sorted(e.uid for e in hit.episodes)
    retriever = MemrouteRetriever(memory=sync_memory, scope=scope, k=k, filters=filters,
                                  strategy="direct")
    docs = retriever.invoke(text)
    lines = [line for d in docs for line in d.page_content.split("\n")]
    assert len(lines) == len(set(lines))
    assert len({d.id for d in docs}) == len(docs)
    for doc in docs:
        nucleus = by_uid[doc.id]
        assert render_turn(nucleus) in doc.page_content.split("\n")  # "[time] producer: text"
        assert set(doc.metadata["shown_elsewhere"]) <= set(doc.metadata["context_uids"])
    page, artifacts = MemorySearch(sync_memory, scope, page_size=5, filters=filters).page(text)
    if matching:
        turns = [line.split(": ", 1)[1] for line in page.split("\n") if line.startswith("   ")]
        assert len(turns) == len(set(turns))
        assert {a["uid"] for a in artifacts} <= {e.uid for e in matching}


async def parrot_and_sanctuary(memory: Memory) -> Scope:
    """A strong match (a-1) between two weak turns, and a weak match (b-0) elsewhere."""
    scope = new_scope()
    await memory.add(scope, conversation(scope.org_id, [
        "Hello there, how was your weekend?", "I adopted a parrot named Kiwi on Saturday.",
        "Nice, the weather was great too."], session="a"))
    await memory.add(scope, conversation(scope.org_id, [
        "We visited a bird sanctuary last spring.", "Okay, noted."], session="b"))
    return scope


async def test_a_neighbour_of_a_ranked_match_does_not_take_its_credit(memory: Memory) -> None:
    """A turn whose window holds a better result's match scores on its own text only."""
    scope = await parrot_and_sanctuary(memory)
    hits = await memory.search_scored(scope, "adopted a parrot named Kiwi", k=3, context=(1, 1))
    assert [h.uid for h in hits[:2]] == [f"{scope.org_id}-a-1", f"{scope.org_id}-b-0"]
    reranked = await memory.rerank(list(reversed(hits)), ["adopted a parrot named Kiwi"], 2)
    assert [r.uid for r in reranked] == [f"{scope.org_id}-a-1", f"{scope.org_id}-b-0"]


async def test_window_credit_keeps_the_match_first_and_its_neighbours_next(
        memory: Memory) -> None:
    """``credit="window"`` (the agent's final rerank): a result scores on its whole window,
    so the neighbour whose window holds the Kiwi turn ranks above the weak bird-sanctuary
    match, yet never above the Kiwi turn itself, whatever order the pool comes in."""
    scope = await parrot_and_sanctuary(memory)
    queries = ["adopted a parrot named Kiwi", "what pet did I get"]
    hits = await memory.search_scored(scope, queries[0], k=5, context=(1, 1))
    match, neighbour, weak = (f"{scope.org_id}-{u}" for u in ("a-1", "a-0", "b-0"))
    for pool in (hits, list(reversed(hits))):
        ranked = [r.uid for r in await memory.rerank(pool, queries, 5, credit="window")]
        assert ranked[0] == match and ranked.index(neighbour) < ranked.index(weak)
        by_nucleus = [r.uid for r in await memory.rerank(pool, queries, 5)]
        assert by_nucleus[0] == match and by_nucleus.index(weak) < by_nucleus.index(neighbour)
    with pytest.raises(InvalidInputError):
        await memory.rerank(hits, queries, 2, credit="sentence")


async def test_search_decodes_the_metadata_of_every_episode_it_shows(memory: Memory) -> None:
    """A search reads metadata as JSON text and decodes the shown episodes' only: each result
    and window member carries what was stored (nested values, unicode, numbers, null)."""
    scope = new_scope()
    episodes = [Episode(content=t, session_id="s", producer="user", uid=f"m{i}",
                        produced_at=T0 + timedelta(minutes=i),
                        metadata={"turn": i, "tags": ["ñandú", "日本", {"deep": [1.5, None]}],
                                  "ok": i % 2 == 0, "big": 2 ** 62 + i, "quote": 'say "hi"\n'})
                for i, t in enumerate(FIFTEEN_TURNS)]
    await memory.add(scope, episodes)
    stored = {s.episode.uid: s.episode.metadata
              for s in await memory.get(scope, [e.uid for e in episodes])}
    for context in [(0, 0), (1, 2)]:
        hits = await memory.search_scored(scope, "trip to Trondheim by night train", k=6,
                                          context=context)
        shown = [e for h in hits for e in h.episodes]
        assert len(shown) >= 6
        assert all(e.metadata == stored[e.uid] for e in shown)
        assert all(h.nucleus.metadata == stored[h.uid] for h in hits)
