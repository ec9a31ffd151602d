"""The tiny VLM: the pixels become patch tokens in raster order, the answer is read at the last position, the
auxiliary glyph loss is optional, and bad input is refused by name."""

import pytest
import torch

from mlsysrepro.transformer.flops import layer_flops, prefill_flops, saving
from mlsysrepro.transformer.llama import LlamaConfig
from mlsysrepro.transformer.vlm import TinyVLM, VLMConfig, vlm_loss

CFG = VLMConfig(image=16, patch=4, vit_dim=16, vit_layers=1, vit_heads=2,
                decoder=LlamaConfig(vocab=30, dim=16, layers=2, heads=2, kv_heads=1, ffn=24))


def test_patches_are_in_raster_order():
    model = TinyVLM(CFG)
    pixels = torch.arange(256, dtype=torch.float32).view(1, 16, 16)
    patches = model.patches(pixels)
    assert patches.shape == (1, 16, 16)
    assert patches[0, 1, 0] == 4 and patches[0, 4, 0] == 64  # the second patch starts at column 4, the fifth at row 4


def test_the_answer_depends_on_the_image_and_the_question():
    torch.manual_seed(0)
    model = TinyVLM(CFG).eval()
    pixels, question = torch.rand(2, 16, 16), torch.randint(0, 30, (2, 5))
    with torch.no_grad():
        logits = model(pixels, question)
        assert logits.shape == (2, 30)
        assert not torch.allclose(model(pixels.flip(0), question), logits)
        assert not torch.allclose(model(pixels, question.flip(0)), logits)


def test_the_answer_loss_reads_the_targets_positions_and_the_glyph_loss_adds_to_it():
    torch.manual_seed(0)
    model = TinyVLM(CFG)
    pixels, question = torch.rand(2, 16, 16), torch.randint(0, 30, (2, 5))
    answer = torch.full((2, 5), -100)
    answer[:, -1] = torch.tensor([3, 4])  # the answers are read at the last question token
    with torch.no_grad():
        by_hand = torch.nn.functional.cross_entropy(model(pixels, question), answer[:, -1])
    plain = vlm_loss(model, pixels, question, answer)
    ignored = vlm_loss(model, pixels, question, answer, torch.full((2, 16), -100))
    with_glyphs = vlm_loss(model, pixels, question, answer, torch.zeros(2, 16, dtype=torch.long))
    assert torch.isclose(plain, by_hand)
    assert torch.isclose(ignored, plain)  # every patch ignored: no glyph term (and no NaN)
    assert with_glyphs > plain


def test_bad_shapes_are_refused_by_name():
    with pytest.raises(ValueError, match="patch"):
        VLMConfig(image=15, patch=4)
    with pytest.raises(ValueError, match="pixels"):
        TinyVLM(CFG).patches(torch.rand(1, 8, 8))


def test_savings_count_only_removed_tokens():
    cfg = CFG.decoder
    full = torch.tensor([20])
    assert float(saving(cfg, torch.tensor([[20, 20]]), full)) == 0
    half = float(saving(cfg, torch.tensor([[20, 10]]), full))
    assert 0.25 < half < 0.5
    saved = float(layer_flops(20, cfg.dim, cfg.ffn) - layer_flops(10, cfg.dim, cfg.ffn))
    assert float(saving(cfg, torch.tensor([[20, 10]]), full, extra=saved)) == pytest.approx(0.0)  # a scorer costing what it saves
    assert float(prefill_flops(cfg, torch.tensor([20, 20]))) == 2 * float(layer_flops(20, cfg.dim, cfg.ffn))
