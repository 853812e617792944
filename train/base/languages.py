"""Which language a text is in: langid's classifier, its model decoded once per process.

Decoding langid's model (base64, bz2, a pickle of ~9 MB of arrays) takes ~2 s. A paper's builder (the language of a
query, over the languages its paper lists), a scorer (over the languages asked for) and ``tooltrain data stats
--languages`` (all of langid's languages) each want a classifier; they share the decoded model and differ only in
the languages they pick from.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

LanguageOf = Callable[[str], str]


@functools.cache
def _identifier_of_every_language():
    from langid.langid import LanguageIdentifier, model

    return LanguageIdentifier.from_modelstring(model, norm_probs=False)  # the argmax needs no normalising


@functools.lru_cache(maxsize=8)
def language_classifier(languages: tuple[str, ...] | None = None) -> LanguageOf:
    """``text -> ISO 639-1 code``, chosen among ``languages`` (all of langid's 97 when None).
    ValueError names the codes langid does not know."""
    # set_languages re-slices from the full model each identifier keeps, so a copy can be restricted while the
    # shared one stays whole
    identifier = copy.copy(_identifier_of_every_language())
    if languages:
        unknown = sorted(set(languages) - set(identifier.nb_classes))
        if unknown:
            raise ValueError(f"langid does not know language code(s) {', '.join(unknown)}")
        identifier.set_languages(list(languages))
    return lambda text: identifier.classify(text)[0]
