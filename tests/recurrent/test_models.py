import pytest
import torch

from mlsysrepro.recurrent.models import Tagger, WordLM, reverse_padded
from mlsysrepro.sparsity.compaction import KERNELS


def test_reverse_padded_reverses_each_column_within_its_length():
    x = torch.arange(8).view(4, 2)  # columns [0, 2, 4, 6] and [1, 3, 5, 7]
    lengths = torch.tensor([3, 4])
    out = reverse_padded(x, lengths)
    assert out[:, 0].tolist() == [4, 2, 0, 6] and out[:, 1].tolist() == [7, 5, 3, 1]
    assert torch.equal(reverse_padded(out, lengths), x)


@pytest.mark.parametrize("kernel", [name for name, kernel in KERNELS.items() if kernel is not None])
def test_compacted_language_model_equals_the_dense_masked_one_decoder_included(kernel):
    torch.manual_seed(0)
    compact = WordLM(50, 16, num_layers=2, p=0.5, mode="structured", kernel=kernel).double()
    dense = WordLM(50, 16, num_layers=2, p=0.5, mode="structured", kernel="dense").double()
    dense.load_state_dict(compact.state_dict())
    ids = torch.randint(50, (6, 3))
    outs, grads = [], []
    for model in (compact, dense):
        logits, _ = model(ids, generator=torch.Generator().manual_seed(4))
        torch.nn.functional.cross_entropy(logits.reshape(-1, 50), ids.reshape(-1)).backward()
        outs.append(logits.detach())
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    assert torch.allclose(outs[0], outs[1], atol=1e-10, rtol=0)
    assert all(torch.allclose(grads[0][n], grads[1][n], atol=1e-10, rtol=0) for n in grads[1])


def test_the_tagger_ignores_padding():
    """A sentence tagged alone or beside a longer one (so padded) gets the same logits."""
    torch.manual_seed(1)
    model = Tagger(30, 5, embedding=8, hidden=6).eval()
    short = torch.tensor([[3], [4], [5]])
    alone = model(short, torch.tensor([3]))
    batch = torch.tensor([[3, 7], [4, 8], [5, 9], [0, 10], [0, 11]])
    padded = model(batch, torch.tensor([3, 5]))
    assert torch.allclose(alone[:, 0], padded[:3, 0], atol=1e-6)
