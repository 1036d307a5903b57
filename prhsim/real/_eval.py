"""``prhsim real eval``: a trained text encoder against frozen image features, through ``prhsim.metrics``.

The text side: each image's first caption, embedded by the run's backbone (the mean of the last
hidden states over its tokens, every learner alike). The image side: the features file, one row
per image of the dataset JSON in its order (the synthetic export's ``image_features.npy``, or any
(N, D) / (N, L, D) file ``prhsim prh`` reads; with layers, the last one). Scores:

* R@1 and R@5, text → image and image → text, after one orthogonal map fitted on ``n_fit``
  validation pairs and scored on the test split (:func:`prhsim.metrics.retrieval`, as the paper
  fits its rotation on 1,000 Flickr30k validation pairs);
* ``metrics[name]``, every reported metric of the registry (:func:`prhsim.metrics.reported_metrics`:
  mutual k-NN with k = 10, linear CKA, R@1): on the test split, a fitted one (R@1, the mean of its two
  directions) fitting on the validation pairs and scored on the test split;

each beside its chance level (``chance[name]``: the record's where it has one, else the metric on the
same test rows with the images shuffled, a permutation baseline, since linear CKA of unrelated features
is well above 0 when the rows are few), and every metric that fits nothing against a permutation null
of ``permutations`` re-pairings of the test rows (:func:`prhsim.metrics.calibrate`: p-value, critical
value τ at ``alpha``, calibrated score).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from prhsim.io import json_text, write_text_atomic
from prhsim.real._tokenizer import encode, load_tokenizer
from prhsim.real._export import FEATURES_NAME
from prhsim.real._feature_checks import check_spread, image_features
from prhsim.real._train import CONFIG_NAME, MODEL_CONFIG_NAME, TOKENIZER_NAME, model_label, one_line, read_run_json
from prhsim.real._weights import run_record
from prhsim.real.data import DataError, dataset_json, parquet_shards, read_captions

EVAL_NAME = "eval.json"


def embed_texts(model, tokenizer, texts: list[str], max_length: int, *, batch: int = 256) -> np.ndarray:
    """The backbone's pooled features of each text, (N, hidden) float64."""
    import torch

    pad = tokenizer.token_to_id("[PAD]")
    rows = encode(tokenizer, texts, max_length)
    device = next(model.parameters()).device
    out = []
    model.eval()
    with torch.no_grad():
        for i in range(0, len(rows), batch):
            chunk = rows[i:i + batch]
            length = max(r.size for r in chunk)
            ids = np.full((len(chunk), length), pad, dtype=np.int64)
            mask = np.zeros_like(ids)
            for j, r in enumerate(chunk):
                ids[j, :r.size], mask[j, :r.size] = r, 1
            feats = model.features(torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device))
            out.append(feats.float().cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def _calibration_entry(cal: Any) -> dict[str, float]:
    """What eval.json keeps of a :class:`prhsim.metrics.Calibration`."""
    return {"raw": cal.raw, "calibrated": cal.calibrated, "p_value": cal.p_value, "tau": cal.tau,
            "null_median": cal.quantile(0.5)}


def evaluate_run(run: Path | str, *, features: Path | str | None = None, data: Path | str | None = None,
                 n_fit: int = 1000, knn_k: int = 10, permutations: int = 1000, alpha: float = 0.05) -> dict[str, Any]:
    """Score the run's text encoder against the image features (module docstring); writes ``run/eval.json``.

    ``data`` is the caption dataset whose val and test splits are scored (default: the one the run
    trained on; a run trained on parquet shards needs one, e.g. Flickr30k's Karpathy JSON).
    ``permutations``: K of the permutation null of mutual k-NN and linear CKA (0: no calibration), drawn
    with seed 0; ``alpha``: the level of its critical value.

    Raises:
        DataError: a missing or damaged run file, a features file whose rows do not match the dataset,
            features the metrics are undefined on (:func:`check_spread`), splits without validation or test images.
    """
    import torch

    from prhsim.real._settings import RealTrainSettings
    from prhsim.real._checkpoint import load_checkpoint
    from prhsim.real._text_models import TextEncoder
    from prhsim.metrics import calibrate, chance_recall, metric_record, reported_metrics, retrieval

    run = Path(run)
    if not (run / CONFIG_NAME).is_file():
        raise DataError(f"{run}: not a prhsim real run folder (no {CONFIG_NAME})")
    settings = read_run_json(run, CONFIG_NAME, RealTrainSettings)
    model_config = read_run_json(run, MODEL_CONFIG_NAME)
    if data is None and parquet_shards(settings.data):
        raise DataError(f"{run}: trained on parquet shards ({settings.data}), which have no val or test split; "
                        "pass the caption dataset to evaluate on (--data, a Karpathy JSON with its image features)")
    json_path = dataset_json(data if data is not None else settings.data)
    dataset = read_captions(json_path)
    feats_path = Path(features or (settings.features if data is None else None) or json_path.parent / FEATURES_NAME)
    images = image_features(feats_path, len(dataset.records))
    check_spread(images, f"image features {feats_path}")
    tokenizer = load_tokenizer(run / TOKENIZER_NAME)
    record = run_record(run)
    try:  # the run's own model_config.json builds; any error of transformers on another is the file's problem
        model = TextEncoder(settings.model, tokenizer.get_vocab_size(), settings.max_length,
                            causal=settings.learner == "ntp", proj_dim=settings.proj_dim, config=model_config,
                            normalize=bool(record and record.get("normalize")))
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{run}: its {MODEL_CONFIG_NAME} does not build the run's model ({one_line(exc)})") from None
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    state = load_checkpoint(run, model=model, optimizer=optimizer, scheduler=scheduler)
    index = {r.id: i for i, r in enumerate(dataset.records)}
    if isinstance(n_fit, bool) or int(n_fit) != n_fit or n_fit < 2:
        raise DataError(f"n_fit must be an integer of at least 2, got {n_fit!r}")
    if isinstance(permutations, bool) or int(permutations) != permutations or permutations < 0:
        raise DataError(f"permutations must be an integer of at least 0, got {permutations!r}")
    val = [r for r in dataset.records if r.split == "val"][:n_fit]
    test = [r for r in dataset.records if r.split == "test"]
    if len(val) < 2 or len(test) < 2:
        raise DataError(f"{json_path}: evaluation needs at least 2 val and 2 test images, got {len(val)} and {len(test)}")
    rows = val + test
    text = embed_texts(model, tokenizer, [r.texts[0] for r in rows], settings.max_length)
    image = images[[index[r.id] for r in rows]]
    fit = np.arange(len(rows)) < len(val)
    recall = retrieval(text, image, fit=fit, ks=(1, 5))
    t_test, i_test = text[~fit], image[~fit]
    n = len(test)
    check_spread(i_test, f"image features {feats_path} (its {n} test rows)")
    check_spread(t_test, f"text features of {run} (its {n} test captions)")
    k = min(knn_k, n - 1)
    records = [metric_record(name) for name in reported_metrics()]
    shuffled = i_test[np.random.default_rng(0).permutation(n)]
    metrics = {m.name: float(m(text, image, knn_k=k, fit=fit) if m.fitted else m(t_test, i_test, knn_k=k))
               for m in records}
    chance = {m.name: (m.chance_level(len(rows), k, fit=fit) if m.fitted else m.chance_level(n, k))
              if m.chance is not None else float(m(t_test, shuffled, knn_k=k))
              for m in records if m.chance is not None or not m.fitted}
    result = {
        "run": str(run), "step": state.step, "learner": settings.learner, "views": settings.views_used, "label": settings.label, "model": model_label(settings, record),
        "data": str(json_path), "features": str(feats_path), "n_fit": len(val), "n_test": n,
        "r1_text_to_image": recall.a_to_b[1], "r5_text_to_image": recall.a_to_b[5],
        "r1_image_to_text": recall.b_to_a[1], "r5_image_to_text": recall.b_to_a[5],
        "knn_k": k, "metrics": metrics, "chance": {"r1": chance_recall(n, 1), "r5": chance_recall(n, 5), **chance},
        "calibration": None,
    }
    if permutations:
        result["calibration"] = {"permutations": int(permutations), "alpha": alpha, **{
            name: _calibration_entry(calibrate(name, t_test, i_test, permutations=int(permutations), alpha=alpha,
                                               rng=0, knn_k=k)) for name in (m.name for m in records if not m.fitted)}}
    write_text_atomic(run / EVAL_NAME, json_text(result))
    return result
