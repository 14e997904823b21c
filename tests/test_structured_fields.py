"""features.structured: claims that contradict a yes/no field of a JSON record in the context."""

import json

import pytest

from features.registry import feature_spec
from features.structured import clauses, contradicted_fields, key_terms, record_fields
from syncheck.featurize import TEXT_CHECK_FEATURES, text_check_features

LISTING = json.dumps({
    "name": "Kogilicious",
    "city": "Isla Vista",
    "attributes": {
        "BusinessParking": {"garage": False, "street": True, "validated": False, "lot": False, "valet": False},
        "RestaurantsReservations": False,
        "OutdoorSeating": True,
        "WiFi": None,
        "RestaurantsTakeOut": True,
        "Ambience": {"romantic": True, "classy": False, "touristy": False, "trendy": False, "casual": True},
    },
    "review_info": [{"review_stars": 5.0, "review_text": "Half and half beef ribs and pork, best I have ever had."}],
}, indent=4)


@pytest.mark.parametrize("sentence, expected", [
    # the errors RAGTruth's annotators marked, each the kind the check is for
    ("The restaurant also has outdoor seating and takes reservations.", 1),
    ("The restaurant has a classy and romantic ambiance.", 1),
    ("The ambiance is casual, with a touristic vibe.", 1),
    ("It offers American cuisine with outdoor seating and WiFi available.", 1),
    ("They do not offer takeout.", 1),
    # what the record says, in the ways answers say it
    ("They do not take reservations, and they offer takeout.", 0),
    ("There is street parking, but no valet, garage, or lot parking.", 0),
    ("Valet and garage parking are not available.", 0),
    ("Its ambience is casual rather than trendy or classy.", 0),
    ("The data does not say whether WiFi is available.", 0),
    ("Kogilicious is a Korean restaurant in Isla Vista.", 0),
    # a nested field needs its parent: "street" alone is an address, not parking
    ("It is on a quiet street near campus.", 0),
])
def test_counts_the_fields_a_sentence_contradicts(sentence, expected):
    assert contradicted_fields(LISTING, sentence) == expected


def test_several_contradictions_are_counted_and_chunk_numbered_contexts_are_read():
    context = f"[1] {LISTING}\n\n[2] Some other passage."
    assert contradicted_fields(context, "They take reservations and have a classy, trendy ambiance.") == 3


def test_yes_no_strings_are_fields_and_other_values_are_not():
    context = json.dumps({"WiFi": "free", "NoiseLevel": "average", "Alcohol": "none", "stars": 4.5})
    assert [f.terms for f in record_fields(context)] == [("wi", "fi"), ("alcohol",)]
    assert contradicted_fields(context, "The cafe has free WiFi.") == 0
    assert contradicted_fields(context, "There is no Wi-Fi.") == 1
    assert contradicted_fields(context, "They serve alcohol.") == 1


def test_an_unknown_field_the_records_text_speaks_of_is_not_checked():
    context = json.dumps({"Music": None, "reviews": ["Great live music on Fridays and a fun crowd."]})
    assert contradicted_fields(context, "They have live music.") == 0
    assert contradicted_fields(json.dumps({"Music": None}), "They have live music.") == 1


@pytest.mark.parametrize("context", ["", "Plain prose with no record at all.", "{not json", '{"a": [1, 2', "{}"])
def test_contexts_without_records_give_zero(context):
    assert record_fields(context) == ()
    assert contradicted_fields(context, "They take reservations.") == 0


def test_key_terms_drop_generic_words_and_split_camel_case():
    assert key_terms("RestaurantsGoodForGroups") == ("groups",)
    assert key_terms("RestaurantsTakeOut") == ("take", "out")
    assert key_terms("BusinessAcceptsCreditCards") == ("credit", "cards")
    assert key_terms("wheelchair_accessible") == ("wheelchair", "accessible")


def test_clauses_carry_negation_over_lists_but_not_over_new_statements():
    got = {" ".join(words): negated for words, negated in clauses("No valet, garage, or lot parking, and they offer "
                                                                  "takeout.")}
    assert got == {"no valet": True, "garage": True, "lot parking": True, "they offer takeout": False}


def test_the_check_is_a_registered_string_check():
    s = feature_spec("contradicted_fields")
    assert (s.sign, s.needs) == (-1, "text_checks")
    assert "contradicted_fields" in TEXT_CHECK_FEATURES
    assert text_check_features(LISTING, "They take reservations.")["contradicted_fields"] == 1.0
