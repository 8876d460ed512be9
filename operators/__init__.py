"""Operators: the operator builder and the operator catalogue. Built in a later issue."""
