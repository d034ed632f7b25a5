"""The query keys pipeline with and without the attribute ruler: CPU per question, alternating.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m benchmarks.experiments.keys_attribute_ruler
"""
import time, json, importlib
import numpy as np
from memroute import nlp
qs=[json.loads(l)["question"] for l in open("../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl")][:400]
B=nlp.load_pipeline(nlp.KEYS)
A=importlib.import_module(nlp.MODEL_PACKAGE).load(exclude=["parser","lemmatizer"]); nlp._multiply_with_numpy(A, A.pipe_names)
ta=[];tb=[]
for i,q in enumerate(qs):
    for name in (("A","B") if i%2 else ("B","A")):
        p = A if name=="A" else B
        c=time.thread_time_ns()
        with nlp._blas_threads().limit(limits=1, user_api="blas"), p.memory_zone():
            nlp._keys_of(p(q))
        (ta if name=="A" else tb).append(time.thread_time_ns()-c)
print("with attribute_ruler", np.median(ta)/1e6, "without", np.median(tb)/1e6, "ratio", np.median(np.array(tb)/np.array(ta)))
