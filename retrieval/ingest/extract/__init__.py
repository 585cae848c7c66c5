"""Entity and relation extraction from text chunks: one interface (`base.Extractor`), two back ends.

`gemini` (typed entities and relations through a JSON schema) when GEMINI_API_KEY is set, else `offline`
(spaCy NER and dependency rules). `extractor_for` picks one and says which, for the ingest warnings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval.config import Settings
    from retrieval.ingest.extract.base import Extractor


def extractor_for(settings: Settings | None) -> tuple[Extractor, str]:
    """The Gemini extractor with a key, else the offline one; and the line the ingest warnings show."""
    if settings is not None and settings.gemini_api_key:
        from retrieval.ingest.extract.gemini import GeminiExtractor

        gemini = GeminiExtractor(settings)
        return gemini, f"extraction: {gemini.describe()}"
    from retrieval.ingest.extract.offline import OfflineExtractor

    offline = OfflineExtractor(noun_phrases=bool(settings and settings.offline_noun_phrases))
    return offline, f"extraction: no GEMINI_API_KEY, so the {offline.describe()} ran; set a key for LLM extraction"
