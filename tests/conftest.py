"""Shared pytest configuration for the Frontier test suite."""
