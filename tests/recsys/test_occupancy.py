"""The occupancy calculator against the CUDA C Best Practices Guide's worked example, and ptxas' registers."""

import json
import shutil

import pytest

from mlsysrepro.recsys import cuda_kernels
from mlsysrepro.recsys.occupancy import A100, VOLTA, occupancy


def test_the_best_practices_guide_example():
    # "Calculating Occupancy": 37 registers per thread on compute capability 7.0
    small = occupancy(37, 128, VOLTA)
    assert (small.blocks, small.share, small.limit) == (12, 0.75, "registers")
    large = occupancy(37, 320, VOLTA)
    assert (large.blocks, large.warps) == (4, 40)


def test_full_occupancy_at_32_registers_and_halved_at_64():
    assert occupancy(32, 256, A100).share == 1.0
    assert occupancy(32, 256, A100).limit == "warps"
    assert occupancy(64, 256, A100).warps == 32


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="registers_per_thread"):
        occupancy(0, 256)
    with pytest.raises(ValueError, match="threads_per_block"):
        occupancy(32, 4096)


def test_the_committed_register_record_matches_its_source():
    record = cuda_kernels.registers("sm_80")
    assert record["none"]["2"] > record["none"]["0"]  # prefetch registers cost registers
    assert all(r <= 42 for r in record["42"].values())


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_record_is_what_ptxas_reports_now():
    committed = json.loads(cuda_kernels.RECORD.read_text())
    assert committed["source_sha256"] == cuda_kernels.source_hash(), "rerun cuda_kernels.write_record()"
    assert committed["registers"] == cuda_kernels.compile_registers(committed["arch"])
