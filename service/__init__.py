"""Frontier's service core: the engine layers below and the dataflow manager."""
