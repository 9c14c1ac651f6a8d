"""Comparing runs: tables, pictures and pages."""
