"""Every paper's declared claims can fail, and show that they can (mlsysrepro.core.claims.lint): each paper claim
declares a power check or a negative control, says why where no power check applies, and says why where its
threshold is not the paper's number."""

import pytest

from mlsysrepro.catalog import PAPERS, TEMPLATE
from mlsysrepro.core.claims import lint


@pytest.mark.parametrize("paper", (*PAPERS, TEMPLATE), ids=lambda p: p.name)
def test_every_paper_claim_could_have_failed(paper):
    assert lint(paper.module().CLAIMS) == []
