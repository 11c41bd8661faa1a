"""The project's model file: a versioned, self-describing container that loads without
executing code.

A model file is a NumPy ``.npz`` archive (a zip with a CRC-32 per member) holding

- ``__header__``: UTF-8 JSON, ``{"format": "lifelong_learning.model", "version": 1,
  "kind": "<learner kind>", "meta": {...}}``; ``meta`` holds the learner's scalars and
  strings (hyperparameters, class names, ...);
- one member per numeric array of the learner's state (no object arrays).

It is read without pickle (object arrays are refused), so a file from anywhere cannot run code;
a truncated or corrupt file fails the zip CRC check and raises :class:`ModelFileError`.
Reading is bounded: before any array is allocated, each member's declared sizes (the zip
entry's uncompressed size and the npy header's shape × itemsize) are checked against
``max_bytes`` (:data:`MAX_MODEL_BYTES` by default, per member and in all), and a compressed member
may not declare more than :data:`MAX_INFLATION` times its compressed size (a zip bomb: this
package writes members uncompressed); no member is ever read past its declared size.
It is written atomically (:func:`lifelong_learning.core.files.atomic_write_bytes`), so a crash
leaves either the old file or the new one.

Nested learners (e.g. the semiparametric dynamics model holding two RLS engines) store
their arrays under ``"<prefix>/<name>"`` keys; see :func:`prefixed` and :func:`unprefixed`.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from lifelong_learning.core.files import atomic_write_bytes

FORMAT_NAME = "lifelong_learning.model"
FORMAT_VERSION = 1
_HEADER_KEY = "__header__"
_NPY = ".npy"

#: the most a model file may declare, per member and in all, unless a reader allows more
MAX_MODEL_BYTES = 2 * 1024**3
#: the most a compressed member may inflate, as a multiple of its compressed size
MAX_INFLATION = 100.0


class ModelFileError(ValueError):
    """A model file is missing, corrupt, of another format/version, or of another kind."""


class _RefusedMemberError(ValueError):
    """A member that is readable but refused (too large, Python objects); the path is added later."""


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


def _gib(n: float) -> str:
    return f"{n} bytes ({n / 1024**3:.3g} GiB)"


def _check_declared_sizes(
    path: Path, infos: list[zipfile.ZipInfo], max_bytes: int, max_inflation: float
) -> None:
    """Refuse members whose declared (uncompressed) sizes exceed the limits, before reading any."""
    total = 0
    for info in infos:
        if not info.filename.endswith(_NPY) or info.is_dir():
            raise ModelFileError(f"{path}: member {info.filename!r} is not an array")
        if info.file_size > max_bytes:
            raise ModelFileError(
                f"{path}: member {info.filename!r} declares {_gib(info.file_size)}, over the limit of "
                f"{_gib(max_bytes)}"
            )
        if info.compress_type != zipfile.ZIP_STORED and info.file_size > max_inflation * max(
            info.compress_size, 1
        ):
            raise ModelFileError(
                f"{path}: member {info.filename!r} inflates {info.compress_size} bytes to "
                f"{_gib(info.file_size)}, more than {max_inflation:g}x (a zip bomb?)"
            )
        total += info.file_size
    if total > max_bytes:
        raise ModelFileError(
            f"{path}: members declare {_gib(total)} in all, over the limit of {_gib(max_bytes)}"
        )


def _read_npy_header(
    f: Any, name: str, declared: int, max_bytes: int
) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Shape, Fortran order and dtype of an npy member, its data size checked before any allocation."""
    fmt = np.lib.format
    version = fmt.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = fmt.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = fmt.read_array_header_2_0(f)
    else:
        raise ValueError(f"member {name!r}: npy format version {version} is not read")
    if dtype.hasobject:
        raise _RefusedMemberError(f"member {name!r} holds Python objects; model files hold numbers only")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > max_bytes or nbytes > declared:
        raise _RefusedMemberError(
            f"member {name!r} declares a {shape} {dtype} array of {_gib(nbytes)}; the member holds "
            f"{_gib(declared)} and the limit is {_gib(max_bytes)}"
        )
    return shape, fortran, dtype


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, max_bytes: int) -> np.ndarray:
    """One npy member as an array; never reads past its declared size; the zip CRC is checked."""
    with zf.open(info) as f:
        shape, fortran, dtype = _read_npy_header(f, info.filename, info.file_size, max_bytes)
        array = np.empty(math.prod(shape), dtype=dtype)
        buffer = memoryview(array.view(np.uint8).reshape(-1))
        got = 0
        while got < len(buffer):
            n = f.readinto(buffer[got:])
            if not n:
                raise EOFError(f"member {info.filename!r} ends after {got} of {len(buffer)} data bytes")
            got += n
        if f.read(1):  # reading to the end checks the CRC
            raise ValueError(f"member {info.filename!r} has data after its array")
    return array.reshape(shape[::-1]).T if fortran else array.reshape(shape)


def _read(
    path: Path,
    header_only: bool,
    max_bytes: int = MAX_MODEL_BYTES,
    max_inflation: float = MAX_INFLATION,
    opened: BinaryIO | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The validated header and (unless ``header_only``) the arrays of the model file ``path``
    (read from ``opened`` when given)."""
    if opened is None:
        try:
            is_file = path.is_file()
        except OSError as exc:  # a name too long, a loop of links
            raise ModelFileError(f"{path}: {exc.strerror or exc}") from exc
        if not is_file:
            raise ModelFileError(f"{path}: no such model file")
    try:
        with zipfile.ZipFile(path if opened is None else opened) as zf:
            infos = zf.infolist()
            _check_declared_sizes(path, infos, max_bytes, max_inflation)
            members = {info.filename[: -len(_NPY)]: info for info in infos}
            if len(members) != len(infos):
                raise ModelFileError(f"{path}: a member name appears twice")
            if _HEADER_KEY not in members:
                raise ModelFileError(f"{path}: not a {FORMAT_NAME} file (no header)")
            header_array = _read_member(zf, members[_HEADER_KEY], max_bytes)
            if header_array.dtype != np.uint8 or header_array.ndim != 1:
                raise ModelFileError(f"{path}: malformed header member")
            header = json.loads(header_array.tobytes().decode())
            arrays = {}
            if not header_only:
                arrays = {
                    k: _read_member(zf, info, max_bytes) for k, info in members.items() if k != _HEADER_KEY
                }
    except ModelFileError:
        raise
    except _RefusedMemberError as exc:
        raise ModelFileError(f"{path}: {exc}") from exc
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        OSError,
        ValueError,
        EOFError,
        KeyError,
        UnicodeDecodeError,
        RuntimeError,
        NotImplementedError,
    ) as exc:
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


def is_model_file(path: str | os.PathLike[str], kind: str | None = None) -> bool:
    """Whether ``path`` is a readable model file of this format (of ``kind``, when given): one a
    save of that kind may replace (a learner never overwrites another learner's model)."""
    try:
        found = read_model_kind(path)
    except (ModelFileError, OSError):
        return False
    return kind is None or found == kind


def read_model_kind(
    path: str | os.PathLike[str], max_bytes: int = MAX_MODEL_BYTES, *, opened: BinaryIO | None = None
) -> str:
    """The kind of learner that wrote the model file ``path``, reading only its header (from
    ``opened``, the file ``path`` names already open, when given: see :func:`load_model_file`).

    Cheap whatever the file's size (the arrays are not read), e.g. to skip a file meant for
    another node before loading it.

    Raises:
        ModelFileError: missing, unreadable or corrupt file, wrong format, a newer version, or
            members that declare more than ``max_bytes`` (each or in all).
    """
    header, _ = _read(Path(path), header_only=True, max_bytes=max_bytes, opened=opened)
    return str(header.get("kind"))


def load_model_file(
    path: str | os.PathLike[str],
    kind: str | tuple[str, ...] | None = None,
    *,
    max_bytes: int = MAX_MODEL_BYTES,
    max_inflation: float = MAX_INFLATION,
    opened: BinaryIO | None = None,
) -> ModelFile:
    """Read a model file without executing code, its sizes bounded before anything is allocated.

    Args:
        path: the file.
        opened: the file ``path`` names, already open (binary, seekable): read from it, e.g.
            after hashing its bytes (:func:`lifelong_learning.core.files.open_regular`).
        kind: if given, the kind (or kinds) the caller accepts; another kind raises.
        max_bytes: the most its members may declare, each and in all (npy data and zip entry).
        max_inflation: the most a compressed member may declare, as a multiple of its
            compressed size.

    Raises:
        ModelFileError: missing, truncated or corrupt file, wrong format, a newer version
            than this code reads, an unexpected kind, or sizes over the limits (the message
            names them).
    """
    path = Path(path)
    header, arrays = _read(path, False, max_bytes, max_inflation, opened)
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
