"""LangChain and LangGraph adapters for Ebb (see the README)."""
