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


CELLS = VLMConfig(image=16, patch=4, vit_dim=16, vit_layers=1, vit_heads=2, row_tokens=(20, 21), col_tokens=(22, 23),
                  decoder=LlamaConfig(vocab=30, dim=16, layers=2, heads=2, kv_heads=1, ffn=24))


def test_the_answer_loss_reads_the_targets_positions_and_the_glyph_loss_adds_to_it():
    torch.manual_seed(0)
    model = TinyVLM(CELLS)
    pixels, question = torch.rand(2, 16, 16), torch.randint(0, 20, (2, 5))
    answer = torch.full((2, 5), -100)
    answer[:, -1] = torch.tensor([3, 4])  # the answers are read at the last question token
    with torch.no_grad():
        by_hand = torch.nn.functional.cross_entropy(model(pixels, question), answer[:, -1])
    plain = vlm_loss(model, pixels, question, answer)
    ignored = vlm_loss(model, pixels, question, answer, torch.full((2, 4), -100))
    with_glyphs = vlm_loss(model, pixels, question, answer, torch.zeros(2, 4, dtype=torch.long))
    assert torch.isclose(plain, by_hand)
    assert torch.isclose(ignored, plain)  # every cell ignored: no glyph term (and no NaN)
    assert with_glyphs > plain


def test_the_glyph_head_reads_a_cells_tokens_together():
    """Two cells a side of 2 x 2 tokens: a cell's class is read from its four tokens side by side, so changing one
    token of cell 0 changes cell 0's logits only."""
    torch.manual_seed(0)
    model = TinyVLM(CELLS)
    vision = torch.randn(1, 16, 16)
    cells = model.cell_tokens(vision)
    assert cells.shape == (1, 4, 4 * 16) and torch.equal(cells[0, 1, :16], vision[0, 2])  # cell 1 starts at token 2
    nudged = vision.clone()
    nudged[0, 5] += 1.0  # token 5 = row 1, col 1 of the patch grid: cell 0's last token
    changed = (model.glyph_head(model.cell_tokens(nudged)) != model.glyph_head(cells)).any(-1)[0]
    assert changed.tolist() == [True, False, False, False]


def test_token_dropout_hides_vision_tokens_from_the_decoder_at_their_own_positions():
    torch.manual_seed(0)
    model = TinyVLM(CELLS)
    pixels, question = torch.rand(2, 16, 16), torch.randint(0, 20, (2, 5))
    answer = torch.full((2, 5), -100)
    answer[:, -1] = torch.tensor([3, 4])
    every = torch.arange(16).expand(2, -1)
    assert torch.isclose(vlm_loss(model, pixels, question, answer, keep=every),
                         vlm_loss(model, pixels, question, answer))
    half = every[:, ::2]
    assert not torch.isclose(vlm_loss(model, pixels, question, answer, keep=half),
                             vlm_loss(model, pixels, question, answer))


def test_cell_words_add_each_cells_own_word_to_its_tokens():
    with_cells = VLMConfig(**{**CELLS.__dict__, "cell_words": (24, 25, 26, 27)})
    torch.manual_seed(0)
    model = TinyVLM(with_cells)
    rows_cols = model.decoder.embed(torch.tensor([20, 21]))[torch.tensor([0, 0, 1, 1])] + model.decoder.embed(
        torch.tensor([22, 23]))[torch.tensor([0, 1, 0, 1])]
    places = model.places().view(2, 2, 2, 2, -1).permute(0, 2, 1, 3, 4).reshape(4, 4, -1)  # (cell, token, dim)
    expected = rows_cols + model.decoder.embed(torch.tensor([24, 25, 26, 27]))
    assert torch.allclose(places, expected[:, None].expand(-1, 4, -1))
    with pytest.raises(ValueError, match="cell_words"):
        VLMConfig(**{**CELLS.__dict__, "cell_words": (24, 25)})


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
