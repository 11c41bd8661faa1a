"""Model files and bags (no ROS imports)."""

from lifelong_learning.io.model_file import (
    FORMAT_NAME,
    FORMAT_VERSION,
    ModelFile,
    ModelFileError,
    atomic_write_bytes,
    load_model_file,
    read_model_kind,
    save_model_file,
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ModelFile",
    "ModelFileError",
    "atomic_write_bytes",
    "load_model_file",
    "read_model_kind",
    "save_model_file",
]
