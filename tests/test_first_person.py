"""A turn's "my" is its speaker's: a named speaker's relation never resolves the asker's, and
answers a question about that speaker's relation."""

from __future__ import annotations

from memroute.nlp import SPEAKER_LABEL, Entity, entity_key
from memroute.planners.offline.resolve import resolve


def said_by(name: str | None, *names: str) -> list[Entity]:
    """A hit's entities as the chain reads them: who said it first (`hit_entities`)."""
    speaker = [Entity(name, entity_key(name), SPEAKER_LABEL)] if name else []
    return speaker + [Entity(n, entity_key(n), "PERSON") for n in names]


def test_another_speakers_colleague_is_not_the_askers() -> None:
    evidence = ["Nothing too soon, but my colleague Rob invited me to a beginner's yoga class.",
                "My colleague Ravi Menon turns 35 on 22 June."]
    entities = [said_by("John", "Rob"), said_by(None, "Ravi Menon")]
    resolved = resolve("Where does my colleague's cello tutor teach?", evidence, entities)
    assert resolved.bridges[0] == ("my colleague", "Ravi Menon"), resolved
    # the other speaker's turn alone resolves nothing of the asker's
    alone = resolve("Where does my colleague's cello tutor teach?", evidence[:1], entities[:1])
    assert alone.bridges == []


def test_a_speakers_own_relation_answers_a_question_about_them() -> None:
    evidence = ["Nothing too soon, but my colleague Rob invited me to a beginner's yoga class."]
    resolved = resolve("What did John's colleague invite him to?", evidence,
                       [said_by("John", "Rob")], named=["John"])
    assert resolved.bridges == [("John's colleague", "Rob")], resolved


def labelled(speaker: str | None, **labels: str) -> list[Entity]:
    """A hit's entities with spaCy's labels (name=label)."""
    return said_by(speaker)[:1] + [Entity(n.replace("_", " "), entity_key(n.replace("_", " ")), l)
                                   for n, l in labels.items()]


def test_the_users_own_relation_is_not_anothers() -> None:
    # "Nia's husband" is not the user's ex-husband, who the user's turn names nearer
    evidence = ["My ex-husband Declan still works at the brewery, and Nia's husband Tomasz is a "
                "paramedic.", "My ex-husband Declan works at the brewery."]
    entities = [labelled(None, Declan="PERSON", Tomasz="PERSON"),
                labelled(None, Declan="PERSON")]
    resolved = resolve("What does Nia's husband do?", evidence[1:], entities[1:], named=["Nia"])
    assert resolved.bridges == [], resolved  # the user's own ex-husband is not Nia's
    resolved = resolve("What does Nia's husband do?", evidence, entities, named=["Nia"])
    assert resolved.bridges == [("Nia's husband", "Tomasz")], resolved
    # and the other way round: her husband is not the asker's
    mine = resolve("What does my husband do?", ["I met Nia and her husband Tomasz for lunch."],
                   [labelled(None, Nia="PERSON", Tomasz="PERSON")])
    assert mine.bridges == [], mine


def test_a_persons_relation_resolves_to_a_person_not_a_place() -> None:
    evidence = ["She lives round the corner in Brynmill with her husband, Owain."]
    entities = [labelled(None, Brynmill="GPE", Owain="PERSON")]
    resolved = resolve("What does Nia's husband do?", evidence, entities, named=["Nia"])
    assert resolved.bridges == [("Nia's husband", "Owain")], resolved
