"""The vectors of a :class:`~ebb_core.engine.Brain`: its embedder and ``embed``.

:class:`VectorsMixin` holds ``set_embedder``, ``embed`` (``ebb embed``: vectors for the memories
without one, or a rebuild under another model) and the embedder plumbing the other calls use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .brain_base import BrainBase
from .embeddings import META_DIM, META_MODEL, EmbedderError
from .errors import EbbError, InvalidInput
from .transfer import Progress


class VectorsMixin(BrainBase):
    """The Brain's embedder and vectors (on :class:`BrainBase`)."""

    def set_embedder(self, embedder: Any) -> None:
        """Use ``embedder`` from now on (every namespace view of this store shares it); the
        adapters call this with the framework's embedder. A model other than the one the
        store's vectors were made with is refused (:class:`EmbedderError`); ``None`` or
        ``False`` turns vectors off."""
        from .embeddings import as_embedder, check_model

        store = self._s.store
        emb = None if embedder in (None, False) else as_embedder(embedder)
        if emb is not None:
            if not store.supports_vectors:
                raise InvalidInput(
                    f"the {store.backend} backend keeps no vectors", field="embedder"
                )
            check_model(store.get_meta(META_MODEL), store.get_meta(META_DIM), emb)
        self._s.embedder = emb

    def _init_embedder(self, embedder: Any) -> None:
        """Wrap ``embedder``; a store whose vectors another model made refuses it. With none
        given, a store embedded by a model Ebb knows by name (the default) keeps using it."""
        from .embeddings import as_embedder, check_model, resolve

        store = self._s.store
        if embedder is False or not store.supports_vectors:
            return
        stored = store.get_meta(META_MODEL)
        if embedder is None:
            if stored is not None:
                try:
                    self._s.embedder = resolve(stored)
                except EbbError:
                    self._s.embedder = None  # a model Ebb cannot load by name: text alone
            return
        emb = as_embedder(embedder)
        if emb is not None:
            check_model(stored, store.get_meta(META_DIM), emb)
        self._s.embedder = emb

    def _embed(self, texts: Sequence[str]) -> Any:
        """The embedder's vectors for ``texts`` (None without an embedder); the store is made
        ready for their dimension and records the model on its first vectors."""
        emb = self._s.embedder
        if emb is None or not texts:
            return None
        vecs = emb.embed_documents(list(texts))
        self._vector_ready(int(vecs.shape[1]))
        return vecs

    def _vector_ready(self, dim: int) -> None:
        emb, store = self._s.embedder, self._s.store
        assert emb is not None
        with self._s.lock:
            stored, stored_dim = store.get_meta(META_MODEL), store.get_meta(META_DIM)
            if stored is not None and stored_dim is not None and int(stored_dim) != dim:
                raise EmbedderError(
                    f"embedder {emb.name!r} returned {dim}-dimensional vectors; this store's are "
                    f"{stored_dim}-dimensional ({stored!r}): re-embed with `ebb embed --rebuild`"
                )
            store.ensure_vectors(dim)
            if stored is None:
                with self._tx():
                    store.set_meta(META_MODEL, emb.name)
                    store.set_meta(META_DIM, str(dim))

    def embed(
        self,
        *,
        rebuild: bool = False,
        embedder: Any = None,
        batch: int = 64,
        progress: Progress | None = None,
        all_namespaces: bool = False,
    ) -> dict[str, int]:
        """Embed the memories that have no vector yet (``ebb embed``), ``batch`` at a time.

        Each batch commits on its own, so a run that is killed resumes where it stopped when
        run again. ``rebuild`` drops every vector of every namespace first (the store holds one
        model's vectors: this is how a store moves to another model) and re-embeds them all
        with ``embedder`` (default: this Brain's), recording the new model before the first
        batch, so an interrupted rebuild is finished by running ``embed()`` again. Returns
        ``{"embedded": n, "missing_before": m}``.
        """
        from .embeddings import as_embedder

        store = self._s.store
        if not store.supports_vectors:
            raise InvalidInput(f"the {store.backend} backend keeps no vectors", field="backend")
        emb = as_embedder(embedder) if embedder is not None else self._s.embedder
        if emb is None:
            raise InvalidInput(
                "no embedder: set EBB_EMBEDDER (e.g. minilm) or pass embedder=", field="embedder"
            )
        stored = store.get_meta(META_MODEL)
        if rebuild:
            probe = emb.embed_documents(["dimension probe"])
            with self._s.lock:
                store.drop_vectors()
                store.ensure_vectors(int(probe.shape[1]))
                with self._tx():
                    store.set_meta(META_MODEL, emb.name)
                    store.set_meta(META_DIM, str(probe.shape[1]))
            all_namespaces = True
        else:
            from .embeddings import check_model

            check_model(stored, store.get_meta(META_DIM), emb)
        self._s.embedder = emb
        spaces = store.namespaces() if all_namespaces else [self._ns]
        missing = sum(store.counts(ns).nodes - store.vector_count(ns) for ns in spaces)
        done = 0
        if progress:
            progress(0, missing)
        for ns in spaces:
            after = ""
            while True:
                with self._s.lock:
                    todo = store.without_vectors(ns, after, batch)
                if not todo:
                    break
                vecs = self._embed([t for _, t in todo])
                with self._s.lock:
                    store.put_vectors(ns, [i for i, _ in todo], vecs, new=True)
                after = todo[-1][0]
                done += len(todo)
                if progress:
                    progress(done, max(missing, done))
        return {"embedded": done, "missing_before": missing}
