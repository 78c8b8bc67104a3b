"""A built collection as other tools read it: ``beir`` (the BEIR folder layout) and
``ir_datasets`` (datasets registered as ``cmrkit/<name>/<split>``). Importing this package
imports neither tool; :mod:`cmrkit.exports.ir_datasets` needs the ``ir-datasets`` package."""
