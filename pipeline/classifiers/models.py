"""fastText document classifiers: quality (wiki vs cc), toxicity, NSFW, and the filter step that applies them.

After CS336 assignment 4 (``classify_quality`` / ``classify_toxic_speech`` / ``classify_nsfw`` returning a
label and a confidence), Dolma's Jigsaw fastText taggers (``__label__toxic``/``__label__non-toxic``,
``__label__nsfw``/``__label__non-nsfw``) and DCLM's fastText quality filter (``__label__hq``/``__label__cc``):
a bag of word n-grams (plus optional character n-grams) averaged into one vector, then a softmax (Joulin et
al. 2017, "Bag of Tricks for Efficient Text Classification"). ``FastTextClassifier`` wraps any supervised
fastText ``.bin``, ours or a user's pretrained one, mapping its label names onto ours.

Documents gain one float per task: ``quality`` = P(wiki), ``toxicity`` = P(toxic), ``nsfw`` = P(nsfw).
``ClassifierFilter`` writes it and drops a document with ``quality_low`` (below the threshold),
``toxicity_toxic`` or ``nsfw_nsfw`` (at or above it).

Determinism: fastText trains reproducibly with ``thread=1`` and a seed, but fasttext-numpy2 0.10.4 leaves
most of the input matrix uninitialised (it randomises the first 1/10 only, with one thread, and never
zeroes the rest), so a second model trained in the same process starts from the last one's freed memory:
different weights, sometimes "Encountered NaN". ``_zeroed_malloc`` makes glibc hand out zeroed memory
while fastText trains (``M_PERTURB`` = 0xff), which restores the fresh-process behaviour bit for bit.

Text is cleaned the same way for training and prediction (``clean_text``): invalid UTF-8 replaced,
whitespace runs (newlines included) turned into one space, since fastText predicts one line; fastText
itself splits words on whitespace only, so the words a pretrained model sees are unchanged.

Training them on labelled data, and their held-out evaluation, is the train-classifier stage (pipeline/classify.py).
It writes a provenance sidecar beside each model (``<model>.json``: ``trained_on`` ``generated`` or ``real`` with the
input files and their SHA-256, the label map, held-out metrics, metrics on real data), which the filter stage reads
to refuse a model trained on generated text on real documents (``trained_on_generated``).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pipeline.runtime.steps import Step, as_text
from workbench.files import atomic_path, read_json
from workbench.params import Checked, setting

PREFIX = "__label__"
GENERATED = "generated"  # a sidecar's ``trained_on`` for the sample crawl's generated labelled text


@dataclass(frozen=True)
class TrainConfig(Checked):
    """fastText supervised hyperparameters (``fasttext.train_supervised`` names in brackets)."""

    lr: float = setting(0.5, "learning rate", above=0, at_most=10)
    epoch: int = setting(10, "passes over the training file", at_least=1)
    word_ngrams: int = setting(2, "[wordNgrams] word n-grams, hashed into bucket rows", at_least=1)
    dim: int = setting(32, "embedding width", at_least=1)
    minn: int = setting(0, "shortest character n-gram (0: none), hashed likewise", at_least=0)
    maxn: int = setting(0, "longest character n-gram (0: none)", at_least=0)
    bucket: int = setting(200_000, "hash rows of the n-grams (fastText's 2M x dim floats would make an 800 MB model "
                                   "at dim 100)", at_least=0)
    min_count: int = setting(1, "[minCount] rarest word kept", at_least=1)
    loss: str = setting("softmax", "the output layer's loss", choices=("softmax", "hs", "ns", "ova"))
    thread: int = setting(1, "fastText threads (1: reproducible)", at_least=1)
    seed: int = setting(0, "fastText's seed")

    def __post_init__(self):
        super().__post_init__()
        if self.maxn < self.minn or (self.maxn > 0) != (self.minn > 0):  # rules across two or three settings
            raise ValueError(f"TrainConfig.minn/maxn must be 0/0 or 1 <= minn <= maxn, got {self.minn}/{self.maxn}")
        if self.bucket < 1 and (self.word_ngrams > 1 or self.maxn > 0):
            raise ValueError(f"TrainConfig.bucket must be >= 1 with n-grams, got {self.bucket}")

    def fasttext_args(self) -> dict:
        return dict(lr=self.lr, epoch=self.epoch, wordNgrams=self.word_ngrams, dim=self.dim, minn=self.minn,
                    maxn=self.maxn, bucket=self.bucket, minCount=self.min_count, loss=self.loss,
                    thread=self.thread, seed=self.seed, verbose=0)


@dataclass(frozen=True)
class Task:
    """One classification task: its two labels, which raw model labels mean them, where its model lives."""

    name: str
    positive: str  # the label whose probability is the document's score
    negative: str
    aliases: Mapping[str, str] = field(default_factory=dict)  # raw model label (no prefix) -> ours
    reject_low: bool = False  # quality drops low scores; toxicity and nsfw drop high ones
    reason: str = ""
    config: TrainConfig = TrainConfig()  # the CLI's default hyperparameters for this task

    @property
    def default_path(self) -> Path:
        return Path("data/classifiers") / f"{self.name}.bin"


TASKS = {
    # character 3-grams: words of Chinese/Japanese text are whole sentences; teasers end in "…"
    "quality": Task("quality", "wiki", "cc", {"hq": "wiki", "high": "wiki", "lq": "cc", "low": "cc"}, True,
                    "quality_low", TrainConfig(minn=3, maxn=3)),
    "toxicity": Task("toxicity", "toxic", "non-toxic", {"non_toxic": "non-toxic", "nontoxic": "non-toxic",
                                                          "hate": "toxic", "offensive": "toxic"}, False,
                     "toxicity_toxic"),
    "nsfw": Task("nsfw", "nsfw", "non-nsfw", {"non_nsfw": "non-nsfw", "sfw": "non-nsfw"}, False, "nsfw_nsfw"),
}

# Tweets: character 3-5-grams catch misspelt and run-together slurs (held-out macro-F1 0.91 vs 0.86 without).
DAVIDSON_CONFIG = TrainConfig(minn=3, maxn=5)


def clean_text(text, max_chars: int | None = 100_000) -> str:
    """One line of valid UTF-8 for fastText: at most ``max_chars`` characters, invalid code points
    (lone surrogates) replaced, every whitespace run one space, no ``__label__`` inside."""
    text = as_text(text)[:max_chars].encode("utf-8", "replace").decode("utf-8")
    return " ".join(text.split()).replace(PREFIX, "label ")


@contextlib.contextmanager
def _zeroed_malloc():
    """glibc ``mallopt(M_PERTURB, 0xff)``: every ``malloc`` returns memory filled with 0xff ^ 0xff = 0 until exit
    (see the module docstring); a no-op where there is no glibc ``mallopt``."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None) if sys.platform.startswith("linux") else None
    if mallopt is not None:
        mallopt(-6, 0xFF)  # M_PERTURB
    try:
        yield
    finally:
        if mallopt is not None:
            mallopt(-6, 0)


class FastTextClassifier:
    """A supervised fastText model with our label names, cleaned input and batched prediction.

    ``labels`` maps raw model labels (without ``__label__``) to names (``{"hq": "wiki"}``); unmapped labels keep
    their raw name. ``default`` is what text with no words gets (label, confidence 1.0); without it such text
    gets the model's first label (its most frequent in training) with confidence 0.0.
    """

    def __init__(self, model, labels: Mapping[str, str] | None = None, default: str | None = None,
                 path: str | Path | None = None):
        self.model, self.path = model, path
        self.mapping = dict(labels or {})
        self.raw_labels = tuple(lab.removeprefix(PREFIX) for lab in model.get_labels())
        self.labels = tuple(dict.fromkeys(self.canonical(lab) for lab in self.raw_labels))
        if not self.labels:
            raise ValueError(f"{path or 'model'}: a supervised fastText model with labels is needed")
        if default is not None and default not in self.labels:
            raise ValueError(f"default label {default!r} is not one of the model's labels {self.labels}")
        self.default = default
        self._column = {raw: self.labels.index(self.canonical(raw)) for raw in self.raw_labels}

    def canonical(self, raw: str) -> str:
        raw = raw.removeprefix(PREFIX)
        return self.mapping.get(raw, raw)

    @classmethod
    def load(cls, path: str | Path, labels: Mapping[str, str] | None = None, **kwargs) -> FastTextClassifier:
        """Load a fastText ``.bin`` (ours, or a pretrained one such as Dolma's Jigsaw or DCLM's)."""
        import fasttext

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"fastText model not found: {path}")
        try:
            model = fasttext.load_model(str(path))
        except ValueError as e:  # fastText's message for a non-model file
            raise ValueError(f"{path}: not a fastText model ({e})") from None
        return cls(model, labels, path=path, **kwargs)

    @classmethod
    def train(cls, train_file: str | Path, out_path: str | Path | None = None, config: TrainConfig | None = None,
              *, labels: Mapping[str, str] | None = None, default: str | None = None, **params) -> FastTextClassifier:
        """Train on a fastText-format file (``__label__x text`` lines); ``params`` override ``config`` fields
        (lr, epoch, word_ngrams, dim, minn, maxn, bucket, min_count, loss, thread, seed). The model is written
        atomically to ``out_path`` when given."""
        import fasttext

        config = TrainConfig(**{**asdict(config or TrainConfig()), **params})
        train_file = Path(train_file)
        if not train_file.is_file() or train_file.stat().st_size == 0:
            raise ValueError(f"training file is missing or empty: {train_file}")
        with _zeroed_malloc():
            model = fasttext.train_supervised(input=str(train_file), **config.fasttext_args())
        clf = cls(model, labels, default=default)
        if out_path is not None:
            clf.save(out_path)
        return clf

    def save(self, path: str | Path) -> Path:
        """Write the ``.bin`` atomically (a temporary file beside it, then ``os.replace``)."""
        with atomic_path(path) as tmp:
            self.model.save_model(str(tmp))
        self.path = Path(path)
        return self.path

    # -- prediction ----------------------------------------------------------------------------------
    def proba(self, texts: Iterable) -> np.ndarray:
        """P(label) for each text: shape (n_texts, n_labels), columns in ``self.labels`` order."""
        cleaned = [clean_text(t) for t in texts]
        out = np.zeros((len(cleaned), len(self.labels)))
        todo = [i for i, t in enumerate(cleaned) if t]
        if todo:
            all_labels, all_probs = self.model.predict([cleaned[i] for i in todo], k=-1)
            for i, labs, probs in zip(todo, all_labels, all_probs, strict=False):
                for lab, p in zip(labs, probs, strict=False):
                    out[i, self._column[lab.removeprefix(PREFIX)]] += p
        empty = [i for i, t in enumerate(cleaned) if not t]
        if empty and self.default is not None:
            out[empty, self.labels.index(self.default)] = 1.0
        return np.clip(out, 0.0, 1.0)  # fastText adds 1e-5 inside its log: probabilities may pass 1 slightly

    def predict_batch(self, texts: Iterable) -> list[tuple[str, float]]:
        """(label, confidence) for each text; one fastText call for the whole batch."""
        p = self.proba(texts)
        return [(self.labels[j], float(p[i, j])) for i, j in enumerate(p.argmax(axis=1))]

    def predict(self, text) -> tuple[str, float]:
        """The most likely label (``__label__`` stripped, mapped) and its probability."""
        return self.predict_batch([text])[0]

    def scores(self, texts: Iterable, label: str) -> np.ndarray:
        """P(``label``) for each text."""
        if label not in self.labels:
            raise ValueError(f"label {label!r} is not one of the model's labels {self.labels}")
        return self.proba(texts)[:, self.labels.index(label)]

    def score(self, text, label: str) -> float:
        return float(self.scores([text], label)[0])


# -- provenance: what a model was trained on ----------------------------------------------------------------------
def provenance_path(model_path: str | Path) -> Path:
    """The sidecar of a model file: ``quality.bin`` -> ``quality.bin.json``."""
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + ".json")


def trained_on_generated(model_path: str | Path) -> bool:
    """True when the model's sidecar says it was trained on generated text (False without a sidecar: a pretrained
    model brought by path)."""
    path = provenance_path(model_path)
    if not path.is_file():
        return False
    try:
        data = read_json(path)
    except ValueError as e:
        raise ValueError(f"{path}: unreadable provenance sidecar ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a provenance sidecar must be a JSON object")
    return data.get("trained_on") == GENERATED


# -- CS336 function API: one cached model per task ---------------------------------------------------------
_PATHS: dict[str, tuple[Path, dict]] = {}
_MODELS: dict[str, FastTextClassifier] = {}


def task_spec(task: str) -> Task:
    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
    return TASKS[task]


def set_model(task: str, model: str | Path | FastTextClassifier, labels: Mapping[str, str] | None = None) -> None:
    """Use ``model`` (a path, loaded on first use, or a classifier) for ``task``; ``labels`` adds raw-label names."""
    task_spec(task)
    _MODELS.pop(task, None)
    if isinstance(model, FastTextClassifier):
        _MODELS[task] = model
    else:
        _PATHS[task] = (Path(model), dict(labels or {}))


def load_task_model(task: str, path: str | Path | None = None,
                    labels: Mapping[str, str] | None = None) -> FastTextClassifier:
    """Load ``task``'s model with its label aliases; a missing file is a one-line FileNotFoundError."""
    t = task_spec(task)
    path = Path(path) if path is not None else t.default_path
    if not path.is_file():
        raise FileNotFoundError(f"{task} classifier model not found: {path} (train one with "
                                f"`python -m pipeline.classify --task {task}` or call set_model({task!r}, PATH))")
    clf = FastTextClassifier.load(path, {**t.aliases, **(labels or {})})
    if t.positive not in clf.labels:
        raise ValueError(f"{path}: a {task} model needs label {t.positive!r} (or an alias), has {clf.labels}")
    if t.negative in clf.labels:
        clf.default = t.negative
    return clf


def get_model(task: str) -> FastTextClassifier:
    """The cached model for ``task`` (``set_model``'s, else ``data/classifiers/<task>.bin``)."""
    if task not in _MODELS:
        path, labels = _PATHS.get(task, (None, {}))
        _MODELS[task] = load_task_model(task, path, labels)
    return _MODELS[task]


def classify_quality(text: str) -> tuple[str, float]:
    """('wiki' | 'cc', confidence)."""
    return get_model("quality").predict(text)


def classify_toxic_speech(text: str) -> tuple[str, float]:
    """('toxic' | 'non-toxic', confidence)."""
    return get_model("toxicity").predict(text)


def classify_nsfw(text: str) -> tuple[str, float]:
    """('nsfw' | 'non-nsfw', confidence)."""
    return get_model("nsfw").predict(text)


# -- the filter step -----------------------------------------------------------------------------------
class ClassifierFilter(Step):
    """Score ``doc["text"]`` with ``task``'s model: ``doc[task]`` = P(positive label), rounded to 4 places.

    quality drops documents scoring below ``threshold`` (``quality_low``); toxicity and nsfw drop those at or
    above it (``toxicity_toxic``, ``nsfw_nsfw``). The model loads on first use (and is not pickled), so the step
    can be built in one process and run in another.
    """

    def __init__(self, task: str, model_path: str | Path | None = None, threshold: float = 0.5, *,
                 labels: Mapping[str, str] | None = None, classifier: FastTextClassifier | None = None):
        self.spec = task_spec(task)
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"ClassifierFilter.threshold must be in [0, 1], got {threshold}")
        self.name, self.threshold, self.labels = task, threshold, dict(labels or {})
        self.model_path = Path(model_path) if model_path is not None else self.spec.default_path
        self._clf = classifier

    @property
    def classifier(self) -> FastTextClassifier:
        if self._clf is None:
            self._clf = load_task_model(self.name, self.model_path, self.labels)
        return self._clf

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_clf": None}

    def reject(self, doc: dict) -> str | None:
        s = doc[self.name] = round(self.classifier.score(doc.get("text", ""), self.spec.positive), 4)
        if (s < self.threshold) if self.spec.reject_low else (s >= self.threshold):
            return self.spec.reason
        return None
