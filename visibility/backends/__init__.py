"""Visibility backends: each turns a resolved filter into its own query language (SQL today)."""
