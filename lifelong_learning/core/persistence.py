"""The one persistence contract of the learners: state ↔ model file, with validation.

Two levels:

- :class:`Stateful`: anything whose learned state is a pair ``(meta, arrays)``: JSON scalars
  and numeric arrays (an RLS engine, a feature map, a rigid-body regressor). It implements
  :meth:`~Stateful.to_state` and the validating :meth:`~Stateful.from_state`; :meth:`copy`
  follows.
- :class:`PersistentModel`: a learner that is a model file of its own ``kind`` (the
  classifier, the inverse-dynamics model). It gets :meth:`to_model_file`, :meth:`from_model_file`,
  :meth:`save` and :meth:`load`: the kind is checked, the state version is written and checked
  (a file without one was written before versions were recorded and is version 1), and any
  malformed content raises :class:`~lifelong_learning.core.model_file.ModelFileError` naming the
  kind. Nodes hold such a model and need nothing else from it
  (:class:`lifelong_learning.nodes.learner.LearnerNode`).

Every learner counts what it learned from in one attribute, ``n_samples``.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, TypeVar

import numpy as np

from lifelong_learning.core.model_file import ModelFile, ModelFileError, load_model_file, save_model_file

State = tuple[dict[str, Any], dict[str, np.ndarray]]
S = TypeVar("S", bound="Stateful")
P = TypeVar("P", bound="PersistentModel")


class Stateful:
    """An object whose learned state is ``(meta, arrays)``: JSON scalars and numeric arrays."""

    def to_state(self) -> State:
        """Scalars and arrays (copies) that :meth:`from_state` restores exactly."""
        raise NotImplementedError

    @classmethod
    def from_state(cls: type[S], meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> S:
        """Rebuild from :meth:`to_state`; ValueError (or KeyError/TypeError) on bad content."""
        raise NotImplementedError

    def copy(self: S) -> S:
        """An independent copy."""
        meta, arrays = self.to_state()
        return type(self).from_state(meta, arrays)


class PersistentModel(Stateful):
    """A learner stored as one model file of kind :attr:`kind` (see the module docstring)."""

    #: the ``kind`` of its model files
    kind: ClassVar[str] = ""
    #: the layout of ``to_state()``; bump it when the layout changes, and read the older ones
    state_version: ClassVar[int] = 1
    #: older layouts ``from_state`` still reads (it finds the version in ``meta["state_version"]``,
    #: absent in files written before versions were recorded: version 1)
    older_state_versions: ClassVar[tuple[int, ...]] = ()
    #: samples learned from (one name for every learner)
    n_samples: int

    def to_model_file(self) -> ModelFile:
        """The model as a :class:`ModelFile` of kind :attr:`kind` (arrays copied)."""
        meta, arrays = self.to_state()
        return ModelFile(kind=self.kind, meta={**meta, "state_version": self.state_version}, arrays=arrays)

    @classmethod
    def from_model_file(cls: type[P], model_file: ModelFile) -> P:
        """Rebuild a model from a :class:`ModelFile`; every field is validated.

        Raises:
            ModelFileError: another kind, another state version, or malformed content.
        """
        if model_file.kind != cls.kind:
            raise ModelFileError(f"holds a {model_file.kind!r} model, expected {cls.kind!r}")
        version = model_file.meta.get("state_version", 1)
        readable = (*cls.older_state_versions, cls.state_version)
        if version not in readable:
            raise ModelFileError(
                f"{cls.kind} model with state version {version!r}; "
                f"this code reads version{'s' if len(readable) > 1 else ''} {', '.join(map(str, readable))}"
            )
        try:
            return cls.from_state(model_file.meta, model_file.arrays)
        except ModelFileError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ModelFileError(f"malformed {cls.kind} model: {exc}") from exc

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model file atomically (no pickle)."""
        save_model_file(path, self.to_model_file())

    @classmethod
    def load(cls: type[P], path: str | os.PathLike[str]) -> P:
        """Read and validate a model file written by :meth:`save` (raises :class:`ModelFileError`)."""
        return cls.from_model_file(load_model_file(path, kind=cls.kind))
