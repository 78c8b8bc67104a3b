"""Assessment tasks from a pool: what assessors see, grouped into HITs, and the files to hand out.

:mod:`cmrkit.assess.tasks` builds the tasks (query unit with its mention, candidate in its
context, HIT grouping, gold pairs); :mod:`cmrkit.assess.render` writes them as an MTurk batch
(input CSV + HIT layout), JSON lines, or a self-contained offline HTML page. The templates live in
``cmrkit/data/assess/``.
"""
