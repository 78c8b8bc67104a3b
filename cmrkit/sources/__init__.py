"""Readers, one module per input format; each turns files into :class:`cmrkit.model.Mention`s."""
