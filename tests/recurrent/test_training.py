import pytest
import torch

from mlsysrepro.recurrent.models import Tagger, Translator, WordLM
from mlsysrepro.text.corpora import Tagged, batchify, build_vocab
from mlsysrepro.recurrent.training import bucketed_batches, perplexity, tag, train_lm, train_tagger, train_translator


def test_the_language_model_learns_a_periodic_stream_with_structured_dropout():
    torch.manual_seed(0)
    stream = batchify(torch.arange(8).repeat(200), 4)
    model = WordLM(8, 24, num_layers=2, p=0.2, mode="structured")
    before = perplexity(model, stream, bptt=10)
    rows = train_lm(model, stream, stream, epochs=4, generator=torch.Generator().manual_seed(0), lr=0.5, bptt=10)
    assert before > 6 and rows[-1]["valid_ppl"] < 1.5  # 8 equally likely words -> the next word is known
    assert [r["epoch"] for r in rows] == [1, 2, 3, 4]


def test_sgd_steps_on_the_window_summed_loss_and_the_linear_schedule_ends_at_zero(monkeypatch):
    """Zaremba's lr 1 is a step on the loss summed over the window's steps: one step of train_lm equals plain SGD on
    T times the mean; with Adam (scale-invariant) and a linear schedule the last step's rate is lr / steps."""
    stream = batchify(torch.arange(8).repeat(10), 2)  # 40 steps: one window of 39
    torch.manual_seed(0)
    model = WordLM(8, 6, num_layers=1, p=0.0)
    reference = WordLM(8, 6, num_layers=1, p=0.0)
    reference.load_state_dict(model.state_dict())
    train_lm(model, stream, stream, epochs=1, generator=torch.Generator(), lr=0.1, clip=1e9, bptt=39)
    loss, _ = reference.loss(stream[:39], stream[1:40])
    (loss * 39).backward()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter -= 0.1 * parameter.grad
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(ours, theirs, atol=1e-6)
    seen = []
    original = torch.optim.Adam.step

    def record(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", record)
    train_lm(WordLM(8, 6, num_layers=1, p=0.0), stream, stream, epochs=2, generator=torch.Generator(), lr=0.4,
             bptt=10, optimizer="adam", schedule="linear")
    assert seen[0] == 0.4 and len(seen) == 8 and seen[-1] == pytest.approx(0.4 / 8)
    with pytest.raises(ValueError, match="schedule must be one of"):
        train_lm(model, stream, stream, 1, torch.Generator(), schedule="cosine")


def test_scoring_held_in_text_leaves_the_trained_model_unchanged():
    """The overfit gap's held-in score must not move training (no random numbers drawn, no state left behind), so a
    run with it trains the same weights as one without."""
    stream = batchify(torch.randint(0, 30, (4000,), generator=torch.Generator().manual_seed(1)), 4)
    trained = []
    for held_in in (None, stream[:40]):
        torch.manual_seed(0)
        model = WordLM(30, 16, 2, p=0.3, mode="structured", kernel="dense", cutoffs=(10,), fused=True)
        rows = train_lm(model, stream, stream[:80], 3, torch.Generator().manual_seed(0), bptt=10, held_in=held_in)
        trained.append((torch.cat([w.flatten() for w in model.parameters()]), [r["valid_ppl"] for r in rows]))
    assert torch.equal(trained[0][0], trained[1][0]) and trained[0][1] == trained[1][1]


def test_an_adaptive_softmax_language_model_learns_and_reports_held_in_perplexity():
    torch.manual_seed(0)
    stream = batchify(torch.arange(8).repeat(200), 4)
    model = WordLM(8, 24, num_layers=2, p=0.2, mode="structured", cutoffs=(4,))
    rows = train_lm(model, stream, stream, epochs=4, generator=torch.Generator().manual_seed(0), lr=0.02, bptt=10,
                    optimizer="adam", held_in=stream[:20])
    assert rows[-1]["valid_ppl"] < 1.5 and rows[-1]["train_ppl"] < 1.5
    assert all("train_ppl" not in row for row in rows[:-1])  # the held-in text is scored once, after the last epoch
    with pytest.raises(ValueError, match="loss"):
        model(stream[:10])
    with pytest.raises(ValueError, match="tie"):
        WordLM(8, 24, cutoffs=(4,), tied=True)


def test_the_adaptive_loss_is_the_negative_log_likelihood_of_its_distribution():
    torch.manual_seed(0)
    model = WordLM(10, 16, num_layers=1, p=0.0, cutoffs=(4, 7)).eval()
    ids, targets = torch.randint(10, (5, 3)), torch.randint(10, (5, 3))
    loss, _ = model.loss(ids, targets)
    out, _ = model.lstm(model.embedding(ids))
    log_probs = model.adaptive.log_prob(out.reshape(-1, 16))
    assert torch.allclose(log_probs.exp().sum(1), torch.ones(15), atol=1e-5)
    assert float(loss.detach()) == pytest.approx(float(-log_probs.gather(1, targets.reshape(-1, 1)).mean()), rel=1e-5)


def test_the_tagger_learns_word_determined_tags():
    g = torch.Generator().manual_seed(0)
    words = ["paris", "london", "ann", "bob", "the", "a", "went"]
    kind = {"paris": "LOC", "london": "LOC", "ann": "PER", "bob": "PER"}
    sentences = [[words[i] for i in torch.randint(7, (6,), generator=g).tolist()] for _ in range(200)]
    tags = [[f"B-{kind[w]}" if w in kind else "O" for w in s] for s in sentences]
    data = Tagged(sentences, tags)
    vocab = build_vocab(sentences)
    torch.manual_seed(0)
    model = Tagger(len(vocab), 3, embedding=8, hidden=8, p=0.2, mode="structured")
    rows = train_tagger(model, data, data, {w: i for i, w in enumerate(vocab)}, ["O", "B-LOC", "B-PER"], epochs=4,
                        generator=g, lr=0.02)
    assert rows[-1]["dev_f1"] > 95.0


@pytest.mark.parametrize("fused", [False, True])
def test_taggers_that_differ_only_in_dropout_see_the_same_batches(monkeypatch, fused):
    """Paired seeds: the batch order does not depend on how many numbers the dropout drew from the run's generator."""
    from mlsysrepro.recurrent import training

    g = torch.Generator().manual_seed(1)
    sentences = [["w"] * int(n) for n in torch.randint(1, 9, (90,), generator=g)]
    data = Tagged(sentences, [["O"] * len(s) for s in sentences])
    seen = []
    monkeypatch.setattr(training, "bucketed_batches", lambda *a: seen.append(bucketed_batches(*a)) or seen[-1])
    orders = []
    for p, mode in ((0.0, "standard"), (0.5, "structured")):
        seen.clear()
        train_tagger(Tagger(3, 1, embedding=4, hidden=4, p=p, mode=mode, kernel="dense", fused=fused), data, data,
                     {"<pad>": 0, "<unk>": 1, "w": 2}, ["O"], epochs=3, generator=torch.Generator().manual_seed(5),
                     batch_size=8)
        orders.append(seen[1:])  # the first call only counts the batches
    assert orders[0] == orders[1] and orders[0][0] != orders[0][1]


def test_tagging_in_length_order_returns_each_sentence_its_own_tags():
    """``tag`` batches sentences by length: each sentence must still get the tags it gets alone, in input order."""
    g = torch.Generator().manual_seed(0)
    words = ["w%d" % i for i in range(12)]
    sentences = [[words[i] for i in torch.randint(12, (int(n),), generator=g).tolist()]
                 for n in torch.randint(1, 30, (50,), generator=g)]
    index = {w: i for i, w in enumerate(build_vocab(sentences))}
    torch.manual_seed(0)
    model = Tagger(len(index), 3, embedding=8, hidden=8, p=0.5, mode="structured")
    tags = ["O", "B-LOC", "B-PER"]
    together = tag(model, sentences, index, tags, batch_size=16)
    alone = [tag(model, [s], index, tags)[0] for s in sentences]
    assert together == alone
    assert [len(t) for t in together] == [len(s) for s in sentences]
    assert len({tuple(t) for t in together}) > 10  # the model tags sentences differently, so order matters


def test_the_translator_learns_to_reverse_sequences_with_structured_dropout():
    """A toy language whose translation is the reversed source (with shifted ids): attention has to find
    the right source position; dev BLEU ends high."""
    g = torch.Generator().manual_seed(0)
    bos, eos = 1, 2

    def pair():
        src = torch.randint(3, 11, (int(torch.randint(3, 7, (1,), generator=g)),), generator=g).tolist()
        return src, [w + 8 for w in reversed(src)]

    train, dev = [pair() for _ in range(1000)], [pair() for _ in range(100)]
    torch.manual_seed(0)
    model = Translator(11, 19, hidden=48, num_layers=1, p=0.1, mode="structured")
    rows = train_translator(model, train, dev, epochs=12, generator=g, bos=bos, eos=eos, batch_size=32, lr=0.01)
    assert rows[-1]["dev_bleu"] > 70.0 and rows[-1]["dev_bleu"] > rows[0]["dev_bleu"] + 30


def test_bucketed_batches_cover_every_sentence_once_and_pad_less_than_shuffling():
    lengths = torch.randint(1, 60, (1000,), generator=torch.Generator().manual_seed(0)).tolist()
    bucketed = bucketed_batches(lengths, 32, 20, torch.Generator().manual_seed(1))
    shuffled = bucketed_batches(lengths, 32, 1, torch.Generator().manual_seed(1))
    for batches in (bucketed, shuffled):
        assert sorted(i for batch in batches for i in batch) == list(range(1000))
        assert all(len(batch) <= 32 for batch in batches)

    def padded_steps(batches):
        return sum(max(lengths[i] for i in batch) * len(batch) for batch in batches)

    assert padded_steps(bucketed) < 0.7 * padded_steps(shuffled)
    assert bucketed != bucketed_batches(lengths, 32, 20, torch.Generator().manual_seed(2))  # shuffled per epoch
