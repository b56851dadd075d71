"""LlamaIndex adapters for Ebb (see the README)."""
