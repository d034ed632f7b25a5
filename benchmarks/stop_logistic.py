"""A logistic model of "stopping after the first rewrite loses nothing" over the candidate
rows of `benchmarks.stop_features` (docs/evaluation.md, "Telling a right first bridge from a
wrong one"): fit on some sets' rows, then each set's recall and searches when the candidates
whose predicted probability reaches a threshold stop.

    python -m benchmarks.stop_logistic --features fresh_names_bridge,bridge_page,bridge_typed,d_rerank,margin \\
        --fit h300=rows-h300.jsonl,w=rows-w.jsonl --check h800=rows-h800held.jsonl,m=rows-m.jsonl

``margin`` enters as its logarithm; features are standardised on the fitted rows. With
``--first-hop`` the rows are `benchmarks.stop_first`'s (a stop at the first judgment saves
all but one of the question's searches).
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from benchmarks import stop_features, stop_first


def _load(spec: str) -> dict[str, list[dict]]:
    out = {}
    for part in spec.split(","):
        if part:
            name, path = part.split("=", 1)
            out[name] = [json.loads(line) for line in open(path, encoding="utf-8")]
    return out


def _vector(row: dict, features: list[str]) -> list[float]:
    return [math.log(float(row.get(f, 1.0))) if f == "margin" else float(row.get(f, 0.0))
            for f in features]


def fit_logistic(x: np.ndarray, y: np.ndarray, *, steps: int, rate: float, l2: float = 0.01,
                 center: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights (bias first), means and deviations of a logistic model of ``y`` on ``x``'s
    standardised columns (``center=False``: scaled only, for differences of pairs), by
    ``steps`` of gradient descent with an L2 penalty on the weights, not the bias."""
    sd = x.std(0) + 1e-9
    mu = x.mean(0) if center else np.zeros(x.shape[1])
    z = np.c_[np.ones(len(x)), (x - mu) / sd]
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(z @ w, -30, 30)))
        w -= rate * (z.T @ (p - y) / len(y) + l2 * np.r_[0, w[1:]])
    return w, mu, sd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", required=True)
    parser.add_argument("--fit", required=True, help="name=rows.jsonl,... to fit on")
    parser.add_argument("--check", default="", help="name=rows.jsonl,... held out")
    parser.add_argument("--thresholds", default="0.76,0.78,0.8,0.82,0.85")
    parser.add_argument("--first-hop", action="store_true",
                        help="rows of benchmarks.stop_first (a stop at the first judgment)")
    args = parser.parse_args()
    simulate = stop_first.simulate if args.first_hop else stop_features.simulate
    features = args.features.split(",")
    fit, check = _load(args.fit), _load(args.check)
    cands = [r for rows in fit.values() for r in rows if r.get("candidate")]
    x = np.array([_vector(r, features) for r in cands])
    y = np.array([1.0 if r["stop"] >= r["base"] - 1e-9 else 0.0 for r in cands])
    w, mu, sd = fit_logistic(x, y, steps=3000, rate=0.5)
    print(json.dumps({"weights": dict(zip(["bias", *features], np.round(w, 3).tolist()))}))

    def prob(row: dict) -> float:
        v = np.r_[1.0, (np.array(_vector(row, features)) - mu) / sd]
        return float(1 / (1 + math.exp(-(v @ w))))

    for t in map(float, args.thresholds.split(",")):
        print(json.dumps({"threshold": t, **{
            f"{'fit' if name in fit else 'held out'} {name}": simulate(
                rows, lambda r: prob(r) >= t) for name, rows in {**fit, **check}.items()}}))


if __name__ == "__main__":
    main()
