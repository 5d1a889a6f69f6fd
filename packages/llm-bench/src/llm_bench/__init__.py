"""GGUF LLMs (llama, qwen3, olmoe) on the uop_scheduler Tensor stack and the llm-bench harness: GGUF, tokenizer, numpy reference, matrix runner."""

from .backends import available_devices, get_backend, register_backend, register_device_family
from .bpe_train import LearnedVocab, learn_bpe
from .dequant import DEQUANTIZABLE_TYPES, dequantize
from .errors import (
    BackendUnavailableError,
    GGUFError,
    LLMBenchError,
    MatrixError,
    ModelError,
    RegistryError,
    TokenizerError,
)
from .ggml_types import GGMLType, GGUFValueType
from .gguf_reader import GGUFFile, GGUFTensor, read_gguf
from .gguf_writer import GGUFWriter
from .harness import quant_name, time_decode, time_prefill, warm_up
from .matrix import Cell, CellResult, Matrix, parse_matrix, read_matrix, run_cell
from .model_api import Backend, LanguageModel
from .model_config import ModelConfig
from .pretokenize import PRESETS, split_words
from .quantize import quantize_q8_0
from .reference_model import NumpyBackend, NumpyModel
from .registry import DEFAULT_MODEL, MODELS, cache_dir, download, resolve_model
from .report import TestResult, append_log, format_step_line, format_summary_table, log_records
from .router_mfma import router_mfma
from .sampling import sample
from .tensor_dequant import GRAPH_QUANT_TYPES, dequantize_blocks
from .tensor_model import TensorBackend, TensorModel
from .tiny_models import SYNTHETIC_SPECS, TINY_SPECS, TinySpec, make_tiny, write_random_model
from .tokenizer import Tokenizer, TokenType

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MODEL",
    "DEQUANTIZABLE_TYPES",
    "GRAPH_QUANT_TYPES",
    "MODELS",
    "PRESETS",
    "SYNTHETIC_SPECS",
    "TINY_SPECS",
    "Backend",
    "BackendUnavailableError",
    "Cell",
    "CellResult",
    "GGMLType",
    "GGUFError",
    "GGUFFile",
    "GGUFTensor",
    "GGUFValueType",
    "GGUFWriter",
    "LLMBenchError",
    "LanguageModel",
    "LearnedVocab",
    "Matrix",
    "MatrixError",
    "ModelConfig",
    "ModelError",
    "NumpyBackend",
    "NumpyModel",
    "RegistryError",
    "TensorBackend",
    "TensorModel",
    "TestResult",
    "TokenType",
    "TinySpec",
    "Tokenizer",
    "TokenizerError",
    "append_log",
    "available_devices",
    "cache_dir",
    "dequantize",
    "dequantize_blocks",
    "download",
    "format_step_line",
    "format_summary_table",
    "get_backend",
    "learn_bpe",
    "log_records",
    "make_tiny",
    "parse_matrix",
    "quant_name",
    "quantize_q8_0",
    "read_gguf",
    "read_matrix",
    "register_backend",
    "register_device_family",
    "resolve_model",
    "run_cell",
    "sample",
    "router_mfma",
    "split_words",
    "time_decode",
    "time_prefill",
    "warm_up",
    "write_random_model",
    "__version__",
]
