"""The run's PNG plots: recall by strategy, tokens against recall, latency distribution."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOTS = ("recall_by_strategy.png", "tokens_vs_recall.png", "latency.png")


def _metric_names(summary: dict[str, Any]) -> list[str]:
    base = "evidence_recall" if summary["dataset"] == "locomo" else (
        "para_recall" if summary["dataset"] == "musique" else "sf_recall")
    return [f"{base}@{k}" for k in summary["ks"]]


def write_plots(summary: dict[str, Any], rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """Draw the three plots into ``out``; returns the files written (none without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    strategies = summary["strategies"]
    names = list(strategies)
    metrics = _metric_names(summary)
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(len(metrics), 1)
    for i, metric in enumerate(metrics):
        values = [strategies[s].get(metric) or 0.0 for s in names]
        xs = [j + i * width for j in range(len(names))]
        bars = ax.bar(xs, values, width, label=metric)
        ax.bar_label(bars, fmt="%.3f", fontsize=7)
    ax.set_xticks([j + width * (len(metrics) - 1) / 2 for j in range(len(names))], names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("recall")
    ax.set_title(f"{summary['dataset']}: recall by strategy (n={summary['n_questions']})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(out / PLOTS[0])
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for s in names:
        tokens = strategies[s]["input_tokens"] + strategies[s]["output_tokens"]
        recall = strategies[s].get(metrics[0]) or 0.0
        ax.scatter([tokens], [recall], s=60)
        ax.annotate(s, (tokens, recall), textcoords="offset points", xytext=(5, 5))
    ax.set_xlabel("LLM tokens per question (input + output)")
    ax.set_ylabel(metrics[0])
    ax.set_title("cost against recall")
    fig.tight_layout()
    written.append(out / PLOTS[1])
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    first_k = summary["ks"][0]
    data = [[r["latency_ms"] for r in rows if r["strategy"] == s and r["k"] == first_k]
            for s in names]
    if any(data):
        ax.boxplot([d or [0.0] for d in data], showfliers=True)
        ax.set_xticks(range(1, len(names) + 1), names)
    ax.set_ylabel("wall ms per question")
    ax.set_yscale("log")
    ax.set_title(f"latency per question (k={first_k})")
    fig.tight_layout()
    written.append(out / PLOTS[2])
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    return written
