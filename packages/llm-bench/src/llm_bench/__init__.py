"""GGUF LLMs (llama, qwen3, olmoe) on the uop stack and an LLM benchmark harness."""

__version__ = "0.1.0"

__all__ = ["__version__"]
