import pytest

from mlsysrepro.core.cache import cache_key
from mlsysrepro.core.settings import Above, injected_parameter_names, resolve, resolve_notebook

PRESETS = {
    "smoke": dict(epochs=2, lr=0.1, name="a", layers=[1, 2], flag=False),
    "default": dict(epochs=20, lr=0.01, name="b", layers=[4], flag=True),
    "paper": dict(epochs=200, lr=0.001, name="c", layers=[8, 8], flag=True),
}


def test_scale_picks_its_preset_and_none_keeps_it():
    s = resolve("p", PRESETS, {"scale": "smoke", "epochs": None})
    assert (s.scale, s.seed, s.epochs, s.lr, s.name) == ("smoke", 0, 2, 0.1, "a")
    assert s.out_dir.parts[-3:] == ("smoke", "figures", "p")


def test_given_value_overrides_preset_and_int_is_accepted_for_float():
    s = resolve("p", PRESETS, {"epochs": 7, "lr": 1, "layers": (3,)})
    assert s.scale == "default" and s.epochs == 7 and s.lr == 1.0 and isinstance(s.lr, float)
    assert s.layers == [3]


def test_unknown_scale_names_the_allowed_values():
    with pytest.raises(ValueError, match=r"'scale' must be one of \['smoke', 'default', 'paper'\], got 'huge'"):
        resolve("p", PRESETS, {"scale": "huge"})


def test_unknown_parameter_names_it_and_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['epoch'\].*allowed parameters: \[.*'epochs'"):
        resolve("p", PRESETS, {"epoch": 3})


@pytest.mark.parametrize(
    "name, value",
    [("epochs", "3"), ("epochs", 2.5), ("epochs", True), ("flag", 1), ("seed", "0"), ("name", 3), ("use_cache", "no")],
)
def test_wrong_type_is_rejected_with_the_expected_type(name, value):
    with pytest.raises(ValueError, match=rf"parameter {name!r} must be of type"):
        resolve("p", PRESETS, {name: value})


def test_negative_seed_is_rejected():
    with pytest.raises(ValueError, match="'seed' must be >= 0"):
        resolve("p", PRESETS, {"seed": -1})


def test_presets_must_agree_across_scales():
    bad = {**PRESETS, "paper": dict(PRESETS["paper"], extra=1)}
    with pytest.raises(ValueError, match="PRESETS\\['paper'\\] has knobs"):
        resolve("p", bad, {})
    with pytest.raises(ValueError, match="must define the scales"):
        resolve("p", {"smoke": {}, "default": {}}, {})


def test_cache_keys_change_with_listed_values_but_not_with_use_cache():
    a = resolve("p", PRESETS, {})
    knobs = list(PRESETS["default"])
    assert cache_key("x", a, knobs) == cache_key("x", resolve("p", PRESETS, {"use_cache": False}), knobs)
    assert cache_key("x", a, knobs) != cache_key("x", resolve("p", PRESETS, {"epochs": 21}), knobs)
    assert cache_key("x", a, knobs) != cache_key("x", resolve("q", PRESETS, {}), knobs)
    assert cache_key("model", a, knobs) != cache_key("profile", a, knobs)


def test_settings_are_frozen_and_name_unknown_attributes():
    s = resolve("p", PRESETS, {})
    with pytest.raises(AttributeError, match="'epoch' is not a parameter of p"):
        s.epoch
    with pytest.raises(Exception):
        s.seed = 3


def test_injected_names_are_read_from_papermills_cell_only():
    history = ["import x", "scale = 'default'\nepochs = None", "# Parameters\nscale = \"smoke\"\nepoch = 3\n"]
    assert injected_parameter_names(history) == {"scale", "epoch"}


def test_resolve_notebook_rejects_a_misspelt_injected_parameter():
    namespace = {"scale": "smoke", "seed": 0, "epochs": None, "epoch": 3, "In": ["# Parameters\nepoch = 3\n"]}
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['epoch'\]"):
        resolve_notebook("p", PRESETS, namespace)


def test_resolve_notebook_ignores_other_globals():
    namespace = {"scale": "smoke", "epochs": 5, "plt": object(), "df": {}, "In": ["# Parameters\nepochs = 5\n"]}
    assert resolve_notebook("p", PRESETS, namespace).epochs == 5


def test_settings_pickle_for_worker_processes():
    import pickle

    settings = resolve("demo", {"smoke": {"n_draws": 3}, "default": {"n_draws": 30}, "paper": {"n_draws": 300}},
                       {"scale": "smoke"})
    again = pickle.loads(pickle.dumps(settings))
    assert again == settings and again.n_draws == 3 and again.to_dict() == settings.to_dict()
    with pytest.raises(TypeError):
        again.values["n_draws"] = 4  # still read-only


def test_declared_ranges_bound_every_value_and_every_preset():
    presets = {"smoke": dict(n=1, p=0.5, sizes=[1, 2]), "default": dict(n=2, p=0.5, sizes=[4]),
               "paper": dict(n=3, p=0.9, sizes=[8])}
    ranges = {"n": (1, None), "p": (0, 1), "sizes": (1, 64)}
    assert resolve("p", presets, {"scale": "smoke", "n": 5}, ranges).n == 5
    with pytest.raises(ValueError, match=r"parameter 'n' must be >= 1, got 0"):
        resolve("p", presets, {"scale": "smoke", "n": 0}, ranges)
    with pytest.raises(ValueError, match=r"parameter 'p' must be in \[0, 1\], got 1.5"):
        resolve("p", presets, {"scale": "smoke", "p": 1.5}, ranges)
    with pytest.raises(ValueError, match=r"parameter 'sizes' must be in \[1, 64\] \(each element\), got \[2, 128\]"):
        resolve("p", presets, {"scale": "smoke", "sizes": [2, 128]}, ranges)
    with pytest.raises(ValueError, match=r"parameter 'smoke.n' must be >= 4, got 1"):
        resolve("p", presets, {"scale": "smoke"}, {"n": (4, None)})  # the presets themselves are checked
    with pytest.raises(ValueError, match=r"ranges given for \['m'\]"):
        resolve("p", presets, {"scale": "smoke"}, {"m": (0, 1)})


def test_an_exclusive_lower_bound_refuses_the_degenerate_value():
    ranges = {"lr": (Above(0), None), "p": (Above(0), 1)}
    assert resolve("p", PRESETS, {"scale": "smoke", "lr": 1e-9}, {"lr": ranges["lr"]}).lr == 1e-9
    with pytest.raises(ValueError, match=r"parameter 'lr' must be > 0, got 0"):
        resolve("p", PRESETS, {"scale": "smoke", "lr": 0.0}, {"lr": ranges["lr"]})
    with pytest.raises(ValueError, match=r"parameter 'lr' must be > 0 and <= 1, got 2.0"):
        resolve("p", PRESETS, {"scale": "smoke", "lr": 2.0}, {"lr": ranges["p"]})


def test_with_values_changes_knobs_and_refuses_unknown_names():
    from mlsysrepro.core import resolve

    settings = resolve("toy", {"smoke": dict(n=1, m=2), "default": dict(n=2, m=2), "paper": dict(n=3, m=2)},
                       {"scale": "smoke"})
    changed = settings.with_values(n=5)
    assert (changed.n, changed.m, settings.n) == (5, 2, 1)
    with pytest.raises(ValueError, match=r"\['k'\] are not parameters of toy"):
        settings.with_values(k=1)
