"""train.base.languages: one decoded langid model, classifiers restricted without touching each other."""

import pytest

from train.base import languages

FRENCH = "Bonjour tout le monde, comment allez-vous aujourd'hui ? Je voudrais réserver une table pour ce soir."


def test_a_restricted_classifier_picks_among_its_languages_and_leaves_the_others_whole():
    every = languages.language_classifier()
    assert every(FRENCH) == "fr"
    only_en_de = languages.language_classifier(("en", "de"))
    assert only_en_de(FRENCH) in {"en", "de"}
    assert every(FRENCH) == "fr" and languages.language_classifier(("fr", "en"))(FRENCH) == "fr"


def test_the_model_is_decoded_once_for_every_language_set():
    languages._identifier_of_every_language()
    before = languages._identifier_of_every_language.cache_info().misses
    languages.language_classifier(("ja", "zh"))("東京の天気はどうですか")
    languages.language_classifier(("es",))
    assert languages._identifier_of_every_language.cache_info().misses == before


def test_an_unknown_code_is_named():
    with pytest.raises(ValueError, match=r"^langid does not know language code\(s\) xx, zz$"):
        languages.language_classifier(("en", "zz", "xx"))
