import pytest
import torch

from mlsysrepro.sparsity.masks import dropout_mask, kept_count


def draw(mode, p=0.5, steps=6, batch=5, hidden=40, seed=0, period=1):
    g = torch.Generator().manual_seed(seed)
    return dropout_mask(mode, steps, batch, hidden, p, g, period=period).expand(steps, batch, hidden)


def test_structured_masks_are_shared_by_the_batch_and_change_over_time():
    m = draw("structured")
    assert torch.equal(m, m[:, :1].expand_as(m))  # the same for every sample
    assert not torch.equal(m[0], m[1])  # re-drawn at every step
    assert ((m > 0).sum(2) == kept_count(40, 0.5)).all()  # exactly k neurons kept per step


def test_a_structured_period_shares_each_draw_between_that_many_steps():
    m = draw("structured", steps=7, period=3)
    for start in (0, 3, 6):
        group = m[start:start + 3]
        assert torch.equal(group, group[:1].expand_as(group))
    assert not torch.equal(m[0], m[3]) and not torch.equal(m[3], m[6])
    whole = draw("structured", steps=7, period=7)
    assert torch.equal(whole, whole[:1].expand(7, 5, 40))


def test_locked_masks_are_shared_over_time_and_differ_across_the_batch():
    m = draw("locked")
    assert torch.equal(m, m[:1].expand_as(m))
    assert not torch.equal(m[:, 0], m[:, 1])


def test_standard_masks_differ_everywhere_and_fixed_masks_nowhere():
    standard, fixed = draw("standard"), draw("fixed")
    assert not torch.equal(standard[0], standard[1]) and not torch.equal(standard[:, 0], standard[:, 1])
    assert torch.equal(fixed, fixed[:1, :1].expand_as(fixed))
    assert torch.equal(draw("none"), torch.ones(6, 5, 40))


@pytest.mark.parametrize("mode", ["standard", "locked", "structured", "fixed"])
@pytest.mark.parametrize("p", [0.2, 0.65])
def test_inverted_dropout_keeps_the_expectation(mode, p):
    """E[mask] = 1: the mean over many draws is 1 within 5 standard errors, and each kept entry is the scale."""
    masks = torch.stack([dropout_mask(mode, 6, 5, 40, p, torch.Generator().manual_seed(s)) for s in range(300)])
    stderr = masks.std() / masks.numel() ** 0.5
    assert abs(float(masks.mean()) - 1.0) <= 5 * float(stderr) + 1e-6
    kept = masks[masks > 0]
    assert torch.allclose(kept, kept[:1].expand_as(kept))


def test_bad_arguments_name_the_allowed_values():
    with pytest.raises(ValueError, match="mode must be one of"):
        draw("spatial")
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        draw("standard", p=1.0)
    with pytest.raises(ValueError, match="period must be a positive integer"):
        draw("structured", period=0)
