"""Chat templates: a GGUF's Jinja template rendered in a sandbox, and the CLI's --chat-template / --chat."""

from __future__ import annotations

import pytest
from llm_bench.chat import ChatTemplateError, model_template, render_chat
from llm_bench.cli import main

pytest.importorskip("jinja2")

# SmolLM2-135M-Instruct's tokenizer.chat_template, as its GGUF stores it
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are "
           "a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
           "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
           "{{ '<|im_start|>assistant\\n' }}{% endif %}")


def test_a_user_message_in_smollm2s_template():
    # worked out by hand from the template: the default system turn, the user turn, the assistant's opening
    assert render_chat(SMOLLM2, [{"role": "user", "content": "Hi"}]) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert not render_chat(SMOLLM2, [{"role": "system", "content": "S"}], add_generation_prompt=False).count("SmolLM")


def test_template_errors_are_chat_template_errors():
    with pytest.raises(ChatTemplateError, match="refused the conversation: no system"):
        render_chat("{{ raise_exception('no system') }}", [])
    with pytest.raises(ChatTemplateError, match="failed"):
        render_chat("{% for %}", [])
    with pytest.raises(ChatTemplateError, match="cannot|unsafe|failed"):  # the sandbox: no attribute access to internals
        render_chat("{{ messages.__class__.__mro__[1].__subclasses__() }}", [])
    with pytest.raises(ChatTemplateError, match="no tokenizer.chat_template"):
        model_template({})


def test_the_cli_reports_a_model_without_a_template(capsys):
    assert main(["-m", "tiny-llama", "--device", "numpy", "--prompt", "x", "--chat-template", "--max-tokens", "2"]) == 1
    assert "no tokenizer.chat_template" in capsys.readouterr().err
