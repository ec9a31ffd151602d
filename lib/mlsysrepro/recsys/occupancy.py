"""The CUDA occupancy calculator: how many warps an SM holds for a kernel, from its registers per thread, threads
per block and shared memory, and which of those limits binds.

Registers are allocated per warp in units of ``register_unit`` (256 on compute capabilities 5.0-9.0), and the
warps a register file holds are counted in groups of ``warp_granularity`` (4: one per SM sub-partition), as in
NVIDIA's occupancy calculator. The CUDA C Best Practices Guide's example ("Calculating Occupancy") is the test: at
37 registers per thread, 128-thread blocks reach 12 blocks (75 %) and 320-thread blocks 4 (62.5 %) on compute
capability 7.0.

:func:`ptxas_registers` reads the registers ``ptxas`` gives a CUDA kernel (``nvcc --resource-usage``), where a CUDA
compiler is installed: the register count of a kernel is measured, never assumed.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SM:
    """The per-SM limits of a compute capability (defaults: 8.0, the A100)."""

    registers: int = 65_536
    max_warps: int = 64
    max_blocks: int = 32
    max_registers_per_thread: int = 255
    register_unit: int = 256
    warp_granularity: int = 4
    shared_memory: int = 167_936
    warp_size: int = 32


A100 = SM()
VOLTA = SM(max_warps=64, max_blocks=32, shared_memory=98_304)


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM, their share of the maximum, and the limit that binds."""

    blocks: int
    warps: int
    share: float
    limit: str


def occupancy(registers_per_thread: int, threads_per_block: int, sm: SM = A100, shared_bytes: int = 0) -> Occupancy:
    """Blocks and warps per SM for a kernel using ``registers_per_thread`` and ``threads_per_block``."""
    if not 1 <= registers_per_thread <= sm.max_registers_per_thread:
        raise ValueError(f"registers_per_thread must be in [1, {sm.max_registers_per_thread}], "
                         f"got {registers_per_thread}")
    if threads_per_block < 1 or threads_per_block > sm.max_warps * sm.warp_size:
        raise ValueError(f"threads_per_block must be in [1, {sm.max_warps * sm.warp_size}], got {threads_per_block}")
    warps_per_block = math.ceil(threads_per_block / sm.warp_size)
    per_warp = math.ceil(registers_per_thread * sm.warp_size / sm.register_unit) * sm.register_unit
    warps_by_registers = (sm.registers // per_warp) // sm.warp_granularity * sm.warp_granularity
    limits = {
        "warps": sm.max_warps // warps_per_block,
        "blocks": sm.max_blocks,
        "registers": warps_by_registers // warps_per_block,
        "shared memory": sm.shared_memory // shared_bytes if shared_bytes else sm.max_blocks,
    }
    limit = min(limits, key=lambda name: limits[name])
    blocks = limits[limit]
    warps = blocks * warps_per_block
    return Occupancy(blocks, warps, warps / sm.max_warps, limit)


def ptxas_registers(source: Path, arch: str = "sm_80", max_registers: int | None = None,
                    defines: dict[str, int] | None = None) -> dict[str, int]:
    """Registers per thread of every kernel in the CUDA file ``source``, as ``ptxas`` allocates them for ``arch``
    (``-maxrregcount`` = ``max_registers``), keyed by the kernel's mangled name. Needs ``nvcc`` on the PATH."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise FileNotFoundError("nvcc is not on the PATH: registers per thread are read from ptxas' report")
    command = [nvcc, f"-arch={arch}", "--resource-usage", "-c", str(source), "-o", "/dev/null"]
    if max_registers is not None:
        command.insert(1, f"-maxrregcount={max_registers}")
    command[1:1] = [f"-D{name}={value}" for name, value in (defines or {}).items()]
    report = subprocess.run(command, capture_output=True, text=True, check=True).stderr
    found, kernel = {}, None
    for line in report.splitlines():
        named = re.search(r"Compiling entry function '(\w+)'|Function properties for (\w+)", line)
        if named:
            kernel = named.group(1) or named.group(2)
        used = re.search(r"Used (\d+) registers", line)
        if used and kernel:
            found[kernel] = int(used.group(1))
    if not found:
        raise RuntimeError(f"no register counts in nvcc's report for {source}:\n{report}")
    return found
