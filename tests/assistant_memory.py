"""The assistant-memory fixture (``fixtures/assistant_memory/``): invented first-person
user/assistant conversations, each in its own scope padded with 520 unrelated chat turns,
and labelled questions over them; what `tests/test_assistant_memory.py` asserts and what
``python -m tests.assistant_memory`` prints (a table per half, direct against auto).

Run as a script: ``MEMROUTE_HOME=/tmp/am .venv/bin/python -m tests.assistant_memory``
(``-E``: half E alone; ``-v``: every question).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from lemminflect import getAllLemmas

from memroute import RetrievalAgent, Scope
from memroute.memory import Memory

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "assistant_memory"
FIXTURE = json.loads((FIXTURE_DIR / "conversations.json").read_text(encoding="utf-8"))
# half E: its own file, written by someone who had not read the rules (tune e1, e2; check e3, e4)
HALF_E = json.loads((FIXTURE_DIR / "half_e.json").read_text(encoding="utf-8"))
PADDING = json.loads((FIXTURE_DIR / "padding_locomo.json").read_text(encoding="utf-8"))["turns"]
QUESTIONS: list[dict] = FIXTURE["questions"]
E_QUESTIONS: list[dict] = HALF_E["questions"]
CONVERSATIONS = FIXTURE["conversations"] + HALF_E["conversations"]
HALVES = {c["id"]: c["half"] for c in CONVERSATIONS}
PARTS = {c["id"]: c.get("part", "") for c in CONVERSATIONS}  # halves D and E: tune, check
TIME_HALVES = ("D", "E")  # measured per part and kind, direct against auto
K = 5
NO_NEIGHBOURS = (0, 0)  # each result is one turn: a hit is the gold turn itself
EXPECTED_ROUTE = {"attribute": "direct", "coordination": "split", "bridge": "chain"}
_TOKEN = re.compile(r"[\w.]+(?:['’]\w+)?")


def episodes(conversation: dict) -> list[dict]:
    """The padding (a year earlier, a turn a minute), then the conversation's sessions."""
    start = datetime(2023, 1, 2, 12, tzinfo=timezone.utc)
    out = [{"content": text, "producer": speaker, "session_id": f"pad{i // 40}",
            "produced_at": start + timedelta(minutes=i), "uid": f"{conversation['id']}-pad-{i}"}
           for i, (speaker, text) in enumerate(PADDING)]
    for s, session in enumerate(conversation["sessions"]):
        begin = datetime.fromisoformat(session["date"])
        for t, (speaker, text) in enumerate(session["turns"]):
            out.append({"content": text, "producer": speaker, "session_id": f"s{s + 1}",
                        "produced_at": begin + timedelta(seconds=30 * t),
                        "uid": f"{conversation['id']}-s{s + 1}-{t}"})
    return out


async def build(memory: Memory, conversations: list[dict] | None = None) -> dict[str, Scope]:
    """Each conversation (by default halves A-D) in its own fresh scope; returns them by
    conversation id."""
    run = uuid.uuid4().hex[:8]
    scopes = {}
    for conversation in conversations or FIXTURE["conversations"]:
        scope = Scope(org_id=f"am-{run}", project_id="assistant", user_id=conversation["id"])
        await memory.add(scope, episodes(conversation))
        scopes[conversation["id"]] = scope
    return scopes


def found(results, gold: list[str]) -> bool:
    """Every gold fact is in a returned turn."""
    return gold_found(results, gold) == len(gold)


def gold_found(results, gold: list[str]) -> int:
    """How many gold facts are in a returned turn."""
    texts = [r.nucleus.content for r in results]
    return sum(any(g in t for t in texts) for g in gold)


def stale_first(results, question: dict) -> bool:
    """Whether a superseded statement (``stale``) ranks above the newest one (``gold``)."""
    texts = [r.nucleus.content for r in results]
    rank = {}
    for key in ("gold", "stale"):
        hits = [i for i, t in enumerate(texts) for g in question.get(key, []) if g in t]
        rank[key] = min(hits) if hits else len(texts)
    return bool(question.get("stale")) and rank["stale"] < rank["gold"]


def _words(text: str) -> list[str]:
    return [re.sub(r"['’]s$", "", w).rstrip(".") for w in _TOKEN.findall(text)]


# A sub-question about one of several subjects agrees with it ("What do A and B eat?" ->
# "What does A eat?"): the singular is the question's own word.
_SINGULAR = {"do": "does", "are": "is", "were": "was", "have": "has"}


# the words a whole question is asked with ("When was the camping trip?", "Who is my wife's
# sister?"): never a run of added words
_ASKING = {"when", "who", "what", "where", "is", "was", "are", "were", "called", "did", "does",
           "have", "has"}


def _lemmas(word: str) -> set[str]:
    """The lemmas of a word as a verb ("booked" -> "book", "rung" -> "ring"): another form of
    the question's own word adds nothing to it."""
    return set(getAllLemmas(word, upos="VERB").get("VERB", ()))


# the days a time expression names, as a person says them ("Saturday 28 or Sunday 29 June")
_CALENDAR = re.compile(r"(?i)\d{1,4}|or|and|of|the|week|(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
                       r"january|february|march|april|may|june|july|august|september|"
                       r"october|november|december")


def added_words(question: str, query: str) -> list[list[str]]:
    """The runs of ``query``'s words that ``question`` does not hold (possessives folded),
    the words a question is asked with aside."""
    known = {w.casefold() for w in _words(question)} | _ASKING
    known |= {_SINGULAR[w] for w in known if w in _SINGULAR}
    known |= {lemma for w in known for lemma in _lemmas(w)}
    runs: list[list[str]] = [[]]
    for word in _words(query):
        if not word or word.casefold() in known or _lemmas(word.casefold()) & known:
            runs.append([])
        else:
            runs[-1].append(word)
    return [r for r in runs if r]


_NAME_CONNECTORS = frozenset({"and", "of", "the", "de", "&"})


def _name_words(words: list[str]) -> bool:
    """Capitalised words, with connectors between them ("Salt and Semaphore", "Bank of
    Ireland")."""
    return bool(words) and words[0][:1].isupper() and words[-1][:1].isupper() and all(
        w[:1].isupper() or w.casefold() in _NAME_CONNECTORS for w in words)


def _names_in_memory() -> set[str]:
    """Every run of capitalised words of the stored turns, connectors between them allowed
    (a name the memory holds)."""
    turns = [t for c in CONVERSATIONS for s in c["sessions"] for _, t in s["turns"]]
    turns += [t for _, t in PADDING]
    names = set()
    for text in turns:
        words = _words(text)
        for i in range(len(words)):
            for j in range(i + 1, min(len(words), i + 5) + 1):
                if _name_words(words[i:j]):
                    names.add(" ".join(words[i:j]).casefold())
    return names


NAMES = _names_in_memory()


def clean_rewrite(question: str, query: str) -> bool:
    """At most one run of new words, and that run one name of the memory (its words
    capitalised and found together in one turn): no evidence word beside it."""
    runs = [r for r in added_words(question, query) if not all(_CALENDAR.fullmatch(w)
                                                               for w in r)]
    if not runs:
        return True
    run = runs[0]
    return len(runs) == 1 and _name_words(run) and " ".join(run).casefold() in NAMES


@dataclass
class Outcome:
    question: dict
    route: str
    reason: str
    direct_found: bool
    auto_found: bool
    searches: int
    rewrites: list[str]
    stop_reason: str

    @property
    def kind(self) -> str:
        return self.question["kind"]

    stale_first: bool = False  # a changed fact: the older statement ranked above the newer
    direct_turns: int = 0  # gold turns found as results
    direct_stale_first: bool = False
    auto_turns: int = 0

    @property
    def routed_right(self) -> bool:
        return self.route == EXPECTED_ROUTE.get(self.kind, self.route)

    @property
    def clean(self) -> bool:
        return all(clean_rewrite(self.question["q"], q) for q in self.rewrites)


async def run(memory: Memory, scopes: dict[str, Scope], agent: RetrievalAgent | None = None,
              questions: list[dict] | None = None) -> list[Outcome]:
    """Direct and auto on each question at `K`, without neighbours."""
    agent = agent or RetrievalAgent(memory, planner="offline", context=NO_NEIGHBOURS)
    out = []
    for q in questions or QUESTIONS:
        scope = scopes[q["conv"]]
        as_of = q.get("as_of")  # when the question is asked (None: now)
        direct = await agent.aretrieve(q["q"], scope=scope, k=K, strategy="direct", as_of=as_of)
        auto = await agent.aretrieve(q["q"], scope=scope, k=K, as_of=as_of)
        rewrites = [s for s in auto.queries if s != q["q"]]
        out.append(Outcome(q, auto.route, auto.route_reason, found(direct.results, q["gold"]),
                           found(auto.results, q["gold"]), len(auto.queries), rewrites,
                           auto.stop_reason, stale_first=stale_first(auto.results, q),
                           direct_turns=gold_found(direct.results, q["gold"]),
                           auto_turns=gold_found(auto.results, q["gold"]),
                           direct_stale_first=stale_first(direct.results, q)))
    return out


def turns_found(o: Outcome, strategy: str) -> int:
    return o.auto_turns if strategy == "auto" else o.direct_turns


def summary(outcomes: list[Outcome]) -> dict:
    """The fixture's targets, measured."""
    by_kind: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_kind.setdefault(o.kind, []).append(o)
    bridges = by_kind.get("bridge", [])
    attributes = by_kind.get("attribute", [])
    rewrites = [(o.question["q"], r) for o in outcomes for r in o.rewrites]
    return {
        "questions": len(outcomes),
        "routed_right": {k: sum(o.routed_right for o in v) / len(v) for k, v in by_kind.items()},
        "direct_found": sum(o.direct_found for o in outcomes) / len(outcomes),
        "auto_found": sum(o.auto_found for o in outcomes) / len(outcomes),
        "found_by_kind": {k: (sum(o.direct_found for o in v) / len(v),
                              sum(o.auto_found for o in v) / len(v)) for k, v in by_kind.items()},
        "bridges_found": sum(o.auto_found for o in bridges) / max(1, len(bridges)),
        "auto_lost": [o.question["q"] for o in outcomes
                      if o.direct_turns > o.auto_turns],
        "rewrites": len(rewrites),
        "unclean_rewrites": [(q, r) for q, r in rewrites if not clean_rewrite(q, r)],
        "searches": sum(o.searches for o in outcomes) / len(outcomes),
        "searches_by_kind": {k: sum(o.searches for o in v) / len(v) for k, v in by_kind.items()},
        "attribute_searches": sorted({o.searches for o in attributes}),
        "gold_turns": sum(len(o.question["gold"]) for o in outcomes),
        "gold_turns_auto": sum(turns_found(o, "auto") for o in outcomes),
        "gold_turns_direct": sum(turns_found(o, "direct") for o in outcomes),
        "stale_first": [o.question["q"] for o in outcomes if o.stale_first],
        "direct_stale_first": [o.question["q"] for o in outcomes if o.direct_stale_first],
        "stop_reasons": dict(Counter(o.stop_reason for o in outcomes)),
    }


def half(outcomes: list[Outcome], name: str) -> list[Outcome]:
    return [o for o in outcomes if HALVES[o.question["conv"]] == name]


def table(outcomes: list[Outcome]) -> str:
    """A markdown table per half: routes, recall and cost against the targets."""
    rows = ["| half | routes right (attr / coord / bridge) | direct found | auto found | "
            "bridges found | auto lost | unclean rewrites | searches (attr / coord / bridge) |",
            "|---|---|---|---|---|---|---|---|"]
    present = {HALVES[o.question["conv"]] for o in outcomes}
    for name in sorted(present - set(TIME_HALVES)):
        s = summary(half(outcomes, name))
        r, c = s["routed_right"], s["searches_by_kind"]
        rows.append(
            f"| {name} | {r['attribute']:.0%} / {r['coordination']:.0%} / {r['bridge']:.0%} | "
            f"{s['direct_found']:.1%} | {s['auto_found']:.1%} | {s['bridges_found']:.0%} | "
            f"{len(s['auto_lost'])} | {len(s['unclean_rewrites'])}/{s['rewrites']} | "
            f"{s['searches']:.2f} ({c['attribute']:.2f} / {c['coordination']:.2f} / "
            f"{c['bridge']:.2f}) |")
    tables = [time_table(outcomes, name) for name in TIME_HALVES if name in present]
    return "\n\n".join(([] if len(rows) == 2 else ["\n".join(rows)]) + tables)


def time_table(outcomes: list[Outcome], name: str = "D") -> str:
    """Half D or E (time and change), per part and kind: gold turns found by direct and auto,
    questions auto lost, stale statements first, unclean rewrites, searches."""
    rows = [f"| half {name} | questions | gold turns | direct | auto | auto lost | stale first "
            "(direct / auto) | unclean rewrites | searches |",
            "|---|---|---|---|---|---|---|---|---|"]
    d = half(outcomes, name)
    groups = [(f"part {p}", [o for o in d if PARTS[o.question["conv"]] == p])
              for p in ("tune", "check")]
    groups += [(k, [o for o in d if o.kind == k]) for k in sorted({o.kind for o in d})]
    for name, group in groups:
        if not group:
            continue
        s = summary(group)
        rows.append(f"| {name} | {s['questions']} | {s['gold_turns']} | "
                    f"{s['gold_turns_direct']} ({s['gold_turns_direct'] / s['gold_turns']:.0%}) | "
                    f"{s['gold_turns_auto']} ({s['gold_turns_auto'] / s['gold_turns']:.0%}) | "
                    f"{len(s['auto_lost'])} | "
                    f"{len(s['direct_stale_first'])} / {len(s['stale_first'])} | "
                    f"{len(s['unclean_rewrites'])}/{s['rewrites']} | "
                    f"{s['searches']:.2f} (max {max(o.searches for o in group)}) |")
    return "\n".join(rows)


async def _main() -> None:
    """Halves A-D, or half E alone with ``-E``; ``-v`` prints every question."""
    half_e = "-E" in sys.argv
    memory = await Memory.open(schema=f"am_{uuid.uuid4().hex[:8]}")
    try:
        scopes = await build(memory, HALF_E["conversations"] if half_e else None)
        outcomes = await run(memory, scopes, questions=E_QUESTIONS if half_e else None)
    finally:
        await memory.close()
    print(table(outcomes))
    if "-v" in sys.argv:
        for o in outcomes:
            if "-D" in sys.argv and HALVES[o.question["conv"]] != "D":
                continue
            mark = ("ok " if o.auto_found else "MISS") + (" " if o.routed_right else "R")
            print(f"{mark} {o.question['conv']} [{o.kind[:5]}] {o.question['q']} -> {o.route} "
                  f"({o.reason}) {o.rewrites} stop={o.stop_reason} "
                  f"turns auto {o.auto_turns}/direct {o.direct_turns} of "
                  f"{len(o.question['gold'])}{' STALE-FIRST' if o.stale_first else ''}")


if __name__ == "__main__":
    asyncio.run(_main())
