"""The LLM planner (`planner`): what it sends (`prompting`), what it asks back (`replies`),
chat backends (`backends`: OpenAI-compatible or LangChain), structured calls within call
limits (`structured`), and token accounting (`tokens`)."""
