"""Cross-encoder reranker: the passthrough when no model loads, and a real tiny model built locally."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retrieval.config import DEFAULT_CROSS_ENCODER, Settings
from retrieval.embedding import default_model_path
from retrieval.models import VerbalizedFact
from retrieval.rerank import CrossEncoderReranker
from retrieval.rerank.cross_encoder import load_failure

QUERY = "Who wrote Hamlet?"
TEXTS = ["Hamlet was written by William Shakespeare.", "Paris is in France.", "Shakespeare wrote plays in London.",
         "Bananas are yellow.", "Hamlet is a prince of Denmark."]


def facts() -> list[VerbalizedFact]:
    return [VerbalizedFact(id=f"f{i}", type="local", text=t, scores={"similarity": 0.1 * i})
            for i, t in enumerate(TEXTS)]


@pytest.fixture(scope="module", autouse=True)
def offline() -> Iterator[None]:
    """No hub access in these tests, whatever the machine allows."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cross-encoder made from the packaged MiniLM with a fresh 1-label head, saved to disk."""
    from sentence_transformers import CrossEncoder

    path = tmp_path_factory.mktemp("tiny-ce")
    CrossEncoder(default_model_path(), num_labels=1, device="cpu").save(str(path))
    return path


@pytest.mark.parametrize("model", ["/nonexistent/cross-encoder", DEFAULT_CROSS_ENCODER])
def test_unloadable_model_is_a_visible_passthrough(model: str) -> None:
    # the hub name is not cached here and HF_HUB_OFFLINE=1: it must fail fast, without the network
    rr = CrossEncoderReranker(model)
    cands = facts()
    out = rr.rerank(QUERY, cands, top_k=2)
    assert [c.id for c in out.candidates] == [c.id for c in cands]  # order kept, not truncated
    assert all("ce_score" not in c.scores for c in out.candidates)
    assert rr.available is False and out.warnings == [rr.reason]
    state = "could not be loaded: there is no such file or directory" if model.startswith("/") else (
        "is not available offline: it is not in the local Hugging Face cache")
    assert rr.reason.startswith(f"Cross-encoder {model} {state}; ")
    assert rr.reason.endswith("; results keep their order.") and "http" not in rr.reason and "Error" not in rr.reason


def test_offline_miss_is_told_without_importing_torch(tmp_path: Path) -> None:
    # the app's sidebar probe must not spend seconds importing torch to learn that an uncached model is missing
    code = (
        "import sys; from retrieval.rerank import CrossEncoderReranker as C; from retrieval.config import "
        "DEFAULT_CROSS_ENCODER as M\n"
        "for m in (M, sys.argv[1], 'bare-hub-name'):\n"
        "    r = C(m); print(r.available, r.reason)\n"
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "no-model")], capture_output=True, text=True,
                         env=env, cwd=Path(__file__).resolve().parents[2], check=True, timeout=120).stdout.splitlines()
    assert out[0].startswith("False") and "not in the local Hugging Face cache" in out[0] and "offline" in out[0]
    assert out[1].startswith("False") and "no such file or directory" in out[1]
    assert out[2].startswith("False") and "not in the local Hugging Face cache" in out[2]  # a hub id without org
    assert out[3] == "False False"


def test_unreachable_hub_without_offline_flag_is_told_at_once(tmp_path: Path) -> None:
    # HF_HUB_OFFLINE unset and the hub unreachable (a closed loopback port): the hub client would retry each file
    # for about a minute; the reranker finds the hub closed and says so in one sentence, without importing torch
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]  # bound, never listening: connections are refused
        code = ("import sys; from retrieval.rerank import CrossEncoderReranker as C\n"
                "r = C('cross-encoder/ms-marco-MiniLM-L-6-v2'); print(r.available); print(r.reason)\n"
                "print('torch' in sys.modules)")
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env |= {"HF_ENDPOINT": f"http://127.0.0.1:{closed}", "HF_HOME": str(tmp_path / "empty-hf-home")}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                             cwd=Path(__file__).resolve().parents[2], check=True).stdout.splitlines()
    assert out == ["False", "Cross-encoder cross-encoder/ms-marco-MiniLM-L-6-v2 is not available offline: it is not "
                   "in the local Hugging Face cache; results keep their order.", "False"]


def test_load_failures_read_as_one_plain_sentence(tmp_path: Path) -> None:
    transformers_offline = OSError(
        "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached "
        "files.\nCheck your internet connection or see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'.")
    assert load_failure(transformers_offline) == (
        "the Hugging Face hub could not be reached and the model is not in the local cache")
    assert "http" not in load_failure(ValueError("bad file at https://x.y/z, see https://a.b"))
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    rr = CrossEncoderReranker(str(broken))
    assert rr.available is False
    assert rr.reason.startswith(f"Cross-encoder {broken} could not be loaded: ") and "(OSError)" in rr.reason
    assert rr.reason.endswith("; results keep their order.") and "\n" not in rr.reason


def test_settings_choose_the_model() -> None:
    rr = CrossEncoderReranker.from_settings(Settings.from_env(env={"KG_CROSS_ENCODER": "/no/such/model"}))
    assert rr.model_name == "/no/such/model" and rr.reason == ""  # lazy: nothing loaded yet


def test_tiny_model_loads_and_scores(tiny_model: Path) -> None:
    from sentence_transformers import CrossEncoder

    rr = CrossEncoderReranker(str(tiny_model))
    cands = facts()
    before = [c.model_dump() for c in cands]
    out = rr.rerank(QUERY, cands, top_k=3)
    assert rr.available and rr.reason == "" and out.warnings == []
    expected = np.asarray(CrossEncoder(str(tiny_model), device="cpu").predict([(QUERY, t) for t in TEXTS]))
    assert [c.id for c in out.candidates] == [f"f{i}" for i in np.argsort(-expected, kind="stable")[:3]]
    got = [c.scores["ce_score"] for c in out.candidates]
    assert got == sorted(got, reverse=True)
    np.testing.assert_allclose(got, np.sort(expected)[::-1][:3], rtol=1e-5)
    assert all(c.scores["similarity"] == orig.scores["similarity"] for c in out.candidates for orig in cands
               if orig.id == c.id)
    assert [c.model_dump() for c in cands] == before
    assert rr.rerank(QUERY, [], 3).candidates == []


@pytest.mark.parametrize(("model", "word", "sentence"), [
    ("/no/such/cross-encoder", "model not found", "could not be loaded: there is no such file or directory"),
    ("org-that-is-not-cached/ce-model", "offline", "is not available offline: it is not in the local Hugging Face"),
])
def test_sidebar_status_is_the_outcome_at_first_read(model: str, word: str, sentence: str) -> None:
    # the probe thread settles an offline miss in milliseconds: the first read waits for it rather than show
    # "loading…" until the analyst's next click
    import app_state

    status = app_state.cross_encoder_status(Settings.from_env(env={"KG_CROSS_ENCODER": model}))
    assert (status.state, status.word) == ("off", word)
    assert status.detail.startswith(f"Cross-encoder {model} {sentence}") and "http" not in status.detail
