"""The evaluation's answer and judge calls go through the library's chat backends and prompt
loader: plain-text completions (no schema), usage from the model or estimated."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from types import SimpleNamespace
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from memroute.evals import answering
from memroute.planners.llm.backends import LangChainChat, OpenAIChat
from memroute.planners.llm.structured import complete_text
from memroute.settings import MemrouteSettings

MESSAGES = [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Who?"}]


class _Completions:
    def __init__(self, reply: Any) -> None:
        self.reply, self.sent = reply, []

    async def create(self, **kwargs: Any) -> Any:
        self.sent.append(kwargs)
        return self.reply


class FakeOpenAIClient:
    """Enough of ``openai.AsyncOpenAI`` for `OpenAIChat`: records options and requests."""

    def __init__(self, text: str, usage: tuple[int, int] | None) -> None:
        message = SimpleNamespace(content=text)
        tokens = None if usage is None else SimpleNamespace(prompt_tokens=usage[0],
                                                            completion_tokens=usage[1])
        self.chat = SimpleNamespace(completions=_Completions(SimpleNamespace(
            choices=[SimpleNamespace(message=message)], usage=tokens)))
        self.options: dict[str, Any] = {}

    def with_options(self, **options: Any) -> FakeOpenAIClient:
        self.options = options
        return self


async def test_openai_plain_text_sends_no_response_format_and_reports_usage() -> None:
    client = FakeOpenAIClient("Mara Quinlan", (42, 3))
    text, usage = await complete_text(OpenAIChat(client, "m"), MESSAGES)
    assert text == "Mara Quinlan"
    assert (usage.llm_calls, usage.input_tokens, usage.output_tokens) == (1, 42, 3)
    assert not usage.estimated
    sent = client.chat.completions.sent[0]
    assert "response_format" not in sent and sent["messages"] == MESSAGES


async def test_plain_text_usage_is_estimated_when_the_model_reports_none() -> None:
    text, usage = await complete_text(OpenAIChat(FakeOpenAIClient("yes", None), "m"), MESSAGES)
    assert text == "yes" and usage.estimated and usage.input_tokens > 0
    model = GenericFakeChatModel(messages=iter([AIMessage("Lisbon")]))
    text, usage = await complete_text(LangChainChat(model), MESSAGES)
    assert text == "Lisbon" and usage.llm_calls == 1 and usage.output_tokens > 0


async def test_answer_backend_keeps_the_configured_client_retries() -> None:
    client = FakeOpenAIClient("", None)
    settings = MemrouteSettings(llm_model="judge-model", llm_max_retries=3)
    backend = answering.answer_backend(client, settings)
    assert backend.model == "judge-model" and client.options["max_retries"] == 3
    assert OpenAIChat(FakeOpenAIClient("", None), "m").client.options["max_retries"] == 0


def test_eval_prompts_load_through_the_library_loader_with_their_file_hash() -> None:
    for name in ("answer", "judge"):
        raw = files("memroute.evals").joinpath("prompts", f"{name}.md").read_bytes()
        assert answering.prompt_hashes()[f"evals/{name}"] == hashlib.sha256(raw).hexdigest()
    messages = answering.eval_prompt("answer").render(question="Q?", memories="[1] m")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "[1] m" in messages[1]["content"] and "Question: Q?" in messages[1]["content"]
