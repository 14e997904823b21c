"""Shared fixtures: a tiny random Llama with a byte-level BPE tokenizer trained in the test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from syncheck.serve.process import ServerProcess

CORPUS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Dr. Smith moved to the U.S. Dept. of Energy in Aug. 1999 and earned $3.5 million [1].",
    "Café owners sell crêpes at 4.50 € each — naïve tourists pay more.",
    "Question: when was it built? Answer: it was built in 1889. Context: the tower is 330 m tall.",
    "Prices rose 3.5% in 2023, i.e. faster than wages, according to the report [2][3].",
] * 4

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def make_tokenizer(chat_template: str | None = None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        special_tokens=["<pad>", "<eos>", "<bos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>")
    if chat_template:
        fast.chat_template = chat_template
    return fast


def make_model(vocab_size: int, seed: int = 0, layers: int = 4, max_positions: int = 512):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    model = LlamaForCausalLM(cfg).eval()
    # Random init is nearly uniform; sharpen the output layer so distributions differ by context.
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)
    return model


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return make_tokenizer(CHAT_TEMPLATE)


@pytest.fixture(scope="session")
def tiny_lm(tiny_tokenizer):
    from syncheck.model.models import load_model

    return load_model(make_model(len(tiny_tokenizer)), tiny_tokenizer, name="tiny-llama")


@pytest.fixture(scope="session")
def tiny_lm_plain():
    """The same kind of model with a tokenizer that has no chat template."""
    from syncheck.model.models import load_model

    tok = make_tokenizer(None)
    return load_model(make_model(len(tok), seed=1), tok, name="tiny-llama-plain")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A tiny random Llama and its tokenizer saved with ``save_pretrained`` (for loaders and CLIs)."""
    tok = make_tokenizer(CHAT_TEMPLATE)
    path = tmp_path_factory.mktemp("tiny-model")
    make_model(len(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def serve_dir(tmp_path_factory):
    """A tiny random Llama with a 4096-token window for ``syncheck serve``, so a long generation can be stopped."""
    tok = make_tokenizer(CHAT_TEMPLATE)
    path = tmp_path_factory.mktemp("tiny-serve-model")
    make_model(len(tok), max_positions=4096).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def shared_data_dir() -> Path:
    """The shared data sets (HaluEval, RAGTruth): ``$SYNCHECK_DATA_DIR``, else ``../shared/data`` beside the
    repository."""
    env = os.environ.get("SYNCHECK_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def missing_data(*files: str) -> str | None:
    """Why a test that reads ``files`` (relative to :func:`shared_data_dir`) cannot run, or ``None`` when it can."""
    root = shared_data_dir()
    missing = [f for f in files if not (root / f).exists()]
    if not missing:
        return None
    return f"{', '.join(missing)} not found under {root} (set SYNCHECK_DATA_DIR to the shared data directory)"


def needs_data(*files: str) -> pytest.MarkDecorator:
    """Skip the test when one of ``files`` (relative to :func:`shared_data_dir`) is not there."""
    reason = missing_data(*files)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def shared_data(*files: str) -> Path:
    """:func:`shared_data_dir`, or skip the running test when one of ``files`` (relative to it) is not there."""
    reason = missing_data(*files)
    if reason is not None:
        pytest.skip(reason)
    return shared_data_dir()


#: the documents the server tests ask about
DOCS = ["The Eiffel Tower was completed in 1889 for the World's Fair.", "It is 330 metres tall."]


class Server(ServerProcess):
    """The test server: offline, its own cache and log, ``--model-id``; ``client()`` is an ``openai`` client."""

    def __init__(self, model: str, model_id: str, cache: Path, *extra: str, **kw) -> None:
        super().__init__(model, "--model-id", model_id, *extra, log=cache / "server.log", timeout=180,
                         env={"HF_HUB_OFFLINE": "1", "SYNCHECK_CACHE": str(cache), "PYTHONWARNINGS": "ignore"}, **kw)

    def client(self, **kw):
        import openai

        return openai.OpenAI(**{"base_url": self.base_url, "api_key": self.api_key or "none", "max_retries": 0, **kw})


@pytest.fixture(scope="module")
def server(serve_dir, tmp_path_factory):
    """``syncheck serve`` on the tiny model, served as ``tiny``: one per test module that asks for it."""
    srv = Server(str(serve_dir), "tiny", tmp_path_factory.mktemp("serve-cache"), "--max-concurrent", "4")
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """A test that runs a benchmark's ``--threads`` (``torch.set_num_threads``) does not slow every test after it."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


#: the cache the run started with: slow tests use it even if a fixture left another in the environment
_REAL_CACHE = os.environ.get("SYNCHECK_CACHE")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch, request):
    """Tiny-model tests write caches to a temp dir; slow tests share the real cache (the converted GGUF), so it is
    converted once per machine and not once per test module."""
    if request.node.get_closest_marker("slow") is None:
        monkeypatch.setenv("SYNCHECK_CACHE", str(tmp_path_factory.getbasetemp() / "syncheck-cache"))
    elif _REAL_CACHE is None:
        monkeypatch.delenv("SYNCHECK_CACHE", raising=False)
    else:
        monkeypatch.setenv("SYNCHECK_CACHE", _REAL_CACHE)
