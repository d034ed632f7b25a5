"""How many questions get keys from proper-noun runs the entity recognizer left unlabelled
(what dropping the shared token encoder and tagger would lose).

    python -m benchmarks.experiments.keys_proper_nouns
"""
import json
from memroute import nlp
qs=[json.loads(l)["question"] for l in open("../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl")][:400]
qs += [qa["question"] for c in json.load(open("../shared/data/locomo/locomo10_conv0-6.json")) for qa in c["qa"]][:400]
p=nlp.load_pipeline(nlp.KEYS)
diff=0
for q in qs:
    d=p(q)
    full=nlp._keys_of(d)
    ner=list(dict.fromkeys(k for k in (nlp.entity_key(e.text) for e in d.ents if e.label_ not in nlp._NOT_SUBJECTS) if k))
    diff += full!=ner
print(diff, len(qs))
