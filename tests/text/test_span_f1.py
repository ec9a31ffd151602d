import pytest

from mlsysrepro.text.span_f1 import chunks, span_f1


def test_chunks_follow_conlleval_boundaries():
    assert chunks(["B-PER", "I-PER", "O", "B-LOC"]) == {(0, 2, "PER"), (3, 4, "LOC")}
    assert chunks(["I-ORG", "I-ORG", "O"]) == {(0, 2, "ORG")}  # IOB1: I- after O starts a chunk
    assert chunks(["B-PER", "B-PER"]) == {(0, 1, "PER"), (1, 2, "PER")}  # B- always starts a new chunk
    assert chunks(["B-PER", "I-LOC", "I-LOC"]) == {(0, 1, "PER"), (1, 3, "LOC")}  # a type change ends it
    assert chunks(["O", "O"]) == set()


def test_partial_spans_and_type_mismatches_count_as_errors():
    true = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["B-ORG", "O"]]
    predicted = [["B-PER", "O", "O", "B-ORG", "O"], ["B-ORG", "O"]]
    # true chunks: PER(0-2), LOC(3-4), ORG; predicted: PER(0-1) partial, ORG(3-4) wrong type, ORG correct
    scores = span_f1(true, predicted)
    assert scores["precision"] == pytest.approx(100 / 3)
    assert scores["recall"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 / 3)
    assert span_f1(true, true)["f1"] == pytest.approx(100.0)


def test_mismatched_inputs_are_rejected():
    with pytest.raises(ValueError, match="same sentences and lengths"):
        span_f1([["O"]], [["O", "O"]])
