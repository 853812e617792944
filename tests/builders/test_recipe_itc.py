"""The ITC recipes' ``itc.languages`` (Table 7's English-only arm, the issue's spelling): it reaches the builder, and a
bad value or a contradicting ``data.builder_args.languages`` fails at compose time naming the valid choices."""

from __future__ import annotations

import pytest

from train.engine.config import ConfigError, compose
from train.engine.resume_config import rule_for


@pytest.mark.parametrize("recipe", ["itc_tiny", "itc_qwen2_5_7b"])
def test_itc_languages_reaches_the_builder_and_defaults_to_every_language(recipe):
    assert compose([f"recipe={recipe}"]).data.builder_args.languages == ""
    cfg = compose([f"recipe={recipe}", "itc.languages=en"])
    assert cfg.itc.languages == "en" and cfg.data.builder_args.languages == "en"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("itc.languages='en,xx'", "unknown language(s) ['xx']; valid: "),
        (
            "data.builder_args.languages=en",
            "data.builder_args.languages=en differs from itc.languages=; choose it with",
        ),
    ],
)
def test_a_bad_itc_choice_fails_at_compose_time(override, message):
    with pytest.raises(ConfigError) as err:
        compose(["recipe=itc_tiny", override])
    assert message in str(err.value)


def test_itc_languages_cannot_change_on_resume_it_chooses_the_training_rows():
    assert rule_for("itc.languages")[0] == "fixed"
