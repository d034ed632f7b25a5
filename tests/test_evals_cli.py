"""`memroute eval` end to end on the fixture slices, against the real embedded store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memroute.evals import metrics
from memroute.evals.cli import app as eval_app
from memroute.evals.datasets import load_dataset
from memroute.evals.runner import EvalConfig, EvalConfigError, Reporter, run_eval
from memroute.settings import MemrouteSettings, get_settings
from tests.fake_chat import ScriptedChatModel

FIX = Path(__file__).parent / "fixtures" / "evals"
STRATEGY_KEYS = {
    "sf_recall@3", "mm_recall@3", "para_recall@3", "all_sf@3", "sf_recall@5", "mm_recall@5",
    "para_recall@5", "all_sf@5", "llm_calls", "input_tokens", "output_tokens", "tokens_by_node",
    "latency_ms_p50", "latency_ms_p95", "routes", "types", "em", "f1", "judge",
}


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, pg_url: str, pg_home: Path):
    """Runs the eval command on the test server, with no LLM configured."""
    for name, value in {"MEMROUTE_DATABASE_URL": pg_url, "MEMROUTE_HOME": str(pg_home),
                        "MEMROUTE_EMBED_THREADS": "1", "MEMROUTE_POOL_MAX_SIZE": "4"}.items():
        monkeypatch.setenv(name, value)
    for name in ("MEMROUTE_LLM_MODEL", "MEMROUTE_LLM_BASE_URL", "MEMROUTE_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def invoke(app, *args: str):
        get_settings.cache_clear()
        return runner.invoke(app, [str(a) for a in args])

    yield invoke
    get_settings.cache_clear()


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_eval_writes_every_output_and_the_figures_add_up(cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = cli(eval_app, "hotpotqa", "--data", FIX / "hotpotqa_5.jsonl", "--limit", "3",
                 "--strategy", "direct,auto,split,chain", "--k", "3,5", "--out", out,
                 "--concurrency", "2")
    assert result.exit_code == 0, result.output
    printed = _last_json(result.stdout)
    summary = json.loads((out / "summary.json").read_text())
    assert printed == summary
    for name in ("results.jsonl", "summary.md", "recall_by_strategy.png",
                 "tokens_vs_recall.png", "latency.png"):
        assert (out / name).is_file(), name
    assert (out / "latency.png").read_bytes()[:4] == b"\x89PNG"
    assert summary["dataset"] == "hotpotqa" and summary["n_questions"] == 3
    assert len(summary["data_sha256"]) == 64 and summary["seed"] == 0
    assert {"embedder", "reranker", "planner", "answer_model", "judge_model",
            "prompts"} <= set(summary["config"])
    assert summary["config"]["planner"] == "offline" and "engine" not in summary["config"]
    assert set(summary["strategies"]) == {"direct", "auto", "split", "chain"}
    for name, figures in summary["strategies"].items():
        assert STRATEGY_KEYS <= set(figures), name
        assert figures["llm_calls"] == 0.0  # the offline planner calls no model
        assert sum(r["n"] for r in figures["routes"].values()) == 3
        assert 0.0 <= figures["sf_recall@3"] <= figures["sf_recall@5"] <= 1.0
    assert set(summary["strategies"]["direct"]["routes"]) == {"direct"}
    assert set(summary["strategies"]["chain"]["routes"]) == {"chain"}

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * 4 * 2
    gold = {q.id: q for q in load_dataset("hotpotqa", FIX / "hotpotqa_5.jsonl").questions}
    for row in rows:
        assert {"id", "type", "route", "queries", "returned", "costs", "metrics",
                "latency_ms", "stop_reason"} <= set(row)
        assert len(row["returned"]) == row["k"]
        contents = [r["content"] for r in row["returned"]]
        # every metric recomputed from the returned contents and the loader's gold
        k = row["k"]
        assert row["metrics"][f"sf_recall@{k}"] == metrics.sf_recall(gold[row["id"]].gold_facts,
                                                                      contents)
        assert "memory_search" in row["costs"] and "total" in row["costs"]
    direct5 = [r["metrics"]["sf_recall@5"] for r in rows
               if r["strategy"] == "direct" and r["k"] == 5]
    assert summary["strategies"]["direct"]["sf_recall@5"] == pytest.approx(
        sum(direct5) / 3, abs=1e-4)
    chain_rows = [r for r in rows if r["strategy"] == "chain"]
    assert any(len(r["queries"]) > 1 for r in chain_rows)  # the chain bridged at least once
    md = (out / "summary.md").read_text()
    assert "| direct |" in md and "sf_recall@3" in md

    again = cli(eval_app, "hotpotqa", "--data", FIX / "hotpotqa_5.jsonl", "--limit", "3",
                "--strategy", "direct", "--k", "3", "--out", tmp_path / "again")
    assert again.exit_code == 0, again.output
    assert _last_json(again.stdout)["store"]["reused"] is True


def test_locomo_through_the_main_cli(cli, tmp_path: Path) -> None:
    from memroute.cli import app as main_app

    out = tmp_path / "locomo"
    result = cli(main_app, "eval", "locomo", "--data", FIX / "locomo_conv26_s1-2.json",
                 "--strategy", "direct,auto", "--k", "5", "--out", out)
    assert result.exit_code == 0, result.output
    summary = _last_json(result.stdout)
    assert summary["n_questions"] == 6
    assert summary["evidence"]["unresolved_ids"] == 1
    assert summary["evidence"]["skipped_questions"] == {"adversarial": 1}
    assert summary["config"]["context"] == [1, 2]
    direct = summary["strategies"]["direct"]
    assert 0.0 <= direct["evidence_recall@5"] <= 1.0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 * 2
    assert all(r["returned"][0]["dia_ids"] for r in rows)  # clusters carry their dia_ids
    # the question whose evidence is half outside the slice can reach at most 0.5
    last = load_dataset("locomo", FIX / "locomo_conv26_s1-2.json").questions[-1]
    assert all(r["metrics"]["evidence_recall@5"] <= 0.5 for r in rows if r["id"] == last.id)


def test_answer_and_judge_without_an_llm_fail_fast(cli, tmp_path: Path) -> None:
    out = tmp_path / "never"
    for flag in ("--answer", "--judge"):
        result = cli(eval_app, "hotpotqa", "--data", FIX / "hotpotqa_5.jsonl", flag,
                     "--out", out)
        assert result.exit_code == 2
        assert "MEMROUTE_LLM_MODEL" in result.stderr
    assert not out.exists()
    bad = cli(eval_app, "hotpotqa", "--data", FIX / "hotpotqa_5.jsonl", "--strategy", "magic")
    assert bad.exit_code == 2 and "unknown strategy" in bad.stderr


async def test_answers_and_judge_with_a_scripted_model(settings: MemrouteSettings,
                                                       tmp_path: Path) -> None:
    questions = load_dataset("hotpotqa", FIX / "hotpotqa_5.jsonl", limit=2).questions
    model = ScriptedChatModel.of([
        questions[0].answer, '{"reason": "same", "label": "CORRECT"}',
        "something else", "no label here", "WRONG",
    ])
    cfg = EvalConfig(dataset="hotpotqa", data=FIX / "hotpotqa_5.jsonl", limit=2,
                     strategies=["direct"], ks=[3], out=tmp_path, concurrency=1,
                     answer=True, judge=True)
    summary = await run_eval(cfg, settings=settings, llm=model)
    direct = summary["strategies"]["direct"]
    assert direct["em"] == 0.5 and direct["judge"] == 0.5
    assert 0.5 <= direct["f1"] < 1.0
    assert direct["llm_calls"] == 2.5  # answer + judge (+ one judge retry) over 2 questions
    assert direct["tokens_by_node"]["answer"]["input"] > 0
    assert direct["tokens_by_node"]["judge"]["output"] > 0
    assert summary["config"]["answer_model"] and summary["config"]["judge_model"]
    assert set(summary["config"]["prompts"]) == {"evals/answer", "evals/judge"}
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["judge"] for r in rows] == [1.0, 0.0]
    # the answer prompt carried the numbered memories
    first_prompt = model.calls[0]["messages"][-1].content
    assert "[1]" in first_prompt and questions[0].question in first_prompt


def test_config_rejects_an_llm_planner_without_an_llm() -> None:
    cfg = EvalConfig(dataset="hotpotqa", data=FIX / "hotpotqa_5.jsonl", planner="llm")
    with pytest.raises(EvalConfigError, match="need"):
        cfg.validate(None)


async def test_interrupted_run_leaves_a_valid_partial_result(settings: MemrouteSettings,
                                                             tmp_path: Path) -> None:
    cfg = EvalConfig(dataset="hotpotqa", data=FIX / "hotpotqa_5.jsonl", strategies=["direct"],
                     ks=[3], out=tmp_path, concurrency=1)
    task: asyncio.Task | None = None

    class StopAfterTwo(Reporter):
        def questions(self, done: int, total: int) -> None:
            if done == 2 and task is not None:
                task.cancel()  # what Ctrl-C does to asyncio.run's main task

    task = asyncio.ensure_future(run_eval(cfg, settings=settings, reporter=StopAfterTwo()))
    summary = await task
    assert summary["partial"] is True
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["partial"] is True and on_disk["n_rows"] == 2
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert on_disk["strategies"]["direct"]["n"] == 2


async def test_llm_planner_tokens_are_counted_per_node(settings: MemrouteSettings,
                                                      tmp_path: Path) -> None:
    from tests.fake_chat import route

    model = ScriptedChatModel.of([route("direct"), route("direct")])
    cfg = EvalConfig(dataset="hotpotqa", data=FIX / "hotpotqa_5.jsonl", limit=2,
                     strategies=["auto"], ks=[3], out=tmp_path, concurrency=1, planner="llm")
    summary = await run_eval(cfg, settings=settings, llm=model)
    auto = summary["strategies"]["auto"]
    assert auto["llm_calls"] == 1.0
    assert auto["routes"] == {"direct": {"n": 2, "sf_recall@3": auto["sf_recall@3"]}}
    router = auto["tokens_by_node"]["tool_select"]
    assert router["input"] > 100 and router["output"] > 0
    assert auto["input_tokens"] == router["input"]
    assert "tool_select" in summary["config"]["prompts"]
    assert summary["config"]["planner"] != "offline"


def test_passage_unit_pools_sets_and_scores_passages(cli, tmp_path: Path) -> None:
    out = tmp_path / "passages"
    result = cli(eval_app, "2wiki", "--data", FIX / "2wiki_4.json", "--unit", "passage",
                 "--pool", f"hotpotqa={FIX / 'hotpotqa_5.jsonl'}",
                 "--pool", f"musique={FIX / 'musique_3.jsonl'}",
                 "--strategy", "direct,auto", "--out", out, "--concurrency", "2")
    assert result.exit_code == 0, result.output
    summary = _last_json(result.stdout)
    assert summary["unit"] == "passage" and summary["ks"] == [2, 5, 10]
    assert summary["headline_metric"] == "passage_recall@5"
    sets = [load_dataset(name, FIX / file) for name, file in (
        ("2wiki", "2wiki_4.json"), ("hotpotqa", "hotpotqa_5.jsonl"),
        ("musique", "musique_3.jsonl"))]
    corpus = {p.passage() for d in sets for q in d.questions for p in q.paragraphs}
    assert summary["store"]["episodes"] == len(corpus)
    assert [p.split(" (")[0] for p in summary["store"]["pool"]] == ["2wiki", "hotpotqa",
                                                                    "musique"]
    gold = {q.id: q for q in sets[0].questions}
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 2 and {r["k"] for r in rows} == {10}  # one ranked list per question
    for row in rows:
        ranked = [r["content"] for r in row["returned"]]
        assert len(ranked) == 10 and set(ranked) <= corpus  # whole passages come back
        for k in (2, 5, 10):
            assert row["metrics"][f"passage_recall@{k}"] == metrics.passage_recall(
                gold[row["id"]].gold_passages, ranked, k)
        assert row["metrics"]["passage_recall@2"] <= row["metrics"]["passage_recall@5"]
    for name, figures in summary["strategies"].items():
        assert figures["n"] == 4
        assert figures["passage_recall@5"] == pytest.approx(
            sum(r["metrics"]["passage_recall@5"] for r in rows if r["strategy"] == name) / 4,
            abs=1e-4)
        assert "all_passages@5" in figures and "sf_recall@10" not in figures
    assert "passage_recall@5" in (out / "summary.md").read_text()

    # the same pool evaluated from another of its sets reuses the store
    again = cli(eval_app, "musique", "--data", FIX / "musique_3.jsonl", "--unit", "passage",
                "--pool", f"2wiki={FIX / '2wiki_4.json'}",
                "--pool", f"hotpotqa={FIX / 'hotpotqa_5.jsonl'}",
                "--strategy", "direct", "--k", "5", "--out", tmp_path / "again")
    assert again.exit_code == 0, again.output
    reused = _last_json(again.stdout)
    assert reused["store"]["reused"] is True
    assert reused["store"]["schema"] == summary["store"]["schema"]
    assert set(reused["strategies"]["direct"]) >= {"passage_recall@5", "all_passages@5"}


@pytest.mark.parametrize(("args", "message"), [
    (("--pool", "2wiki=x.json"), "with --unit passage"),
    (("--unit", "passage", "--pool", "locomo=x.json"), "NAME=FILE"),
    (("--unit", "paragraph"), "--unit must be"),
])
def test_passage_options_are_checked_before_anything_runs(cli, tmp_path: Path, args: tuple,
                                                          message: str) -> None:
    result = cli(eval_app, "hotpotqa", "--data", FIX / "hotpotqa_5.jsonl", *args,
                 "--out", tmp_path / "never")
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "never").exists()
    locomo = cli(eval_app, "locomo", "--data", FIX / "locomo_conv26_s1-2.json", "--unit",
                 "passage", "--out", tmp_path / "never")
    assert locomo.exit_code == 2 and "Wikipedia set" in locomo.stderr


def test_config_accepts_the_scripted_llm_only_for_a_model_planner() -> None:
    data = FIX / "hotpotqa_5.jsonl"
    EvalConfig(dataset="hotpotqa", data=data, planner="cascade", scripted_llm=True).validate(None)
    with pytest.raises(EvalConfigError, match="need"):
        EvalConfig(dataset="hotpotqa", data=data, planner="cascade").validate(None)
    with pytest.raises(EvalConfigError, match="scripted"):
        EvalConfig(dataset="hotpotqa", data=data, scripted_llm=True).validate(None)


def test_cascade_planner_with_the_scripted_llm_from_the_command(cli, tmp_path: Path) -> None:
    """``--planner cascade --scripted-llm``: the offline decisions first, the scripted model
    below the threshold; its tokens are counted per node and the planner is named."""
    out = tmp_path / "cascade"
    result = cli(eval_app, "hotpotqa", "--data", FIX / "hotpotqa_5.jsonl", "--strategy", "auto",
                 "--k", "3", "--out", out, "--concurrency", "1", "--planner", "cascade",
                 "--scripted-llm")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["config"]["planner"].startswith("cascade:offline+")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    calls = sum(r["costs"]["total"]["llm_calls"] for r in rows)
    tokens = sum(r["costs"]["total"]["input_tokens"] for r in rows)
    assert summary["strategies"]["auto"]["llm_calls"] == pytest.approx(calls / len(rows), abs=1e-3)
    assert (calls == 0) == (tokens == 0)  # a consulted model's prompt is counted
    # who made each decision, per question and in the summary's share
    auto = summary["strategies"]["auto"]
    made = {who: sum(r["decisions"].get(who, 0) for r in rows) for who in ("offline", "llm")}
    assert all(sum(r["decisions"].values()) >= 1 for r in rows)  # the route at least
    assert made["llm"] >= 1 and made["offline"] >= 1  # this fixture has both kinds
    assert made["llm"] <= calls  # each LLM decision cost at least one call
    assert auto["decisions"] == {w: pytest.approx(n / len(rows), abs=1e-3)
                                 for w, n in made.items() if n}
    assert auto["llm_decision_share"] == pytest.approx(made["llm"] / sum(made.values()),
                                                       abs=1e-4)
    report = (out / "summary.md").read_text()
    assert f"{100 * auto['llm_decision_share']:.1f} %" in report.split("## Planner decisions")[1]
