"""A collection: its folder (``layout``, the one owner of the folder's files), building it from
mentions (``build``), and coreference clusterings as files (``clusters``).

Import the module you need (``from cmrkit.collection.layout import collection_dir``); this face
imports nothing, so reading a collection never loads the builder.
"""
