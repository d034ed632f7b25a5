"""The vocabulary as data (issue 46, items 3 and 7): the words the reading rules are written
with live in `memroute.reading.vocabulary`, each entry naming the kind of sentence it is for and
where it came from; no code module of the planner, time or reading holds a word list of its own.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from spacy.glossary import GLOSSARY

from memroute.reading import vocabulary as V

PACKAGE = Path(__file__).resolve().parents[1] / "memroute"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# the reading rules and what else reads words (the graph's and the stores' lists are of
# arguments and columns, not of words)
SCANNED = ("planners", "time", "reading", "strategies", "memory/rerankers", "nlp.py",
           "memory/titles.py", "memory/splitter.py")
MIN_WORDS = 4
# names whose values are a setting's choices, not words of a sentence (as a `Literal[...]`)
NOT_WORDS = {"PLANNER_CHOICES", "STRATEGIES"}
_RUN = re.compile(r"[A-Za-z'’ \\-]+(?:\|[A-Za-z'’ \\-]+)+")


def _is_word(text: str) -> bool:
    """A lowercase word or phrase of a sentence: letters (an apostrophe, a hyphen or a space
    inside), at least three letters or a function word, and no spaCy label ("prep", "poss")."""
    text = text.replace("\\ ", " ").replace("\\-", "-").strip()
    if not re.fullmatch(r"[a-z][a-z'’\- ]*[a-z]", text) or text in GLOSSARY:
        return False
    return len(text) >= 3 or text in V.STOPWORDS.words


def _regex_words(text: str) -> list[str]:
    """The longest run of words ``text`` alternates between ("before|after|since|...")."""
    runs = [[w for w in run.split("|") if _is_word(w)] for run in _RUN.findall(text)]
    return max(runs, key=len, default=[])


def word_lists(source: str) -> list[tuple[int, str]]:
    """(line, words) for each word list ``source`` holds: a set, tuple, list or dict keyed by at
    least four words; a string of at least four words split into a list; a regular expression
    alternating between at least four words."""
    tree = ast.parse(source)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                    ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant)}
    exempt = {id(n.value) for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
              and any(isinstance(t, ast.Name) and t.id in NOT_WORDS
                      for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))}
    exempt |= {id(n.slice) for n in ast.walk(tree) if isinstance(n, ast.Subscript)
               and isinstance(n.value, ast.Name) and n.value.id == "Literal"}
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt or id(node) in docstrings:
            continue
        if isinstance(node, (ast.Set, ast.Tuple, ast.List, ast.Dict)):
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            listed = [e.value for e in items if isinstance(e, ast.Constant)
                      and isinstance(e.value, str) and _is_word(e.value)]
            if len(listed) >= MIN_WORDS:
                found.append((node.lineno, " ".join(listed)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "split" and isinstance(node.func.value, ast.Constant) \
                and isinstance(node.func.value.value, str):
            listed = [w for w in node.func.value.value.split() if _is_word(w)]
            if len(listed) >= MIN_WORDS:
                found.append((node.lineno, " ".join(listed)))
                docstrings.add(id(node.func.value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            listed = _regex_words(node.value)
            if len(listed) >= MIN_WORDS:
                found.append((node.lineno, "|".join(listed)))
    return found


def test_the_scan_finds_word_lists_and_leaves_structure() -> None:
    """The scan can fail: each form of word list is found, structural patterns are not."""
    lists = '''
A = frozenset({"aunt", "brother", "child", "daughter"})
B = re.compile(r"\\b(before|after|since|during)\\s+")
C = ("of", "from", "for", "behind", "by")
D = {"do": "does", "are": "is", "were": "was", "have": "has"}
E = set("mum dad nan grandad".split())
F = re.compile(r"(?:on|in|during|of)\\s+")
'''
    assert sorted(line for line, _ in word_lists(lists)) == [2, 3, 4, 5, 6, 7]
    structure = '''
"""A docstring may say this|that|these|those."""
A = re.compile(r"(\\d{1,2})(?:st|nd|rd|th)?")
B = {"relcl", "acl", "prep", "poss"}
C = re.compile(r"[.!?]+\\s+(?=[A-Z])|\\d{4}|--")
D = ("DATE", "TIME", "CARDINAL", "ORDINAL")
E = ("and", "or")
F = Literal["auto", "direct", "split", "chain"]
'''
    assert word_lists(structure) == []


@pytest.mark.parametrize("layer", SCANNED)
def test_no_code_module_holds_a_word_list(layer: str) -> None:
    """Words live in the vocabulary; rules import them (`memroute/reading/vocabulary.py`)."""
    held = []
    root = PACKAGE / layer
    for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
        if path == PACKAGE / "reading" / "vocabulary.py":
            continue
        for line, listed in word_lists(path.read_text()):
            held.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {listed[:70]}")
    assert not held, "\n".join(held)


ENTRIES = {name: entry for name, entry in vars(V).items()
           if isinstance(entry, (V.Words, V.Phrases))}


def fixture_questions() -> dict[str, tuple[str, str, str]]:
    """The assistant-memory fixture's questions by id, as a source names them ("c5-q11": its
    conversation's 11th question) -> (half, part, question)."""
    questions = {}
    for path in sorted((FIXTURES / "assistant_memory").glob("*.json")):
        data = json.loads(path.read_text())
        if "questions" not in data:
            continue
        parts = {c["id"]: (c["half"], c.get("part", "")) for c in data["conversations"]}
        count: Counter[str] = Counter()
        for q in data["questions"]:
            count[q["conv"]] += 1
            questions[f"{q['conv']}-q{count[q['conv']]}"] = (*parts[q["conv"]], q["q"])
    return questions


def test_every_entry_names_its_sentence_and_where_it_came_from() -> None:
    """Each entry says what kind of sentence it is for and where its words came from: the
    language ("general"), a benchmark's text, or the fixture question a rule was read off,
    named by its half, part and id ("half C c5-q11"), never half E's check part (issue 46,
    item 7: no rule is read off it)."""
    questions = fixture_questions()
    assert len(ENTRIES) >= 40
    for name, entry in ENTRIES.items():
        listed = entry.words if isinstance(entry, V.Words) else entry.phrases
        assert listed, name
        assert len(entry.sentence.split()) >= 4, (name, entry.sentence)
        named = re.findall(r"half ([A-E])(?: (tune|check))? ([a-z]\d+-q\d+)", entry.source)
        assert entry.source.startswith("general") or named or "LoCoMo" in entry.source, \
            (name, entry.source)
        for half, part, question_id in named:
            assert question_id in questions, (name, question_id)
            assert questions[question_id][:2] == (half, part), (name, questions[question_id])
            assert (half, part) != ("E", "check"), (name, entry.source)


def test_people_and_roles_are_listed_once() -> None:
    """A people or role word belongs to one group; the sets the rules use are unions."""
    groups = [V.KIN, V.KIN_FAMILIAR, V.CLOSE, V.PEERS, V.SERVICES, V.WORK_ROLES, V.THING_ROLES,
              V.ROLE_PLURALS, V.MEMBERS, V.SOMEONE, V.PERSON, V.PETS, V.PETS_MORE]
    seen: dict[str, int] = {}
    for i, group in enumerate(groups):
        for word in group.words:
            assert word not in seen, (word, groups[seen[word]].sentence, group.sentence)
            seen[word] = i
