"""Alignment backends: real loaders on tiny random models saved in the real layouts, windowing, batching."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from features.alignment import LexicalOverlapScorer, make_alignment_scorer
from features.alignment.lexical import lexical_precision
from features.alignment.nli import find_entailment_label
from features.alignment.windows import ClaimTooLongError, max_over_windows, premise_budget, split_windows, token_offsets

ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
TEXTS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "It is 330 metres tall and was the tallest structure until 1930.",
    "Bananas are yellow fruits grown in tropical countries.",
    "The tower was designed by the engineering company of Gustave Eiffel.",
]
PREMISES = [" ".join(TEXTS), TEXTS[0], TEXTS[2] + " " + TEXTS[3]]
CLAIMS = ["The tower was finished in 1889.", "It is in Paris. It is tall.", "Bananas are blue."]


def roberta_tokenizer():
    """A byte-level BPE tokenizer with RoBERTa's special tokens and pair template, trained on TEXTS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=ROBERTA_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(TEXTS * 3, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
        pad_token="<pad>", unk_token="<unk>", mask_token="<mask>", model_max_length=126,
    )


def roberta_config(vocab_size: int, **kw):
    from transformers import RobertaConfig

    return RobertaConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=128, pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1, **kw,
    )


# ---------------------------------------------------------------- windows
@settings(max_examples=40, deadline=None)
@given(n_words=st.integers(0, 120), max_tokens=st.integers(2, 30), data=st.data())
def test_windows_cover_every_token_within_the_budget(n_words, max_tokens, data):
    overlap = data.draw(st.integers(0, max_tokens - 1))
    text = " ".join(f"w{i}" for i in range(n_words))
    windows = split_windows(text, max_tokens, overlap)
    for w in windows:
        assert text[w.start : w.end] == w.text
        assert len(token_offsets(w.text)) <= max_tokens
    covered = {tok for w in windows for tok in w.text.split()}
    assert covered == set(text.split())
    for a, b in zip(windows, windows[1:]):  # consecutive windows share exactly `overlap` words
        assert len(set(a.text.split()) & set(b.text.split())) == overlap


def test_supporting_sentence_at_the_end_of_a_long_premise_is_found():
    support = "The Eiffel Tower was completed in 1889 by Gustave Eiffel."
    filler = " ".join(f"Unrelated sentence number {i} talks about harbours and weather." for i in range(80))
    premise = filler + " " + support

    def windows_of(p, c):
        return [w.text for w in split_windows(p, 50)]

    def score_pairs(ps, cs):
        return np.array([lexical_precision(p, c) for p, c in zip(ps, cs)])

    windows = windows_of(premise, support)
    assert len(windows) > 10
    assert score_pairs(windows[:1], [support])[0] < 0.3  # what truncation to the first window would see
    assert max_over_windows([premise], [support], windows_of, score_pairs, batch_size=4)[0] == 1.0


def test_premise_budget_keeps_the_whole_claim(tiny_tokenizer):
    claim = "The tower was finished in 1889."
    n_claim = len(tiny_tokenizer(claim, add_special_tokens=False)["input_ids"])
    budget = premise_budget(tiny_tokenizer, claim, 100)
    assert budget + n_claim + tiny_tokenizer.num_special_tokens_to_add(pair=True) <= 100
    with pytest.raises(ClaimTooLongError, match="split the claim into sentences"):
        premise_budget(tiny_tokenizer, claim * 20, 100)


# ---------------------------------------------------------------- factory
def test_factory_specs_and_errors():
    assert isinstance(make_alignment_scorer("lexical"), LexicalOverlapScorer)
    custom = LexicalOverlapScorer()
    assert make_alignment_scorer(custom) is custom
    with pytest.raises(ValueError, match="llm-judge"):
        make_alignment_scorer("bogus")
    with pytest.raises(ValueError, match="nli:<hub id or dir>"):
        make_alignment_scorer("nli")


def test_scorer_alignment_goes_through_the_factory():
    from syncheck.pipeline import _alignment

    assert isinstance(_alignment("lexical"), LexicalOverlapScorer)
    assert _alignment(None) is None
    with pytest.raises(ValueError, match="unknown alignment backend"):
        _alignment("nope")


# ---------------------------------------------------------------- NLI cross-encoder
def test_find_entailment_label():
    assert find_entailment_label({0: "CONTRADICTION", 1: "Entailment", 2: "neutral"}) == 1
    assert find_entailment_label({0: "not_entailment", 1: "entailment"}) == 1
    assert find_entailment_label({0: "hallucinated", 1: "Consistent"}) == 1
    assert find_entailment_label({0: "SUPPORTS", 1: "REFUTES", 2: "NOT ENOUGH INFO"}) == 0
    assert find_entailment_label({0: "inconsistent", 1: "factually_consistent"}) == 1
    with pytest.raises(ValueError, match="entailment_label="):
        find_entailment_label({0: "LABEL_0", 1: "LABEL_1"})


@pytest.fixture(scope="module")
def nli_dir(tmp_path_factory):
    from transformers import RobertaForSequenceClassification

    tok = roberta_tokenizer()
    cfg = roberta_config(len(tok), num_labels=3, id2label={0: "CONTRADICTION", 1: "Entailment", 2: "neutral"},
                         label2id={"CONTRADICTION": 0, "Entailment": 1, "neutral": 2})
    torch.manual_seed(0)
    model = RobertaForSequenceClassification(cfg).eval()
    path = tmp_path_factory.mktemp("nli")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_nli_loads_from_directory_and_uses_the_entailment_class(nli_dir):
    from transformers import AutoModelForSequenceClassification

    scorer = make_alignment_scorer(f"nli:{nli_dir}")
    assert scorer.entail_index == 1
    got = scorer.score(PREMISES, CLAIMS)
    ref_model = AutoModelForSequenceClassification.from_pretrained(nli_dir).eval()
    for p, c, g in zip(PREMISES, CLAIMS, got):
        with torch.no_grad():
            probs = torch.softmax(ref_model(**scorer.tokenizer(p, c, return_tensors="pt")).logits, -1)[0]
        assert g == pytest.approx(float(probs[1]), abs=1e-5)
        assert g != pytest.approx(float(probs[0]), abs=1e-4)  # not the default first class


def test_nli_batching_equals_one_by_one(nli_dir):
    scorer = make_alignment_scorer(f"nli:{nli_dir}")
    batched = scorer.score(PREMISES, CLAIMS, batch_size=3)
    single = [scorer.score([p], [c], batch_size=1)[0] for p, c in zip(PREMISES, CLAIMS)]
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_nli_long_premise_is_windowed_not_truncated(nli_dir):
    scorer = make_alignment_scorer(f"nli:{nli_dir}")
    long_premise = " ".join(TEXTS * 12)
    windows = scorer._windows(long_premise, CLAIMS[0])
    assert len(windows) > 1 and windows[-1].endswith(TEXTS[-1])
    for w in windows:  # every window fits next to the whole claim
        assert len(scorer.tokenizer(w, CLAIMS[0])["input_ids"]) <= scorer.max_length
    expected = max(scorer.score([w], [CLAIMS[0]])[0] for w in windows)
    assert scorer.score([long_premise], [CLAIMS[0]])[0] == pytest.approx(expected, abs=1e-6)


def test_nli_without_entailment_label_fails_clearly(tmp_path):
    from transformers import RobertaForSequenceClassification

    tok = roberta_tokenizer()
    model = RobertaForSequenceClassification(roberta_config(len(tok), num_labels=2))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="names entailment.*entailment_label="):
        make_alignment_scorer(f"nli:{tmp_path}")
    scorer = make_alignment_scorer(f"nli:{tmp_path}", entailment_label=1)  # the way out the message gives
    assert 0.0 <= scorer.score([TEXTS[0]], [CLAIMS[0]])[0] <= 1.0


def test_nli_predict_models_like_hhem_use_their_predict():
    from features.alignment.nli import NLIScorer

    class PredictOnly(torch.nn.Module):  # HHEM-2.1's remote class: own tokenizer, predict(pairs) -> [0, 1]
        config = types.SimpleNamespace(id2label={0: "hallucinated", 1: "LABEL_1"})

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def predict(self, pairs):
            return torch.tensor([0.9 if c.split()[0] in p else 0.1 for p, c in pairs])

    scorer = NLIScorer(PredictOnly())
    np.testing.assert_allclose(scorer.score(["Paris is big.", "Rome."], ["Paris rules.", "Oslo."]), [0.9, 0.1])


def test_nli_missing_model_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="hf download"):
        make_alignment_scorer("nli:nobody/no-such-nli-model")


# ---------------------------------------------------------------- AlignScore
def _save_alignscore_checkpoint(tmp_path, monkeypatch, with_tri: bool = True):
    """A tiny random RoBERTa saved as an AlignScore Lightning checkpoint (with Lightning's AttributeDict)."""
    from transformers import RobertaModel

    tok = roberta_tokenizer()
    backbone = tmp_path / "backbone"
    cfg = roberta_config(len(tok))
    cfg.save_pretrained(backbone)
    tok.save_pretrained(backbone)
    torch.manual_seed(1)
    encoder = RobertaModel(cfg, add_pooling_layer=True).eval()
    heads = {
        "bin_layer": torch.nn.Linear(32, 2), "tri_layer": torch.nn.Linear(32, 3), "reg_layer": torch.nn.Linear(32, 1),
    }
    state = {f"base_model.{k}": v for k, v in encoder.state_dict().items()}
    state["mlm_head.dense.weight"] = torch.randn(32, 32)
    for name, layer in heads.items():
        if with_tri or name != "tri_layer":
            state.update({f"{name}.{k}": v for k, v in layer.state_dict().items()})

    # Lightning pickles hyper-parameters as pytorch_lightning.utilities.parsing.AttributeDict:
    # pickle it under that name, then remove the module so loading cannot import it.
    mod = types.ModuleType("pytorch_lightning.utilities.parsing")

    class AttributeDict(dict):
        pass

    AttributeDict.__module__, AttributeDict.__qualname__ = mod.__name__, "AttributeDict"
    mod.AttributeDict = AttributeDict
    for name in ("pytorch_lightning", "pytorch_lightning.utilities", "pytorch_lightning.utilities.parsing"):
        monkeypatch.setitem(sys.modules, name, mod)
    ckpt = tmp_path / "AlignScore-tiny.ckpt"
    torch.save({"epoch": 2, "pytorch-lightning_version": "1.7.7", "state_dict": state,
                "hyper_parameters": AttributeDict(model=str(backbone), using_pretrained=True)}, ckpt)
    monkeypatch.undo()
    return ckpt, encoder, heads["tri_layer"], tok


def test_alignscore_checkpoint_loads_and_scores_like_the_official_head(tmp_path, monkeypatch):
    ckpt, encoder, tri, tok = _save_alignscore_checkpoint(tmp_path, monkeypatch)
    assert "pytorch_lightning" not in sys.modules
    scorer = make_alignment_scorer(f"alignscore:{ckpt}", max_length=126)

    def official(premise, claim):
        with torch.no_grad():
            pooled = encoder(**tok(premise, claim, return_tensors="pt")).pooler_output
            return float(torch.softmax(tri(pooled), -1)[0, 0])

    premise, claim = TEXTS[0], CLAIMS[0]
    assert scorer.score([premise], [claim])[0] == pytest.approx(official(premise, claim), abs=1e-5)
    # a two-sentence claim: mean over its sentences
    got = scorer.score([premise], ["It is in Paris. It is tall."])[0]
    assert got == pytest.approx((official(premise, "It is in Paris.") + official(premise, "It is tall.")) / 2, abs=1e-5)
    # a premise in several chunks: max over chunks
    scorer.chunk_words = 12
    chunks = [TEXTS[0], TEXTS[1] + " " + TEXTS[2], TEXTS[3]]
    assert scorer.score([" ".join(TEXTS)], [claim])[0] == pytest.approx(
        max(official(c, claim) for c in chunks), abs=1e-5
    )


def test_alignscore_chunks_follow_alignscore():
    from features.alignment.alignscore import alignscore_chunks

    assert alignscore_chunks(" ".join(TEXTS)) == [" ".join(TEXTS)]  # < 350 words: one chunk
    sents = [f"Sentence {i} has exactly six words." for i in range(200)]  # 1200 words -> 4 chunks of 50 sentences
    chunks = alignscore_chunks(" ".join(sents))
    assert len(chunks) == 4 and chunks[0] == " ".join(sents[:50])


def test_alignscore_batching_equals_one_by_one(tmp_path, monkeypatch):
    ckpt, *_ = _save_alignscore_checkpoint(tmp_path, monkeypatch)
    scorer = make_alignment_scorer(f"alignscore:{ckpt}")
    batched = scorer.score(PREMISES, CLAIMS, batch_size=4)
    single = [scorer.score([p], [c], batch_size=1)[0] for p, c in zip(PREMISES, CLAIMS)]
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_alignscore_rejects_a_checkpoint_without_the_3_way_head(tmp_path, monkeypatch):
    ckpt, *_ = _save_alignscore_checkpoint(tmp_path, monkeypatch, with_tri=False)
    with pytest.raises(ValueError, match="tri_layer"):
        make_alignment_scorer(f"alignscore:{ckpt}")


# ---------------------------------------------------------------- LLM judge
def test_llm_judge_is_the_yes_no_softmax_of_the_next_token(tiny_lm):
    from syncheck.model.llm_judge import LLMJudgeScorer

    judge = LLMJudgeScorer(tiny_lm)
    prompt = judge.prompt(TEXTS[0], CLAIMS[0])
    assert "Premise: " + TEXTS[0] in prompt and "Does the premise support the hypothesis? Answer Yes or No." in prompt
    assert prompt.startswith("<|user|>") and prompt.endswith("<|assistant|>")  # the chat template is used
    ids = tiny_lm.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = tiny_lm.model(input_ids=ids).logits[0, -1]
    yes, no = torch.logsumexp(logits[judge.yes_ids], 0), torch.logsumexp(logits[judge.no_ids], 0)
    expected = float(torch.sigmoid(yes - no))
    assert judge.score([TEXTS[0]], [CLAIMS[0]])[0] == pytest.approx(expected, abs=1e-5)


def test_llm_judge_batching_equals_one_by_one_and_windows(tiny_lm):
    from syncheck.model.llm_judge import LLMJudgeScorer

    judge = LLMJudgeScorer(tiny_lm, max_premise_tokens=40)
    batched = judge.score(PREMISES, CLAIMS, batch_size=3)
    single = [judge.score([p], [c], batch_size=1)[0] for p, c in zip(PREMISES, CLAIMS)]
    np.testing.assert_allclose(batched, single, atol=1e-5)
    assert np.all((batched >= 0) & (batched <= 1))
    windows = judge._windows(PREMISES[0], CLAIMS[0])
    assert len(windows) > 1
    assert batched[0] == pytest.approx(max(judge.score([w], [CLAIMS[0]])[0] for w in windows), abs=1e-5)


def test_llm_judge_claims_of_one_premise_share_its_cached_prefix(tiny_lm, monkeypatch):
    from syncheck.model.llm_judge import LLMJudgeScorer

    judge = LLMJudgeScorer(tiny_lm)
    premise = " ".join(TEXTS * 2)
    assert len(judge._windows(premise, CLAIMS[0])) == 1
    claims = [*CLAIMS, TEXTS[1], "Gustave Eiffel designed it."]
    single = [judge.score([premise], [c], batch_size=1)[0] for c in claims]
    lengths = []
    forward = judge._forward

    def counted(ids, mask, cache, keep=False):
        lengths.append(ids.numel())
        return forward(ids, mask, cache, keep)

    monkeypatch.setattr(judge, "_forward", counted)
    shared = judge.score([premise] * len(claims), claims, batch_size=16)
    np.testing.assert_allclose(shared, single, atol=1e-5)
    # the premise runs once per window, not once per claim: far fewer tokens than the prompts one by one
    pairs = [(w, c) for c in claims for w in judge._windows(premise, c)]
    assert sum(lengths) < 0.6 * sum(len(judge._prompt_ids(w, c)) for w, c in pairs)


@pytest.mark.parametrize("name", ["document-claim", "source-check"])
def test_llm_judge_named_prompts_share_the_premise_prefix_and_reject_unknown_names(tiny_lm, name):
    from syncheck.model.llm_judge import JUDGE_PROMPTS, LLMJudgeScorer

    judge = LLMJudgeScorer(tiny_lm, prompt=name)
    prompt = judge.prompt(TEXTS[0], CLAIMS[0])
    assert JUDGE_PROMPTS[name].format(premise=TEXTS[0], claim=CLAIMS[0]) in prompt
    assert prompt.index(TEXTS[0]) < prompt.index(CLAIMS[0])  # the premise comes first, so claims share its prefix
    premise = " ".join(TEXTS * 2)
    single = [judge.score([premise], [c], batch_size=1)[0] for c in CLAIMS]
    np.testing.assert_allclose(judge.score([premise] * len(CLAIMS), CLAIMS), single, atol=1e-5)
    with pytest.raises(ValueError, match="unknown judge prompt 'yes-no'; use one of: premise-hypothesis"):
        LLMJudgeScorer(tiny_lm, prompt="yes-no")


def test_llm_judge_without_chat_template(tiny_lm_plain):
    from syncheck.model.llm_judge import LLMJudgeScorer

    judge = LLMJudgeScorer(tiny_lm_plain.model, tiny_lm_plain.tokenizer)
    assert judge.prompt("P", "H").endswith("Answer Yes or No.\nAnswer:")
    assert 0.0 <= judge.score(["P"], ["H"])[0] <= 1.0


# ---------------------------------------------------------------- real packaged models
@pytest.mark.slow
def test_embedding_finds_the_supporting_sentence_anywhere():
    scorer = make_alignment_scorer("embedding")
    support = "The Eiffel Tower was completed in 1889 for the World's Fair."
    filler = " ".join(f"Harbour {i} stores grain, timber and fish for the winter months." for i in range(40))
    claim = "The Eiffel Tower was finished in 1889."
    long_score, alone, unrelated = scorer.score([filler + " " + support, support, filler], [claim] * 3)
    assert long_score == pytest.approx(alone, abs=1e-5)  # max over sentences: the end of the premise counts
    assert long_score > unrelated + 0.1
    batched = scorer.score(PREMISES, CLAIMS, batch_size=2)
    np.testing.assert_allclose(batched, [scorer.score([p], [c])[0] for p, c in zip(PREMISES, CLAIMS)], atol=1e-5)


def test_score_cli_rejects_an_unknown_alignment_spec_before_loading(tmp_path):
    from click.testing import CliRunner

    from syncheck.cli import main

    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": 1, "context": "c", "response": "r"}\n', encoding="utf-8")
    res = CliRunner().invoke(main, ["score", str(inp), "--alignment", "bogus"])
    assert res.exit_code == 2 and "unknown alignment backend" in res.output


def test_cross_encoder_relevance_loads_a_one_logit_reranker(tmp_path, nli_dir):
    from transformers import RobertaForSequenceClassification

    from features.alignment.relevance import make_relevance_scorer

    tok = roberta_tokenizer()
    torch.manual_seed(2)
    model = RobertaForSequenceClassification(roberta_config(len(tok), num_labels=1)).eval()
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    scorer = make_relevance_scorer(f"cross-encoder:{tmp_path}")
    query = "When was the tower completed?"
    got = scorer.score(query, TEXTS)
    with torch.no_grad():
        want = [float(model(**tok(query, t, return_tensors="pt")).logits[0, 0]) for t in TEXTS]
    np.testing.assert_allclose(got, want, atol=1e-5)
    with pytest.raises(ValueError, match="one output"):
        make_relevance_scorer(f"cross-encoder:{nli_dir}")  # a 3-class NLI model is no reranker
