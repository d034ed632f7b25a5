"""The `memroute` CLI against the real embedded store (through typer's CliRunner)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from statement_routes import SESSION_LOG
from typer.testing import CliRunner

from memroute import sample_data
from memroute.cli import app
from memroute.memory.server import server_tuning
from memroute.settings import get_settings

# shared/ sits beside the checkout (as in CI); tests that need it skip without it.
SHARED_HOTPOTQA = (Path(__file__).resolve().parents[2]
                   / "shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl")


@pytest.fixture(scope="module")
def schema() -> str:
    return f"cli_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, pg_url: str, pg_home: Path, schema: str):
    """Runs `memroute ...` on the test server, in this module's schema."""
    for name, value in {"MEMROUTE_DATABASE_URL": pg_url, "MEMROUTE_DB_SCHEMA": schema,
                        "MEMROUTE_HOME": str(pg_home), "MEMROUTE_EMBED_THREADS": "1",
                        "MEMROUTE_POOL_MAX_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    for name in ("MEMROUTE_SCOPE", "MEMROUTE_LLM_MODEL", "MEMROUTE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        get_settings.cache_clear()
        return runner.invoke(app, list(args), input=input)

    yield invoke
    get_settings.cache_clear()


@pytest.fixture
def scope_arg() -> str:
    return f"cli-{uuid.uuid4().hex[:8]}/tests/u1"


def write_jsonl(path: Path, lines: list[object]) -> Path:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n")
    return path


def count(cli, scope_arg: str) -> int:
    result = cli("db", "status", "--scope", scope_arg, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["counts"]["episodes"]


def test_ingest_then_search(cli, scope_arg: str) -> None:
    sample = str(sample_data.path())
    result = cli("ingest", sample, "--scope", scope_arg, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["valid"] == 40 and report["added"] == 40 and report["episodes"] == 40
    assert report["invalid"] == 0

    again = json.loads(cli("ingest", sample, "--scope", scope_arg, "--json").stdout)
    assert again["added"] == 0 and again["episodes"] == 40  # fixed uids: idempotent

    found = cli("search", "Which clinic does Biscuit go to?", "--scope", scope_arg, "-k", "3",
                "--json")
    assert found.exit_code == 0, found.output
    payload = json.loads(found.stdout)
    ranked = payload["results"]
    assert len(ranked) == 3
    assert [r["rank"] for r in ranked] == [1, 2, 3]
    assert ranked[0]["score"] >= ranked[1]["score"] >= ranked[2]["score"]
    texts = [r["content"] + " ".join(c["content"] for c in r["context"]) for r in ranked]
    assert any("Riverside Animal Clinic" in text for text in texts)
    assert {"embed_ms", "read_ms"} <= set(payload["timings_ms"])

    table = cli("search", "Which clinic does Biscuit go to?", "--scope", scope_arg)
    assert table.exit_code == 0
    assert "Biscuit" in table.stdout and "total" in table.stdout


def test_search_shows_each_turn_once(cli, scope_arg: str, tmp_path: Path) -> None:
    """Consecutive matching turns: their context windows (1 before, 2 after) overlap, yet the
    JSON and the table show each turn in one result only; the JSON still names every
    neighbour (``context_uids``) and those another result shows (``shown_elsewhere``)."""
    turns = [f"turn {i}: we talked about the sailing trip to Bergen, part {i}" for i in range(8)]
    path = write_jsonl(tmp_path / "trip.jsonl", [
        {"uid": f"t{i}", "content": text, "producer": "user", "session_id": "s1",
         "produced_at": f"2024-05-01T10:00:{i:02d}Z"} for i, text in enumerate(turns)])
    assert cli("ingest", str(path), "--scope", scope_arg, "--json").exit_code == 0

    found = cli("search", "sailing trip to Bergen", "--scope", scope_arg, "-k", "4", "--json")
    assert found.exit_code == 0, found.output
    rows = json.loads(found.stdout)["results"]
    assert len(rows) == 4
    shown = [r["uid"] for r in rows] + [c["uid"] for r in rows for c in r["context"]]
    assert len(shown) == len(set(shown))  # no turn in two results
    nuclei = {r["uid"] for r in rows}
    for row in rows:
        context = {c["uid"] for c in row["context"]}
        assert context | set(row["shown_elsewhere"]) == set(row["context_uids"])
        assert not context & set(row["shown_elsewhere"])
        for uid in row["shown_elsewhere"]:  # really shown by another result
            assert uid in nuclei or any(uid in {c["uid"] for c in other["context"]}
                                        for other in rows if other is not row)
    assert any(row["shown_elsewhere"] for row in rows)  # the windows did overlap

    table = cli("search", "sailing trip to Bergen", "--scope", scope_arg, "-k", "4")
    assert table.exit_code == 0
    printed = [f"part {i}" for i in range(8) if f"part {i}" in table.stdout]
    assert printed and all(table.stdout.count(part) == 1 for part in printed)
    assert len(printed) == len(shown)


def test_search_filters_and_scope_isolation(cli, scope_arg: str) -> None:
    assert cli("ingest", str(sample_data.path()), "--scope", scope_arg).exit_code == 0
    result = cli("search", "laptop order", "--scope", scope_arg, "--filters",
                 '{"producer": "support"}', "--json", "-k", "20")
    rows = json.loads(result.stdout)["results"]
    assert rows and {r["producer"] for r in rows} == {"support"}

    other = cli("search", "laptop order", "--scope", f"other-{uuid.uuid4().hex[:6]}", "--json")
    assert other.exit_code == 0 and json.loads(other.stdout)["results"] == []


def test_an_empty_scope_is_named_on_stderr(cli, scope_arg: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`memroute search` and `memroute ask` on a scope that holds no episodes (here: no
    --scope, so the default one) print one line on stderr naming it (``hint`` in the JSON);
    a search that finds something never counts the scope (no extra round trip)."""
    monkeypatch.setenv("MEMROUTE_DB_SCHEMA", f"cli_empty_{uuid.uuid4().hex[:8]}")

    def counts() -> int:
        return sum(n for (_, caller), n in SESSION_LOG.sent.items()
                   if caller == "memroute.memory.store:Memory.count")

    hint = ("hint: scope default/default holds no episodes; name the scope with --scope "
            "org[/project[/user[/agent]]] (or MEMROUTE_SCOPE)")
    for command in ("search", "ask"):
        result = cli(command, "Where does Alice live?")
        assert result.exit_code == 0, result.output
        assert [line for line in result.stderr.splitlines() if "hint" in line] == [hint]
        as_json = cli(command, "Where does Alice live?", "--json")
        assert json.loads(as_json.stdout)["hint"] == "scope default/default holds no episodes"
    assert cli("search", "x").stderr == hint + "\n"  # search prints nothing else there
    assert cli("ingest", str(sample_data.path()), "--scope", scope_arg).exit_code == 0
    before = counts()
    for command in ("search", "ask"):
        found = cli(command, "Which clinic does Biscuit go to?", "--scope", scope_arg, "--json")
        assert json.loads(found.stdout)["results"] and json.loads(found.stdout)["hint"] is None
        assert "hint" not in cli(command, "Biscuit", "--scope", scope_arg).stderr
    assert counts() == before


def test_bad_lines_are_reported_and_nothing_is_written(cli, scope_arg: str,
                                                       tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [
        {"content": "first good line", "session_id": "s1"},
        {"content": "   "},
        "{not json",
        {"content": "fourth good line", "colour": "red"},
        "",
        {"content": "good again", "produced_at": "yesterday"},
        {"content": "last good line"},
    ])
    result = cli("ingest", str(path), "--scope", scope_arg)
    assert result.exit_code == 2
    assert "line 2:" in result.stderr and "line 3:" in result.stderr
    assert "line 4:" in result.stderr and "colour" in result.stderr
    assert "line 6:" in result.stderr and "produced_at" in result.stderr
    assert "line 1:" not in result.stderr and "line 7:" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: 4 of 6 line(s)")
    assert "Traceback" not in result.output
    assert count(cli, scope_arg) == 0

    as_json = cli("ingest", str(path), "--scope", scope_arg, "--json")
    assert as_json.exit_code == 2
    assert [e["line"] for e in json.loads(as_json.stdout)["errors"]] == [2, 3, 4, 6]

    skipped = cli("ingest", str(path), "--scope", scope_arg, "--skip-invalid", "--json")
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.stdout)["added"] == 2
    assert count(cli, scope_arg) == 2


def test_lines_without_uid_get_stable_uids(cli, scope_arg: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", [
        {"content": "ok", "producer": "user"},
        {"content": "ok", "producer": "user"},  # a repeated line is a second episode
        {"content": "see you tomorrow", "producer": "assistant",
         "produced_at": "2024-05-01T10:00:00Z", "metadata": {"topic": "smalltalk"}},
    ])
    first = json.loads(cli("ingest", str(path), "--scope", scope_arg, "--json").stdout)
    second = json.loads(cli("ingest", str(path), "--scope", scope_arg, "--json").stdout)
    assert (first["added"], second["added"], second["episodes"]) == (3, 0, 3)


def test_errors_are_one_line_unless_debug(cli, scope_arg: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    bad_filter = cli("search", "x", "--scope", scope_arg, "--filters", '{"a": {"$regex": 1}}')
    assert bad_filter.exit_code == 2
    assert bad_filter.stderr.count("\n") == 1 and "$regex" in bad_filter.stderr

    not_json = cli("search", "x", "--scope", scope_arg, "--filters", "{oops", "--json")
    assert not_json.exit_code == 2
    assert json.loads(not_json.stderr)["kind"] == "FilterError"

    missing = cli("ingest", str(tmp_path / "nope.jsonl"), "--scope", scope_arg)
    assert missing.exit_code == 2 and "cannot read" in missing.stderr

    assert cli("search", "x", "--scope", "bad scope!").exit_code == 2
    for command in ("search", "ask"):  # above the memory's MAX_K
        too_many = cli(command, "x", "--scope", scope_arg, "-k", "1001")
        assert too_many.exit_code == 2 and "at most 1000" in too_many.stderr
    assert cli("ingest", str(tmp_path), "--format", "csv").exit_code == 2

    monkeypatch.setenv("MEMROUTE_DATABASE_URL",
                       "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    down = cli("search", "x", "--scope", scope_arg)
    assert down.exit_code == 3
    assert down.stderr.startswith("error: cannot connect") and down.stderr.count("\n") == 1
    assert "Traceback" not in down.output

    debug = cli("search", "x", "--scope", scope_arg, "--debug")
    assert debug.exit_code != 0
    assert type(debug.exception).__name__ == "StoreUnavailableError"  # raised, not swallowed


def test_logs_go_to_stderr_and_debug_shows_them(cli, scope_arg: str) -> None:
    quiet = cli("db", "erase", "--scope", scope_arg, "--yes", "--json")
    assert quiet.exit_code == 0
    assert json.loads(quiet.stdout) == {"scope": scope_arg, "session": None, "deleted": 0,
                                       "by_scope": {}}
    assert "memory.delete" not in quiet.output  # an info event: hidden by default

    loud = cli("db", "erase", "--scope", scope_arg, "--yes", "--json", "--debug")
    assert json.loads(loud.stdout)["deleted"] == 0  # stdout stays one JSON document
    assert "memory.delete" in loud.stderr and "memory.open" in loud.stderr


def test_erase_asks_first(cli, scope_arg: str) -> None:
    assert cli("ingest", str(sample_data.path()), "--scope", scope_arg).exit_code == 0
    refused = cli("db", "erase", "--scope", scope_arg, "--json")
    assert refused.exit_code == 2 and "--yes" in refused.stderr

    declined = cli("db", "erase", "--scope", scope_arg, input="n\n")
    assert declined.exit_code == 2 and count(cli, scope_arg) == 40

    session = cli("db", "erase", "--scope", scope_arg, "--session", "laptop-support",
                  input="y\n")
    assert session.exit_code == 0, session.output
    assert "erased 12 episode(s)" in session.stdout
    assert count(cli, scope_arg) == 28

    everything = cli("db", "erase", "--scope", scope_arg, "--yes", "--json")
    assert json.loads(everything.stdout)["deleted"] == 28
    assert count(cli, scope_arg) == 0


def test_db_commands_with_an_external_database(cli, pg_url: str) -> None:
    status = cli("db", "status", "--json")
    assert status.exit_code == 0
    info = json.loads(status.stdout)
    assert info["mode"] == "external" and info["schema"].startswith("cli_")
    url = cli("db", "url")
    assert url.exit_code == 0 and url.stdout.strip() == pg_url
    for action in ("start", "stop", "tune"):
        refused = cli("db", action)
        assert refused.exit_code == 2 and "MEMROUTE_DATABASE_URL" in refused.stderr


@pytest.mark.slow
def test_db_start_status_stop_embedded(cli, monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:
    monkeypatch.delenv("MEMROUTE_DATABASE_URL")
    monkeypatch.setenv("MEMROUTE_HOME", str(tmp_path))
    before = json.loads(cli("db", "status", "--json").stdout)
    assert before["mode"] == "embedded" and before["running"] is False
    try:
        started = cli("db", "start", "--json")
        assert started.exit_code == 0, started.output
        url = json.loads(started.stdout)["url"]
        status = json.loads(cli("db", "status", "--json").stdout)
        assert status["running"] is True and status["url"] == url and status["pid"]
        assert cli("db", "url").stdout.strip() == url
        with psycopg.connect(url, autocommit=True) as conn:  # as an older data directory
            conn.execute("ALTER SYSTEM RESET ALL")
        tuned = cli("db", "tune", "--json")
        assert tuned.exit_code == 0, tuned.output
        in_force = json.loads(tuned.stdout)
        expected = server_tuning()["shared_buffers"]  # e.g. "4096MB", shown as "4GB"
        mb = int(expected.removesuffix("MB"))
        assert in_force["shared_buffers"] in {expected, f"{mb // 1024}GB"}
        assert json.loads(cli("db", "status", "--json").stdout)["url"] == url
    finally:
        stopped = cli("db", "stop", "--json")
    assert json.loads(stopped.stdout)["stopped"] is True
    assert json.loads(cli("db", "status", "--json").stdout)["running"] is False
    assert "not running" in cli("db", "stop").stdout


def test_ingest_hotpotqa_slice(cli, scope_arg: str) -> None:
    if not SHARED_HOTPOTQA.exists():
        pytest.skip("shared HotpotQA data not present")
    result = cli("ingest", str(SHARED_HOTPOTQA), "--format", "hotpotqa", "--limit", "2",
                 "--scope", scope_arg, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    record = json.loads(SHARED_HOTPOTQA.read_text().splitlines()[0])
    first_title = record["context"]["title"][0]
    first_sentence = record["context"]["sentences"][0][0].strip()
    assert report["added"] == report["valid"] > 40  # two questions' paragraphs, pooled
    found = json.loads(cli("search", f"{first_title}: {first_sentence}", "--scope", scope_arg,
                           "-k", "1", "--json").stdout)["results"]
    assert found[0]["content"] == f"{first_title}: {first_sentence}"
    assert found[0]["producer"] == "system" and found[0]["metadata"]["title"] == first_title


def test_ingest_locomo_makes_one_scope_per_conversation(cli, scope_arg: str,
                                                        tmp_path: Path) -> None:
    def conversation(sample_id: str, speaker: str) -> dict:
        return {
            "sample_id": sample_id,
            "conversation": {
                "speaker_a": speaker, "speaker_b": "Sam",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": speaker, "dia_id": "D1:1", "text": f"{speaker} adopted a cat."},
                    {"speaker": "Sam", "dia_id": "D1:2", "text": "What is the cat called?"},
                    {"speaker": speaker, "dia_id": "D1:3", "text": "Her name is Miso.",
                     "blip_caption": "a grey cat on a sofa"},
                ],
            },
            "qa": [{"question": "What is the cat's name?", "answer": "Miso",
                    "evidence": ["D1:3"], "category": 4}],
        }

    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([conversation("conv-a", "Ana"), conversation("conv-b", "Bo")]))
    result = cli("ingest", str(path), "--format", "locomo", "--scope", scope_arg, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    org, project, _ = scope_arg.split("/")
    assert report["scopes"] == [f"{org}/{project}/conv-a", f"{org}/{project}/conv-b"]
    assert report["added"] == 6
    assert report["episodes_by_scope"] == {f"{org}/{project}/conv-a": 3,
                                           f"{org}/{project}/conv-b": 3}
    again = cli("ingest", str(path), "--format", "locomo", "--scope", f"{org}/{project}")
    assert again.exit_code == 0, again.output  # the scopes stored into, not the one given
    assert (f"→ 2 scopes: {org}/{project}/conv-a (now 3), {org}/{project}/conv-b (now 3)"
            in " ".join(again.stdout.split()))
    hits = json.loads(cli("search", "cat name", "--scope", f"{org}/{project}/conv-b",
                          "--json").stdout)["results"]
    assert len(hits) == 3  # one result per turn, each with its context window
    turns = list({t["content"]: t for h in hits for t in [h, *h["context"]]}.values())
    assert {t["producer"] for t in turns} == {"Bo", "Sam"} and len(turns) == 3
    miso = next(t for t in turns if "Miso" in t["content"])
    assert "[image: a grey cat on a sofa]" in miso["content"]
    assert miso["metadata"]["dia_id"] == "D1:3"


def test_version_and_help(cli) -> None:
    from memroute import __version__

    assert cli("--version").stdout.strip() == f"memroute {__version__}"
    help_text = cli("--help").stdout
    for command in ("ingest", "search", "ask", "db", "eval"):
        assert command in help_text
    eval_help = cli("eval", "--help")  # plugged in through the memroute.cli entry point
    assert eval_help.exit_code == 0 and "--data" in eval_help.stdout


@pytest.fixture
def sample_scope(cli, scope_arg: str) -> str:
    assert cli("ingest", str(sample_data.path()), "--scope", scope_arg).exit_code == 0
    return scope_arg


def test_ask_direct_matches_search(cli, sample_scope: str) -> None:
    question = "When is my dentist appointment?"
    asked = cli("ask", question, "--scope", sample_scope, "--strategy", "direct", "-k", "4",
                "--json")
    assert asked.exit_code == 0, asked.output
    answer = json.loads(asked.stdout)
    searched = json.loads(cli("search", question, "--scope", sample_scope, "-k", "4",
                              "--json").stdout)
    assert answer["route"] == "direct" and answer["queries"] == [question]
    assert [r["uid"] for r in answer["results"]] == [r["uid"] for r in searched["results"]]
    assert {r["role"] for r in answer["results"]} == {"direct"}
    assert answer["costs"]["totals"]["llm_calls"] == 0 and answer["planner"] == "offline"
    assert answer["stop_reason"] and answer["scope"] == sample_scope


def test_ask_explain_shows_hops_evidence_and_costs(cli, sample_scope: str) -> None:
    result = cli("ask", "What is the address of the clinic where Biscuit's vet works?",
                 "--scope", sample_scope, "--strategy", "chain", "--explain", "-k", "5")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "route chain" in out and "ChainOfQuery hops" in out
    assert "Evidence" in out and "Cost" in out and "chain_judge" in out and "total" in out
    assert "stop reason" in out
    assert "hop 1: sufficient" in result.stderr  # progress streamed as it happened
    assert "search hop 1 [chain]" in result.stderr

    as_json = json.loads(cli("ask", "What is the address of the clinic where Biscuit's vet "
                             "works?", "--scope", sample_scope, "--strategy", "chain",
                             "-k", "5", "--json").stdout)
    assert as_json["route"] == "chain" and as_json["hops"][0]["hop"] == 1
    assert len(as_json["queries"]) == len(as_json["hops"])
    assert {n["node"] for n in as_json["costs"]["nodes"]} >= {"memory_search", "final_rerank"}


def test_ask_split_lists_sub_queries(cli, sample_scope: str) -> None:
    question = "Where do Priya and Jonah Reyes live?"
    answer = json.loads(cli("ask", question, "--scope", sample_scope, "--strategy", "split",
                            "--json").stdout)
    assert answer["route"] == "split" and question in answer["queries"]
    assert set(answer["sub_queries"]) <= set(answer["queries"])
    explained = cli("ask", question, "--scope", sample_scope, "--strategy", "split",
                    "--explain")
    assert "route split" in explained.stdout
    for query in answer["sub_queries"]:
        assert query in explained.stdout and f"[split]: {query!r}" in explained.stderr


async def test_explanation_shows_planned_sub_queries(memory, scope) -> None:
    """The --explain renderer on a split planned by a (scripted) LLM."""
    import io

    from fake_chat import ScriptedChatModel, route, split
    from rich.console import Console

    from memroute import RetrievalAgent
    from memroute.cli_output import print_explanation

    await memory.add(scope, sample_data.episodes())
    llm = ScriptedChatModel.of([route("split"), split("Where does Priya live?",
                                                      "Where does Jonah Reyes live?")])
    result = await RetrievalAgent(memory=memory, llm=llm).aretrieve(
        "Where do Priya and Jonah Reyes live?", scope=scope, k=4)
    buffer = io.StringIO()
    print_explanation(Console(file=buffer, width=200), result)
    text = buffer.getvalue()
    assert "route split" in text and "sub-queries" in text
    assert "1. Where does Priya live?" in text and "2. Where does Jonah Reyes live?" in text
    assert "tool_select" in text and "split_plan" in text
    (total,) = [line for line in text.splitlines() if line.startswith("│ total")]
    cells = [cell.strip() for cell in total.strip("│").split("│")]
    assert cells[2] == str(result.costs.llm_calls) == "2"  # the router and the split planner


def test_ask_rejects_bad_options(cli, sample_scope: str) -> None:
    bad = cli("ask", "x", "--scope", sample_scope, "--strategy", "deep")
    assert bad.exit_code == 2 and "--strategy" in bad.stderr
    no_llm = cli("ask", "x", "--scope", sample_scope, "--planner", "llm")
    assert no_llm.exit_code == 2 and "MEMROUTE_LLM_MODEL" in no_llm.stderr
    budget = json.loads(cli("ask", "Who is Biscuit's vet and who is my dentist?", "--scope",
                            sample_scope, "--max-llm-calls", "0", "--json").stdout)
    assert budget["costs"]["totals"]["llm_calls"] == 0


@pytest.mark.parametrize("path", [(), ("ingest",), ("search",), ("ask",), ("db",),
                                  ("db", "status"), ("db", "start"), ("db", "stop"),
                                  ("db", "url"), ("db", "erase"), ("eval",)])
def test_every_help_page_renders(cli, path: tuple[str, ...]) -> None:
    result = cli(*path, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage" in result.stdout


def test_starting_the_cli_loads_no_database_or_model_code() -> None:
    import subprocess
    import sys

    code = ("import sys, memroute.cli; "
            "print(sorted(m for m in ('memroute.memory', 'psycopg', 'numpy', 'langgraph', "
            "'memroute.evals') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]"


def test_the_evaluation_plugs_in_and_the_library_never_imports_it() -> None:
    """`memroute eval` and the data set formats come from entry points; no module outside
    memroute/evals names the evaluation, so there is no cli <-> evals cycle."""
    import ast
    from importlib.metadata import entry_points

    import memroute
    from memroute.ingest import ingest_formats

    assert [ep.value for ep in entry_points(group="memroute.cli", name="eval")] == [
        "memroute.evals.cli:app"]
    assert set(ingest_formats()) == {"jsonl", "hotpotqa", "2wiki", "musique", "locomo"}
    root = Path(memroute.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.relative_to(root).parts[0] == "evals":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [node.value] if isinstance(node, ast.Constant)
                     and isinstance(node.value, str) else [])
            if any("memroute.evals" in n for n in names):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


def test_ask_planner_offline_never_reaches_the_configured_model(
        cli, sample_scope: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_llm_openai import FakeOpenAI

    server = FakeOpenAI()
    try:
        monkeypatch.setenv("MEMROUTE_LLM_MODEL", "big")
        monkeypatch.setenv("MEMROUTE_LLM_BASE_URL", server.url)
        monkeypatch.setenv("MEMROUTE_LLM_API_KEY", "k")
        question = "Who is Biscuit's vet and who is my dentist?"
        by_option = cli("ask", question, "--scope", sample_scope, "--planner", "offline",
                        "--json")
        monkeypatch.setenv("MEMROUTE_PLANNER", "offline")
        by_env = cli("ask", question, "--scope", sample_scope, "--json")
        for result in (by_option, by_env):
            assert result.exit_code == 0, result.output
            answer = json.loads(result.stdout)
            assert answer["planner"] == "offline" and answer["costs"]["totals"]["llm_calls"] == 0
        assert server.requests == []
    finally:
        server.close()


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """`memroute ... | head`: the reader leaving is no error to report (exit 1, no message),
    while other failures still are."""
    import typer

    from memroute.cli._app import MemrouteGroup

    pipe = typer.Typer(cls=MemrouteGroup)

    @pipe.command()
    def lines(broken: bool = True) -> None:
        typer.echo("first line")
        if broken:
            raise BrokenPipeError(32, "Broken pipe")
        raise RuntimeError("not a pipe")

    @pipe.command()
    def other() -> None:
        pass

    runner = CliRunner()
    closed = runner.invoke(pipe, ["lines"])
    assert closed.exit_code == 1
    assert "error" not in closed.stderr and "BrokenPipe" not in closed.stderr
    failed = runner.invoke(pipe, ["lines", "--no-broken"])
    assert failed.exit_code == 1 and "unexpected RuntimeError: not a pipe" in failed.stderr


@pytest.mark.parametrize("where", ["acme/p/", "acme//u1", "/p", "acme/p/u/a/x"])
def test_a_scope_with_an_empty_part_is_an_input_error(cli, where: str) -> None:
    """An empty part is refused (exit 2), never a wider scope: ``acme/p/`` would otherwise
    erase the project's memory instead of a user's."""
    for args in (("search", "x", "--scope", where), ("db", "erase", "--scope", where, "--yes")):
        refused = cli(*args)
        assert refused.exit_code == 2 and "invalid scope" in refused.output, refused.output
