"""The exception hierarchy of llm-bench: every user-facing failure is an `LLMBenchError`."""


class LLMBenchError(Exception):
    """Base class of every error llm-bench raises on bad input or an unusable environment."""


class GGUFError(LLMBenchError):
    """A GGUF file is truncated, corrupt, or uses a feature or tensor type this reader does not support."""


class TokenizerError(LLMBenchError):
    """The tokenizer metadata is unusable, or text cannot be encoded with the vocabulary."""


class ModelError(LLMBenchError):
    """A model's metadata or weights do not describe a supported architecture."""


class RegistryError(LLMBenchError):
    """A model name cannot be resolved to a file, or its download failed."""


class MatrixError(LLMBenchError):
    """A benchmark matrix file is malformed."""


class BackendUnavailableError(LLMBenchError):
    """The requested compute backend (device) is not available in this installation."""
