"""The project's model file: a versioned, self-describing container that loads without
executing code.

A model file is a NumPy ``.npz`` archive (a zip with a CRC-32 per member) holding

- ``__header__``: UTF-8 JSON, ``{"format": "lifelong_learning.model", "version": 1,
  "kind": "<learner kind>", "meta": {...}}``; ``meta`` holds the learner's scalars and
  strings (hyperparameters, class names, ...);
- one member per numeric array of the learner's state (no object arrays).

It is read with ``allow_pickle=False``, so a file from anywhere cannot run code; a
truncated or corrupt file fails the zip CRC check and raises :class:`ModelFileError`.
It is written atomically (:func:`lifelong_learning.core.files.atomic_write_bytes`), so a crash
leaves either the old file or the new one.

Nested learners (e.g. the semiparametric dynamics model holding two RLS engines) store
their arrays under ``"<prefix>/<name>"`` keys; see :func:`prefixed` and :func:`unprefixed`.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.core.files import atomic_write_bytes

FORMAT_NAME = "lifelong_learning.model"
FORMAT_VERSION = 1
_HEADER_KEY = "__header__"


class ModelFileError(ValueError):
    """A model file is missing, corrupt, of another format/version, or of another kind."""


@dataclass
class ModelFile:
    """The content of a model file: what learner wrote it, its scalars, and its arrays."""

    kind: str
    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    version: int = FORMAT_VERSION


def prefixed(prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Return ``arrays`` with keys ``"<prefix>/<key>"`` (to nest one learner's state in another's)."""
    return {f"{prefix}/{k}": v for k, v in arrays.items()}


def unprefixed(prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Return the arrays stored under ``prefix`` by :func:`prefixed`, without the prefix."""
    p = prefix + "/"
    return {k[len(p) :]: v for k, v in arrays.items() if k.startswith(p)}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON-serializable in model metadata: {type(obj).__name__}")


def save_model_file(path: str | os.PathLike[str], model: ModelFile) -> None:
    """Write ``model`` to ``path`` atomically. Arrays must be numeric (no object arrays)."""
    if not model.kind:
        raise ModelFileError("a model file needs a kind")
    buf = io.BytesIO()
    header = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "kind": model.kind,
        "meta": model.meta,
    }
    members: dict[str, np.ndarray] = {
        _HEADER_KEY: np.frombuffer(
            json.dumps(header, default=_json_default, allow_nan=True).encode(), dtype=np.uint8
        )
    }
    for key, arr in model.arrays.items():
        a = np.asarray(arr)
        if a.dtype.hasobject:
            raise ModelFileError(f"array {key!r} has dtype object; model files hold numbers only")
        if key == _HEADER_KEY:
            raise ModelFileError(f"{_HEADER_KEY!r} is reserved")
        members[key] = a
    np.savez(buf, **members)  # type: ignore[arg-type]
    atomic_write_bytes(path, buf.getvalue())


def _read(path: Path, header_only: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The validated header and (unless ``header_only``) the arrays of the model file ``path``."""
    if not path.is_file():
        raise ModelFileError(f"{path}: no such model file")
    try:
        with np.load(path, allow_pickle=False) as npz:
            if _HEADER_KEY not in npz.files:
                raise ModelFileError(f"{path}: not a {FORMAT_NAME} file (no header)")
            header = json.loads(bytes(npz[_HEADER_KEY]).decode())
            arrays = {} if header_only else {k: npz[k] for k in npz.files if k != _HEADER_KEY}
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: unreadable or corrupt model file ({exc})") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path}: not a {FORMAT_NAME} file")
    version = header.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise ModelFileError(
            f"{path}: format version {version!r}; this code reads versions 1..{FORMAT_VERSION}"
        )
    if not isinstance(header.get("meta") or {}, dict):
        raise ModelFileError(f"{path}: malformed header")
    return header, arrays


def read_model_kind(path: str | os.PathLike[str]) -> str:
    """The kind of learner that wrote the model file ``path``, reading only its header.

    Cheap whatever the file's size (the arrays are not read), e.g. to skip a file meant for
    another node before loading it.

    Raises:
        ModelFileError: missing, unreadable or corrupt file, wrong format or a newer version.
    """
    header, _ = _read(Path(path), header_only=True)
    return str(header.get("kind"))


def load_model_file(path: str | os.PathLike[str], kind: str | tuple[str, ...] | None = None) -> ModelFile:
    """Read a model file without executing code.

    Args:
        path: the file.
        kind: if given, the kind (or kinds) the caller accepts; another kind raises.

    Raises:
        ModelFileError: missing, truncated or corrupt file, wrong format, a newer version
            than this code reads, or an unexpected kind.
    """
    path = Path(path)
    header, arrays = _read(path, header_only=False)
    file_kind = header.get("kind")
    if kind is not None:
        accepted = (kind,) if isinstance(kind, str) else tuple(kind)
        if file_kind not in accepted:
            raise ModelFileError(
                f"{path}: holds a {file_kind!r} model, expected {' or '.join(map(repr, accepted))}"
            )
    return ModelFile(
        kind=str(file_kind), meta=header.get("meta") or {}, arrays=arrays, version=header["version"]
    )
