import pytest
import torch

from mlsysrepro.recurrent.lstm import LSTM
from mlsysrepro.sparsity.compaction import KERNELS, Drop, masked_projection

COMPACTED = [name for name, kernel in KERNELS.items() if kernel is not None]


def run(model, x, seed):
    out, final = model(x, generator=torch.Generator().manual_seed(seed))
    loss = (out * torch.linspace(-1, 1, out.numel(), dtype=x.dtype).view_as(out)).sum() + final[-1][1].sum()
    loss.backward()
    return out.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("kernel", COMPACTED)
@pytest.mark.parametrize("mode,period", [("structured", 1), ("structured", 3), ("fixed", 1)])
@pytest.mark.parametrize("p", [0.2, 0.5, 0.65])
def test_compacted_structured_lstm_equals_the_dense_masked_one(p, mode, period, kernel):
    """Every kernel: forward outputs and every parameter gradient agree with the dense masked product through
    autograd in float64 to 1e-10 (period 3 leaves a shorter last draw)."""
    torch.manual_seed(0)
    compact = LSTM(12, 16, num_layers=3, p=p, mode=mode, kernel=kernel, period=period).double()
    dense = LSTM(12, 16, num_layers=3, p=p, mode=mode, kernel="dense", period=period).double()
    dense.load_state_dict(compact.state_dict())
    x = torch.randn(7, 5, 12, dtype=torch.float64)
    out_c, grads_c = run(compact, x, seed=3)
    out_d, grads_d = run(dense, x, seed=3)
    assert torch.allclose(out_c, out_d, atol=1e-10, rtol=0)
    for name in grads_d:
        assert torch.allclose(grads_c[name], grads_d[name], atol=1e-10, rtol=0), name


@pytest.mark.parametrize("kernel", COMPACTED)
def test_the_compacted_projection_skips_exactly_the_dropped_columns(kernel):
    """Dropped input columns get zero gradient and only the kept rows of W^T receive any."""
    x = torch.randn(4, 3, 10, requires_grad=True)
    w = torch.randn(10, 6, requires_grad=True)  # W^T
    indices = torch.tensor([[0, 1, 2, 3, 4]] * 4)
    masked_projection(x, w, None, Drop(indices=indices, scale=2.0, kernel=kernel)).sum().backward()
    assert (x.grad[:, :, 5:] == 0).all() and (x.grad[:, :, :5] != 0).all()
    assert (w.grad[5:] == 0).all() and (w.grad[:5] != 0).all()


def test_without_dropout_it_is_torch_lstm_forward_and_backward():
    """Outputs, final states and every gradient (weights, input, initial state) equal torch.nn.LSTM's in float64:
    the hand-written backward through time of the recurrence is exact."""
    torch.manual_seed(1)
    ours = LSTM(8, 10, num_layers=2, p=0.0).double()
    reference = torch.nn.LSTM(8, 10, num_layers=2).double()
    with torch.no_grad():
        for l in range(2):
            getattr(reference, f"weight_ih_l{l}").copy_(ours.w_ih[l].t())
            getattr(reference, f"weight_hh_l{l}").copy_(ours.w_hh[l])
            getattr(reference, f"bias_ih_l{l}").copy_(ours.bias[l])
            getattr(reference, f"bias_hh_l{l}").zero_()
    x = torch.randn(5, 3, 8, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 3, 10, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(2, 3, 10, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(5, 3, 10, dtype=torch.float64)

    out, final = ours(x, [(h0[l], c0[l]) for l in range(2)])
    ((out * weights).sum() + final[1][1].sum() + 2 * final[0][0].sum()).backward()
    ours_grads = [x.grad.clone(), h0.grad.clone(), c0.grad.clone()]
    x.grad = h0.grad = c0.grad = None
    expected, (h, c) = reference(x, (h0, c0))
    ((expected * weights).sum() + c[1].sum() + 2 * h[0].sum()).backward()

    assert torch.allclose(out, expected, atol=1e-12)
    assert torch.allclose(final[1][0], h[1], atol=1e-12) and torch.allclose(final[1][1], c[1], atol=1e-12)
    for mine, theirs in zip(ours_grads, [x.grad, h0.grad, c0.grad]):
        assert torch.allclose(mine, theirs, atol=1e-10)
    for l in range(2):
        assert torch.allclose(ours.w_ih[l].grad, getattr(reference, f"weight_ih_l{l}").grad.t(), atol=1e-10)
        assert torch.allclose(ours.w_hh[l].grad, getattr(reference, f"weight_hh_l{l}").grad, atol=1e-10)
        assert torch.allclose(ours.bias[l].grad, getattr(reference, f"bias_ih_l{l}").grad, atol=1e-10)


@pytest.mark.parametrize("mode,kernel,p", [("standard", "dense", 0.0), ("standard", "dense", 0.5),
                                           ("locked", "dense", 0.5), ("structured", "dense", 0.5),
                                           ("fixed", "dense", 0.5), ("structured", "per-draw", 0.5)])
@pytest.mark.parametrize("dtype,tolerance", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
def test_the_fused_layers_compute_what_the_explicit_loop_computes(mode, kernel, p, dtype, tolerance):
    """fused=True (torch.lstm on the dropped input, oneDNN in float32) gives the explicit loop's outputs, final states
    and gradients for the same draw; a compacted draw (per-draw kernel) keeps its compaction."""
    torch.manual_seed(2)
    explicit = LSTM(12, 16, num_layers=2, p=p, mode=mode, kernel=kernel).to(dtype)
    fused = LSTM(12, 16, num_layers=2, p=p, mode=mode, kernel=kernel, fused=True).to(dtype)
    fused.load_state_dict(explicit.state_dict())
    x = torch.randn(7, 5, 12, dtype=dtype)
    out_e, grads_e = run(explicit, x, seed=4)
    out_f, grads_f = run(fused, x, seed=4)
    assert torch.allclose(out_f, out_e, atol=tolerance, rtol=0)
    for name in grads_e:
        assert torch.allclose(grads_f[name], grads_e[name], atol=tolerance, rtol=0), name


def test_eval_mode_drops_nothing_and_bad_modes_are_rejected():
    model = LSTM(4, 6, p=0.5, mode="structured").eval()
    x = torch.randn(3, 2, 4)
    assert torch.equal(model(x)[0], model(x)[0])
    with pytest.raises(ValueError, match="mode must be one of"):
        LSTM(4, 6, mode="zoneout")
    with pytest.raises(ValueError, match="period must be a positive integer"):
        LSTM(4, 6, mode="structured", period=0)
    with pytest.raises(ValueError, match="kernel must be one of"):
        LSTM(4, 6, mode="structured", kernel="sparse")
