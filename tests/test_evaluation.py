"""Evaluation parts: question files in three formats, evidence and answer scores, the judge's reply parser
on the replies real models give, and `graphrag-lite eval` on an index."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from graphrag_lite.answer_parsing import ParseError
from graphrag_lite.evaluation.evaluate import QuestionResult, summary_table
from graphrag_lite.evaluation.judge import judge_parser
from graphrag_lite.evaluation.questions import QuestionFileError, load_questions
from graphrag_lite.evaluation.scoring import (
    UnitLookup,
    contains_answer,
    exact_match,
    found_sentences,
    score_retrieval,
    token_f1,
)
from tests.conftest import DATA, make_project


def test_question_files_load_from_jsonl_json_and_csv_with_lists_and_aliases(tmp_path):
    record = {"question": "Who won?", "answer": "Ivar", "answer_aliases": ["I. Sigurdsson"],
              "evidence": "Ivar won the final.", "evidence_documents": ["chess.txt"], "question_type": "people"}
    (tmp_path / "q.jsonl").write_text(json.dumps(record) + "\n\n")
    (tmp_path / "q.json").write_text(json.dumps({"questions": [record]}))
    pd.DataFrame([{**record, "answer_aliases": json.dumps(record["answer_aliases"]),
                   "evidence_documents": '["chess.txt"]'}]).to_csv(tmp_path / "q.csv", index=False)
    loaded = [load_questions(tmp_path / name)[0] for name in ("q.jsonl", "q.json", "q.csv")]
    assert loaded[0].answers == ("Ivar", "I. Sigurdsson") and loaded[0].group == "people"
    assert loaded[0].evidence == ("Ivar won the final.",) and loaded[0].evidence_documents == ("chess.txt",)
    assert all(q == loaded[0] or q.id != loaded[0].id for q in loaded)
    assert {q.answers for q in loaded} == {("Ivar", "I. Sigurdsson")}


@pytest.mark.parametrize(("name", "text", "message"), [
    ("q.jsonl", '{"question": "a"}\n{"question": "b"\n', r"q\.jsonl: line 2: not valid JSON"),
    ("q.jsonl", '{"question": "a", "id": 1}\n{"question": "b", "id": 1}\n', r"line 2: id '1' is used twice"),
    ("q.json", '{"items": 3}', r"q\.json: expected a list of questions"),
    ("q.json", '[{"question": "a", "evidence": {"x": 1}}]', r"entry 1: 'evidence' must be a string or a list"),
    ("q.txt", "Who?", r"must end in \.jsonl, \.json or \.csv"),
    ("q.jsonl", "\n", r"no questions in the file"),
])
def test_bad_question_files_name_the_file_and_the_entry(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(QuestionFileError, match=message):
        load_questions(tmp_path / name)


def test_answer_scores_follow_squad_normalization():
    assert exact_match("The Norwich.", ["the Norwich"]) == 1.0 and exact_match("Norwich ship", ["Norwich"]) == 0.0
    assert token_f1("captain of the Norwich", ["the Norwich"]) == 0.5  # precision 1/3, recall 1
    assert contains_answer("He was made Captain of the Norwich that day.", ["the Norwich"]) == 1.0
    assert contains_answer("He went to Norwichshire.", ["Norwich"]) == 0.0  # whole words only
    assert token_f1("", ["x"]) == 0.0


def test_evidence_is_found_by_sentence_documents_and_text_units():
    evidence = ["Ivar Sigurdsson beat the grandmaster Pavel Orlov in the final round."]
    paraphrase = "In the last round, Pavel Orlov lost: Sigurdsson beat him. Then it rained."
    assert found_sentences(evidence, [paraphrase]) == {0}
    assert found_sentences(evidence, ["Pavel Orlov played chess. Sigurdsson taught school."]) == set()
    from graphrag_lite.evaluation.questions import Question

    units = UnitLookup.of(pd.DataFrame({"id": ["u-a", "u-b"], "human_readable_id": [0, 1],
                                        "document_id": ["d1", "d2"]}),
                          pd.DataFrame({"id": ["d1", "d2"], "title": ["chess.txt", "jazz.txt"]}))
    question = Question("q", "?", evidence=tuple(evidence), evidence_documents=("jazz.txt", "d1"),
                        evidence_text_units=("u-b", "7"))
    found = score_retrieval(question, [{"id": 1, "text": paraphrase}], units)
    scores = summary_table([QuestionResult("q", "", "basic", found.gold, found.found)]).iloc[0]
    assert (found.gold, found.found) == (5, 3) and scores["recall"] == 0.6 and scores["all_gold"] == 0.0


@pytest.mark.parametrize(("reply", "winners"), [
    ('{"directness": {"winner": 2, "reason": "x"}, "diversity": {"winner": "tie"}}', {"directness": 2, "diversity": 0}),
    ('<think>hmm</think>```json\n{"Directness": {"winner": "Answer 1"}, "diversity": "2"}\n```',
     {"directness": 1, "diversity": 2}),
    ('Sure! {"directness": {"winner": "1"}, "diversity": {"winner": "neither"}}', {"directness": 1, "diversity": 0}),
])
def test_the_judge_parser_takes_the_forms_models_reply_in(reply, winners):
    assert judge_parser(["directness", "diversity"])(reply)[0] == winners


@pytest.mark.parametrize("reply", ["", "I cannot compare these answers.", '{"directness": {"winner": 1}}',
                                   '{"directness": {"winner": 3}, "diversity": {"winner": 1}}',
                                   '{"directness": {"winner": 1}, "diversity": {"win'])
def test_the_judge_parser_refuses_what_it_cannot_use(reply):
    with pytest.raises(ParseError):
        judge_parser(["directness", "diversity"])(reply)


def test_eval_scores_an_index_against_basic_search_packed_to_the_same_budget(tmp_path, cli):
    root = make_project(tmp_path, sorted((DATA / "unrelated-documents").glob("*.txt")),
                        "extract_graph_nlp:\n  min_entity_frequency: 1\n")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    questions = [{"question": "Who beat Pavel Orlov in Reykjavik?", "answer": "Ivar Sigurdsson",
                  "evidence_documents": ["chess.txt"], "group": "chess"},
                 {"question": "What did the jazz band play?", "evidence": ["nothing like this is in the corpus at all"],
                  "group": "missing"}]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    shown = cli("eval", "--root", root, "--questions", tmp_path / "q.jsonl", "--methods", "local,global")
    assert shown.exit_code == 0 and "basic_packed" in shown.output and "by group" in shown.output
    strict = {"parse_constant": lambda name: pytest.fail(f"{name} is not JSON")}
    data = json.loads(cli("eval", "--root", root, "--questions", tmp_path / "q.jsonl", "--json", "--answers").output,
                      **strict)
    by_method = {m["method"]: m for m in data["methods"]}
    assert set(by_method) == {"local", "basic", "basic_packed"}
    assert by_method["basic_packed"]["recall"] == 0.5 and by_method["basic_packed"]["all_gold"] == 0.5
    answered = [q for q in data["questions"] if q["method"] == "local" and q["answer"]]
    assert len(answered) == 1 and answered[0]["calls"] >= 1  # only the question with an answer is answered
    assert cli("eval", "--root", root, "--questions", tmp_path / "q.jsonl", "--methods", "drift").exit_code != 0


def test_eval_counts_a_question_the_model_answers_with_nothing_usable_and_still_scores_its_retrieval(tmp_path, cli):
    from graphrag_lite.fake.script import scripted

    root = make_project(tmp_path, sorted((DATA / "unrelated-documents").glob("*.txt")),
                        "extract_graph_nlp:\n  min_entity_frequency: 1\n")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    question = {"question": "Who beat Pavel Orlov in Reykjavik?", "answer": "Ivar Sigurdsson",
                "evidence_documents": ["chess.txt"]}
    (tmp_path / "q.jsonl").write_text(json.dumps(question) + "\n")
    # an empty reply, then a think block with nothing after it: no answer, asked again, then counted
    with scripted({"query_local": ["", "<think>Let me see.</think>"]}):
        result = cli("eval", "--root", root, "--questions", tmp_path / "q.jsonl", "--methods", "local",
                     "--answers", "--json")
    assert result.exit_code == 4 and "got no usable answer" in result.output
    data = json.loads(result.output[:result.output.rindex("}") + 1])
    local = next(q for q in data["questions"] if q["method"] == "local")
    assert local["failed"] and local["answer"] is None and local["gold"] == 1  # retrieval still scored
