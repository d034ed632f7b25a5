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
    source: str = "general"
    """Where the words came from: "general" (the language's own), or the tune question or
    fixture a rule was read off."""

    def __iter__(self):
        return iter(sorted(self.words))

    def alternation(self) -> str:
        """The words as a regular expression's alternatives, the longest first."""
        return "|".join(re.escape(w) for w in sorted(self.words, key=lambda w: (-len(w), w)))


@dataclass(frozen=True)
class Phrases:
    """Words and phrases searched for in text, in order, and the kind of sentence they are
    for; `pattern` matches any of them as whole words."""

    sentence: str
    phrases: tuple[str, ...]
    source: str = "general"
    """Where the phrases came from, as `Words.source`."""

    def alternation(self) -> str:
        """The phrases as a regular expression's alternatives, in order."""
        return "|".join(re.escape(p) for p in self.phrases)

    def pattern(self) -> str:
        return r"\b(" + self.alternation() + r")\b"


def words(sentence: str, text: str, source: str = "general") -> Words:
    return Words(sentence, frozenset(text.split()), source)


def phrases(sentence: str, listed: tuple[str, ...], source: str = "general") -> Phrases:
    return Phrases(sentence, listed, source)


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
    realtor solicitor stylist supervisor surgeon tenant therapist trainer tutor vet""",
    source="general; chiropractor, midwife, pharmacist, physio, physiotherapist and solicitor "
           "from half C c5-q11 ('Where did my physio do her training?', commit b34d197)")
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
    uh um whoa woah woohoo wow yay yeah yep yes yikes yup""",
    source="LoCoMo turns of the fixture's padding ('Woah Joanna', 'Bummer', 'Woohoo'; commits "
           "b34d197, 6fdc850)")
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
    'with her husband")',
    """at in near""",
    source="half E tune e2-q7 ('What does Nia's husband do?')")
CLAUSE_OPENERS = words(
    'words that open a described thing\'s clause, or are its subject ("the dentist who")',
    """he her his i i'm i've my our she that their they we we're where which who whom you""")
CLAUSE_PREPOSITIONS = words(
    'prepositions a described thing\'s clause goes on through ("lent us his van for the move")',
    """at by for from in on to with""",
    source="half C c5-q13 ('Who wrote the novel we're reading at book club?', commit b34d197)")
CLAUSE_OBJECTS = words(
    'objects of a described thing\'s verb, pronouns and determiners ("lent us his van")',
    """a an her him his it its me my our the their them us you""",
    source="half C c5-q12 ('What does the guy who lent us his van do for a living?', commit "
           "b34d197)")
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
PAST_AUXILIARIES = phrases(
    'auxiliaries that put a question in the past ("Where did he live?")',
    ('did', 'was', 'were', 'had'))
PAST = phrases(
    'words that make a question ask about the past ("Where did he live before?")',
    PAST_AUXILIARIES.phrases + ('used to', 'before', 'previously', 'originally', 'first',
     'ago', 'last',))
SOFTENERS = phrases(
    'words before a time expression that leave its span as it is ("early in March")',
    ('earlier', 'later', 'early', 'late', 'sometime', 'over', 'during', 'in', 'on', 'at',
     'from', 'since', 'the', 'this past',))
PARTS_OF_DAY = phrases(
    'parts of a day: a time expression of them alone names no window but today\'s ("this evening")',
    ('morning', 'afternoon', 'evening', 'night', 'tonight',))

# The grammar of a question: function words its rules match ("What do Pepper and Mochi eat?").

BE = words(
    'forms of "be" opening a question or its clause ("What is the ...", "Are they the same ...")',
    """is was are were""")
DO_HAVE = words(
    'forms of "do" and "have" opening a question ("Do Pepper and Mochi eat the same food?")',
    """do does did has have""")
AUXILIARIES_MORE = words(
    'more auxiliaries that open a yes-or-no question ("Can both ...", "Had they ...")',
    """had can could will would""")
SINGULAR = {"do": "does", "are": "is", "were": "was", "have": "has"}
"""A plural verb made singular when a question is asked of one of its subjects ("What do
Pepper and Mochi eat?" -> "What does Pepper eat?")."""
WH_WORDS = words(
    'question words: a new question begins ("When is X\'s birthday and where ...")',
    """who whom whose what when where which how why""")
RELATIVE_PRONOUNS = phrases(
    'words that open a relative clause after a noun ("the woman who portrayed ...")',
    ('who', 'whom', 'whose', 'which', 'that', 'where'))
SUBJECT_PRONOUNS = words(
    'pronouns that stand for a subject already named, never a described thing ("it", "they")',
    """it they he she i you we""")
OTHERS = phrases(
    'words that open a clause about someone other than the user ("before she retired")',
    ('he', 'she', 'they', 'it', 'him', 'her', 'them', 'how', 'what', 'which', 'who', 'when',
     'where'),
    source="half C c5-q6 ('What did Ottoline Marsh do before she retired?', commit 7e675ab); "
           "the question words general")
POSSESSIVE_PRONOUNS = phrases(
    'possessive pronouns of someone named before ("her wedding", "its director")',
    ('his', 'her', 'their', 'its'))
ARTICLES = phrases(
    'articles before a noun ("the director of X", "a band formed in ...")',
    ('the', 'a', 'an'))
DETERMINERS = phrases(
    'words that make a described thing a particular one, told by someone ("my trip")',
    ('my', 'our', 'the', 'his', 'her', 'their'))
FIRST_PERSON = phrases(
    'the user speaking of themselves in a question ("my colleague", "we\'re")',
    ('i', "i'm", "i've", "i'd", "i'll", 'my', 'me', 'our', 'we', "we're", 'mine'))
CONTRACTED = phrases(
    'words a contraction\'s "\'s", "\'ll" or "\'d" follows, never a name\'s possessive '
    '("that\'s", "let\'s")',
    ('he', 'she', 'it', 'that', 'there', 'here', 'who', 'what', 'let'),
    source="general; that a name's \"'s\" is no contraction was read off half D check d4-q23 "
           "(\"Fallon's Table\", commit 9516020); with the question words, never a possessor "
           "after half C c5-q3 (\"When's Graham's knee replacement?\", commit b34d197)")
POINTERS = words(
    'words that point at something and own nothing ("it\'s", "there\'s")',
    """it that there here""")
SHARED = phrases(
    'words that ask what several subjects share ("What do both X and Y ...")',
    ('in common', 'both', 'same', 'each', 'either', 'neither', 'also'))
SHARED_DROPPED = phrases(
    'words of a shared question dropped when it is asked of each subject ("both")',
    ('both', 'each', 'either', 'all', 'also'))
COMPARATIVES = phrases(
    'words that make a question compare its subjects ("Which film came out first, X or Y?")',
    ('first', 'earlier', 'earliest', 'older', 'oldest', 'younger', 'youngest', 'later',
     'latest', 'last', 'before', 'after', 'longer', 'longest', 'shorter', 'more', 'most',
     'less', 'fewer', 'larger', 'largest', 'bigger', 'smaller', 'higher', 'highest', 'lower',
     'taller', 'tallest', 'compared', 'than', 'closer', 'farther', 'further', 'greater',
     'better'))
PARTICIPLE_ENDINGS = phrases(
    'endings of past participles, regular and not ("directed", "written", "sung", "built")',
    ('ed', 'en', 'wn', 'ung', 'ote', 'ade', 'eft', 'ilt', 'orn', 'old', 'ught', 'ound'))
PARTICIPLE_PREPOSITIONS = phrases(
    'prepositions after a participle that make it a relation ("directed by", "formed in")',
    ('by', 'in', 'for', 'from', 'at', 'with', 'on', 'as', 'to'))
RELATION_PREPOSITIONS = phrases(
    'prepositions that tie a relation to a named thing ("the director of X", "the band '
    'behind Y")',
    ('of', 'from', 'for', 'by', 'behind'))
ROLE_PREPOSITIONS = words(
    'prepositions that tie a role to a named thing in a parse ("the coach of X", "the '
    'teacher at Y")',
    """of from for behind by in at with""")
WORK_KINDS = phrases(
    'kinds of named work or body said before its name ("the director of film X")',
    ('film', 'song', 'album', 'band', 'book', 'novel', 'series', 'show', 'game', 'team',
     'company', 'group', 'movie', 'play', 'opera', 'magazine', 'newspaper', 'station',
     'club'))
ROLE_OPENERS = phrases(
    'words before a role a question reaches through a named thing ("has the director who")',
    ('has', 'have', 'had', 'with', 'whose', 'of'))
DESCRIPTORS = phrases(
    'words that tie a named person to a work in a comparison ("starring X", "by Y")',
    ('starring', 'alongside', 'featuring', 'by', 'with'))
NAME_LINKS = phrases(
    'lowercase words inside a name in a question ("Bank of America", "Guillermo del Toro")',
    ('of', 'the', 'de', 'van', 'von', 'da', 'del'))
KIN_PREFIXES = phrases(
    'words before a kin noun that keep it kin ("half brother", "ex wife")',
    ('half', 'great', 'grand', 'ex'),
    source="half C c5-q1 ('What does Dana do for work?': 'my sister-in-law Dana', commit "
           "b34d197)")
NOT_A_VERB = words(
    'words of a described thing\'s clause before its verb ("the guy who lent ...")',
    """who that which the a to my i'm""")

# Time: the words of time expressions and the prepositions before them.

EVENT_BEFORE = phrases(
    'relations that put a question before an event ("before my trip to Norway")',
    ('before', 'until', 'ahead of', 'prior to'))
EVENT_AFTER = phrases(
    'relations that put a question after an event ("since my operation")',
    ('after', 'since', 'following'))
EVENT_DURING = phrases(
    'relations that put a question at an event ("on the camping trip")',
    ('during', 'on', 'at'))
CALENDAR_UNITS = phrases(
    'calendar spans named in a time expression: a date, not an event ("last week")',
    ('weekend', 'week', 'month', 'year'))
DAY_WORDS = phrases(
    'words that name one day relative to when they are said ("tomorrow")',
    ('today', 'tomorrow', 'tonight', 'yesterday'))
STRETCHES = words(
    'spans a time expression measures, not one day ("for three weeks", "on Mondays")',
    """week weeks month months year years days nights mornings evenings century centuries
    decade decades season seasons quarter quarters""")
NEAR = phrases(
    'words that place a span relative to when it is said ("last weekend", "next week")',
    ('last', 'past', 'next', 'coming'))
NUMBER_WORDS = phrases(
    'numbers in words counting days, weeks or months ("three weeks ago")',
    ('a', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'))
DATE_PREPOSITIONS = phrases(
    'prepositions before a date stated in a turn ("on the 3rd of May", "in June")',
    ('on', 'in', 'during', 'of'))
DAY_LEADS = phrases(
    'words before a weekday named alone ("on Saturday", "this weekend")',
    ('on', 'this', 'the', 'that', 'for', 'by', 'from', 'until', 'till'))
ORDINAL_LEADS = phrases(
    'words before a day of the month named alone ("on the 14th", "the weekend of the 3rd")',
    ('on', 'the', 'weekend', 'of'))
EXPRESSION_PREPOSITIONS = phrases(
    'words before a time expression dropped with it from a search ("What did I book last '
    'week?" -> "What did I book?")',
    ('on', 'in', 'during', 'over', 'at', 'for', 'from', 'since', 'of', 'earlier', 'later'))
CLAUSE_BREAKS = phrases(
    'words after an event\'s phrase that begin another clause ("before my trip and what ...")',
    ('and', 'or', 'but', 'so', 'when', 'where', 'what', 'who', 'that', 'which'))
WEEKS = {"this week": 0, "the week": 0, "last week": -1, "next week": 1}
"""A week named relative to when it is said, and how many weeks from that one it is."""
NO_WINDOW = phrases(
    'time expressions of the present or of no span, which name no window ("these days")',
    ('these days', 'those days', 'now', 'currently', 'the past', 'the future'))
COMMON_QUESTION_WORDS = words(
    'words of a question too common to show the LLM planner which terms a search used',
    """the and was were what which who whom whose when where how did does are has have had for
    from with that this""")

# Searches: words that a search's terms or a sub-query's wording leave out.

RERANK_STOPS = words(
    'words of a question or a sentence the offline reranker does not match on ("how many")',
    """a an and are as at be by for from has have in is it its of on or that the this to was
    were which who what when where with did does do how many much""")
INSTRUCTIONS = words(
    'words capitalised only because they open a question or an instruction ("Name the ...", '
    '"List ...")',
    """a an the and or of in on at to for from by with is are was were be been do does did has
    have had what which who whom whose when where why how name list find tell give show i it
    its this that these those""")
COMPARISON_WORDS = phrases(
    'words that make a sub-query compare rather than ask one fact ("the difference between")',
    ('comparison', 'versus', 'difference', 'differ', 'both', 'either', 'neither', 'same as'))
THAN_COMPARATIVES = phrases(
    'comparatives before "than" in a sub-query that compares ("older than X")',
    ('more', 'less', 'fewer', 'greater', 'older', 'younger', 'larger', 'smaller', 'bigger',
     'longer', 'shorter', 'higher', 'lower', 'earlier', 'later', 'faster', 'slower'))
CHOICE_VERBS = phrases(
    'verbs after "which (one)" in a sub-query that chooses between options ("which one came '
    'first, A or B")',
    ('is', 'was', 'came', 'has', 'had'))
