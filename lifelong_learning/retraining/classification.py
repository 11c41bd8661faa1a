"""The classification task of a retraining job: labeled features → an IncrementalRLSC with the tuned
Nyström map (a :class:`~lifelong_learning.retraining.task.Task`).

A random test split, the test error of the classifier exported with each tuned map, and the
export from every row. Memory is bounded by the block (``job.block`` rows) and the samples (at
most ``job.sample_rows`` rows each for the tuning and for the promotion gate), not by the features
of the bags, but for some tens of bytes per row (the labels' codes, the split's row numbers, the
training labels; the random split is drawn over every process's rows) and the validation bags,
which are read whole (by the main process): the bags are read a block at a time
(:func:`~lifelong_learning.io.labeled_features.labeled_feature_blocks`) into a temporary file
(:class:`~lifelong_learning.retraining.rows.FeatureStore`) that every later pass (the score, the
export) reads back a block at a time.

With a ``group`` of several processes each reads the ``r``-th contiguous share of the bags (by
size); the rows keep the one-process order (process by process), and every choice made on rows
(the gate's most recent samples per class, the random test split, the tuning sample, the classes'
order, the serving model's held-out samples appended last) is made on global row numbers, so that
the job equals the one-process job. The gate's samples are gathered by the main process, which
alone scores the gate and writes files.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.files import open_regular, stream_digest
from lifelong_learning.core.model_file import MAX_MODEL_BYTES
from lifelong_learning.io.bags import BagError, Skipped, message_count
from lifelong_learning.io.labeled_features import labeled_feature_blocks, read_labeled_features
from lifelong_learning.learners.recognition_gate import DEFAULT_MAX_CLASSES
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.learners.taken_back import TakenBack, row_digests
from lifelong_learning.nystrom.distributed import ONE_PROCESS, Group, JobProgress
from lifelong_learning.nystrom.export import classifier_from_sums, classifier_sums, one_hot
from lifelong_learning.retraining.job import TuningJob
from lifelong_learning.retraining.promotion import Decision, gate_classifier
from lifelong_learning.retraining.rows import FeatureStore

#: the skipped rows' reason: unlearned by the serving model (learners/taken_back.py)
TAKEN_BACK = "taken back by the serving model (undone, forgotten, reset)"


class Classification:
    """Labeled features: see the module docstring."""

    metric = "test error (%)"

    def __init__(self, job: TuningJob, rng: Any, group: Group = ONE_PROCESS) -> None:
        self.group = group
        self.bags_read = [str(job.bags[i]) for i in job.shares(group)[group.rank]]
        self.store = FeatureStore(int(job.block))
        self.warnings: list[str] = []
        self.baselines: dict[str, float] = {}
        self.groups: list[int] | None = None  # no bag boundaries: holdout-bags is holdout-recent
        self.known: list[Any] = []  # the serving model's classes, first in the exported model
        self.extra_labels: list[str] = []  # the serving model's held-out samples' (_continue_from)
        self._scored: tuple[Any, Any] | None = None  # a model and its training rows' sums (score)
        try:
            serving = self._serving(job.init) if job.init else None
            # what the robot's model took back (undone, forgotten, renamed, reset): not learned again
            self.taken_back, self.robot_classes = self._record(job, serving)
            self.renamed = 0  # rows learned under the name the robot's model gave their class since
            self.samples_read, self.skipped = self._read(job)
            self.extra_X = np.empty((0, self.store.d or 0))  # the serving model's held-out samples
            # the gate's rows, the random test split of the others, the serving model's held-out
            # samples, the classes' order and the tuning sample
            gate, self.recent, self.held_out = self._hold_out(job)
            renamed = sum(group.all_gather(self.renamed))
            if renamed:
                self.warnings.append(
                    f"{renamed} samples of the bags learned under the name the serving model gave their "
                    "class since (~/rename_class)"
                )
            self.kept, self.train_rows, self.test_rows = self._split(job, rng, gate)
            if serving is not None:
                self._continue_from(serving)
            self.train_labels = [*self.store.labels(self.train_rows), *self.extra_labels]
            self.classes = self._classes()
            pick = _tuning_sample(len(self.train_labels), int(job.sample_rows), job.seed, group)
            self.X_tr = self._training_rows(pick)
            self.Y_tr = one_hot(self.classes + [self.train_labels[i] for i in pick])[1][len(self.classes) :]
            self.n_train, self.n_test = (
                int(v) for v in np.sum(group.all_gather((self.train_rows.size, self.test_rows.size)), axis=0)
            )
            self.labels_te = self.store.labels(self.test_rows)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Delete the temporary file of the features."""
        self.store.close()

    def _read(self, job: TuningJob) -> tuple[int, dict[str, int]]:
        """Every usable labeled feature of this process's bags into the store: how many (this
        process's) and the skipped ones counted (every process's)."""
        group, skipped = self.group, Skipped()
        error: Exception | None = None
        messages = sum(group.all_gather(message_count(self.bags_read, topic=job.topic)))
        with JobProgress(group, messages, "reading bags", unit="msg", enabled=job.progress) as progress:
            try:
                limit = int(job.max_message_bytes)
                for X, labels, _ in labeled_feature_blocks(
                    self.bags_read, job.topic, int(job.block), skipped, progress.add, limit
                ):
                    X, labels = self._not_taken_back(X, labels, skipped)
                    if len(labels):
                        self.store.append(X, labels)
            except (BagError, OSError) as exc:
                error = exc
        group.agree(error)
        dims = group.all_gather(self.store.d)
        widths = {d for d in dims if d is not None}  # None: every row of a process's share taken back
        if len(widths) > 1:
            raise BagError(f"the processes' bags hold feature vectors of different lengths: {dims}")
        counts: dict[str, int] = {}
        for part in group.all_gather(dict(skipped)):
            for reason, n in part.items():
                counts[reason] = counts.get(reason, 0) + n
        if not widths:  # the reader raises when no row is usable: every one was taken back here
            raise BagError(f"no sample left to learn: all {counts.get(TAKEN_BACK, 0)} were {TAKEN_BACK}")
        self.store.d = widths.pop()
        return self.store.n, counts

    def _record(self, job: TuningJob, serving: Any) -> tuple[TakenBack, list[str]]:
        """What the robot's model took back and the classes it knows: the model continued from, else
        the gate's serving model (read by the main process alone, as the gate reads it, and shared);
        none without either."""
        if serving is None and job.serving_model:
            model, error = None, None
            if self.group.is_main:
                try:
                    model = IncrementalRLSC.load(job.serving_model)
                except (ValueError, OSError) as exc:
                    error = ValueError(f"{job.serving_model} (the serving model): {exc}")
            self.group.agree(error)
            found = (TakenBack(), []) if model is None else (model.taken_back_, _classes_of(model))
            return self.group.all_gather(found)[0]
        return (TakenBack(), []) if serving is None else (serving.taken_back_, _classes_of(serving))

    def _not_taken_back(self, X: np.ndarray, labels: list[Any], skipped: Skipped) -> tuple[Any, list[Any]]:
        """The rows of ``X`` the serving model did not take back, with their labels as it names them
        now; those it took back are counted in ``skipped`` (learners/taken_back.py)."""
        if not self.taken_back:
            return X, list(labels)
        out = self.taken_back.sort(X, labels, self.robot_classes)
        first = next((str(lab) for lab, k in zip(labels, out.keep, strict=True) if not k), "")
        skipped.add(TAKEN_BACK, f"e.g. a sample labeled {first!r}", out.dropped)
        self.renamed += out.renamed
        return X[out.keep], out.labels

    def _split(self, job: TuningJob, rng: Any, gate: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row numbers of the rows not held out for the gate, and of the random training and test
        parts of them (this process's rows, drawn on every process's)."""
        kept = np.flatnonzero(~gate)
        counts = [int(c) for c in self.group.all_gather(int(kept.size))]
        offset = sum(counts[: self.group.rank])
        tr, te = random_split(sum(counts), job.test_fraction, rng)
        mine = lambda p: p[(p >= offset) & (p < offset + kept.size)] - offset  # noqa: E731
        return kept, kept[mine(tr)], kept[mine(te)]

    def _serving(self, path: str) -> Any:
        """The model to continue from, the same file on every process (or ValueError on each)."""
        group = self.group
        serving, error, digest = None, None, None
        try:
            serving = IncrementalRLSC.load(path)
            with open_regular(path, MAX_MODEL_BYTES) as f:
                digest = stream_digest(f, MAX_MODEL_BYTES)
        except (ValueError, OSError) as exc:  # a file another process's machine lacks, or corrupt
            error = exc
        group.agree(error)
        if len(set(group.all_gather(digest))) > 1:  # every process must continue from one model
            raise ValueError(f"the processes' copies of {path} differ: give each the same model file")
        return serving

    def _classes(self) -> list[Any]:
        """The classes in one_hot's order: first appearance in the global order of the training labels."""
        order = itertools.chain.from_iterable(self.group.all_gather(list(dict.fromkeys(self.train_labels))))
        classes = list(dict.fromkeys(order))
        if len(classes) > DEFAULT_MAX_CLASSES:
            self.warnings.append(
                f"{len(classes)} classes: an object_recognition node with the default max_classes "
                f"({DEFAULT_MAX_CLASSES}) will refuse to load this model; raise its max_classes"
            )
        return classes

    def _training_rows(self, pick: np.ndarray) -> np.ndarray:
        """The training rows at positions ``pick`` (sorted) among the bags' and the serving model's."""
        bags = pick[pick < self.train_rows.size]
        extra = pick[pick >= self.train_rows.size] - self.train_rows.size
        return np.vstack([self.store.take(self.train_rows[bags]), self.extra_X[extra]])

    def _blocks(self, rows: np.ndarray, extra: bool) -> Callable[[], Iterator[np.ndarray]]:
        """The rows ``rows`` of the store (and, with ``extra``, the serving model's samples after
        them), a block at a time."""

        def blocks() -> Iterator[np.ndarray]:
            yield from self.store.blocks(rows)
            if extra and len(self.extra_labels):
                yield self.extra_X

        return blocks

    def _continue_from(self, serving: Any) -> None:
        """The serving model's classes come first; its held-out samples join the training data
        (after every row of the bags: on the last process), but for those the promotion gate holds
        out (the most recent: the candidate must not have seen what it is scored on)."""
        d = self.store.d
        if serving.n_features_in_ not in (None, d):
            raise ValueError(
                f"the model to continue from takes {serving.n_features_in_} features, the bags {d}"
            )
        self.known = [str(c) for c in serving.classes_.tolist()]
        last = self.group.rank == self.group.world_size - 1
        held_out = (
            row_digests(self.held_out[0]).tolist() if self.group.is_main and len(self.held_out[0]) else []
        )
        gate = set(itertools.chain.from_iterable(self.group.all_gather(held_out)))
        if serving.feature_map is None and serving.n_validation_ and last:
            val_X, val_labels = serving.validation_samples()
            fresh = ~np.isin(row_digests(val_X), np.fromiter(gate, np.uint64, len(gate)))
            self.extra_X, self.extra_labels = (
                np.asarray(val_X, dtype=np.float64)[fresh],
                [str(c) for c, f in zip(val_labels, fresh, strict=True) if f],
            )
        mine = set(self.store.vocabulary) | set(self.extra_labels)
        seen = set(itertools.chain.from_iterable(self.group.all_gather(sorted(mine))))
        unseen = sorted(set(self.known) - seen)
        if unseen:
            self.warnings.append(
                f"classes {unseen} of the serving model have no sample in the bags or its validation buffer: "
                "they are kept but cannot be predicted until taught again"
            )

    def _hold_out(self, job: TuningJob) -> tuple[np.ndarray, Any, tuple[np.ndarray, np.ndarray]]:
        """Which rows the promotion gate holds out (a mask of this process's rows): the validation
        bags' when given (then none), else the most recent ``holdout_fraction`` of each class's
        samples (of a class of 5 or more; objects are taught one after the other, so the most
        recent part of the bags alone would be one class), at most about ``sample_rows`` in all,
        counted over every process's rows in the global order. With the mask: the bags' held-out
        samples (learned after the gate) and the gate's data (with the validation bags'), both
        gathered on the main process."""
        store, group = self.store, self.group
        gate = np.zeros(store.n, dtype=bool)
        if not job.validation_bags:
            codes = store.codes
            mine = {store.vocabulary[c]: int(k) for c, k in enumerate(np.bincount(codes)) if k}
            per_process = group.all_gather(mine)
            total_rows = sum(sum(c.values()) for c in per_process)
            fraction = min(float(job.holdout_fraction), int(job.sample_rows) / max(total_rows, 1))
            for code, label in enumerate(store.vocabulary):
                total = sum(c.get(label, 0) for c in per_process)
                before = sum(c.get(label, 0) for c in per_process[: group.rank])
                k = round(fraction * total) if total >= 5 else 0
                rows = np.flatnonzero(codes == code)
                gate[rows[before + np.arange(rows.size) >= total - k]] = True
        rows = np.flatnonzero(gate)
        recent = _gathered((store.take(rows), list(store.labels(rows))), group)
        X_gate, labels_gate = recent
        error: Exception | None = None
        if job.validation_bags and group.is_main:  # the gate's data: the main process's alone
            try:
                extra = read_labeled_features(
                    job.validation_bags, topic=job.topic, max_message_bytes=int(job.max_message_bytes)
                )
                if extra.X.shape[1] != store.d:
                    raise BagError(
                        f"the validation bags hold {extra.X.shape[1]} features, the bags {store.d}"
                    )
                extra_X, extra_labels = self._not_taken_back(extra.X, list(extra.labels), extra.skipped)
                for reason, n in extra.skipped.items():
                    key = f"{reason} (validation bags)"
                    self.skipped[key] = self.skipped.get(key, 0) + n
                X_gate, labels_gate = np.vstack([X_gate, extra_X]), labels_gate + extra_labels
            except (BagError, OSError) as exc:
                error = exc
        group.agree(error)
        return gate, recent, (X_gate, np.array(labels_gate, dtype=object))

    def promotion(self, out: Path, job: TuningJob) -> Decision:
        """The gate: the exported classifier and the serving one on the held-out samples."""
        if self.held_out[1].size == 0:
            raise BagError(
                "no held-out sample for the promotion gate: teach more views, or give validation bags"
            )
        candidate = IncrementalRLSC.load(out)
        return gate_classifier(
            candidate,
            job.serving_model,
            self.held_out,
            margin=float(job.promotion_margin),
            force=bool(job.force),
        )

    def learn_held_out(self, out: Path) -> int:
        """After the gate: the bags' held-out samples learned by the exported model, in their order,
        as the online learner would learn them (never the validation bags'); how many."""
        X, labels = self.recent
        if not labels:
            return 0
        model = IncrementalRLSC.load(out)
        model.partial_fit(X, labels)
        model.save(out)
        return len(labels)

    def score(self, model: Any) -> tuple[float, dict[str, Any]]:
        """The test error of the classifier exported with the tuned map from every training row
        (the tuning may have seen only a sample of them), in the classes' order. The training
        rows' sums are kept for the export of the same model."""
        sums = classifier_sums(
            model, self._blocks(self.train_rows, True), self.train_labels, self.classes, self.group
        )
        if self._scored is None:  # the first objective's model: the one exported
            self._scored = (model, sums)
        clf = classifier_from_sums(model, sums)
        classes = np.asarray(clf.classes_.tolist(), dtype=object)  # self.classes, in that order
        wrong, seen = 0.0, 0
        for X in self.store.blocks(self.test_rows):
            pred = classes[clf.decision_function(X).argmax(1)]
            wrong += float(np.sum(pred != self.labels_te[seen : seen + X.shape[0]]))
            seen += X.shape[0]
        if self.group.world_size > 1:
            wrong = float(self.group.all_reduce(torch.tensor([wrong], dtype=torch.float64))[0])
        return 100.0 * wrong / self.n_test, {}

    def export(self, model: Any, choice: dict[str, Any], out: Path) -> None:
        """Every row but the gate's (the training rows, the serving model's held-out samples, the
        test rows: sums add, so the training rows' sums of :meth:`score` are reused), the serving
        model's classes first, then the others in order of first appearance in the bags."""
        test = classifier_sums(model, self._blocks(self.test_rows, False), self.labels_te, (), self.group)
        if self._scored is not None and self._scored[0] is model:
            train = self._scored[1]
        else:  # a model not scored first: its training rows' sums again
            blocks = self._blocks(self.train_rows, True)
            train = classifier_sums(model, blocks, self.train_labels, (), self.group)
        mine = dict.fromkeys([*self.store.labels(self.kept), *self.extra_labels])  # this process's order
        order = dict.fromkeys(
            [*self.known, *itertools.chain.from_iterable(self.group.all_gather(list(mine)))]
        )
        classifier_from_sums(model, train + test, list(order), out, self.group, self.taken_back)


def _classes_of(model: Any) -> list[str]:
    return [str(c) for c in model.classes_.tolist()]


def random_split(n: int, fraction: float, rng: Any) -> tuple[np.ndarray, np.ndarray]:
    """Sorted positions of a random training part and test part (``fraction`` of ``n``, at least
    one) of ``n`` rows; ValueError when fewer than 4 would be left to train on."""
    n_test = max(1, round(fraction * n))
    if n - n_test < 4:
        raise ValueError(f"too few samples ({n}) for a test split of {fraction}")
    idx = rng.permutation(n)
    return np.sort(idx[: n - n_test]), np.sort(idx[n - n_test :])


def _tuning_sample(n: int, sample_rows: int, seed: Any, group: Group = ONE_PROCESS) -> np.ndarray:
    """This process's positions (among its ``n`` rows) of a uniform random sample of at most
    ``sample_rows`` of every process's rows (all of them when there are no more), drawn on global
    row numbers: the same rows whatever the number of processes."""
    counts = [int(c) for c in group.all_gather(int(n))]
    total, offset = sum(counts), sum(counts[: group.rank])
    if total <= sample_rows:
        return np.arange(n)
    pick = np.sort(np.random.default_rng(seed).choice(total, size=sample_rows, replace=False))
    return pick[(pick >= offset) & (pick < offset + n)] - offset


def _gathered(part: tuple[np.ndarray, list[Any]], group: Group) -> tuple[np.ndarray, list[Any]]:
    """Rows and labels of every process, in process order, on the main process (others: their own)."""
    if group.world_size == 1:
        return part
    parts = group.all_gather(part)
    if not group.is_main:
        return part
    X = np.vstack([p[0] for p in parts])
    return X, [lab for p in parts for lab in p[1]]
