"""A rank program for ``torchrun`` in the orphan test (tests/core/test_dist.py): it joins the group with
:func:`mlsysrepro.core.dist.init_from_env`, writes its pid into the folder given as its argument, and sleeps."""

import sys

from mlsysrepro.core.dist import init_from_env
from tests.core.test_dist import sleeps_and_writes_its_pid

if __name__ == "__main__":
    rank, world_size = init_from_env()
    sleeps_and_writes_its_pid(rank, world_size, sys.argv[1])
