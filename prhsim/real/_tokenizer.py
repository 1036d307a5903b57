"""The text tokenizer of ``prhsim real``: WordPiece through the ``tokenizers`` library.

Either built from the training captions (the offline default), or read from a local
``tokenizer.json`` (any Hugging Face fast tokenizer) or ``vocab.txt`` (a BERT WordPiece vocabulary).
Nothing is downloaded.

Special tokens are the tokenizer's own: those its post-processor puts around one text
(:func:`special_tokens`; a BERT checkpoint's tokenizer.json: ``[CLS] … [SEP]``; a ``vocab.txt`` is
read as BERT's tokenizer, with the same two). :func:`encode` gives each text as the model reads it
(the specials included, ``max_length`` tokens at most, as ``tokenizer(text, truncation=True,
max_length=…)`` of transformers does); training cuts its views from the text's tokens without them
(:func:`encode` with ``specials=False``) and puts them around every view (:mod:`._batches`). The
vocabulary built here has the special tokens but no post-processor: nothing is added.

The built vocabulary: BERT's normaliser (lower-cased) and pre-tokeniser split the captions into
words; the vocabulary is the special tokens below, every character (as a word start and as a
``##`` continuation), then whole words by decreasing count (ties in alphabetical order) up to
``vocab_size``; WordPiece encodes greedily by the longest match. The library's own WordPiece
trainer breaks ties between equally frequent merges in hash order, so two trainings on the same
captions gave different vocabularies (measured: 3 of 5 differed), and two runs with one seed
would not be the same run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from prhsim.real.data import DataError

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(texts: Iterable[str], vocab_size: int = 8192):
    """A WordPiece tokenizer built from ``texts``, the same for the same texts (module docstring)."""
    from collections import Counter

    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    normalizer, splitter = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(word for word, _ in splitter.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for word in counts for c in word})
    vocab: dict[str, int] = {}
    for token in [*SPECIALS, *chars, *(f"##{c}" for c in chars)]:
        vocab.setdefault(token, len(vocab))
    for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if len(vocab) >= vocab_size:
            break
        vocab.setdefault(word, len(vocab))
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = splitter
    return tokenizer


def load_tokenizer(path: Path | str):
    """A tokenizer from a local ``tokenizer.json`` or ``vocab.txt`` (or a folder holding one).

    Raises:
        DataError: no such file, or a file the tokenizers library cannot read, or one without
            the pad and mask tokens.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    path = Path(path)
    if path.is_dir():
        found = [path / name for name in ("tokenizer.json", "vocab.txt") if (path / name).is_file()]
        if not found:
            raise DataError(f"{path}: no tokenizer.json or vocab.txt in this folder")
        path = found[0]
    if not path.is_file():
        raise DataError(f"{path}: no such file (expected a tokenizer.json or a WordPiece vocab.txt)")
    try:
        if path.suffix == ".txt":
            tokenizer = Tokenizer(models.WordPiece.from_file(str(path), unk_token="[UNK]"))
            tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
            tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
            if cls is not None and sep is not None:  # BERT's tokenizer reads a text as [CLS] … [SEP]
                tokenizer.post_processor = processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
        else:
            tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the library raises its own exception types
        raise DataError(f"{path}: not a tokenizer the tokenizers library can read ({str(exc).splitlines()[0]})") from None
    tokenizer.no_padding()  # a saved fast tokenizer may pad or cut: prhsim pads and cuts itself
    tokenizer.no_truncation()
    missing = [t for t in ("[PAD]", "[MASK]") if tokenizer.token_to_id(t) is None]
    if missing:
        raise DataError(f"{path}: the tokenizer has no {' or '.join(missing)} token")
    return tokenizer


#: The text whose encodings with and without special tokens tell where the tokenizer puts them.
PROBE = "a"
#: The ids put before and after a text by a tokenizer without special tokens: none.
NO_SPECIALS = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def special_tokens(tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The ids the tokenizer's post-processor puts before and after one text (BERT: ``[CLS]``, ``[SEP]``); two
    empty arrays for a tokenizer without one.

    Raises:
        DataError: a post-processor that changes the text's own tokens.
    """
    if tokenizer.post_processor is None:
        return NO_SPECIALS
    bare = tokenizer.encode(PROBE, add_special_tokens=False).ids
    full = tokenizer.encode(PROBE, add_special_tokens=True).ids
    starts = [k for k in range(len(full) - len(bare) + 1) if full[k:k + len(bare)] == bare]
    if not bare or not starts:
        raise DataError(f"the tokenizer's post-processor changes the tokens of a text ({bare} to {full}), not only "
                        "adding special tokens around it")
    k = starts[0]
    return np.asarray(full[:k], dtype=np.int64), np.asarray(full[k + len(bare):], dtype=np.int64)


def content_length(tokenizer, max_length: int, specials: tuple[np.ndarray, np.ndarray] | None = None) -> int:
    """The text tokens a sequence of ``max_length`` holds beside the tokenizer's special tokens (``specials``, the
    pair of :func:`special_tokens`, where the caller has it already).

    Raises:
        DataError: the special tokens leave no room.
    """
    room = max_length - sum(a.size for a in (special_tokens(tokenizer) if specials is None else specials))
    if room < 1:
        raise DataError(f"max_length {max_length} leaves no room for a text token beside the tokenizer's "
                        f"{max_length - room} special tokens")
    return room


def encode(tokenizer, texts: list[str], max_length: int, *, specials: bool = True) -> list[np.ndarray]:
    """Token ids of each text, ``max_length`` at most: its tokens cut to fit, between the tokenizer's special tokens
    (:func:`special_tokens`), or alone (``specials=False``, cut at ``max_length``; [UNK] for an empty text)."""
    unk = tokenizer.token_to_id("[UNK]")
    before, after = special_tokens(tokenizer) if specials else NO_SPECIALS
    room = content_length(tokenizer, max_length, (before, after)) if specials else max_length
    out = []
    for encoding in tokenizer.encode_batch(list(texts), add_special_tokens=False):
        ids = np.asarray(encoding.ids[:room], dtype=np.int64)
        if before.size or after.size:
            out.append(np.concatenate([before, ids, after]))
        else:
            out.append(ids if ids.size else np.array([unk], dtype=np.int64))
    return out
