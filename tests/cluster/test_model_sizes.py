import pytest

from mlsysrepro.cluster.model_sizes import PARAMETERS, gradient_bytes, lstm_lm, resnet, vgg


@pytest.mark.parametrize("name,count", [
    # torchvision's published parameter counts
    ("resnet18", 11_689_512), ("resnet50", 25_557_032), ("resnet101", 44_549_160), ("resnet152", 60_192_808),
    ("vgg11", 132_863_336), ("vgg16", 138_357_544), ("vgg19", 143_667_240),
])
def test_layer_by_layer_counts_match_the_published_ones(name, count):
    assert PARAMETERS[name] == count


def test_the_lstm_lm_count_by_hand():
    # embedding 10*4, two LSTMs of 4*4*(4+4) weights + 2*16 biases, decoder 4*10 + 10
    assert lstm_lm(vocab=10, hidden=4, layers=2) == 40 + 2 * (128 + 32) + 50


def test_alexnet_matches_torchvision_and_googlenet_its_paper():
    from mlsysrepro.cluster.model_sizes import alexnet, googlenet

    assert alexnet() == 61_100_840  # torchvision's alexnet
    assert 6_500_000 < googlenet() < 7_100_000  # "about 7M" (Szegedy et al., Sec. 5), with biases and 5x5 convs


def test_gradient_bytes_are_fp32_and_unknown_models_are_named():
    assert gradient_bytes("resnet50") == 4 * 25_557_032
    with pytest.raises(ValueError, match="model must be one of"):
        gradient_bytes("lenet")
    with pytest.raises(ValueError, match="depth must be one of"):
        resnet(20)
    with pytest.raises(ValueError, match="depth must be one of"):
        vgg(15)
