"""The embedding kernels of ``cuda/embedding_bag.cu`` (written in the layout of PyTorch 2.1's EmbeddingBag CUDA
kernel, the paper's baseline): their registers per thread (read from ptxas, here, for the A100's sm_80), and, on a
machine with CUDA, the kernels built into a shared library and called on torch tensors.

The register cap of the paper's OptMT is a build flag (``-maxrregcount``), as in the artifact, so every cap is its
own library. Where ``nvcc`` is missing, :func:`registers` reads ``cuda/registers.json``, the record of the last
compile, only while its source hash matches the ``.cu`` file (a test rewrites and checks it where nvcc exists).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import torch

from ..core import paths
from .occupancy import ptxas_registers

SOURCE = Path(__file__).parent / "cuda" / "embedding_bag.cu"
RECORD = SOURCE.with_name("registers.json")
DISTANCES = (0, 2, 4, 8)
CAPS = (None, 42)
MODES = {"sum": 0, "mean": 1}


def source_hash() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()


def compile_registers(arch: str = "sm_80") -> dict[str, dict[str, int]]:
    """Registers per thread of the kernel at every prefetch distance, uncapped and under every cap of
    :data:`CAPS` (``{"none": {"0": 32, ...}, "42": {...}}``), read from ptxas."""
    found = {}
    for cap in CAPS:
        report = ptxas_registers(SOURCE, arch, cap)
        found["none" if cap is None else str(cap)] = {
            str(d): next(r for name, r in report.items() if f"embedding_bag_sum_meanILi{d}E" in name)
            for d in DISTANCES}
    return found


def registers(arch: str = "sm_80") -> dict[str, dict[str, int]]:
    """:func:`compile_registers` where nvcc is installed, else the committed record of the same source."""
    if shutil.which("nvcc"):
        return compile_registers(arch)
    record = json.loads(RECORD.read_text())
    if record["source_sha256"] != source_hash() or record["arch"] != arch:
        raise RuntimeError(f"nvcc is not installed and {RECORD.name} records another source or arch than "
                           f"{SOURCE.name} for {arch}: install the CUDA compiler to read the registers")
    return record["registers"]


def write_record(arch: str = "sm_80") -> dict:
    """Compile, and write :data:`RECORD` (run where nvcc is installed, after changing the kernel)."""
    record = {"arch": arch, "registers": compile_registers(arch), "source_sha256": source_hash()}
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def build(max_registers: int | None = None, arch: str = "native") -> Path:
    """The kernels as a shared library (built once per source, cap and arch, under ``build/cuda/``)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise FileNotFoundError("nvcc is not on the PATH: the CUDA kernels are built with it")
    tag = f"{source_hash()[:12]}-{arch}-{max_registers or 'uncapped'}"
    target = paths.build_dir() / "cuda" / f"embedding_bag-{tag}.so"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        command = [nvcc, f"-arch={arch}", "-O3", "-shared", "-Xcompiler", "-fPIC", str(SOURCE), "-o",
                   str(target) + ".tmp"]
        if max_registers is not None:
            command.insert(1, f"-maxrregcount={max_registers}")
        subprocess.run(command, check=True, capture_output=True, text=True)
        Path(str(target) + ".tmp").rename(target)
    return target


class Kernels:
    """The library built by :func:`build`, called on CUDA tensors on torch's current stream."""

    def __init__(self, max_registers: int | None = None, arch: str = "native"):
        self.library = ctypes.CDLL(str(build(max_registers, arch)))
        for name in ("embedding_bag_forward", "pin_rows"):
            getattr(self.library, name).restype = ctypes.c_int

    @staticmethod
    def _stream() -> ctypes.c_void_p:
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def bag(self, weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, distance: int = 0,
            mode: str = "sum", grid: int = 1024) -> torch.Tensor:
        """Pooled bags (batch x dim) of ``weight`` rows, as ``F.embedding_bag(indices, weight, offsets, mode)``."""
        if distance not in DISTANCES:
            raise ValueError(f"distance must be one of {DISTANCES}, got {distance}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
        if not (weight.is_cuda and weight.dtype == torch.float32 and weight.is_contiguous()):
            raise ValueError("weight must be a contiguous float32 CUDA tensor")
        indices, offsets = indices.to(weight.device, torch.int64), offsets.to(weight.device, torch.int64)
        output = torch.empty(offsets.numel(), weight.shape[1], device=weight.device)
        offset2bag = torch.empty_like(indices)  # written on every call, as PyTorch's kernel does
        bag_size = torch.empty_like(offsets)
        status = self.library.embedding_bag_forward(
            ctypes.c_void_p(indices.data_ptr()), ctypes.c_void_p(offsets.data_ptr()),
            ctypes.c_void_p(weight.data_ptr()), ctypes.c_int64(offsets.numel()), ctypes.c_int64(indices.numel()),
            ctypes.c_int64(weight.shape[1]), ctypes.c_int64(weight.shape[0]), ctypes.c_int(MODES[mode]),
            ctypes.c_void_p(output.data_ptr()), ctypes.c_void_p(offset2bag.data_ptr()),
            ctypes.c_void_p(bag_size.data_ptr()), ctypes.c_int(distance), ctypes.c_int(grid), self._stream())
        if status:
            raise RuntimeError(f"embedding_bag_forward failed with CUDA error {status}")
        return output

    def pin(self, weight: torch.Tensor, rows: torch.Tensor) -> None:
        """Prefetch every line of ``rows`` of ``weight`` into L2 with the evict-last policy."""
        rows = rows.to(weight.device, torch.int64)
        status = self.library.pin_rows(ctypes.c_void_p(rows.data_ptr()), ctypes.c_int64(rows.numel()),
                                       ctypes.c_void_p(weight.data_ptr()), ctypes.c_int64(weight.shape[1]),
                                       self._stream())
        if status:
            raise RuntimeError(f"pin_rows failed with CUDA error {status}")
