"""``ebb ui``: a local web page for the human side of Ebb (see :mod:`ebb_core.ui.server`)."""
