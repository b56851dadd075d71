"""bench/locomo.py on a tiny synthetic conversation file (not LoCoMo's data): the replay, the
scoring, the split and the diagnostics, on a real Kùzu store. The vectors, where a test needs
them, come from the FAKE hashing embedder (plumbing only, never quality)."""

from __future__ import annotations

import json
import math
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ebb_core import Config

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import locomo  # noqa: E402


def _conversation(sample_id: str, pet: str) -> dict[str, Any]:
    """Three sessions (numbered 1, 2, 10: their order is numeric), seven turns, five questions:
    one per category 1-4 plus an adversarial one (category 5, never asked)."""
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben, long week?"},
                {
                    "speaker": "Ben",
                    "dia_id": "D1:2",
                    "text": f"I adopted a {pet} named Pickle from the shelter.",
                },
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "I started pottery classes downtown."},
                {
                    "speaker": "Ben",
                    "dia_id": "D2:2",
                    "text": "Nice! Here is my garden.",
                    "blip_caption": "a photo of tomato plants",
                },
            ],
            "session_10_date_time": "9:30 am on 2 June, 2023",
            "session_10": [
                {"speaker": "Ana", "dia_id": "D10:1", "text": "My pottery bowl cracked."},
                {"speaker": "Ben", "dia_id": "D10:2", "text": "Pickle chewed my slippers again."},
                {"speaker": "Ana", "dia_id": "D10:3", "text": "Ha, typical."},
            ],
        },
        "qa": [
            {"question": "What did Ana make?", "evidence": ["D2:1", "D10:1"], "category": 1},
            {"question": "When did Ben adopt Pickle?", "evidence": ["D1:2"], "category": 2},
            {"question": "What does Ben grow?", "evidence": ["D2:2"], "category": 3},
            {"question": "What did Pickle chew?", "evidence": ["D10:2"], "category": 4},
            {"question": "What did Ana adopt?", "adversarial_answer": "a cat", "category": 5},
        ],
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-locomo.json"
    convs = [_conversation("conv-b", "dog"), _conversation("conv-a", "cat")]
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


def _main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    monkeypatch.setattr(sys, "argv", ["locomo.py", *args])
    locomo.main()
    return json.loads(capsys.readouterr().out)


def test_score_question_counts_recall_ndcg_and_any() -> None:
    ranked = ["a", "x", "y", "z", "w", "b", "v", "u", "t", "s", "c"]
    got = locomo.score_question(ranked, {"a", "b", "c"})
    assert got["r5"] == pytest.approx(1 / 3)
    assert got["r10"] == pytest.approx(2 / 3)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert got["ndcg10"] == pytest.approx((1 + 1 / math.log2(7)) / ideal)
    assert got["any10"] == 1.0
    assert locomo.score_question(ranked, {"q"})["any10"] == 0.0
    assert locomo.score_question(ranked, set()) == dict.fromkeys(locomo.METRICS, 0.0)


def test_sessions_come_in_numeric_order_with_their_dates() -> None:
    conv = _conversation("c", "dog")["conversation"]
    got = locomo.sessions(conv)
    assert [when for when, _ in got] == [
        datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc),
        datetime(2023, 5, 20, 10, 0, tzinfo=timezone.utc),
        datetime(2023, 6, 2, 9, 30, tzinfo=timezone.utc),
    ]
    assert [t["dia_id"] for t in got[2][1]] == ["D10:1", "D10:2", "D10:3"]
    assert locomo.turn_text(conv["session_2"][1]) == (
        'Ben said, "Nice! Here is my garden." and shared a photo of tomato plants'
    )


def test_questions_skip_the_adversarial_category() -> None:
    qs = list(locomo.questions(_conversation("c", "dog")))
    assert [cat for cat, _, _ in qs] == [1, 2, 3, 4]
    assert qs[0][2] == {"turn:D2:1", "turn:D10:1"}


def test_replay_and_score_on_kuzu(tmp_path: Path) -> None:
    conv = _conversation("conv-a", "cat")
    result = locomo.run([conv], Config(), "kuzu", tmp_path)
    rows = result["rows"]
    assert len(rows) == 4 and {r["category"] for r in rows} == {1, 2, 3, 4}
    by_cat = {r["category"]: r for r in rows}
    # the words of these questions are in their evidence turns: found in the top 10
    assert by_cat[4]["r10"] == 1.0 and by_cat[2]["r10"] == 1.0
    summary = locomo.summarise(rows)
    assert summary["overall"]["questions"] == 4
    assert summary["4:single-hop"]["r10"] == 1.0
    assert len(result["recall_ms"]) == 4 and result["embed_ms"] == [0.0] * 4


def test_main_json_reports_per_conversation_and_the_text_index_alone(
    data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _main(monkeypatch, capsys, "--data", str(data), "--baseline", "--json")
    assert out["reported_on"] == ["conv-a", "conv-b"]  # sorted by sample id
    assert set(out["results"]) == {"default", "text-index-alone"}
    assert out["results"]["default"]["overall"]["questions"] == 8
    assert set(out["per_conversation"]["default"]) == {"conv-a", "conv-b"}
    assert out["config"]["vector_weight"] == Config().vector_weight
    assert "embedder" not in out


def test_main_split_tunes_on_the_first_and_reports_on_the_rest(
    data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _main(
        monkeypatch,
        capsys,
        *("--data", str(data), "--split", "1", "--grid", "spread_share=0,0.5", "--json"),
    )
    assert out["tuned_on"] == ["conv-a"] and out["reported_on"] == ["conv-b"]
    assert [t["spread_share"] for t in out["tuning"]["trials"]] == [0, 0.5]
    assert set(out["results"]) == {"default", "tuned"}
    assert out["results"]["tuned"]["overall"]["questions"] == 4


def test_main_with_an_embedder_caches_vectors_and_diagnoses_misses(
    data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cache = tmp_path / "vectors.npz"
    args = ("--data", str(data), "--embedder", "fake:32", "--embed-cache", str(cache))
    first = _main(monkeypatch, capsys, *args, "--diagnose", "3", "--json")
    # 7 distinct turn texts per conversation (the pets differ in one) + 4 distinct questions
    assert first["embedder"]["texts_embedded"] == 7 + 1 + 4
    assert cache.exists()
    diag = first["diagnostics"]["default"]
    assert diag["relevant_turns"] == 2 * 5
    assert diag["missed"] == sum(diag["by_rank"].values())
    assert len(diag["sample"]) == min(3, diag["missed"])
    again = _main(monkeypatch, capsys, *args, "--json")
    assert again["embedder"]["texts_embedded"] == 0  # every vector came from the cache
    assert again["results"] == first["results"]


def test_main_rejects_an_unknown_setting(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["locomo.py", "--data", str(data), "--set", "nope=1"])
    with pytest.raises(SystemExit, match=r"nope=1.*NAME one of"):
        locomo.main()


def test_context_key_needs_an_embedder(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["locomo.py", "--data", str(data), "--context-key", "prev"])
    with pytest.raises(SystemExit, match="--context-key needs --embedder"):
        locomo.main()
