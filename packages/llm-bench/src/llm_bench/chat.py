"""Chat prompts: a model's `tokenizer.chat_template` (Jinja, as Hugging Face and llama.cpp render it) applied to a list
of messages. Needs jinja2: `pip install 'uop-llm-bench[chat]'`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import LLMBenchError


class ChatTemplateError(LLMBenchError):
    """The model has no chat template, jinja2 is missing, or the template failed to render."""


def render_chat(template: str, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
                bos_token: str = "", eos_token: str = "") -> str:
    """The prompt text `template` makes of `messages` ({"role": ..., "content": ...}), in a sandbox: a template can
    only format its inputs. `raise_exception(msg)` in a template becomes a ChatTemplateError."""
    try:
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise ChatTemplateError("chat templates need jinja2: pip install 'uop-llm-bench[chat]'") from None

    def raise_exception(message: str) -> Any:
        raise ChatTemplateError(f"the chat template refused the conversation: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(template).render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                                bos_token=bos_token, eos_token=eos_token)
    except TemplateError as e:
        raise ChatTemplateError(f"the model's chat template failed: {e}") from None


def model_template(metadata: Mapping[str, Any]) -> str:
    """The GGUF's `tokenizer.chat_template`, or a ChatTemplateError when it has none."""
    template = metadata.get("tokenizer.chat_template")
    if not isinstance(template, str) or not template:
        raise ChatTemplateError("the model has no tokenizer.chat_template; use --prompt without --chat-template")
    return template
