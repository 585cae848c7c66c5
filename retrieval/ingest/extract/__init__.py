"""Entity and relation extraction from text chunks: one interface (`base.Extractor`), two back ends.

`gemini` (typed entities and relations through a JSON schema) when GEMINI_API_KEY is set, else `offline`
(spaCy NER and dependency rules). `extractor_for` picks one and says which, for the ingest warnings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.registry import Registry

if TYPE_CHECKING:
    from retrieval.config import Settings
    from retrieval.ingest.extract.base import Extractor

# In order of preference: the first that builds for the settings runs.
EXTRACTORS = Registry("extractor", {
    "gemini": "retrieval.ingest.extract.gemini:GeminiExtractor",
    "offline": "retrieval.ingest.extract.offline:OfflineExtractor",
}, ("build", "describe", "extract"))


def extractor_for(settings: Settings | None) -> tuple[Extractor, str]:
    """The Gemini extractor with a key, else the offline one; and the line the ingest warnings show."""
    for name in EXTRACTORS:
        extractor: Extractor | None = EXTRACTORS.load(name).build(settings)
        if extractor is None:
            continue
        if name == "gemini":
            return extractor, f"extraction: {extractor.describe()}"
        return extractor, (f"extraction: no GEMINI_API_KEY, so the {extractor.describe()} ran; set a key for LLM "
                           "extraction")
    raise AssertionError("the offline extractor always builds")
