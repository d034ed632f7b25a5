"""The LLM planner: prompt files, chat backends (OpenAI-compatible or LangChain), structured
calls within call limits, and token accounting."""
