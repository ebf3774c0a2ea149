"""The LoCoMo runner's reading and scoring (`bench/locomo.py`), on a handmade conversation:
what becomes a memory, which questions are asked, and what each metric counts."""

import json
import zipfile
from pathlib import Path

import pytest

from bench.memory.locomo import (
    bm25_ranking,
    interval,
    load_conversations,
    parse_conversation,
    question_scores,
    rrf,
)

CONVERSATION = {
    "speaker_a": "Ana",
    "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy!"},
        {
            "speaker": "Ben",
            "dia_id": "D1:2",
            "text": "Look at mine.",
            "blip_caption": "a photo of a dog on a beach",
        },
    ],
    "session_2_date_time": "10:37 am on 27 June, 2023",
    "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "The puppy is called Rex."}],
    # Sessions listed without turns (as LoCoMo lists dates past the last session).
    "session_3_date_time": "9:00 am on 1 July, 2023",
    "session_3": [],
    "qa": [
        {"question": "What did Ana adopt?", "evidence": ["D1:1"], "category": 4},
        {"question": "What is the dog's name?", "evidence": ["D1:1", "D2:1"], "category": 1},
        {"question": "When?", "evidence": ["D1:1; D2:1"], "category": 2},
        {"question": "Where?", "evidence": [], "category": 3},
        {"question": "Who?", "evidence": ["D9:9"], "category": 4},
        {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},
    ],
}


def test_turns_become_memories_with_their_session_date() -> None:
    conversation = parse_conversation("7", CONVERSATION)
    assert [(t.turn_id, t.content, t.occurred) for t in conversation.turns] == [
        ("D1:1", "Ana: I adopted a puppy!", "2023-05-08"),
        ("D1:2", "Ben: Look at mine. [shares a photo of a dog on a beach]", "2023-05-08"),
        ("D2:1", "Ana: The puppy is called Rex.", "2023-06-27"),
    ]


def test_questions_with_malformed_or_missing_evidence_and_adversarial_ones_are_not_asked() -> None:
    conversation = parse_conversation("7", CONVERSATION)
    assert [(q.text, q.category, sorted(q.evidence)) for q in conversation.questions] == [
        ("What did Ana adopt?", 4, ["D1:1"]),
        ("What is the dog's name?", 1, ["D1:1", "D2:1"]),
    ]
    # Joined ids, no evidence, an id no turn has; the adversarial one is not counted.
    assert conversation.skipped == 3


def test_scores_count_the_first_evidence_turn_and_all_of_them() -> None:
    evidence = frozenset({"b", "e"})
    ranked = ["x", "b", "y", "z", "w", "e"]
    assert question_scores(ranked, evidence) == {
        "any@1": 0.0,
        "any@5": 1.0,
        "all@5": 0.0,
        "any@10": 1.0,
        "MRR@10": 0.5,
    }
    assert question_scores(["e", "b"], evidence)["all@5"] == 1.0
    assert question_scores(["e"], evidence)["MRR@10"] == 1.0
    # Past the tenth, a hit counts for nothing.
    missed = question_scores([*(f"x{n}" for n in range(10)), "e"], frozenset({"e"}))
    assert missed == {"any@1": 0.0, "any@5": 0.0, "all@5": 0.0, "any@10": 0.0, "MRR@10": 0.0}


def test_bm25_weighs_term_frequency_and_length() -> None:
    documents = [
        "puppy",
        "the puppy the puppy and a very long line of other words about the park",
        "rex",
        "puppy puppy",
    ]
    # Repeated: ahead of once; a short line ahead of a long one; no shared word: left out.
    assert bm25_ranking(documents, "Puppy?") == [3, 0, 1]


def test_rrf_adds_reciprocal_ranks() -> None:
    # 2: 1/61 + 1/62; 1: 1/62 + 1/63 (below 2); 3: 1/61 alone; 4: 1/63 alone.
    assert rrf([[2, 1, 4], [3, 2, 1]]) == [2, 1, 3, 4]


def test_interval_brackets_the_mean() -> None:
    mean, low, high = interval([0.0, 1.0] * 50)
    assert mean == 0.5 and 0.35 < low < 0.5 < high < 0.65
    assert interval([1.0] * 10) == (1.0, 1.0, 1.0)


def test_conversations_are_read_from_the_zip_by_file_name(tmp_path: Path) -> None:
    data = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("data/multimodal_dialog/locomo10_v2/7.json", json.dumps(CONVERSATION))
    [conversation] = load_conversations(data, ["7"])
    assert conversation.id == "7" and len(conversation.turns) == 3
    with pytest.raises(SystemExit, match="lacks conversations 8"):
        load_conversations(data, ["8"])


def test_missing_data_says_where_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"github\.com/snap-research/locomo"):
        load_conversations(tmp_path / "nowhere.zip", ["26"])
