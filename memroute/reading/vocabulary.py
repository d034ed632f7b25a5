"""The words memroute's reading rules are written with, as data: each entry names the kind of
sentence it is for, and the rules (`memroute.planners.offline`, `memroute.time`,
`memroute.nlp`) import it. A word is listed once: the sets a rule uses are unions of entries
(`RELATIONS`, `ROLES`, ...). Where spaCy's tags or the standard library decide as well, there is
no list: month and day names come from `calendar`; question words, auxiliaries and the
subjects that take "have" from spaCy's tags (measured: the same reading of all 298 questions
of the fixtures with the lists and without).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Words:
    """A list of words and the kind of sentence it is for."""

    sentence: str
    words: frozenset[str]

    def __iter__(self):
        return iter(sorted(self.words))


@dataclass(frozen=True)
class Phrases:
    """Words and phrases searched for in text, in order, and the kind of sentence they are
    for; `pattern` matches any of them as whole words."""

    sentence: str
    phrases: tuple[str, ...]

    def alternation(self) -> str:
        """The phrases as a regular expression's alternatives, in order."""
        return "|".join(re.escape(p) for p in self.phrases)

    def pattern(self) -> str:
        return r"\b(" + self.alternation() + r")\b"


def words(sentence: str, text: str) -> Words:
    return Words(sentence, frozenset(text.split()))


def phrases(sentence: str, listed: tuple[str, ...]) -> Phrases:
    return Phrases(sentence, listed)


# People and roles, each word in one group; the sets the rules use are unions of groups.

KIN = words(
    'kin, in a question or a turn ("my sister\'s husband", "Otto\'s mother")',
    """aunt brother child daughter father granddaughter grandfather grandmother grandson husband
    mother nephew niece parent sister son spouse uncle wife""")
KIN_FAMILIAR = words(
    'kin as a user names them in a memory ("my mum", "our nan", "my ex")',
    """auntie baby daddy ex goddaughter godfather godmother godson grandad grandchild grandma
    grandpa granny mommy mum mummy nan nana twin""")
CLOSE = words(
    'people of one\'s own life, in a memory or a question ("my colleague")',
    """boss boyfriend colleague cousin coworker dad fiance fiancee friend girlfriend kid mentor
    mom neighbor neighbour partner roommate sibling teacher""")
PEERS = words(
    'peers a memory relates to its user ("my flatmate")',
    """bestie buddy classmate flatmate housemate pal teammate""")
SERVICES = words(
    'people by the work they do for the user ("my dentist", "our landlord")',
    """accountant adviser advisor agent assistant attorney babysitter banker barber builder
    childminder chiropractor cleaner client contractor counsellor counselor customer dentist
    doctor electrician employee employer gardener gp hairdresser instructor intern landlady
    landlord lawyer lecturer manager mechanic midwife nanny nurse optician orthodontist
    pharmacist physician physio physiotherapist plumber professor psychiatrist psychologist
    realtor solicitor stylist supervisor surgeon tenant therapist trainer tutor vet""")
WORK_ROLES = words(
    'a role of a named work or body ("the director of Harbor Lights"), or a person\'s',
    """actor actress architect author captain cinematographer coach composer creator designer
    developer director editor founder host leader lyricist narrator owner performer presenter
    president producer publisher screenwriter singer writer""")
THING_ROLES = words(
    'a role reached only through a named thing ("the manufacturer of X")',
    """manufacturer star""")
ROLE_PLURALS = words(
    'roles in the plural, reached through a named thing ("its directors")',
    """authors children composers creators directors founders owners parents performers producers
    singers stars writers""")
MEMBERS = words(
    'people a question reaches through what they belong to ("a player of Z")',
    """boy girl member player student""")
SOMEONE = words(
    'someone not named yet, in a question ("the guy who lent us his van")',
    """guy people somebody someone""")
PERSON = words(
    'a person as such, in a question ("the man who ...", "which person")',
    """man person woman""")
VAGUE = words(
    "too general to look for in evidence: the question's clause describes the thing",
    """one thing""")
PETS = words(
    'pets by their kind, a relation in a memory ("my dog")',
    """bird cat dog hamster horse kitten parrot pet puppy rabbit""")
PETS_MORE = words(
    'more pets by their kind, a relation in a memory only',
    """budgie ferret fish gecko goldfish lizard pony snake tortoise turtle""")
THINGS = words(
    'what a question asks for that is a thing in its own right ("What film ...")',
    """airline album artist band book brand channel character chef club company documentary film
    films franchise group label magazine model movie musician network newspaper novel
    organization politician program programme restaurant rider school series show song station
    studio team university""")

PERSON_NOUNS = (KIN.words | CLOSE.words | WORK_ROLES.words | THING_ROLES.words | PETS.words
                | MEMBERS.words | SOMEONE.words | PERSON.words)
"""A person (or pet) a question reaches through another thing ("the director of X")."""
ROLES = KIN.words | WORK_ROLES.words | THING_ROLES.words | ROLE_PLURALS.words
"""People and roles a question can reach through a named thing ("the director who died first")."""
RELATIONS = (KIN.words | KIN_FAMILIAR.words | CLOSE.words | PEERS.words | SERVICES.words
             | WORK_ROLES.words | PETS.words | PETS_MORE.words)
"""Who or what a memory relates to someone: people by their role, pets by their kind."""
NOT_PEOPLE = PETS.words | PETS_MORE.words
PEOPLE_RELATIONS = (KIN.words | KIN_FAMILIAR.words | CLOSE.words | PEERS.words
                    | SERVICES.words)
"""A person's relation to someone ("my colleague", "Nia's husband"): what it names is a person."""
"""A relation that is no person (a resolution of a person's relation is never one)."""
GENERIC = SOMEONE.words | PERSON.words | VAGUE.words
"""Nouns too general to look for in the evidence."""
ENTITY_NOUNS = ROLES | THINGS.words | PERSON.words
"""What a question can ask for that is a thing in its own right, not a shared attribute."""

# Sentences of a turn or a passage: which capitalised words name something.

STOPWORDS = words(
    "function words of any sentence: never a search term, a name or an event's word",
    """a about above after again against all also am an and another any are as at be because been
    before being below between both but by called can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just known many me more most much my myself named no nor not now
    of off on once one ones only or other our ours out over own same she should so some such
    than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom whose why will with
    would you your yours yourself""")
MODALS = words(
    'modal verbs capitalised only because they open a question ("May I ...")',
    """may might""")
SENTENCE_STARTERS = words(
    'words capitalised only because they open a sentence, naming nothing ("However")',
    """according across additionally after against all along also although among amongst another
    any anyway around as at awesome based before being besides between beyond born both by
    considered cool currently described despite during each early eight either even every few
    first five following for formerly founded four from furthermore generally good great
    having head here however in initially instead into it's its just known last later less
    like located many meanwhile more moreover most near neither nevertheless new next nice
    nine no none not now often okay old on once one only onto originally other over per
    perfect poor previously recently regarded second seven several since six some sometimes
    sorry still such sure ten then there therefore third though three throughout thus today
    toward towards two under unlike until upon usually via wait well while with within without
    yet""")
INTERJECTIONS = words(
    'interjections and greetings opening a chat turn: never part of a name ("Hey Maria")',
    """ah aha argh aw aww btw bummer cheers congrats congratulations dang darn geez gosh haha
    hello hey hi hmm hooray huh jeez lol meh nope oh ok okay omg ooh oops ouch phew thanks ugh
    uh um whoa woah woohoo wow yay yeah yep yes yikes yup""")
CONNECTORS = words(
    'lowercase words inside a capitalised name ("Bank of America"); not "and", which joins two',
    """& da de del den der di du for la le of the van von y""")
ABBREVIATIONS = words(
    'abbreviations whose full stop ends no sentence ("Dr. Okafor", "St. Louis")',
    """capt col dr ft gen gov jr lt mr mrs ms mt rep rev sen sgt sr st""")
ABBREVIATIONS_MORE = words(
    'more abbreviations whose full stop ends no sentence of stored text ("approx. 3 km")',
    """approx apr aug co corp dec dept est etc feb fig inc jan jul jun ltd mar no nos nov oct prof
    sep sept vol vs""")
DEMONYMS = words(
    'nationalities and creeds: an evidence entity a chain never bridges to ("American")',
    """african american argentine asian australian austrian belgian brazilian british canadian
    catholic chinese christian czech danish democratic dutch egyptian english european finnish
    french german greek hungarian indian irish israeli italian japanese jewish korean latin
    mexican muslim new norwegian polish portuguese republican roman russian scottish soviet
    spanish swedish swiss turkish welsh""")

# Questions: their structure, subjects and described things.

PLACE_NOUNS = words(
    'a place a question reaches through another thing ("the city where X was born")',
    """birthplace city country hometown place state town village""")
ATTRIBUTE_NOUNS = words(
    'what a question asks that its subjects share, not a thing ("What kind of ...")',
    """form genre kind sort type""")
CLAUSE_STOPS = words(
    'words that end a described thing\'s clause after its verb ("the guy who lent us his van is")',
    """are based born famous held is like likes located love loves was were""")
PLACE_PREPOSITIONS = words(
    'prepositions that put a place before its name, not a person ("round the corner in Brynmill '
    'with her husband"; half E tune, e2 "What does Nia\'s husband do?")',
    """at in near""")
CLAUSE_OPENERS = words(
    'words that open a described thing\'s clause, or are its subject ("the dentist who")',
    """he her his i i'm i've my our she that their they we we're where which who whom you""")
CLAUSE_PREPOSITIONS = words(
    'prepositions a described thing\'s clause goes on through ("lent us his van for the move")',
    """at by for from in on to with""")
CLAUSE_OBJECTS = words(
    'objects of a described thing\'s verb, pronouns and determiners ("lent us his van")',
    """a an her him his it its me my our the their them us you""")
OBJECT_BEFORE = words(
    'words before "you" that make it an object in the first person ("told you" -> "told me")',
    """about at by for from gave give help helped like of on support supports tell to told with""")
FIRST_PERSON_VERBS = {"has": "have", "does": "do", "is": "am"}
"""A question put in the first person: the verb after "I" ("Where does you live" -> "do I")."""
PARTICIPLES = {"get": "got"}
"""Participles of British speech lemminflect lacks, for a past question told in the perfect
("What have I got up to?")."""

# Time: expressions, windows, events and "now".

AHEAD = words(
    'prepositions that put a day a turn names ahead of its deed ("booked for Saturday")',
    """before by for from till until""")
TIME_WORDS = words(
    'time words in an event phrase besides month and day names: a date ("before lunch")',
    """afternoon ago breakfast christmas day days dinner easter evening lunch midnight month
    morning night noon school that then this time today tomorrow tonight week weekend work
    year yesterday""")
EVENT_NOUNS = phrases(
    'nouns of things that happen: a described thing is an event ("before my trip to Norway")',
    ('trip', 'travel', 'travels', 'holiday', 'vacation', 'journey', 'flight', 'visit',
     'move', 'moving', 'surgery', 'operation', 'procedure', 'appointment', 'wedding',
     'honeymoon', 'party', 'birthday', 'funeral', 'graduation', 'interview', 'exam',
     'exams', 'test', 'race', 'marathon', 'match', 'game', 'concert', 'show', 'conference',
     'course', 'retreat', 'camp', 'camping', 'hike', 'festival', 'launch', 'meeting',
     'break', 'stay', 'shift', 'treatment', 'injury', 'accident', 'birth', 'pregnancy',
     'move-in', 'renovation', 'recital', 'ceremony', 'reunion', 'break-up', 'breakup',
     'diagnosis', 'job', 'new job', 'semester', 'term', 'season', 'tour', 'cruise',
     'weekend',))
FUTURE = phrases(
    'words that make a question ask about the future ("What do I have next Friday?")',
    ('will', 'going to', 'gonna', 'next', 'upcoming', 'coming', 'tomorrow', 'plan',
     'planned', 'planning', 'have on', "'s on", 'is on', 'happening',))
NOW = phrases(
    'words that make a question ask how things stand now ("Where is he working now?")',
    ('now', 'still', 'currently', 'current', 'anymore', 'any more', 'these days',
     'nowadays', 'at the moment', 'latest', 'newest',))
PAST = phrases(
    'words that make a question ask about the past ("Where did he live before?")',
    ('did', 'was', 'were', 'had', 'used to', 'before', 'previously', 'originally', 'first',
     'ago', 'last',))
SOFTENERS = phrases(
    'words before a time expression that leave its span as it is ("early in March")',
    ('earlier', 'later', 'early', 'late', 'sometime', 'over', 'during', 'in', 'on', 'at',
     'from', 'since', 'the', 'this past',))
PARTS_OF_DAY = phrases(
    'parts of a day: a time expression of them alone names no window but today\'s ("this evening")',
    ('morning', 'afternoon', 'evening', 'night', 'tonight',))
